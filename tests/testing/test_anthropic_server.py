"""AnthropicServer driven over real HTTP by the real ``anthropic`` client (sync and async)."""

from __future__ import annotations

import asyncio
import http.client
import json
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("anthropic")

import anthropic
from anthropic.types import MessageParam, ToolParam

from haltwise.testing import (
    AnthropicServer,
    AnthropicUsage,
    ScriptEntry,
    error,
    reply,
    tool_call,
)

USER: list[MessageParam] = [{"role": "user", "content": "What is the answer?"}]
READ_FILE: ToolParam = {
    "name": "read_file",
    "description": "Read a file.",
    "input_schema": {"type": "object", "properties": {"path": {"type": "string"}}},
}


@contextmanager
def client_for(server: AnthropicServer, **options: Any) -> Iterator[anthropic.Anthropic]:
    options.setdefault("max_retries", 0)
    options.setdefault("timeout", 5.0)
    with anthropic.Anthropic(base_url=server.base_url, api_key="test", **options) as client:
        yield client


def raw(
    server: AnthropicServer, method: str, path: str, body: object = None
) -> tuple[int, dict[str, str], bytes]:
    conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=5)
    try:
        data = None if body is None else json.dumps(body).encode()
        headers = {"Content-Type": "application/json"} if data is not None else {}
        conn.request(method, path, body=data, headers=headers)
        response = conn.getresponse()
        return response.status, dict(response.getheaders()), response.read()
    finally:
        conn.close()


def events(payload: bytes) -> list[tuple[str, dict[str, Any]]]:
    """The server-sent events of a streamed response, as (name, data)."""
    parsed = []
    for chunk in payload.decode().strip().split("\n\n"):
        name_line, data_line = chunk.split("\n")
        parsed.append((name_line.removeprefix("event: "), json.loads(data_line[len("data: ") :])))
    return parsed


# Plain responses


def test_a_text_reply_is_a_complete_message() -> None:
    script = [reply("The answer is 42.", usage=(200, 12))]
    with AnthropicServer(script) as server, client_for(server) as client:
        message = client.messages.create(model="claude-x", max_tokens=100, messages=USER)
    assert message.id == "msg_scripted_1"
    assert message.model == "claude-x"  # the model the request named
    assert message.stop_reason == "end_turn"
    assert [block.type for block in message.content] == ["text"]
    assert message.content[0].text == "The answer is 42."  # type: ignore[union-attr]
    assert (message.usage.input_tokens, message.usage.output_tokens) == (200, 12)
    assert message.usage.cache_read_input_tokens == 0
    assert message.usage.cache_creation_input_tokens == 0


def test_tool_calls_are_tool_use_blocks_with_ids_and_inputs() -> None:
    script = [
        reply(
            "Let me look.",
            tool_calls=[
                tool_call("read_file", {"path": "a.py"}),
                tool_call("read_file", {"path": "b.py"}, id="toolu_mine"),
            ],
        )
    ]
    with AnthropicServer(script) as server, client_for(server) as client:
        message = client.messages.create(
            model="claude-x", max_tokens=100, messages=USER, tools=[READ_FILE]
        )
    assert message.stop_reason == "tool_use"
    text, first, second = message.content
    assert text.type == "text"
    assert first.type == "tool_use" and second.type == "tool_use"
    assert (first.id, first.name, first.input) == (
        "toolu_scripted_1",
        "read_file",
        {"path": "a.py"},
    )
    assert (second.id, second.input) == ("toolu_mine", {"path": "b.py"})


def test_cache_reads_and_writes_are_parts_of_the_prompt() -> None:
    script = [
        reply("Cached.", usage=(1_000, 10), cached_tokens=600),
        reply(
            "Written.", usage=AnthropicUsage(1_000, 10, cached_tokens=200, cache_write_tokens=500)
        ),
    ]
    with AnthropicServer(script) as server, client_for(server) as client:
        read = client.messages.create(model="m", max_tokens=10, messages=USER).usage
        written = client.messages.create(model="m", max_tokens=10, messages=USER).usage
    assert (read.input_tokens, read.cache_read_input_tokens) == (400, 600)
    assert (written.input_tokens, written.cache_read_input_tokens) == (300, 200)
    assert written.cache_creation_input_tokens == 500


def test_finish_reasons_map_to_stop_reasons() -> None:
    script: list[ScriptEntry] = [
        reply("Cut", finish_reason="length"),
        reply("No.", finish_reason="content_filter"),
    ]
    with AnthropicServer(script) as server, client_for(server) as client:
        reasons = [
            client.messages.create(model="m", max_tokens=1, messages=USER).stop_reason
            for _ in script
        ]
    assert reasons == ["max_tokens", "refusal"]


def test_usage_is_estimated_when_not_scripted() -> None:
    with AnthropicServer([reply("abcdefgh")]) as server, client_for(server) as client:
        usage = client.messages.create(model="m", max_tokens=10, messages=USER).usage
    assert usage.output_tokens == 2  # a quarter of the characters
    assert usage.input_tokens > 0


