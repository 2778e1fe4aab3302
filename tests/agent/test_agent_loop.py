"""The agent loop end to end: the real ``openai`` client, streaming, against ScriptedServer.

Each limit, each dialog choice, synthesis, cancel, injected messages and resume.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any, cast

import openai
import pytest
from misreported import MisreportedUsage

import haltwise
from haltwise import Answer, Ask, Choice, Status
from haltwise.agent.loop import CHARS_PER_TOKEN, Agent, AgentError, AgentStatus, Listener
from haltwise.agent.store import Store
from haltwise.agent.tools import Toolbox, ToolOutput
from haltwise.engine.detectors import stuck
from haltwise.engine.limits import Limit
from haltwise.testing import (
    FakeClock,
    ScriptedResponse,
    ScriptedServer,
    ScriptEntry,
    ToolCall,
    error,
    raw,
    raw_stream,
    reply,
    tool_call,
)

#: The workspace, the store and the isolation from the user's environment.
pytest_plugins = ["agent_fixtures"]

MODEL = "scripted-model"
PRICES = haltwise.Prices({MODEL: {"input": "1.00", "output": "4.00"}})


def read(path: str = "a.txt") -> ScriptEntry:
    return reply(f"Reading {path}.", tool_calls=[tool_call("read_file", {"path": path})])


def reads(n: int) -> list[ScriptEntry]:
    """n turns that each read a different file (so stuck detection stays quiet)."""
    return [read("a.txt" if i % 2 == 0 else "sub/b.py") for i in range(n)]


class Recorder(Listener):
    """Keeps what the agent reported."""

    def __init__(self) -> None:
        self.statuses: list[AgentStatus] = []
        self.turn_counts: list[int] = []
        self.notes: list[str] = []
        self.warnings: list[str] = []
        self.asks: list[Ask] = []
        self.outputs: list[ToolOutput] = []
        self.streamed = ""
        self.on_tool: Callable[[], object] | None = None
        self._turn = False

    def event(self, event: haltwise.Event, decision: haltwise.Decision) -> None:
        self._turn = isinstance(event, haltwise.TurnStarting) and not isinstance(
            decision, haltwise.Stop
        )

    def status(self, status: AgentStatus) -> None:
        self.statuses.append(status)
        if self._turn:
            self.turn_counts.append(status.turns)
            self._turn = False

    def note(self, text: str) -> None:
        self.notes.append(text)

    def warning(self, text: str) -> None:
        self.warnings.append(text)

    def asking(self, ask: Ask) -> None:
        self.asks.append(ask)

    def text(self, delta: str) -> None:
        self.streamed += delta

    def tool_finished(self, name: str, output: ToolOutput, call_id: str) -> None:
        self.outputs.append(output)
        if self.on_tool is not None:
            self.on_tool()


@contextmanager
def agent_for(
    script: Sequence[ScriptEntry],
    workspace: Path,
    limits: Limit | None,
    *,
    store: Store | None = None,
    prompter: Callable[[Ask], Answer | None] | None = None,
    approver: Callable[[str], bool] | None = None,
    clock: Callable[[], float] = time.monotonic,
    repeat_last: bool = False,
    approval_timeout: float = 0.0,
) -> Iterator[tuple[Agent, ScriptedServer, Recorder]]:
    """An agent on the scripted server. With a store and no prompter, an ask waits for an
    answer through the store's ledger: ``approval_timeout`` (none by default, so that it stops
    at once as an agent with no UI and no ledger does)."""
    recorder = Recorder()
    with ScriptedServer(script, model=MODEL, repeat_last=repeat_last) as server:
        client = openai.OpenAI(base_url=server.base_url, api_key="test", max_retries=0)
        agent = Agent(
            client,
            MODEL,
            Toolbox(workspace, approver=approver),
            limits=limits,
            pricer=PRICES,
            clock=clock,
            store=store,
            listener=recorder,
            prompter=prompter,
            base_url=server.base_url,
            approval_timeout=approval_timeout,
        )
        yield agent, server, recorder
        client.close()


def test_a_run_completes_with_its_answer(workspace: Path) -> None:
    script = [*reads(2), reply("a.txt holds three Greek letters.", usage=(300, 9))]
    with agent_for(script, workspace, haltwise.max_turns(25)) as (agent, server, seen):
        outcome = agent.send("What is in a.txt?")
    assert outcome.status is Status.COMPLETED
    assert outcome.partial_output == "a.txt holds three Greek letters."
    assert outcome.usage.turns == 3 and outcome.usage.tool_calls == 2
    assert seen.streamed.endswith("three Greek letters.")
    assert seen.turn_counts == [1, 2, 3]
    assert agent.status().widget().startswith("Turns: 3/25 │ ")
    first = server.requests[0]
    assert first["stream"] is True and first["stream_options"] == {"include_usage": True}
    assert {tool["function"]["name"] for tool in first["tools"]} == {
        "read_file",
        "list_dir",
        "search",
        "write_file",
        "edit_file",
        "run_command",
    }
    tool_message = server.requests[1]["messages"][-1]
    assert tool_message["role"] == "tool" and tool_message["content"] == "alpha\nbeta\ngamma\n"


def test_with_no_ui_the_turn_limit_stops_silently(workspace: Path) -> None:
    with agent_for(reads(10), workspace, haltwise.max_turns(2)) as (agent, server, _):
        outcome = agent.send("Read forever.")
    assert outcome.status is Status.ABANDONED and outcome.reason == "turn_limit"
    assert "2 of 2 turns" in outcome.message
    assert len(server.requests) == 2  # max_turns=N lets exactly N turns run


def test_soft_warnings_go_into_the_conversation(workspace: Path) -> None:
    limits = haltwise.max_turns(4, warn_at=0.5)
    with agent_for([*reads(3), reply("done")], workspace, limits) as (agent, server, seen):
        agent.send("Read.")
    assert seen.notes == ["Turn 2 of 4: 2 turns left; wrap up soon."]
    second = server.requests[1]["messages"]
    assert second[-1] == {
        "role": "user",
        "content": "[haltwise] Turn 2 of 4: 2 turns left; wrap up soon.",
    }


def test_a_block_becomes_the_tool_error(workspace: Path) -> None:
    limits = haltwise.max_turns(25) | haltwise.max_tool_calls(1, tool="read_file")
    script = [read(), read("sub/b.py"), reply("ok")]
    with agent_for(script, workspace, limits) as (agent, server, seen):
        outcome = agent.send("Read two files.")
    assert outcome.status is Status.COMPLETED
    refused = server.requests[2]["messages"][-1]
    assert refused["role"] == "tool"
    assert refused["content"].startswith("error: Budget for read_file spent: 1 of 1")
    assert seen.outputs[-1].is_error


def asks_then(*answers: Answer | None) -> Callable[[Ask], Answer | None]:
    queue = list(answers)

    def prompter(ask: Ask) -> Answer | None:
        return queue.pop(0)

    return prompter


def test_continue_at_the_limit_resets_the_count(workspace: Path) -> None:
    limits = haltwise.max_turns(2, on_limit="ask")
    prompter = asks_then(Answer(Choice.CONTINUE), Answer(Choice.CONTINUE))
    script = [*reads(4), reply("done")]
    with agent_for(script, workspace, limits, prompter=prompter) as (agent, _, seen):
        outcome = agent.send("Read a lot.")
    assert outcome.status is Status.COMPLETED
    assert [ask.question for ask in seen.asks] == ["You've used 2 turns. Continue?"] * 2
    assert seen.turn_counts == [1, 2, 1, 2, 1]
    assert outcome.usage.turns == 5
    assert {status.state for status in seen.statuses} >= {"running", "asking", "idle"}


def test_extend_raises_the_cap(workspace: Path) -> None:
    limits = haltwise.max_turns(2, on_limit="ask")
    prompter = asks_then(Answer(Choice.EXTEND, 3))
    with agent_for([*reads(4), reply("done")], workspace, limits, prompter=prompter) as (
        agent,
        _,
        seen,
    ):
        outcome = agent.send("Read a lot.")
    assert outcome.status is Status.COMPLETED
    assert seen.turn_counts == [1, 2, 3, 4, 5]
    assert agent.status().max_turns == 5


def test_wrap_up_writes_the_answer_without_tools(workspace: Path) -> None:
    limits = haltwise.max_turns(2, on_limit="ask")
    script = [*reads(2), reply("From what I read: alpha, beta, gamma.", usage=(900, 12)), read()]
    prompter = asks_then(Answer(Choice.WRAP_UP))
    with agent_for(script, workspace, limits, prompter=prompter) as (agent, server, _):
        outcome = agent.send("Summarize.")
    assert outcome.status is Status.COMPLETED_WITH_WARNINGS
    assert outcome.reason == "turn_limit"
    assert outcome.partial_output == "From what I read: alpha, beta, gamma."
    synthesis = server.requests[-1]
    assert len(server.requests) == 3
    assert "tools" not in synthesis
    assert synthesis["messages"][-1]["content"].startswith("[haltwise] The run has stopped")
    assert agent.messages[-1] == {
        "role": "assistant",
        "content": "From what I read: alpha, beta, gamma.",
    }


def test_abort_at_the_limit_declines(workspace: Path) -> None:
    limits = haltwise.max_turns(1, on_limit="ask")
    with agent_for(reads(3), workspace, limits, prompter=asks_then(Answer(Choice.ABORT))) as (
        agent,
        server,
        _,
    ):
        outcome = agent.send("Read.")
    assert outcome.status is Status.ABANDONED and outcome.reason == "declined"
    assert len(server.requests) == 1


def test_synthesize_policy_salvages_an_answer_headless(workspace: Path) -> None:
    limits = haltwise.max_turns(25) | haltwise.max_tool_calls(2, on_limit="synthesize")
    two_calls = reply(tool_calls=[tool_call("read_file", {"path": "a.txt"}), tool_call("list_dir")])
    script = [two_calls, read("sub/b.py"), reply("Best answer: f returns 1.")]
    with agent_for(script, workspace, limits) as (agent, server, _):
        outcome = agent.send("What does f return?")
    assert outcome.status is Status.COMPLETED_WITH_WARNINGS
    assert outcome.reason == "tool_call_limit"
    assert outcome.partial_output == "Best answer: f returns 1."
    messages = server.requests[-1]["messages"]
    assert "tools" not in server.requests[-1]
    # The refused call still has a result, so the conversation is valid for the endpoint.
    unrun = [m for m in messages if m["role"] == "tool" and m["content"].startswith("not run")]
    assert len(unrun) == 1


def test_token_and_cost_limits_stop_after_usage(workspace: Path) -> None:
    script = [
        reply(tool_calls=[tool_call("list_dir")], usage=(800, 10)),
        reply(tool_calls=[tool_call("read_file", {"path": "a.txt"})], usage=(900, 10)),
        reply("done"),
    ]
    with agent_for(script, workspace, haltwise.max_tokens(1500)) as (agent, _, _seen):
        outcome = agent.send("Go.")
    # The second request's prompt (at least the first's 800 tokens) cannot fit in what is left.
    assert outcome.reason == "token_limit" and outcome.usage.total_tokens == 810
    assert "leaves no room" in outcome.message
    with agent_for(script, workspace, haltwise.max_tokens(1800)) as (agent, _, _seen):
        outcome = agent.send("Go.")
    # Room for the second (190 tokens of answer), not for the third.
    assert outcome.reason == "token_limit" and outcome.usage.total_tokens == 1720
    with agent_for(script, workspace, haltwise.max_cost("0.001")) as (agent, _, _seen):
        outcome = agent.send("Go.")
    assert outcome.reason == "cost_limit"
    assert outcome.usage.cost is not None and outcome.usage.cost > 0


def test_the_time_limit_uses_the_injected_clock(workspace: Path) -> None:
    clock = FakeClock()
    with agent_for(reads(5), workspace, haltwise.timeout(10), clock=clock) as (agent, _, seen):
        seen.on_tool = lambda: clock.advance(6)
        outcome = agent.send("Go.")
    assert outcome.status is Status.TIMED_OUT and outcome.reason == "time_limit"
    assert outcome.usage.turns == 2


def test_stuck_detection_nudges_then_stops(workspace: Path) -> None:
    same = reply(
        tool_calls=[tool_call("edit_file", {"path": "a.txt", "old_text": "x", "new_text": "y"})]
    )
    with agent_for([same], workspace, haltwise.max_turns(25) | stuck(), repeat_last=True) as (
        agent,
        _,
        seen,
    ):
        outcome = agent.send("Fix it.")
    assert outcome.reason.startswith("stuck.")
    assert any("stuck" in note for note in seen.notes)
    assert outcome.usage.turns < 10


def run_in_thread(agent: Agent, prompt: str) -> tuple[threading.Thread, dict[str, Any]]:
    box: dict[str, Any] = {}
    thread = threading.Thread(target=lambda: box.update(outcome=agent.send(prompt)))
    thread.start()
    return thread, box


def wait_until(condition: Callable[[], bool], timeout: float = 5.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "timed out waiting"
        time.sleep(0.01)


def test_cancel_while_the_model_has_not_answered(workspace: Path, store_path: Path) -> None:
    with (
        Store(store_path) as store,
        agent_for(
            [read(), reply("late", delay=20), reply("fine")],
            workspace,
            haltwise.max_turns(25),
            store=store,
        ) as (agent, server, _),
    ):
        thread, box = run_in_thread(agent, "Go.")
        wait_until(lambda: len(server.requests) == 2)
        started = time.monotonic()
        assert agent.cancel("interrupted (Ctrl-C)")
        thread.join(5)
        assert time.monotonic() - started < 2
        outcome = box["outcome"]
        assert outcome.status is Status.CANCELLED and outcome.reason == "cancelled"
        assert outcome.message == "The run was cancelled: interrupted (Ctrl-C)."
        assert not agent.cancel()  # nothing runs now
        record = store.load_run(outcome.run_id)
        assert record.status == "cancelled"
        assert record.checkpoint is not None and record.checkpoint["run"]["turns"] == 2
        # The next prompt is a new run, not cancelled by the last one.
        again = agent.send("Again?")
        assert again.status is Status.COMPLETED and again.partial_output == "fine"


def test_cancel_during_the_dialog_keeps_the_counts(workspace: Path) -> None:
    opened = threading.Event()
    release = threading.Event()

    def prompter(ask: Ask) -> Answer | None:
        opened.set()
        release.wait(5)
        return Answer(Choice.CONTINUE)

    limits = haltwise.max_turns(2, on_limit="ask")
    with agent_for(reads(5), workspace, limits, prompter=prompter) as (agent, _, _seen):
        thread, box = run_in_thread(agent, "Go.")
        assert opened.wait(5)
        agent.cancel()
        release.set()
        thread.join(5)
    outcome = box["outcome"]
    assert outcome.status is Status.CANCELLED
    assert outcome.usage.turns == 2
    assert agent.status().turns == 2  # the answer did not start a new round


def test_cancel_kills_a_running_command(workspace: Path) -> None:
    script = [reply(tool_calls=[tool_call("run_command", {"command": "sleep 30"})])]
    with agent_for(script, workspace, haltwise.max_turns(5), approver=lambda c: True) as (
        agent,
        _,
        _seen,
    ):
        thread, box = run_in_thread(agent, "Sleep.")
        time.sleep(0.3)
        started = time.monotonic()
        agent.cancel()
        thread.join(5)
        assert time.monotonic() - started < 3
    assert box["outcome"].status is Status.CANCELLED


def test_a_message_typed_mid_run_joins_without_a_reset(workspace: Path) -> None:
    with agent_for([*reads(3), reply("done")], workspace, haltwise.max_turns(3)) as (
        agent,
        server,
        seen,
    ):
        seen.on_tool = lambda: agent.inject("Also look at sub/b.py.")
        outcome = agent.send("Read.")
    assert outcome.reason == "turn_limit"  # injected messages never reset the count
    assert {"role": "user", "content": "Also look at sub/b.py."} in server.requests[1]["messages"]
    assert not agent.inject("too late")


def test_resume_continues_with_the_counts_it_had(workspace: Path, store_path: Path) -> None:
    limits = haltwise.max_turns(2, on_limit="ask")
    with (
        Store(store_path) as store,
        agent_for(reads(5), workspace, limits, store=store) as (
            agent,
            _,
            _seen,
        ),
    ):
        first = agent.send("Read everything.")  # no prompter: stops at the limit
    assert first.reason == "turn_limit"
    with Store(store_path) as store:
        record = store.load_run(first.run_id)
        assert [m["role"] for m in record.messages] == [
            "system",
            "user",
            "assistant",
            "tool",
            "assistant",
            "tool",
        ]
        prompter = asks_then(Answer(Choice.CONTINUE))
        with agent_for(
            [reply("Resumed and done.")], workspace, limits, store=store, prompter=prompter
        ) as (
            again,
            server,
            seen,
        ):
            again.resume(record)
            assert again.status().turns == 2
            outcome = again.send("Go on.")
        assert [ask.question for ask in seen.asks] == ["You've used 2 turns. Continue?"]
        assert outcome.status is Status.COMPLETED and outcome.run_id == first.run_id
        assert outcome.usage.turns == 3
        sent = server.requests[0]["messages"]
        assert sent[:6] == record.messages and sent[-1] == {"role": "user", "content": "Go on."}
        assert store.load_run(first.run_id).status == "completed"
        # The original conversation is kept; the resumed one is a fork.
        assert store.load_run(first.run_id).conversation_id != record.conversation_id


@pytest.mark.parametrize(
    ("entry", "expected"),
    [
        (error(401, "bad key"), "refused the API key"),
        (error(404, "no such model", code="model_not_found"), "does not know model"),
        (error(500, "boom"), "answered HTTP 500: boom"),
    ],
)
def test_endpoint_failures_are_clear(workspace: Path, entry: ScriptEntry, expected: str) -> None:
    with (
        agent_for([entry], workspace, haltwise.max_turns(5)) as (agent, _, _seen),
        pytest.raises(AgentError, match=expected),
    ):
        agent.send("Hi.")
    assert agent.governor.outcome is not None and agent.governor.outcome.reason == "error"


def chunk(delta: dict[str, Any], **fields: Any) -> dict[str, Any]:
    """A ``chat.completion.chunk`` with one choice holding ``delta``, and ``fields`` over it."""
    return {
        "id": "chatcmpl-raw",
        "object": "chat.completion.chunk",
        "created": 0,
        "model": MODEL,
        "choices": [{"index": 0, "delta": delta, "finish_reason": None}],
        **fields,
    }


def listing_part(index: Any = 0, **function: Any) -> dict[str, Any]:
    """A tool-call piece of a delta: ``list_dir`` with no arguments, ``function`` over it."""
    called = {"name": "list_dir", "arguments": "{}", **function}
    return {"index": index, "id": f"call_{index}", "type": "function", "function": called}


#: How an AgentError for a chunk with a field of the wrong type begins.
MALFORMED = "sent a chunk that is not a chat completion chunk: "
#: What an endpoint that is no chat-completions API, or a broken one, may answer with HTTP 200,
#: and the end of the AgentError it must be (after "the model endpoint at URL ").
NOT_A_REPLY: dict[str, tuple[ScriptEntry, str]] = {
    "a web page": (
        raw("<html>oops</html>", content_type="text/html"),
        "sent no chat completion chunk: it answered HTTP 200 with '<html>oops</html>' "
        "(content type 'text/html'). Check --base-url (or OPENAI_BASE_URL): it must be an "
        "OpenAI-compatible API",
    ),
    "a long page": (
        raw("<p>\x1b[2J" + "x" * 300, content_type="text/html"),
        "sent no chat completion chunk: it answered HTTP 200 with '<p>\\x1b[2J"
        + "x" * 193
        + "' ... (content type 'text/html'). Check --base-url",
    ),
    "a page that is not UTF-8": (
        raw(b"<p>caf\xe9</p>", content_type="text/html; charset=latin-1"),
        "sent a stream that is not UTF-8 text (byte 0xe9): it answered HTTP 200 with "
        "'<p>caf\\\\xe9</p>' (content type 'text/html; charset=latin-1'). Check --base-url",
    ),
    "an empty body": (
        raw(b"", content_type=""),
        "sent no chat completion chunk: it answered HTTP 200 with an empty body "
        "(no content type). Check --base-url",
    ),
    "a stream with no chunk": (
        raw_stream(),
        "sent no chat completion chunk: it answered HTTP 200 with 'data: [DONE]\\n\\n' "
        "(content type 'text/event-stream'). Check --base-url",
    ),
    "chunks with no choice": (
        raw_stream({**chunk({}), "choices": []}),
        "sent no chat completion chunk: it answered HTTP 200 with 'data: {",
    ),
    "data that is not JSON": (
        raw_stream("{not json"),
        "sent stream data that is not JSON (Expecting property name enclosed in double "
        "quotes at character 1): '{not json'",
    ),
    "an error in the stream": (
        raw_stream({"error": {"message": "overloaded\x1b[2J"}}),
        "sent an error in its stream: 'overloaded\\x1b[2J'",
    ),
    "a chunk that is a number": (
        raw_stream("5"),
        MALFORMED + "the chunk is 5, where a chat completion chunk (an object) belongs",
    ),
    "choices that are not a list": (
        raw_stream({**chunk({}), "choices": {"index": 0}}),
        MALFORMED + "choices is {'index': 0}, where a list of choices or null belongs",
    ),
    "a delta that is text": (
        raw_stream(chunk(cast(dict[str, Any], "hi"))),
        MALFORMED + "choices[0].delta is 'hi', where a delta (an object) or null belongs",
    ),
    "content that is a number": (
        raw_stream(chunk({"content": 5})),
        MALFORMED + "choices[0].delta.content is 5, where text or null belongs",
    ),
    "an index that is text": (
        raw_stream(
            chunk({"tool_calls": [listing_part(0)]}), chunk({"tool_calls": [listing_part("x")]})
        ),
        MALFORMED + "choices[0].delta.tool_calls[0].index is 'x', where the tool call's number (an "
        "integer) or null belongs",
    ),
    "a tool name that is a number": (
        raw_stream(chunk({"tool_calls": [listing_part(name=42)]})),
        MALFORMED
        + "choices[0].delta.tool_calls[0].function.name is 42, where the tool's name (text) "
        "or null belongs",
    ),
    "a call id that is a number": (
        raw_stream(chunk({"tool_calls": [{**listing_part(), "id": 7}]})),
        MALFORMED
        + "choices[0].delta.tool_calls[0].id is 7, where the tool call's id (text) or null belongs",
    ),
    "arguments that are a list": (
        raw_stream(chunk({"tool_calls": [listing_part(arguments=["."])]})),
        MALFORMED
        + "choices[0].delta.tool_calls[0].function.arguments is ['.'], where JSON text or null "
        "belongs",
    ),
}


@pytest.mark.parametrize("entry", NOT_A_REPLY.values(), ids=NOT_A_REPLY)
def test_an_endpoint_that_sends_no_reply_is_an_agent_error_naming_what_it_sent(
    workspace: Path, entry: tuple[ScriptEntry, str]
) -> None:
    answer, expected = entry
    with agent_for([answer], workspace, haltwise.max_turns(5)) as (agent, server, _seen):
        with pytest.raises(AgentError) as raised:
            agent.send("Hi.")
        endpoint = server.base_url
    assert str(raised.value).startswith(f"the model endpoint at {endpoint} {expected}")
    assert "\n" not in str(raised.value) and "\x1b" not in str(raised.value)
    assert agent.governor.outcome is not None and agent.governor.outcome.reason == "error"


def test_tool_arguments_sent_as_an_object_are_taken_as_their_json(workspace: Path) -> None:
    arguments = {"path": "sub", "note": "é"}
    script = [
        raw_stream(chunk({"tool_calls": [listing_part(arguments=arguments)]})),
        reply("done"),
    ]
    with agent_for(script, workspace, haltwise.max_turns(5)) as (agent, server, seen):
        outcome = agent.send("List.")
        sent = server.requests[-1]["messages"]
    assert outcome.status is Status.COMPLETED
    call = sent[-2]["tool_calls"][0]
    assert call["function"] == {"name": "list_dir", "arguments": '{"path": "sub", "note": "é"}'}
    # Its result is the tool's own word on it (note is no argument of list_dir).
    assert sent[-1]["content"].startswith("error: bad arguments for list_dir:\n- note:")
    assert len(seen.outputs) == 1


def test_every_error_the_engine_raises_is_exported_beside_the_others() -> None:
    # The agent's callers (and a plain Governor's, which meets QuestionOpen) catch them by
    # the names haltwise exports; ``error_for`` is a factory, not an error.
    from haltwise.engine import errors

    raised = {name for name in errors.__all__ if isinstance(getattr(errors, name), type)}
    assert raised - set(haltwise.__all__) == set()
    assert all(getattr(haltwise, name) is getattr(errors, name) for name in raised)


def test_an_unreachable_endpoint_is_clear(workspace: Path) -> None:
    client = openai.OpenAI(base_url="http://127.0.0.1:9/v1", api_key="x", max_retries=0)
    agent = Agent(client, MODEL, Toolbox(workspace), limits=haltwise.max_turns(5))
    with pytest.raises(AgentError, match="cannot reach the model endpoint"):
        agent.send("Hi.")


def picky(body: dict[str, Any]) -> str | ScriptedResponse:
    """An endpoint that knows no ``stream_options``, so reports no usage in a stream."""
    if "stream_options" in body:
        return error(400, "Unrecognized request argument supplied: stream_options")
    return reply("fine")


def estimated(*, endpoint: str, figure: str = "no token usage") -> str:
    """The warning of a run whose endpoint reported no usage, or a figure that is not one."""
    return (
        f"the model endpoint at {endpoint} reported {figure}: such a model call counts at an "
        "estimate (4 characters a token of its prompt and reply), and at least at what its "
        "request reserved (its prompt and max_tokens), never as free"
    )


def test_endpoints_without_stream_options_still_work(workspace: Path) -> None:
    with agent_for([picky, picky], workspace, haltwise.max_turns(5)) as (agent, server, seen):
        agent.max_output_tokens = 64
        outcome = agent.send("Hi.")
        endpoint = server.base_url
    assert outcome.partial_output == "fine"
    assert "stream_options" not in server.requests[-1]
    # With no usage, the call counts at least at what its request reserved: unknown is not zero.
    assert outcome.usage.output_tokens == 64
    assert seen.warnings == [estimated(endpoint=endpoint)]


def test_a_call_with_no_usage_counts_an_estimate_when_nothing_was_reserved(
    workspace: Path,
) -> None:
    # A run's first call with no max_tokens reserves nothing: the estimate is what counts.
    with agent_for([picky, picky], workspace, haltwise.max_turns(5)) as (agent, server, seen):
        outcome = agent.send("Hi.")
        endpoint = server.base_url
        sent = server.requests[-1]
    prompt = json.dumps([sent["messages"], sent["tools"]], ensure_ascii=False)
    assert outcome.usage.input_tokens == -(-len(prompt) // CHARS_PER_TOKEN) > 0
    assert outcome.usage.output_tokens == 1  # "fine": at least one token
    assert outcome.usage.cost is not None and outcome.usage.cost > 0
    assert seen.warnings == [estimated(endpoint=endpoint)]


def test_token_limits_bite_on_an_endpoint_that_reports_no_usage(workspace: Path) -> None:
    def listing(body: dict[str, Any]) -> str | ScriptedResponse:
        if "stream_options" in body:
            return error(400, "Unrecognized request argument supplied: stream_options")
        return reply(tool_calls=[tool_call("list_dir")])

    limits = haltwise.max_tokens(3_000) | haltwise.max_turns(20)
    with agent_for([listing], workspace, limits, repeat_last=True) as (agent, server, _):
        outcome = agent.send("List.")
        answered = sum("stream_options" not in body for body in server.requests)
    assert (outcome.status, outcome.reason) == (Status.ABANDONED, "token_limit")
    assert outcome.usage.turns < 5
    assert answered == outcome.usage.model_calls


def test_turn_limit_command_semantics(workspace: Path) -> None:
    opened = threading.Event()
    release = threading.Event()

    def prompter(ask: Ask) -> Answer | None:
        opened.set()
        release.wait(5)
        return Answer(Choice.ABORT)

    limits = haltwise.max_turns(25, warn_at=0.8, on_limit="ask")
    script = [*reads(3), reply("done"), *reads(2)]
    with agent_for(script, workspace, limits, prompter=prompter) as (
        agent,
        _,
        _seen,
    ):
        agent.send("Read.")
        assert agent.status().turns == 4
        assert agent.set_turn_limit(10).turns == 4  # N to M keeps the count
        unlimited = agent.set_turn_limit(haltwise.UNLIMITED)
        assert (unlimited.turns, unlimited.max_turns) == (4, None)
        assert unlimited.widget().startswith("Turns: 4/∞")
        again = agent.set_turn_limit(1)  # unlimited to N restarts it
        assert (again.turns, again.max_turns) == (0, 1)
        assert repr(agent.governor.limits) == "max_turns(1, warn_at=0.8, on_limit='ask')"
        thread, _box = run_in_thread(agent, "More.")
        assert opened.wait(5)
        with pytest.raises(haltwise.ConfigurationError, match="a question is open"):
            agent.set_turn_limit(50)
        release.set()
        thread.join(5)


def test_a_lone_surrogate_from_the_model_is_mended_where_it_enters(
    workspace: Path, escaping_server: None
) -> None:
    calls = [
        ToolCall("read\ud800", "{}", id="call\ud800"),
        ToolCall("write_file", '{"path": "b.txt", "content": "a\ud800"}'),
    ]
    script = [reply(tool_calls=calls, usage=(10, 5)), reply("done \ud800", usage=(20, 2))]
    with agent_for(script, workspace, haltwise.max_turns(5)) as (agent, server, seen):
        outcome = agent.send("Go.")
    assert outcome.status is Status.COMPLETED
    assert outcome.partial_output == seen.streamed == "done \ufffd"
    assistant, unnamed, written = server.requests[1]["messages"][-3:]
    # Names and ids are text: U+FFFD. Arguments are JSON: the same JSON, escaped, which the
    # tool refuses rather than write a replacement character the model never wrote.
    assert assistant["tool_calls"][0]["id"] == "call\ufffd"
    assert [call["function"] for call in assistant["tool_calls"]] == [
        {"name": "read\ufffd", "arguments": "{}"},
        {"name": "write_file", "arguments": '{"path": "b.txt", "content": "a\\ud800"}'},
    ]
    assert unnamed["content"].startswith("error: no tool named 'read\ufffd'")
    assert "lone surrogate" in written["content"]
    assert not (workspace / "b.txt").exists()


@pytest.mark.parametrize(
    ("usage", "figure"),
    [
        (MisreportedUsage(-5, 1), "usage.prompt_tokens=-5"),
        (MisreportedUsage(10**20, 1), "usage.prompt_tokens=100000000000000000000"),
        (MisreportedUsage(cast(int, "x"), 1), "usage.prompt_tokens='x'"),
        (MisreportedUsage(cast(int, None), 1), "usage.prompt_tokens=None"),
        (MisreportedUsage(12, cast(int, 1.5)), "usage.completion_tokens=1.5"),
        (MisreportedUsage(12, True), "usage.completion_tokens=True"),
        (MisreportedUsage(12, 1, cached_tokens=-1), "usage.prompt_tokens_details.cached_tokens=-1"),
    ],
)
def test_usage_that_is_not_a_count_counts_at_the_reservation(
    workspace: Path, usage: MisreportedUsage, figure: str
) -> None:
    # A prompt reported larger than the estimate (some 1,200 tokens): the reservation counts.
    listing = reply(tool_calls=[tool_call("list_dir")], usage=(5_000, 9))
    misreported = reply(tool_calls=[tool_call("list_dir")], usage=usage)
    script = [listing, misreported, reply("done", usage=usage)]
    with agent_for(script, workspace, haltwise.max_tokens(100_000)) as (agent, server, seen):
        agent.max_output_tokens = 50
        outcome = agent.send("Go.")
        endpoint = server.base_url
    assert outcome.status is Status.COMPLETED
    # Each misreported call counts as its request reserved: the last prompt and max_tokens.
    assert (outcome.usage.input_tokens, outcome.usage.output_tokens) == (5_000 * 3, 9 + 50 * 2)
    # Once a run.
    assert seen.warnings == [
        estimated(endpoint=endpoint, figure=f"{figure}, which is not a token count")
    ]


def test_cached_tokens_past_the_prompt_are_cut_to_it(workspace: Path) -> None:
    # Some proxies count the cached tokens outside the prompt; the prompt's count stands.
    usage = MisreportedUsage(10, 1, cached_tokens=500)
    with agent_for([reply("done", usage=usage)], workspace, haltwise.max_turns(5)) as (
        agent,
        _,
        seen,
    ):
        outcome = agent.send("Go.")
    assert outcome.status is Status.COMPLETED
    assert (outcome.usage.input_tokens, outcome.usage.cache_read_tokens) == (10, 10)
    assert seen.warnings == []
