"""ScriptedServer driven over real HTTP by the real ``openai`` client (sync and async)."""

from __future__ import annotations

import asyncio
import http.client
import json
import socket
import threading
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from typing import Any

import pytest

pytest.importorskip("openai")

import openai
from openai.types.chat import ChatCompletionMessageParam, ChatCompletionToolParam

from haltwise.testing import (
    ErrorReply,
    Reply,
    ScriptedServer,
    ScriptEntry,
    ToolCall,
    Usage,
    error,
    reply,
    tool_call,
)

USER: list[ChatCompletionMessageParam] = [{"role": "user", "content": "What is the answer?"}]
READ_FILE_TOOL: ChatCompletionToolParam = {
    "type": "function",
    "function": {
        "name": "read_file",
        "description": "Read a file.",
        "parameters": {
            "type": "object",
            "properties": {"path": {"type": "string"}},
            "required": ["path"],
            "additionalProperties": False,
        },
        "strict": True,
    },
}


@contextmanager
def client_for(server: ScriptedServer, **options: Any) -> Iterator[openai.OpenAI]:
    options.setdefault("max_retries", 0)
    options.setdefault("timeout", 5.0)
    with openai.OpenAI(base_url=server.base_url, api_key="test", **options) as client:
        yield client


def raw_request(
    server: ScriptedServer, method: str, path: str, body: bytes | None = None
) -> tuple[int, dict[str, Any]]:
    """One plain HTTP request with the standard library; returns status and parsed JSON."""
    conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=5)
    try:
        headers = {"Content-Type": "application/json"} if body is not None else {}
        conn.request(method, path, body=body, headers=headers)
        response = conn.getresponse()
        payload: dict[str, Any] = json.loads(response.read())
        return response.status, payload
    finally:
        conn.close()


# -- non-streaming ---------------------------------------------------------------------


def test_text_reply_is_a_complete_chat_completion() -> None:
    with (
        ScriptedServer([reply("The answer is 42.", usage=(200, 12))], model="m-1") as server,
        client_for(server) as client,
    ):
        completion = client.chat.completions.create(model="whatever", messages=USER)

    assert completion.object == "chat.completion"
    assert completion.id.startswith("chatcmpl-")
    assert completion.model == "m-1"
    assert completion.created > 0
    (choice,) = completion.choices
    assert choice.message.role == "assistant"
    assert choice.message.content == "The answer is 42."
    assert choice.message.tool_calls is None
    assert choice.finish_reason == "stop"
    assert completion.usage is not None
    assert (completion.usage.prompt_tokens, completion.usage.completion_tokens) == (200, 12)
    assert completion.usage.total_tokens == 212


def test_tool_call_reply_has_ids_and_json_arguments() -> None:
    script = [
        reply(
            tool_calls=[
                tool_call("read_file", {"path": "a.py"}),
                tool_call("grep", {"pattern": "def main", "paths": ["src", "tests"]}),
            ],
            usage=(120, 30),
        ),
        reply(tool_calls=[tool_call("read_file", {"path": "b.py"})]),
        reply(tool_calls=[tool_call("noop", id="call_custom")]),
    ]
    with ScriptedServer(script) as server, client_for(server) as client:
        first = client.chat.completions.create(model="m", messages=USER, tools=[READ_FILE_TOOL])
        second = client.chat.completions.create(model="m", messages=USER)
        third = client.chat.completions.create(model="m", messages=USER)

    choice = first.choices[0]
    assert choice.finish_reason == "tool_calls"
    assert choice.message.content is None
    calls = choice.message.tool_calls
    assert calls is not None
    assert [call.id for call in calls] == ["call_1", "call_2"]
    assert all(call.type == "function" for call in calls)
    functions = [call.function for call in calls if call.type == "function"]
    assert [f.name for f in functions] == ["read_file", "grep"]
    assert json.loads(functions[0].arguments) == {"path": "a.py"}
    assert json.loads(functions[1].arguments) == {"pattern": "def main", "paths": ["src", "tests"]}
    # ids keep counting across replies; explicit ids are kept
    assert [c.id for c in second.choices[0].message.tool_calls or []] == ["call_3"]
    assert [c.id for c in third.choices[0].message.tool_calls or []] == ["call_custom"]


