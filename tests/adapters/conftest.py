"""What the adapters' tests share: a guard whose governor records what it is told."""

from __future__ import annotations

from haltwise import Decision, Event, Guard, ToolResult


def tool_results(guard: Guard) -> list[str]:
    """The contents of the ``ToolResult`` events ``guard``'s governor handles from now on, in
    the order it handles them (the list returned fills as the run goes)."""
    results: list[str] = []
    handle = guard.governor.handle

    def recording(event: Event) -> Decision:
        if isinstance(event, ToolResult):
            results.append(event.content)
        return handle(event)

    guard.governor.handle = recording
    return results
