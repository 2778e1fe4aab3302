"""``deep_size``: the bytes an object graph holds, for asserting that state stays bounded."""

from __future__ import annotations

import gc
import sys
import types
from collections import deque

__all__ = ["deep_size"]


def deep_size(root: object) -> int:
    """Bytes held by ``root`` and everything it references, each object counted once.

    Follows containers, ``__slots__`` and ``__dict__``, and whatever else the garbage collector
    sees an object hold (the fields of an extension type, which compiled haltwise's windows and
    tallies are); classes, modules and code are not counted, nor what a function reaches. Use it
    to show that a detector's or a governor's state does not grow with the length of a run.
    """
    seen: set[int] = set()
    total = 0
    stack: deque[object] = deque([root])
    while stack:
        item = stack.pop()
        if id(item) in seen or isinstance(item, _NOT_STATE):
            continue
        seen.add(id(item))
        total += sys.getsizeof(item)
        if isinstance(item, dict):
            stack.extend(item.keys())
            stack.extend(item.values())
        elif isinstance(item, list | tuple | set | frozenset | deque):
            stack.extend(item)
        for cls in type(item).__mro__:
            for name in getattr(cls, "__slots__", ()):
                if hasattr(item, name):
                    stack.append(getattr(item, name))
        if hasattr(item, "__dict__"):
            stack.append(vars(item))
        stack.extend(gc.get_referents(item))
    return total


#: What is not a piece of state: classes, modules, code and what a function reaches.
_NOT_STATE = (
    type,
    types.ModuleType,
    types.CodeType,
    types.FunctionType,
    types.BuiltinFunctionType,
    types.MethodType,
    types.FrameType,
)
