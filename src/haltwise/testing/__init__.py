"""Test helpers for code built on haltwise: a scripted LLM server and a fake clock.

* :class:`ScriptedServer` - an in-process OpenAI-compatible HTTP server that answers chat
  completion requests (plain or streamed) from a script of :func:`reply`, :func:`error`
  and callable entries, and records what it was sent.
* :class:`AnthropicServer` - the same script served as the Anthropic Messages API (plain or
  streamed), for the ``anthropic`` client and the Claude Agent SDK's CLI;
  :class:`AnthropicUsage` adds prompt-cache writes to a reply's usage.
* :func:`reply`, :func:`tool_call`, :func:`error` and :class:`Usage` - build script
  entries (:class:`Reply`, :class:`ToolCall`, :class:`ErrorReply`); :func:`raw` and
  :func:`raw_stream` send bytes as they are (:class:`RawReply`), as a misbehaving endpoint does.
* :func:`deep_size` - the bytes an object graph holds, to show state stays bounded.
* :class:`FakeClock` - a monotonic clock (and ``sleep`` / ``asleep``) that moves only when
  told to.

Only the standard library is needed to import this package::

    from haltwise.testing import ScriptedServer, reply, tool_call

    script = [
        reply(tool_calls=[tool_call("read_file", {"path": "a.py"})], usage=(120, 30)),
        reply("The answer is 42.", usage=(200, 12)),
    ]
    with ScriptedServer(script) as server:
        client = openai.OpenAI(base_url=server.base_url, api_key="test")
        ...
"""

from haltwise.testing._raw import RawReply, raw, raw_stream
from haltwise.testing._script import (
    ErrorReply,
    FinishReason,
    Reply,
    ScriptedResponse,
    ScriptEntry,
    ToolCall,
    Usage,
    error,
    reply,
    tool_call,
)
from haltwise.testing.anthropic_server import AnthropicServer, AnthropicUsage
from haltwise.testing.clock import FakeClock
from haltwise.testing.server import ScriptedServer
from haltwise.testing.size import deep_size

__all__ = [
    "AnthropicServer",
    "AnthropicUsage",
    "ErrorReply",
    "FakeClock",
    "FinishReason",
    "RawReply",
    "Reply",
    "ScriptEntry",
    "ScriptedResponse",
    "ScriptedServer",
    "ToolCall",
    "Usage",
    "deep_size",
    "error",
    "raw",
    "raw_stream",
    "reply",
    "tool_call",
]
