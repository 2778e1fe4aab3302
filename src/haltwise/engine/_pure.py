"""What the Cython directives in haltwise's compiled modules mean when they run as Python.

``events.py`` and ``dispatch.py`` are compiled by Cython from these very sources (see
``haltwise/_compiled.py``); there ``cython`` is Cython's compile-time module. Run as Python,
they import this module in its place, so that haltwise needs no Cython at run time and means
the same thing with or without it: a compiled event is a frozen extension type, an interpreted
one a frozen slotted dataclass, with the same fields, defaults, equality, hash and repr.

Only the directives haltwise uses are here.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import MISSING, fields
from typing import TYPE_CHECKING, Any, TypeVar

__all__ = [
    "bint",
    "cast",
    "cclass",
    "compiled",
    "dataclasses",
    "declare",
    "int",
    "locals",
    "longlong",
    "ulonglong",
]

_T = TypeVar("_T")
_F = TypeVar("_F", bound=Callable[..., Any])

#: Interpreted: Cython's own ``cython.compiled`` is True in a compiled module.
compiled = False
#: Compiled: a C int, a C long long, a C unsigned long long. Interpreted: an int.
int = int
longlong = int
ulonglong = int
#: Compiled: a C int read as a truth value. Interpreted: a bool.
bint = bool
#: Compiled: a C double. Interpreted: a float.
double = float


def cast(kind: type[_T], value: Any) -> _T:
    """Compiled: a C cast. Interpreted: ``value`` as ``kind``."""
    return kind(value)  # type: ignore[call-arg]


def cclass(cls: type[_T]) -> type[_T]:
    """Compiled: an extension type. Interpreted: the class as written."""
    return cls


def freelist(_: int) -> Callable[[type[_T]], type[_T]]:
    """Compiled: an extension type that keeps up to that many freed objects to reuse.
    Interpreted: the class as written."""
    return cclass


def locals(**_: Any) -> Callable[[_F], _F]:
    """Compiled: the function's arguments and locals typed as named. Interpreted: the function
    as written, so that a typed argument costs nothing at each call."""
    return _unchanged


def _unchanged(function: _F) -> _F:
    return function


def declare(kind: type[_T], value: Any = None, **_: Any) -> _T:
    """Compiled: a typed variable or attribute. Interpreted: ``value``."""
    return value  # type: ignore[no-any-return]


def _value_type(*, frozen: bool) -> Callable[[type[_T]], type[_T]]:
    """A frozen slotted dataclass with a quicker ``__init__`` (``_quick``)."""
    from dataclasses import dataclass

    def make(cls: type[_T]) -> type[_T]:
        return _quick(dataclass(frozen=frozen, slots=True)(cls))

    return make


def _quick(cls: type[_T]) -> type[_T]:
    """``cls`` with an ``__init__`` that stores each field through its slot's descriptor.

    A frozen dataclass's own ``__init__`` stores through ``object.__setattr__``, which costs
    twice as much, and drivers build an event for every step of a loop. The signature,
    defaults and everything else of the dataclass are unchanged.
    """
    params = []
    namespace: dict[str, Any] = {}
    for field in fields(cls):  # type: ignore[arg-type]
        assert field.default_factory is MISSING, "events hold values: no default factories"
        namespace[f"_set_{field.name}"] = getattr(cls, field.name).__set__
        if field.default is MISSING:
            params.append(field.name)
        else:
            namespace[f"_default_{field.name}"] = field.default
            params.append(f"{field.name}=_default_{field.name}")
    body = "".join(f"    _set_{f.name}(self, {f.name})\n" for f in fields(cls))  # type: ignore[arg-type]
    text = f"def __init__(self, {', '.join(params)}):\n{body or '    pass'}\n"
    exec(text, namespace)  # our own source, written from the dataclass's fields
    init = namespace["__init__"]
    init.__qualname__ = f"{cls.__qualname__}.__init__"
    init.__doc__ = cls.__init__.__doc__
    cls.__init__ = init  # type: ignore[method-assign]
    return cls


if TYPE_CHECKING:
    # Type checkers see the standard library's dataclass, which is what each event is.
    import dataclasses
else:

    class dataclasses:  # noqa: N801 (named as Cython's ``cython.dataclasses``)
        dataclass = staticmethod(_value_type)
