"""Script entries that send bytes as they are, for testing how a client copes with an endpoint
that misbehaves: a web page where an API should be, a stream whose data is not JSON, chunks with
fields of the wrong type.

* :func:`raw` - any body, with a status and a content type (a :class:`RawReply`);
* :func:`raw_stream` - server-sent events, one ``data:`` line per event (a mapping is written
  as JSON, a string as it is), then ``data: [DONE]``.

Both go in a :class:`~haltwise.testing.ScriptedServer` (or ``AnthropicServer``) script like
:func:`~haltwise.testing.reply`; nothing is checked or estimated, and no usage is added.
Stdlib-only and immutable, like the rest of the script.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from haltwise.testing._script import ScriptedResponse, _check_seconds

__all__ = ["RawReply", "raw", "raw_stream"]


@dataclass(frozen=True, slots=True, repr=False)
class RawReply(ScriptedResponse):
    """A response sent byte for byte. Build it with :func:`raw` or :func:`raw_stream`."""

    body: bytes
    status: int = 200
    content_type: str = "text/event-stream"
    delay: float = 0.0

    def __post_init__(self) -> None:
        if not isinstance(self.body, bytes):
            raise TypeError(f"raw body must be bytes, got {type(self.body).__name__}")
        if isinstance(self.status, bool) or not isinstance(self.status, int):
            raise TypeError(f"raw status must be an int, got {type(self.status).__name__}")
        if not 100 <= self.status <= 599:
            raise ValueError(f"raw status must be an HTTP status (100-599), got {self.status}")
        _check_seconds("delay", self.delay)

    def __repr__(self) -> str:
        parts = [repr(self.body[:60] + (b"..." if len(self.body) > 60 else b""))]
        if self.status != 200:
            parts.append(f"status={self.status!r}")
        parts.append(f"content_type={self.content_type!r}")
        if self.delay:
            parts.append(f"delay={self.delay!r}")
        return f"RawReply({', '.join(parts)})"


def raw(
    body: bytes | str,
    *,
    status: int = 200,
    content_type: str = "application/json",
    delay: float = 0.0,
) -> RawReply:
    """A response whose body is ``body`` exactly (a ``str`` is sent as UTF-8), whatever the
    request asked for: ``raw("<html>oops</html>", content_type="text/html")``."""
    data = body.encode("utf-8") if isinstance(body, str) else body
    return RawReply(data, status=status, content_type=content_type, delay=delay)


def raw_stream(*events: Mapping[str, Any] | str, delay: float = 0.0) -> RawReply:
    """A ``text/event-stream`` response of ``events``, each as one ``data:`` line (a mapping as
    JSON, unchecked; a string as it is, so that it can be anything but JSON), and then
    ``data: [DONE]``: ``raw_stream({"choices": [{"index": 0, "delta": {"content": 5}}]})``."""
    lines = [
        event if isinstance(event, str) else json.dumps(dict(event), ensure_ascii=False)
        for event in events
    ]
    body = "".join(f"data: {line}\n\n" for line in [*lines, "[DONE]"])
    return RawReply(body.encode("utf-8"), content_type="text/event-stream", delay=delay)