# Streaming


def test_a_stream_has_the_real_event_sequence() -> None:
    script = [
        reply(
            "Let me look that up.",
            tool_calls=[tool_call("read_file", {"path": "a.py"})],
            usage=(120, 30),
        )
    ]
    body = {"model": "m", "max_tokens": 100, "messages": USER, "stream": True}
    with AnthropicServer(script) as server:
        status, headers, payload = raw(server, "POST", "/v1/messages", body)
    assert status == 200
    assert headers["Content-Type"].startswith("text/event-stream")
    stream = events(payload)
    names = [name for name, _ in stream]
    assert names[:2] == ["message_start", "ping"]
    assert names[-2:] == ["message_delta", "message_stop"]
    assert names.count("content_block_start") == names.count("content_block_stop") == 2
    assert all(name == data["type"] for name, data in stream)
    start = stream[0][1]["message"]
    # The input side comes first; output tokens only at the end, as the API does.
    assert start["usage"] == {
        "input_tokens": 120,
        "cache_creation_input_tokens": 0,
        "cache_read_input_tokens": 0,
        "output_tokens": 1,
    }
    deltas = [data["delta"] for name, data in stream if name == "content_block_delta"]
    assert "".join(d["text"] for d in deltas if d["type"] == "text_delta") == "Let me look that up."
    arguments = "".join(d["partial_json"] for d in deltas if d["type"] == "input_json_delta")
    assert json.loads(arguments) == {"path": "a.py"}
    end = stream[-2][1]
    assert end["delta"]["stop_reason"] == "tool_use"
    assert end["usage"]["output_tokens"] == 30


def test_the_streaming_client_reassembles_text_tool_use_and_usage() -> None:
    script = [
        reply(
            "Reading.",
            tool_calls=[tool_call("read_file", {"path": "a.py"})],
            usage=(120, 30),
            cached_tokens=20,
        )
    ]
    with (
        AnthropicServer(script) as server,
        client_for(server) as client,
        client.messages.stream(
            model="m", max_tokens=100, messages=USER, tools=[READ_FILE]
        ) as stream,
    ):
        texts = list(stream.text_stream)
        message = stream.get_final_message()
    assert "".join(texts) == "Reading."
    assert len(texts) >= 1
    assert message.content[1].type == "tool_use"
    assert message.content[1].input == {"path": "a.py"}
    assert (message.usage.input_tokens, message.usage.output_tokens) == (100, 30)
    assert message.usage.cache_read_input_tokens == 20
    assert message.stop_reason == "tool_use"


def test_a_stream_sends_malformed_arguments_as_written() -> None:
    script = [reply(tool_calls=[tool_call("read_file", '{"path": "a.py"')])]
    body = {"model": "m", "max_tokens": 10, "messages": USER, "stream": True}
    with AnthropicServer(script) as server:
        _, _, payload = raw(server, "POST", "/v1/messages", body)
    pieces = [
        data["delta"]["partial_json"]
        for name, data in events(payload)
        if name == "content_block_delta"
    ]
    assert "".join(pieces) == '{"path": "a.py"'


def test_a_plain_response_refuses_arguments_that_are_not_an_object() -> None:
    script = [reply(tool_calls=[tool_call("f", "[1, 2]")])]
    with (
        AnthropicServer(script) as server,
        client_for(server) as client,
        pytest.raises(anthropic.InternalServerError) as caught,
    ):
        client.messages.create(model="m", max_tokens=10, messages=USER)
    assert "not a JSON object" in str(caught.value)


# Errors


@pytest.mark.parametrize(
    ("status", "exception", "kind"),
    [
        (400, anthropic.BadRequestError, "invalid_request_error"),
        (401, anthropic.AuthenticationError, "authentication_error"),
        (429, anthropic.RateLimitError, "rate_limit_error"),
        (500, anthropic.InternalServerError, "api_error"),
        (529, anthropic.InternalServerError, "overloaded_error"),
    ],
)
def test_errors_are_anthropic_errors(
    status: int, exception: type[anthropic.APIStatusError], kind: str
) -> None:
    with (
        AnthropicServer([error(status, "scripted failure")]) as server,
        client_for(server) as client,
        pytest.raises(exception) as caught,
    ):
        client.messages.create(model="m", max_tokens=10, messages=USER)
    assert caught.value.status_code == status
    assert caught.value.body == {
        "type": "error",
        "error": {"type": kind, "message": "scripted failure"},
    }
    assert caught.value.response.headers["request-id"] == "req_scripted_1"


def test_retry_after_lets_the_client_retry() -> None:
    script = [error(429, "slow down", retry_after=0.01), reply("Done.")]
    with AnthropicServer(script) as server, client_for(server, max_retries=2) as client:
        message = client.messages.create(model="m", max_tokens=10, messages=USER)
        assert len(server.requests) == 2
    assert message.content[0].text == "Done."  # type: ignore[union-attr]