def test_raw_string_arguments_are_sent_unchanged() -> None:
    broken = '{"path": "a.py"'  # malformed on purpose
    with (
        ScriptedServer([reply(tool_calls=[tool_call("read_file", broken)])]) as server,
        client_for(server) as client,
    ):
        completion = client.chat.completions.create(model="m", messages=USER)
    (call,) = completion.choices[0].message.tool_calls or []
    assert call.type == "function"
    assert call.function.arguments == broken


def test_content_and_finish_reason_overrides() -> None:
    script: list[ScriptEntry] = [
        reply("Let me check.", tool_calls=[tool_call("read_file", {"path": "x"})]),
        reply("cut off mid-sen", finish_reason="length"),
        "a plain string is a reply",
    ]
    with ScriptedServer(script) as server, client_for(server) as client:
        mixed, truncated, plain = (
            client.chat.completions.create(model="m", messages=USER) for _ in range(3)
        )
    assert mixed.choices[0].message.content == "Let me check."
    assert mixed.choices[0].finish_reason == "tool_calls"
    assert truncated.choices[0].finish_reason == "length"
    assert plain.choices[0].message.content == "a plain string is a reply"


# -- streaming -------------------------------------------------------------------------


def test_streamed_text_arrives_in_several_deltas_with_usage() -> None:
    text = "The answer, after careful thought, is 42."
    with (
        ScriptedServer([reply(text, usage=(200, 12))]) as server,
        client_for(server) as client,
    ):
        stream = client.chat.completions.create(
            model="m", messages=USER, stream=True, stream_options={"include_usage": True}
        )
        chunks = list(stream)

    assert all(chunk.object == "chat.completion.chunk" for chunk in chunks)
    assert len({chunk.id for chunk in chunks}) == 1
    assert chunks[0].choices[0].delta.role == "assistant"
    deltas = [
        c.choices[0].delta.content for c in chunks if c.choices and c.choices[0].delta.content
    ]
    assert len(deltas) > 3
    assert "".join(deltas) == text
    finish = [c.choices[0].finish_reason for c in chunks if c.choices]
    assert finish[-1] == "stop"
    assert all(reason is None for reason in finish[:-1])
    # the usage chunk comes last and has no choices
    assert chunks[-1].choices == []
    assert chunks[-1].usage is not None
    assert chunks[-1].usage.total_tokens == 212
    assert all(chunk.usage is None for chunk in chunks[:-1])


def test_stream_without_include_usage_has_no_usage_chunk() -> None:
    with ScriptedServer(["hello there"]) as server, client_for(server) as client:
        chunks = list(client.chat.completions.create(model="m", messages=USER, stream=True))
    assert all(chunk.choices for chunk in chunks)
    assert all(chunk.usage is None for chunk in chunks)
    assert chunks[-1].choices[0].finish_reason == "stop"


def test_streamed_tool_calls_reassemble_from_chunks() -> None:
    long_path = "src/" + "deeply/nested/" * 6 + "module.py"
    script = [
        reply(
            tool_calls=[
                tool_call("read_file", {"path": long_path}),
                tool_call("list_dir", {"path": "src"}),
            ]
        )
    ]
    with ScriptedServer(script) as server, client_for(server) as client:
        stream = client.chat.completions.create(
            model="m", messages=USER, stream=True, stream_options={"include_usage": True}
        )
        chunks = list(stream)

    calls: dict[int, dict[str, str]] = {}
    argument_pieces: dict[int, int] = {}
    for chunk in chunks:
        for choice in chunk.choices:
            for delta in choice.delta.tool_calls or []:
                call = calls.setdefault(delta.index, {"id": "", "name": "", "arguments": ""})
                if delta.id:
                    assert not call["id"], "the id is only sent once"
                    call["id"] = delta.id
                if delta.function and delta.function.name:
                    assert not call["name"], "the name is only sent once"
                    call["name"] = delta.function.name
                if delta.function and delta.function.arguments:
                    call["arguments"] += delta.function.arguments
                    argument_pieces[delta.index] = argument_pieces.get(delta.index, 0) + 1

    assert sorted(calls) == [0, 1]
    assert calls[0]["id"] == "call_1"
    assert calls[0]["name"] == "read_file"
    assert json.loads(calls[0]["arguments"]) == {"path": long_path}
    assert argument_pieces[0] > 1
    assert calls[1] == {"id": "call_2", "name": "list_dir", "arguments": '{"path": "src"}'}
    assert [c.choices[0].finish_reason for c in chunks if c.choices][-1] == "tool_calls"
    assert chunks[-1].usage is not None


