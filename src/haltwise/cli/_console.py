"""A rich ``Console`` for output whose reader may go away (``haltwise runs | head -1``).

Imported only where rich is (it comes with ``haltwise[agent]``).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from rich.console import Console

__all__ = ["PipeConsole"]


class PipeConsole(Console):
    """Rich's answer to a closed pipe is to exit the process at once, from whichever thread
    wrote. This console prints nothing more and calls ``on_closed`` (a run cancels itself);
    with none, it raises ``BrokenPipeError`` for the command's top level to end quietly."""

    def __init__(self, *args: Any, on_closed: Callable[[], None] | None = None, **kwargs: Any):
        super().__init__(*args, **kwargs)
        self._on_closed = on_closed

    def on_broken_pipe(self) -> None:
        self.quiet = True
        if self._on_closed is None:
            raise BrokenPipeError
        self._on_closed()
