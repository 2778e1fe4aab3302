"""Usage as a misbehaving endpoint or proxy reports it, for the agent's tests: figures that are
not token counts, cached tokens past the prompt. ``ScriptedServer`` sends what it holds."""

from __future__ import annotations

from typing import Any

from haltwise.testing import Usage


class MisreportedUsage(Usage):
    """Usage as a misbehaving endpoint or proxy reports it: figures that are not token counts,
    cached tokens past the prompt. ``ScriptedServer`` sends whatever it holds, unchecked."""

    __slots__ = ()

    def __post_init__(self) -> None:
        """Nothing is checked: what is sent is the point."""

    @property
    def total_tokens(self) -> Any:
        return None