def test_stream_helper_accumulates_text_tool_calls_and_usage() -> None:
    script = [
        reply(
            "Reading it now.",
            tool_calls=[tool_call("read_file", {"path": "a.py"})],
            usage=(300, 40),
            cached_tokens=256,
            reasoning_tokens=10,
        )
    ]
    with (
        ScriptedServer(script) as server,
        client_for(server) as client,
        client.chat.completions.stream(
            model="m",
            messages=USER,
            tools=[READ_FILE_TOOL],
            stream_options={"include_usage": True},
        ) as stream,
    ):
        event_types = {event.type for event in stream}
        final = stream.get_final_completion()

    assert {"content.delta", "content.done", "tool_calls.function.arguments.done"} <= event_types
    message = final.choices[0].message
    assert message.content == "Reading it now."
    (call,) = message.tool_calls or []
    assert call.id == "call_1"
    assert call.function.name == "read_file"
    assert call.function.parsed_arguments == {"path": "a.py"}  # strict tool: parsed by the SDK
    assert final.choices[0].finish_reason == "tool_calls"
    assert final.usage is not None
    assert final.usage.prompt_tokens_details is not None
    assert final.usage.prompt_tokens_details.cached_tokens == 256
    assert final.usage.completion_tokens_details is not None
    assert final.usage.completion_tokens_details.reasoning_tokens == 10


# -- usage -----------------------------------------------------------------------------


def test_usage_details_in_non_streaming_responses() -> None:
    script = [
        reply("a", usage=Usage(1000, 50, cached_tokens=800, reasoning_tokens=20)),
        reply("b", usage=(10, 5)),
    ]
    with ScriptedServer(script) as server, client_for(server) as client:
        detailed = client.chat.completions.create(model="m", messages=USER).usage
        plain = client.chat.completions.create(model="m", messages=USER).usage
    assert detailed is not None
    assert detailed.prompt_tokens_details is not None
    assert detailed.prompt_tokens_details.cached_tokens == 800
    assert detailed.completion_tokens_details is not None
    assert detailed.completion_tokens_details.reasoning_tokens == 20
    assert plain is not None
    assert plain.prompt_tokens_details is None
    assert plain.completion_tokens_details is None


def test_usage_is_estimated_when_not_scripted() -> None:
    long_history: list[ChatCompletionMessageParam] = [
        {"role": "system", "content": "You are terse. " * 50},
        *USER,
    ]
    with ScriptedServer(["short answer"], repeat_last=True) as server, client_for(server) as c:
        small = c.chat.completions.create(model="m", messages=USER).usage
        again = c.chat.completions.create(model="m", messages=USER).usage
        large = c.chat.completions.create(model="m", messages=long_history).usage
        streamed = list(
            c.chat.completions.create(
                model="m", messages=USER, stream=True, stream_options={"include_usage": True}
            )
        )[-1].usage
    assert small is not None
    assert large is not None
    assert small.prompt_tokens > 0
    assert small.completion_tokens == 3  # ceil(len("short answer") / 4)
    assert small.total_tokens == small.prompt_tokens + small.completion_tokens
    assert again == small  # deterministic
    assert large.prompt_tokens > small.prompt_tokens + 150
    assert streamed == small


# -- script control --------------------------------------------------------------------


def test_requests_are_recorded_in_order() -> None:
    with ScriptedServer(["one", "two"]) as server, client_for(server) as client:
        client.chat.completions.create(model="model-a", messages=USER, temperature=0.5)
        list(
            client.chat.completions.create(
                model="model-b",
                messages=[*USER, {"role": "assistant", "content": "one"}],
                tools=[READ_FILE_TOOL],
                stream=True,
            )
        )
        requests = server.requests
        assert server.responses_served == 2

    assert [r["model"] for r in requests] == ["model-a", "model-b"]
    assert requests[0]["messages"] == USER
    assert requests[0]["temperature"] == 0.5
    assert "stream" not in requests[0]
    assert requests[1]["stream"] is True
    assert requests[1]["messages"][-1] == {"role": "assistant", "content": "one"}
    assert requests[1]["tools"][0]["function"]["name"] == "read_file"


