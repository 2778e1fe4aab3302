"""deep_size counts what an object graph holds, each object once."""

from __future__ import annotations

import functools
import sys

from haltwise.engine.detectors import canonical_arguments
from haltwise.testing import deep_size


class Plain:
    def __init__(self, payload: object) -> None:
        self.payload = payload


class Slotted:
    __slots__ = ("payload",)

    def __init__(self, payload: object) -> None:
        self.payload = payload


def test_it_follows_containers_slots_and_dicts() -> None:
    text = "x" * 10_000
    assert deep_size([text]) >= sys.getsizeof(text)
    assert deep_size(Slotted(text)) >= sys.getsizeof(text)
    assert deep_size(Plain(text)) >= sys.getsizeof(text)
    assert deep_size({"key": text}) >= sys.getsizeof(text)


def test_shared_objects_count_once() -> None:
    text = "y" * 10_000
    assert deep_size([text, text]) < 2 * sys.getsizeof(text)


def test_it_follows_what_an_extension_type_holds() -> None:
    # Compiled, haltwise's windows and tallies are extension types: their fields are neither
    # slots nor a dict, and only the garbage collector sees what they hold.
    text = "z" * 10_000
    assert deep_size(functools.partial(len, text)) >= sys.getsizeof(text)


def test_a_function_is_not_followed_into_its_module() -> None:
    assert deep_size(Plain(test_shared_objects_count_once)) < 1_000
    # Compiled, haltwise's own functions are Cython's, which are no FunctionType.
    assert deep_size(Plain(canonical_arguments)) < 1_000
