"""``deep_size``: the bytes an object graph holds, for asserting that state stays bounded."""

from __future__ import annotations

import gc
import sys
import types
from collections import deque

__all__ = ["deep_size"]


def deep_size(root: object) -> int:
    """Bytes held by ``root`` and everything it references, each object counted once.

    Follows whatever the garbage collector sees an object hold: the items of a container, the
    slots and the ``__dict__`` of an instance, the fields of an extension type (compiled,
    haltwise's windows and tallies are such). Classes, modules, code and functions are not
    counted, nor what a function reaches. Use it to show that a detector's or a governor's state
    does not grow with the length of a run.
    """
    seen: set[int] = set()
    total = 0
    stack: deque[object] = deque([root])
    while stack:
        item = stack.pop()
        if id(item) in seen or isinstance(item, _NOT_STATE) or hasattr(type(item), "__globals__"):
            continue  # a function of any kind, compiled ones too, has its module's globals
        seen.add(id(item))
        total += sys.getsizeof(item)
        stack.extend(gc.get_referents(item))
    return total


#: What is not a piece of state: classes, modules, code, frames and bound methods.
_NOT_STATE = (
    type,
    types.ModuleType,
    types.CodeType,
    types.BuiltinFunctionType,
    types.MethodType,
    types.FrameType,
)