def test_exhausted_script_answers_500_with_message() -> None:
    with ScriptedServer(["only"]) as server, client_for(server) as client:
        client.chat.completions.create(model="m", messages=USER)
        with pytest.raises(openai.InternalServerError, match="script exhausted after 1 responses"):
            client.chat.completions.create(model="m", messages=USER)
        with pytest.raises(openai.InternalServerError) as streamed:
            client.chat.completions.create(model="m", messages=USER, stream=True)
        assert len(server.requests) == 3
        assert server.responses_served == 1
    assert streamed.value.status_code == 500
    assert isinstance(streamed.value.body, dict)
    assert streamed.value.body["message"] == "script exhausted after 1 responses"


def test_empty_script_is_exhausted_at_once() -> None:
    with (
        ScriptedServer([]) as server,
        client_for(server) as client,
        pytest.raises(openai.InternalServerError, match="after 0 responses"),
    ):
        client.chat.completions.create(model="m", messages=USER)


def test_repeat_last_keeps_answering() -> None:
    with ScriptedServer(["first", "again"], repeat_last=True) as server, client_for(server) as c:
        contents = [
            c.chat.completions.create(model="m", messages=USER).choices[0].message.content
            for _ in range(4)
        ]
        assert server.responses_served == 4
    assert contents == ["first", "again", "again", "again"]


@pytest.mark.parametrize(
    ("status", "exception", "error_type"),
    [
        (400, openai.BadRequestError, "invalid_request_error"),
        (401, openai.AuthenticationError, "authentication_error"),
        (403, openai.PermissionDeniedError, "permission_error"),
        (404, openai.NotFoundError, "not_found_error"),
        (409, openai.ConflictError, "conflict_error"),
        (422, openai.UnprocessableEntityError, "invalid_request_error"),
        (429, openai.RateLimitError, "rate_limit_error"),
        (500, openai.InternalServerError, "server_error"),
        (503, openai.InternalServerError, "server_error"),
    ],
)
def test_error_entries_raise_the_matching_openai_exception(
    status: int, exception: type[openai.APIStatusError], error_type: str
) -> None:
    script: list[ScriptEntry] = [
        error(status, f"scripted failure {status}", code="boom"),
        "recovered",
    ]
    with ScriptedServer(script) as server, client_for(server) as client:
        with pytest.raises(exception) as caught:
            client.chat.completions.create(model="m", messages=USER)
        after = client.chat.completions.create(model="m", messages=USER)
    assert caught.value.status_code == status
    assert caught.value.body == {
        "message": f"scripted failure {status}",
        "type": error_type,
        "param": None,
        "code": "boom",
    }
    assert after.choices[0].message.content == "recovered"


def test_error_in_a_streaming_request_is_raised_before_streaming() -> None:
    with (
        ScriptedServer([error(429, "slow down")]) as server,
        client_for(server) as client,
        pytest.raises(openai.RateLimitError, match="slow down"),
    ):
        client.chat.completions.create(model="m", messages=USER, stream=True)


def test_retry_after_lets_the_client_retry_quickly() -> None:
    # replies and errors mix without an annotation
    script = [
        error(429, "slow down", retry_after=0.01),
        error(503, "busy", retry_after=0.01),
        reply("ok"),
    ]
    with ScriptedServer(script) as server, client_for(server, max_retries=2) as client:
        started = time.monotonic()
        completion = client.chat.completions.create(model="m", messages=USER)
        elapsed = time.monotonic() - started
        assert len(server.requests) == 3
    assert completion.choices[0].message.content == "ok"
    assert elapsed < 1.0