def test_an_exhausted_script_answers_500() -> None:
    with AnthropicServer([reply("One.")]) as server, client_for(server) as client:
        client.messages.create(model="m", max_tokens=10, messages=USER)
        with pytest.raises(anthropic.InternalServerError, match="script exhausted after 1"):
            client.messages.create(model="m", max_tokens=10, messages=USER)


def test_a_request_without_max_tokens_is_refused_and_uses_no_entry() -> None:
    with AnthropicServer([reply("Kept.")]) as server:
        status, _, payload = raw(server, "POST", "/v1/messages", {"model": "m", "messages": USER})
        assert status == 400
        assert json.loads(payload)["error"]["message"] == "max_tokens: Field required"
        with client_for(server) as client:
            message = client.messages.create(model="m", max_tokens=10, messages=USER)
    assert message.content[0].text == "Kept."  # type: ignore[union-attr]
    assert len(server.requests) == 1


# Callables, delays, the rest of the API


def test_callables_see_the_request_and_requests_are_recorded() -> None:
    def echo(body: dict[str, Any]) -> str:
        return f"You asked {body['messages'][0]['content']!r} of {body['model']}."

    with AnthropicServer([echo]) as server, client_for(server) as client:
        message = client.messages.create(model="claude-y", max_tokens=10, messages=USER)
        requests = server.requests
    assert message.content[0].text == "You asked 'What is the answer?' of claude-y."  # type: ignore[union-attr]
    assert requests == [{"model": "claude-y", "max_tokens": 10, "messages": USER}]


def test_a_delayed_reply_outlasts_a_client_timeout_and_close_is_prompt() -> None:
    server = AnthropicServer([reply("Late.", delay=30)]).start()
    try:
        with client_for(server, timeout=0.3) as client, pytest.raises(anthropic.APITimeoutError):
            client.messages.create(model="m", max_tokens=10, messages=USER)
    finally:
        started = time.monotonic()
        server.close()
    assert time.monotonic() - started < 3.0


def test_the_async_client_streams_too() -> None:
    async def both() -> tuple[str, str]:
        with AnthropicServer(["Plain.", "Streamed."]) as server:
            async with anthropic.AsyncAnthropic(
                base_url=server.base_url, api_key="test", max_retries=0
            ) as client:
                plain = await client.messages.create(model="m", max_tokens=10, messages=USER)
                async with client.messages.stream(
                    model="m", max_tokens=10, messages=USER
                ) as stream:
                    streamed = await stream.get_final_text()
        return plain.content[0].text, streamed  # type: ignore[union-attr]

    assert asyncio.run(both()) == ("Plain.", "Streamed.")


def test_count_tokens_models_and_the_connectivity_check() -> None:
    with AnthropicServer([reply("Unused.")], model="claude-scripted") as server:
        with client_for(server) as client:
            counted = client.messages.count_tokens(model="m", messages=USER)
            models = [model.id for model in client.models.list()]
        hello, _, _ = raw(server, "HEAD", "/api/hello")
        assert server.requests == []  # none of these is a model call
        assert server.responses_served == 0
    assert counted.input_tokens > 0
    assert models == ["claude-scripted"]
    assert hello == 200


def test_unknown_paths_get_404_and_are_logged() -> None:
    with AnthropicServer([]) as server:
        status, _, payload = raw(server, "POST", "/v1/complete", {"prompt": "hi"})
        head, _, _ = raw(server, "HEAD", "/nowhere")
        unknown = server.unknown_requests
    assert status == 404 and head == 404
    assert json.loads(payload)["error"] == {
        "type": "not_found_error",
        "message": "Unknown path: POST /v1/complete",
    }
    assert unknown == [("POST", "/v1/complete"), ("HEAD", "/nowhere")]


def test_the_claude_code_env_points_the_cli_here_and_keeps_it_quiet(tmp_path: Path) -> None:
    with AnthropicServer([]) as server:
        env = server.claude_code_env(tmp_path)
        assert env["ANTHROPIC_BASE_URL"] == server.base_url == server.url
    assert env["ANTHROPIC_API_KEY"] == "test"
    assert env["HOME"] == str(tmp_path)
    assert env["CLAUDE_CONFIG_DIR"] == str(tmp_path / ".claude")
    assert env["CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC"] == "1"


def test_reprs_and_usage_validation() -> None:
    server = AnthropicServer(["Hi."], model="claude-m")
    assert repr(server) == "<AnthropicServer new model='claude-m' served=0/1>"
    usage = AnthropicUsage(100, 5, cached_tokens=10, cache_write_tokens=20)
    assert repr(usage) == "AnthropicUsage(100, 5, cached_tokens=10, cache_write_tokens=20)"
    with pytest.raises(ValueError, match="cannot exceed prompt_tokens"):
        AnthropicUsage(100, 5, cached_tokens=60, cache_write_tokens=60)
    with pytest.raises(ValueError, match="cache_write_tokens must be >= 0"):
        AnthropicUsage(100, 5, cache_write_tokens=-1)
    with pytest.raises(TypeError, match="cache_write_tokens must be an int"):
        AnthropicUsage(100, 5, cache_write_tokens=1.5)  # type: ignore[arg-type]
