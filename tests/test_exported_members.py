"""What ``import haltwise`` reaches: every stuck detector, as the other limits are."""

from __future__ import annotations

import inspect

import pytest

import haltwise
from haltwise.engine import detectors
from haltwise.engine.limits import Limit


def detector_factories() -> list[str]:
    """The names in ``haltwise.engine.detectors.__all__`` that build a limit: the detectors."""
    return [
        name
        for name in detectors.__all__
        # Compiled, a factory is a Cython function, which ``inspect.isfunction`` does not take.
        if callable(factory := getattr(detectors, name))
        and not isinstance(factory, type)
        and inspect.signature(factory).return_annotation in ("Limit", Limit)
    ]


def test_the_detectors_are_found() -> None:
    # The three that ``stuck()`` leaves off unless asked for are detectors like the rest.
    assert {"stuck", "repeats", "no_effect", "oscillation", "recurring_errors"} <= set(
        detector_factories()
    )


@pytest.mark.parametrize("name", detector_factories())
def test_every_detector_is_exported_from_haltwise(name: str) -> None:
    assert name in haltwise.__all__
    assert getattr(haltwise, name) is getattr(detectors, name)