def test_callable_entries_see_the_request_body() -> None:
    seen: list[dict[str, Any]] = []

    def echo(body: dict[str, Any]) -> Reply:
        seen.append(body)
        last = body["messages"][-1]["content"]
        body["messages"].clear()  # mutating the copy must not touch server.requests
        return reply(f"you said: {last}", usage=(len(last), 3))

    def fail_on_second(body: dict[str, Any]) -> Reply | ErrorReply:
        return error(400, "no tools allowed") if "tools" in body else reply("fine")

    with (
        ScriptedServer([echo, fail_on_second, fail_on_second]) as server,
        client_for(server) as client,
    ):
        echoed = client.chat.completions.create(model="m", messages=USER)
        assert client.chat.completions.create(model="m", messages=USER).choices[0].message.content
        with pytest.raises(openai.BadRequestError, match="no tools allowed"):
            client.chat.completions.create(model="m", messages=USER, tools=[READ_FILE_TOOL])
        recorded = server.requests

    assert echoed.choices[0].message.content == "you said: What is the answer?"
    assert echoed.usage is not None
    assert echoed.usage.prompt_tokens == len("What is the answer?")
    assert seen[0]["model"] == "m"
    assert recorded[0]["messages"] == USER


def test_callable_failures_become_500_errors() -> None:
    def boom(body: dict[str, Any]) -> Reply:
        raise ValueError("no script for this")

    def wrong(body: dict[str, Any]) -> Any:
        return 42

    with ScriptedServer([boom, wrong]) as server, client_for(server) as client:
        with pytest.raises(openai.InternalServerError, match=r"script\[0\] raised ValueError"):
            client.chat.completions.create(model="m", messages=USER)
        with pytest.raises(openai.InternalServerError, match=r"script\[1\] returned 42"):
            client.chat.completions.create(model="m", messages=USER)


def test_delay_postpones_the_answer() -> None:
    with ScriptedServer([reply("late", delay=0.15)]) as server, client_for(server) as client:
        started = time.monotonic()
        completion = client.chat.completions.create(model="m", messages=USER)
        elapsed = time.monotonic() - started
    assert completion.choices[0].message.content == "late"
    assert elapsed >= 0.15


def test_delay_beyond_client_timeout_and_close_is_prompt() -> None:
    server = ScriptedServer([reply("never seen", delay=30)]).start()
    try:
        with (
            client_for(server, timeout=0.1) as client,
            pytest.raises(openai.APITimeoutError),
        ):
            client.chat.completions.create(model="m", messages=USER)
    finally:
        started = time.monotonic()
        server.close()
    assert time.monotonic() - started < 1.5


def test_async_client_plain_and_streaming() -> None:
    async def main() -> tuple[str | None, str, int]:
        script = [
            reply("async hello", usage=(7, 2)),
            reply("streamed async hello", usage=(9, 4)),
        ]
        with ScriptedServer(script) as server:
            async with openai.AsyncOpenAI(
                base_url=server.base_url, api_key="test", max_retries=0, timeout=5.0
            ) as client:
                plain = await client.chat.completions.create(model="m", messages=USER)
                stream = await client.chat.completions.create(
                    model="m", messages=USER, stream=True, stream_options={"include_usage": True}
                )
                text, total = "", 0
                async for chunk in stream:
                    if chunk.choices and chunk.choices[0].delta.content:
                        text += chunk.choices[0].delta.content
                    if chunk.usage is not None:
                        total = chunk.usage.total_tokens
        return plain.choices[0].message.content, text, total

    assert asyncio.run(main()) == ("async hello", "streamed async hello", 13)


def test_concurrent_requests_each_get_one_entry() -> None:
    script = [f"answer {i}" for i in range(16)]
    with ScriptedServer(script) as server, client_for(server) as client:

        def ask(_: int) -> str | None:
            return (
                client.chat.completions.create(model="m", messages=USER).choices[0].message.content
            )

        with ThreadPoolExecutor(max_workers=8) as pool:
            answers = list(pool.map(ask, range(16)))
        assert server.responses_served == 16
        assert len(server.requests) == 16
    assert sorted(answers, key=str) == sorted(script)


# -- other endpoints and malformed requests ----------------------------------------------


def test_models_endpoint_lists_the_model() -> None:
    with ScriptedServer([], model="tiny-scripted") as server, client_for(server) as client:
        assert [m.id for m in client.models.list()] == ["tiny-scripted"]
        assert client.models.retrieve("tiny-scripted").owned_by == "haltwise"
        with pytest.raises(openai.NotFoundError):
            client.models.retrieve("gpt-nonexistent")


def test_malformed_requests_get_400_and_consume_nothing() -> None:
    with ScriptedServer(["kept"]) as server:
        status, body = raw_request(server, "POST", "/v1/chat/completions", b"{not json")
        assert status == 400
        assert body["error"]["type"] == "invalid_request_error"
        status, body = raw_request(server, "POST", "/v1/chat/completions", b'{"model": "m"}')
        assert status == 400
        assert "messages" in body["error"]["message"]
        status, body = raw_request(server, "POST", "/v1/other", b"{}")
        assert status == 404
        assert server.requests == []
        assert server.responses_served == 0
        status, body = raw_request(
            server, "POST", "/v1/chat/completions", json.dumps({"messages": USER}).encode()
        )
        assert status == 200
        assert body["choices"][0]["message"]["content"] == "kept"


# -- lifecycle -------------------------------------------------------------------------


def test_lifecycle_and_clean_close() -> None:
    server = ScriptedServer(["x"])
    with pytest.raises(RuntimeError, match="not running"):
        _ = server.base_url
    assert not server.running
    assert server.start() is server
    assert server.start() is server  # starting again is harmless
    port = server.port
    assert server.url == f"http://127.0.0.1:{port}"
    assert server.base_url == f"http://127.0.0.1:{port}/v1"
    assert f"127.0.0.1:{port} running" in repr(server)
    server.close()
    server.close()  # idempotent
    assert not server.running
    assert "closed" in repr(server)
    with pytest.raises(RuntimeError, match="not running"):
        _ = server.port
    with pytest.raises(RuntimeError, match="cannot be restarted"):
        server.start()
    with socket.socket() as probe:
        probe.settimeout(1)
        assert probe.connect_ex(("127.0.0.1", port)) != 0
    assert not any(t.name.endswith(f":{port}") for t in threading.enumerate())


def test_close_from_inside_a_callable_does_not_hang() -> None:
    def stop(body: dict[str, Any]) -> Reply:
        server.close()
        return reply("bye")

    server = ScriptedServer([stop]).start()
    with client_for(server) as client:
        started = time.monotonic()
        assert client.chat.completions.create(model="m", messages=USER).choices[0].message.content
    assert time.monotonic() - started < 1.0
    assert not server.running


# -- values ----------------------------------------------------------------------------


def test_reprs_are_readable() -> None:
    call = tool_call("read_file", {"path": "a.py"})
    assert repr(call) == """ToolCall('read_file', '{"path": "a.py"}')"""
    assert repr(tool_call("x", id="call_9")) == "ToolCall('x', '{}', id='call_9')"
    assert (
        repr(reply(tool_calls=[call], usage=(120, 30)))
        == """Reply(tool_calls=[ToolCall('read_file', '{"path": "a.py"}')], usage=Usage(120, 30))"""
    )
    assert repr(reply("hi", delay=0.5)) == "Reply('hi', delay=0.5)"
    assert repr(Usage(10, 5, cached_tokens=8)) == "Usage(10, 5, cached_tokens=8)"
    assert repr(error(429, "slow")) == "ErrorReply(429, 'slow', type='rate_limit_error')"


def test_value_validation() -> None:
    with pytest.raises(ValueError, match="cached_tokens"):
        Usage(10, 5, cached_tokens=11)
    with pytest.raises(ValueError, match="reasoning_tokens"):
        reply("x", usage=(10, 5), reasoning_tokens=6)
    with pytest.raises(ValueError, match="explicit usage"):
        reply("x", cached_tokens=1)
    with pytest.raises(ValueError, match="delay"):
        reply("x", delay=-1)
    with pytest.raises(ValueError, match="400-599"):
        error(200, "not an error")
    with pytest.raises(TypeError, match="JSON-encodable"):
        tool_call("x", {"when": object()})
    with pytest.raises(TypeError, match="ToolCall"):
        Reply(tool_calls=("read_file",))  # type: ignore[arg-type]
    with pytest.raises(TypeError, match=r"script\[1\]"):
        ScriptedServer(["ok", 3])  # type: ignore[list-item]
    with pytest.raises(ValueError, match="non-empty script"):
        ScriptedServer([], repeat_last=True)
    assert reply().content == ""
    assert isinstance(reply(tool_calls=[ToolCall("f")]).tool_calls[0], ToolCall)
    headers = dict(error(429, "x", retry_after=1.5, headers={"x-should-retry": "true"}).headers)
    assert headers == {"retry-after-ms": "1500", "retry-after": "2", "x-should-retry": "true"}
