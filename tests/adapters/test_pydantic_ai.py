"""pydantic-ai under haltwise, end to end: a real ``Agent`` with its OpenAI chat model, talking
over real HTTP to the scripted server, governed by ``haltwise.adapters.pydantic_ai.govern``.

Each limit is checked by what the server received: a refused request never reaches it. The
deadline and cancel tests wait for real (the server really hangs); the others do not wait.
"""

from __future__ import annotations

import asyncio
import dataclasses
import importlib.util
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Coroutine, Iterator
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("pydantic_ai")

from pydantic import BaseModel
from pydantic_ai import (
    Agent,
    DeferredToolRequests,
    DeferredToolResults,
    ModelHTTPError,
    ModelRetry,
    RunContext,
    UsageLimitExceeded,
)
from pydantic_ai.messages import ModelMessage, ModelResponse, TextPart, ToolCallPart
from pydantic_ai.models.function import AgentInfo, FunctionModel
from pydantic_ai.models.openai import OpenAIChatModel
from pydantic_ai.providers.openai import OpenAIProvider
from pydantic_ai.usage import UsageLimits

from haltwise import (
    Answer,
    Ask,
    Choice,
    Guard,
    InvalidValueError,
    Prices,
    Status,
    max_cost,
    max_model_calls,
    max_tokens,
    max_tool_calls,
    max_turns,
    same_errors,
    stuck,
    timeout,
)
from haltwise.adapters._common import SYNTHESIS_SECONDS
from haltwise.adapters.pydantic_ai import GovernedAgent, govern
from haltwise.testing import Reply, ScriptedServer, error, reply, tool_call

from .conftest import tool_results

MODEL = "scripted-model"
#: The ``max_tokens`` every agent here is set up with.
MAX_TOKENS = 256
#: What a hung reply waits before answering: far past every deadline below.
HUNG = 30.0
#: How soon after its deadline (or its cancel) a run must have ended.
PROMPTLY = 1.0
ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "src" / "haltwise" / "examples" / "pydantic_ai_agent.py"
DOCS = ROOT / "docs" / "adapters" / "pydantic-ai.md"


def in_loop(test: Callable[[], Coroutine[Any, Any, None]]) -> Callable[[], None]:
    """Run an async test in a fresh event loop, as a user's ``asyncio.run(main())`` would."""

    def run_in_loop() -> None:
        asyncio.run(test())

    run_in_loop.__doc__ = test.__doc__
    return run_in_loop


@pytest.fixture
def event_loop_for_run_sync() -> Iterator[None]:
    """``run_sync`` drives the thread's event loop (pydantic-ai makes one and leaves it open)."""
    loop = asyncio.new_event_loop()
    asyncio.set_event_loop(loop)
    yield
    asyncio.set_event_loop(None)
    loop.close()


def model_for(server: ScriptedServer) -> OpenAIChatModel:
    provider = OpenAIProvider(base_url=server.base_url, api_key="test")
    return OpenAIChatModel(MODEL, provider=provider)


class Lookup:
    """An agent with one tool, ``lookup``, that records each time it really runs."""

    def __init__(self, server: ScriptedServer, **agent_options: Any) -> None:
        self.ran: list[str] = []
        self.agent: Agent[None, Any] = Agent(
            model_for(server), model_settings={"max_tokens": MAX_TOKENS}, **agent_options
        )

        @self.agent.tool_plain
        def lookup(key: str) -> str:
            """Look a key up."""
            self.ran.append(key)
            return f"value of {key}"


def lookups(*keys: str) -> Reply:
    """A reply that calls ``lookup`` once per key, all in one response (parallel calls)."""
    return reply(tool_calls=[tool_call("lookup", {"key": key}) for key in keys], usage=(100, 10))


def done(text: str = "All done.") -> Reply:
    return reply(text, usage=(120, 8))


def messages(request: dict[str, Any]) -> list[dict[str, Any]]:
    sent: list[dict[str, Any]] = request["messages"]
    return sent


def texts_of(request: dict[str, Any], role: str) -> list[str]:
    return [str(m.get("content")) for m in messages(request) if m["role"] == role]


def answering(*answers: Answer | Choice | None) -> tuple[list[Ask], Any]:
    """A prompter that gives ``answers`` in turn, and the list of what it was asked."""
    asked: list[Ask] = []
    queue = list(answers)

    def prompter(ask: Ask) -> Answer | Choice | None:
        asked.append(ask)
        return queue.pop(0)

    return asked, prompter


# ------------------------------------------------------------------------------------------------
# One meaning of each limit


@in_loop
async def test_max_model_calls_lets_exactly_that_many_requests_reach_the_server() -> None:
    with ScriptedServer([lookups("a"), lookups("b"), lookups("c"), lookups("d"), done()]) as server:
        lookup = Lookup(server)
        governed = await govern(lookup.agent, Guard(max_model_calls(3))).run("Find d.")

    assert len(server.requests) == 3
    assert governed.outcome.status is Status.ABANDONED
    assert governed.outcome.reason == "model_call_limit"
    assert governed.usage.model_calls == 3
    assert governed.result is None
    assert sorted(lookup.ran) == ["a", "b", "c"]


@in_loop
async def test_max_turns_lets_exactly_that_many_turns_run() -> None:
    with ScriptedServer([lookups("a"), lookups("b"), lookups("c"), lookups("d"), done()]) as server:
        lookup = Lookup(server)
        governed = await govern(lookup.agent, Guard(max_turns(3))).run("Find d.")

    assert len(server.requests) == 3
    assert governed.outcome.reason == "turn_limit"
    assert governed.usage.turns == 3
    assert sorted(lookup.ran) == ["a", "b", "c"]


@in_loop
async def test_max_tool_calls_lets_exactly_that_many_tools_run_parallel_calls_included() -> None:
    with ScriptedServer([lookups("a", "b"), lookups("c", "d"), done()]) as server:
        lookup = Lookup(server)
        governed = await govern(lookup.agent, Guard(max_tool_calls(3))).run("Find d.")

    assert sorted(lookup.ran) == ["a", "b", "c"]  # the 4th was refused before it ran
    assert governed.outcome.reason == "tool_call_limit"
    assert governed.usage.tool_calls == 3
    assert len(server.requests) == 2  # the run ended after the step it stopped in


@in_loop
async def test_parallel_tool_calls_are_all_counted_before_any_of_them_runs() -> None:
    seen: list[int] = []
    with ScriptedServer([lookups("a", "b", "c"), done()]) as server:
        agent = Agent(model_for(server))
        guard = Guard(max_tool_calls(10))

        @agent.tool_plain
        def lookup(key: str) -> str:
            seen.append(guard.governor.usage.tool_calls)
            return key

        governed = await govern(agent, guard).run("Find them.")

    assert seen == [3, 3, 3]
    assert governed.completed
    assert governed.output == "All done."


@in_loop
async def test_a_failed_and_a_retried_call_count_like_any_other() -> None:
    attempts: list[str] = []
    script = [
        reply(tool_calls=[tool_call("flaky", {"n": 1})]),
        reply(tool_calls=[tool_call("flaky", {"n": "not a number"})]),  # invalid arguments
        reply(tool_calls=[tool_call("flaky", {"n": 2})]),
        done(),
    ]
    with ScriptedServer(script) as server:
        agent = Agent(model_for(server))

        @agent.tool_plain(retries=3)
        def flaky(n: int) -> str:
            attempts.append(str(n))
            if n == 1:
                raise ModelRetry("try again with n=2")
            return "ok"

        governed = await govern(agent, Guard(max_tool_calls(3))).run("Go.")

    assert attempts == ["1", "2"]
    assert governed.usage.tool_calls == 3
    assert governed.completed


class City(BaseModel):
    city: str


@in_loop
async def test_the_call_that_writes_the_final_answer_counts_like_any_other() -> None:
    final = reply(tool_calls=[tool_call("final_result", {"city": "Paris"})], usage=(90, 9))
    with ScriptedServer([lookups("a"), final]) as server:
        lookup = Lookup(server, output_type=City)
        governed = await govern(lookup.agent, Guard(max_tool_calls(5))).run("Which city?")
    assert governed.completed
    assert governed.result is not None and governed.result.output == City(city="Paris")
    assert governed.usage.tool_calls == 2

    with ScriptedServer([lookups("a"), final]) as server:
        lookup = Lookup(server, output_type=City)
        governed = await govern(lookup.agent, Guard(max_tool_calls(1))).run("Which city?")
    assert governed.outcome.reason == "tool_call_limit"
    assert governed.result is None


# ------------------------------------------------------------------------------------------------
# Decisions, carried out


@in_loop
async def test_a_warning_reaches_the_model_in_the_next_request() -> None:
    script = [lookups("a"), lookups("b"), lookups("c"), done()]
    with ScriptedServer(script) as server:
        lookup = Lookup(server)
        governed = await govern(lookup.agent, Guard(max_turns(4, warn_at=0.5))).run("Find.")

    assert governed.completed
    notes = [texts_of(request, "user")[1:] for request in server.requests]
    assert notes[0] == []
    assert notes[1] == ["Turn 2 of 4: 2 turns left; wrap up soon."]  # the 2nd turn crossed half
    assert notes[2] == notes[3] == notes[1]  # it stays in the history, once


@in_loop
async def test_a_blocked_call_is_a_tool_error_the_model_sees_and_the_run_goes_on() -> None:
    script = [lookups("a"), lookups("b"), done("Found a; b was refused.")]
    with ScriptedServer(script) as server:
        lookup = Lookup(server)
        guard = Guard(max_tool_calls(1, tool="lookup"))  # a per-tool cap blocks by default
        governed = await govern(lookup.agent, guard).run("Find a and b.")

    assert sorted(lookup.ran) == ["a"]
    refusal = texts_of(server.requests[2], "tool")[-1]
    assert "max_tool_calls(1, tool='lookup')" in refusal
    assert governed.completed
    assert governed.output == "Found a; b was refused."


@in_loop
async def test_a_synthesize_limit_answers_through_the_agents_own_output() -> None:
    script = [lookups("a", "b", "c"), done("From a and b: the answer is 42.")]
    with ScriptedServer(script) as server:
        lookup = Lookup(server)
        guard = Guard(max_tool_calls(2, on_limit="synthesize"))
        governed = await govern(lookup.agent, guard).run("Find it.")

    assert sorted(lookup.ran) == ["a", "b"]
    assert governed.outcome.status is Status.COMPLETED_WITH_WARNINGS
    assert governed.result is not None
    assert governed.result.output == "From a and b: the answer is 42."
    assert governed.output == governed.result.output
    assert governed.usage.model_calls == 2  # the tools-free pass is counted
    last = server.requests[-1]
    assert "tools" not in last
    assert "Do not call any tool" in texts_of(last, "user")[-1]


@in_loop
async def test_a_synthesis_pass_that_calls_a_tool_instead_ends_with_the_partial_output() -> None:
    script = [lookups("a", "b", "c"), lookups("d"), done()]
    with ScriptedServer(script) as server:
        lookup = Lookup(server)
        guard = Guard(max_tool_calls(2, on_limit="synthesize"))
        governed = await govern(lookup.agent, guard).run("Find it.")

    assert sorted(lookup.ran) == ["a", "b"]
    assert len(server.requests) == 2  # no second pass
    assert governed.outcome.status is Status.ABANDONED
    assert governed.result is None


@in_loop
async def test_a_synthesis_pass_that_writes_no_answer_counts_in_the_usage_returned() -> None:
    script = [lookups("a", "b", "c"), lookups("d"), done()]
    with ScriptedServer(script) as server:
        lookup = Lookup(server)
        guard = Guard(max_tool_calls(2, on_limit="synthesize"))
        governed = await govern(lookup.agent, guard).run("Find it.")

    assert len(server.requests) == 2
    outcome = governed.outcome
    assert outcome.status is Status.ABANDONED
    assert outcome.reason == "tool_call_limit"
    assert governed.output is None
    assert outcome.usage.model_calls == 2  # the pass, sent and answered with a tool call
    assert outcome.usage.input_tokens == 200
    assert dataclasses.replace(outcome.usage, elapsed=0.0) == dataclasses.replace(
        guard.governor.usage, elapsed=0.0
    )


@in_loop
async def test_a_synthesis_pass_that_fails_counts_at_what_it_reserved() -> None:
    """The model's error is pydantic-ai's own, and goes on; the stop stands, and the
    governor's outcome and checkpoint count the pass, sent and never answered."""
    with ScriptedServer([lookups("a", "b", "c"), error(400, "bad request")]) as server:
        guard = Guard(max_tool_calls(2, on_limit="synthesize"))
        with pytest.raises(ModelHTTPError):
            await govern(Lookup(server).agent, guard).run("Find.")
        assert len(server.requests) == 2

    outcome = guard.governor.outcome
    assert outcome is not None
    assert outcome.status is Status.ABANDONED
    assert outcome.reason == "tool_call_limit"
    assert outcome.usage.model_calls == 2
    assert outcome.usage.output_tokens == 10 + MAX_TOKENS  # the pass, at its max_tokens
    assert outcome.checkpoint is not None
    saved = guard.governor.ledger.load_checkpoint(outcome.checkpoint)
    assert (saved["run"]["model_calls"], saved["run"]["output_tokens"]) == (2, 10 + MAX_TOKENS)
    assert saved["in_flight"] == []


@in_loop
async def test_a_synthesizer_given_to_the_guard_writes_the_answer_instead() -> None:
    with ScriptedServer([lookups("a", "b", "c"), done()]) as server:
        guard = Guard(
            max_tool_calls(2, on_limit="synthesize"),
            synthesizer=lambda evidence: f"Answered from: {evidence.stop_message}",
        )
        governed = await govern(Lookup(server).agent, guard).run("Find it.")

    assert len(server.requests) == 1
    assert governed.outcome.status is Status.COMPLETED_WITH_WARNINGS
    assert governed.output is not None and governed.output.startswith("Answered from: ")


@in_loop
async def test_a_refused_call_of_an_output_tool_is_an_error_the_model_sees() -> None:
    final = reply(tool_calls=[tool_call("final_result", {"city": "Paris"})], usage=(90, 9))
    with ScriptedServer([lookups("a"), final, done("Paris, then.")]) as server:
        lookup = Lookup(server, output_type=[City, str])
        guard = Guard(max_tool_calls(0, tool="final_result"))  # a per-tool cap blocks
        governed = await govern(lookup.agent, guard).run("Which city?")

    assert "max_tool_calls(0, tool='final_result')" in texts_of(server.requests[2], "tool")[-1]
    assert governed.completed
    assert governed.result is not None and governed.result.output == "Paris, then."


@in_loop
async def test_calls_that_fail_validation_report_their_errors_to_the_stuck_detectors() -> None:
    invalid = reply(tool_calls=[tool_call("lookup", {"nokey": 1})], usage=(100, 10))
    with ScriptedServer([invalid] * 5 + [done()]) as server:
        lookup = Lookup(server, retries=10)
        guard = Guard(same_errors(3, ladder=False))
        governed = await govern(lookup.agent, guard).run("Find.")

    assert sorted(lookup.ran) == []
    assert governed.outcome.reason == "stuck.same_error"
    assert len(server.requests) == 3


@in_loop
async def test_a_repeated_call_is_nudged_then_blocked_then_stopped() -> None:
    with ScriptedServer([lookups("a")] * 8 + [done()]) as server:
        lookup = Lookup(server)
        governed = await govern(lookup.agent, Guard(stuck())).run("Find.")

    assert governed.outcome.reason == "stuck.repeat"
    assert any("You seem to be stuck" in text for text in texts_of(server.requests[-2], "user"))
    assert "Refused" in texts_of(server.requests[-1], "tool")[-1]
    assert sorted(lookup.ran) == ["a", "a", "a"]


# ------------------------------------------------------------------------------------------------
# Asking the human, in place


@in_loop
async def test_ask_continue_starts_a_new_round() -> None:
    asked: list[Ask] = []

    async def prompter(ask: Ask) -> Choice:  # an async prompter is awaited
        asked.append(ask)
        return Choice.CONTINUE

    script = [lookups("a"), lookups("b"), lookups("c"), done()]
    with ScriptedServer(script) as server:
        lookup = Lookup(server)
        guard = Guard(max_turns(2, on_limit="ask"), prompter=prompter)
        governed = await govern(lookup.agent, guard).run("Find.")

    assert [ask.reason for ask in asked] == ["turn_limit"]
    assert governed.completed
    assert len(server.requests) == 4


@in_loop
async def test_ask_extend_raises_the_limit_by_that_much() -> None:
    asked, prompter = answering(Answer(Choice.EXTEND, 1), Choice.ABORT)
    script = [lookups("a"), lookups("b"), lookups("c"), lookups("d"), done()]
    with ScriptedServer(script) as server:
        lookup = Lookup(server)
        guard = Guard(max_turns(2, on_limit="ask"), prompter=prompter)
        governed = await govern(lookup.agent, guard).run("Find.")

    assert len(asked) == 2
    assert len(server.requests) == 3
    assert governed.outcome.reason == "declined"


@in_loop
async def test_ask_wrap_up_writes_the_final_answer_with_one_tools_free_call() -> None:
    _, prompter = answering(Choice.WRAP_UP)
    script = [lookups("a"), lookups("b"), done("What I found: a, b.")]
    with ScriptedServer(script) as server:
        lookup = Lookup(server)
        guard = Guard(max_turns(2, on_limit="ask"), prompter=prompter)
        governed = await govern(lookup.agent, guard).run("Find.")

    assert len(server.requests) == 3
    assert "tools" not in server.requests[-1]
    assert governed.outcome.status is Status.COMPLETED_WITH_WARNINGS
    assert governed.result is not None and governed.result.output == "What I found: a, b."
    assert governed.usage.model_calls == 3


@in_loop
async def test_ask_abort_and_no_prompter_stop_the_run() -> None:
    _, prompter = answering(Choice.ABORT)
    for guard in (Guard(max_turns(1, on_limit="ask"), prompter=prompter), Guard(max_turns(1))):
        with ScriptedServer([lookups("a"), lookups("b"), done()]) as server:
            governed = await govern(Lookup(server).agent, guard).run("Find.")
        assert len(server.requests) == 1
        assert governed.outcome.status is Status.ABANDONED
    assert governed.outcome.reason == "turn_limit"


# ------------------------------------------------------------------------------------------------
# Tokens and dollars


PRICES = Prices({MODEL: {"input": "1", "output": "10"}})  # USD per million tokens


@in_loop
async def test_a_request_whose_worst_case_cost_does_not_fit_is_never_sent() -> None:
    # Each turn: 100 prompt + 10 completion tokens = $0.0002; each request reserves its prompt
    # and its 256 max_tokens first ($0.00266 with a 100-token prompt).
    script = [lookups("a"), lookups("b"), lookups("c"), done()]
    with ScriptedServer(script) as server:
        lookup = Lookup(server)
        guard = Guard(max_cost("0.003"), pricer=PRICES)
        governed = await govern(lookup.agent, guard).run("Find.")

    assert len(server.requests) == 2
    assert governed.outcome.reason == "cost_limit"
    assert governed.usage.cost == Decimal("0.0004")


@in_loop
async def test_max_tokens_is_lowered_to_what_a_token_limit_leaves() -> None:
    with ScriptedServer([lookups("a"), lookups("b"), done()]) as server:
        lookup = Lookup(server)
        governed = await govern(lookup.agent, Guard(max_tokens(300))).run("Find.")

    # 110 tokens used, 190 left: the 100-token prompt leaves 90 to write; then 80 are left,
    # less than the prompt alone, and the third request is refused.
    assert [request["max_completion_tokens"] for request in server.requests] == [MAX_TOKENS, 90]
    assert governed.outcome.reason == "token_limit"
    assert governed.usage.total_tokens == 220


@in_loop
async def test_usage_comes_from_pydantic_ais_request_usage_cached_tokens_included() -> None:
    with ScriptedServer([reply("Cached.", usage=(1000, 20), cached_tokens=800)]) as server:
        governed = await govern(Lookup(server).agent, Guard(max_turns(5))).run("Hi.")

    usage = governed.usage
    assert (usage.input_tokens, usage.output_tokens, usage.cache_read_tokens) == (1000, 20, 800)


# ------------------------------------------------------------------------------------------------
# Sub-agents, the user's own limits, resuming


@in_loop
async def test_a_sub_agent_counts_against_the_parents_limits() -> None:
    research = [lookups("x"), lookups("y"), lookups("z"), done("sub-answer")]
    with (
        ScriptedServer(research) as sub_server,
        ScriptedServer(
            [reply(tool_calls=[tool_call("delegate", {"topic": "t"})]), done()]
        ) as server,
    ):
        guard = Guard(max_model_calls(3))
        helper = Lookup(sub_server)
        parent: Agent[None, str] = Agent(model_for(server))
        outcomes: list[Status] = []

        @parent.tool
        async def delegate(ctx: RunContext[None], topic: str) -> str:
            sub = await govern(helper.agent, guard).run(topic, usage=ctx.usage)
            outcomes.append(sub.outcome.status)
            return sub.output or "no answer"

        governed = await govern(parent, guard).run("Research t.")

    assert len(server.requests) + len(sub_server.requests) == 3
    assert len(sub_server.requests) == 2
    assert outcomes == [Status.ABANDONED]
    assert governed.outcome.reason == "model_call_limit"
    assert governed.usage.model_calls == 3


@in_loop
async def test_a_sub_agent_may_have_tighter_limits_of_its_own() -> None:
    with (
        ScriptedServer([lookups("x"), lookups("y"), done()]) as sub_server,
        ScriptedServer(
            [reply(tool_calls=[tool_call("delegate", {"topic": "t"})]), done("Parent done.")]
        ) as server,
    ):
        guard = Guard(max_model_calls(10))
        helper = govern(Lookup(sub_server).agent, guard, limits=max_model_calls(1))
        parent: Agent[None, str] = Agent(model_for(server))

        @parent.tool
        async def delegate(ctx: RunContext[None], topic: str) -> str:
            sub = await helper.run(topic)
            return sub.outcome.message

        governed = await govern(parent, guard).run("Research t.")

    assert len(sub_server.requests) == 1
    assert governed.completed
    assert governed.usage.model_calls == 3  # the parent's two and the sub-agent's one


@in_loop
async def test_a_model_error_is_pydantic_ais_own_and_the_request_still_counts() -> None:
    with ScriptedServer([lookups("a"), error(400, "bad request")]) as server:
        guard = Guard(max_cost("1.00"), pricer=PRICES)
        with pytest.raises(ModelHTTPError):
            await govern(Lookup(server).agent, guard).run("Find.")

    outcome = guard.governor.outcome
    assert outcome is not None and outcome.reason == "error"
    assert outcome.usage.model_calls == 2
    # Sent and never answered: counted at what it reserved (its prompt and max_tokens).
    assert outcome.usage.output_tokens == 10 + MAX_TOKENS
    assert len(server.requests) == 2


@pytest.mark.usefixtures("event_loop_for_run_sync")
def test_a_sub_agent_of_a_sync_run_counts_against_its_limits_too() -> None:
    with (
        ScriptedServer([lookups("x"), lookups("y"), lookups("z"), done()]) as sub_server,
        ScriptedServer([reply(tool_calls=[tool_call("delegate", {"topic": "t"})])]) as server,
    ):
        guard = Guard(max_model_calls(3))
        helper = govern(Lookup(sub_server).agent, guard)
        parent: Agent[None, str] = Agent(model_for(server))

        @parent.tool_plain
        async def delegate(topic: str) -> str:
            return (await helper.run(topic)).outcome.message

        governed = govern(parent, guard).run_sync("Research t.")

    assert (len(server.requests), len(sub_server.requests)) == (1, 2)
    assert governed.outcome.reason == "model_call_limit"


@in_loop
async def test_the_users_own_usage_limits_apply_too() -> None:
    script = [lookups("a"), lookups("b"), lookups("c"), done()]
    with ScriptedServer(script) as server:
        guard = Guard(max_model_calls(10))
        with pytest.raises(UsageLimitExceeded):
            await govern(Lookup(server).agent, guard).run(
                "Find.", usage_limits=UsageLimits(request_limit=2)
            )
    assert len(server.requests) == 2
    assert guard.governor.usage.model_calls == 2

    with ScriptedServer(script) as server:
        governed = await govern(Lookup(server).agent, Guard(max_model_calls(2))).run(
            "Find.", usage_limits=UsageLimits(request_limit=5)
        )
    assert len(server.requests) == 2
    assert governed.outcome.reason == "model_call_limit"


@in_loop
async def test_a_run_resumed_from_pydantic_ais_deferred_tools_keeps_its_counts() -> None:
    script = [
        reply(tool_calls=[tool_call("delete", {"path": "a.txt"})]),
        lookups("b"),
        lookups("c"),
        done(),
    ]
    with ScriptedServer(script) as server:
        lookup = Lookup(server, output_type=[str, DeferredToolRequests])

        @lookup.agent.tool_plain(requires_approval=True)
        def delete(path: str) -> str:
            return f"deleted {path}"

        guard = Guard(max_turns(2) | max_tool_calls(10))
        governed = govern(lookup.agent, guard)
        paused = await governed.run("Delete a.txt, then look up b and c.")
        assert paused.result is not None
        requests = paused.result.output
        assert isinstance(requests, DeferredToolRequests)
        approvals = DeferredToolResults(
            approvals={c.tool_call_id: True for c in requests.approvals}
        )

        resumed = await governed.run(
            message_history=paused.result.all_messages(),
            deferred_tool_results=approvals,
            resume=paused,
        )

    assert paused.usage.turns == 1
    assert resumed.outcome.reason == "turn_limit"
    assert resumed.usage.turns == 2  # one before the pause, one after
    assert resumed.usage.tool_calls == 2  # the approved call was counted once, when it was made
    assert len(server.requests) == 2


@in_loop
async def test_a_run_resumes_from_a_checkpoint_in_a_new_guard() -> None:
    with ScriptedServer([lookups("a"), lookups("b"), lookups("c"), done()]) as server:
        first = Guard(max_turns(2))
        stopped = await govern(Lookup(server).agent, first).run("Find.")
        assert stopped.outcome.reason == "turn_limit"
        checkpoint = first.governor.checkpoint()

        again = Guard(max_turns(3))  # say, in another process, with the limit raised
        assert stopped.result is None
        resumed = await govern(Lookup(server).agent, again).run("Go on.", resume=checkpoint)

    assert resumed.outcome.reason == "turn_limit"
    assert resumed.usage.turns == 3
    assert len(server.requests) == 3

    with ScriptedServer([done()]) as server:
        assert resumed.outcome.checkpoint is not None  # the same guard, by reference this time
        last = await govern(Lookup(server).agent, again).run(
            "Go on.", resume=resumed.outcome.checkpoint
        )
    assert last.outcome.reason == "turn_limit"  # its 3 turns were used already
    assert server.requests == []


# ------------------------------------------------------------------------------------------------
# Sync, cancel, deadlines


@pytest.mark.usefixtures("event_loop_for_run_sync")
def test_run_sync_governs_the_same_way() -> None:
    asked, prompter = answering(Choice.CONTINUE)
    script = [lookups("a"), lookups("b"), lookups("c"), done()]
    with ScriptedServer(script) as server:
        lookup = Lookup(server)
        guard = Guard(max_turns(2, on_limit="ask"), prompter=prompter)
        governed = govern(lookup.agent, guard).run_sync("Find.")

    assert len(asked) == 1
    assert governed.completed
    assert governed.output == "All done."
    assert governed.usage.turns == 4  # the count of the whole run, across rounds
    assert sorted(lookup.ran) == ["a", "b", "c"]


@pytest.mark.usefixtures("event_loop_for_run_sync")
def test_run_sync_stops_at_a_limit() -> None:
    with ScriptedServer([lookups("a"), lookups("b"), done()]) as server:
        governed = govern(Lookup(server).agent, Guard(max_model_calls(1))).run_sync("Find.")
    assert len(server.requests) == 1
    assert governed.outcome.reason == "model_call_limit"


def cancel_soon(guard: Guard, after: float = 0.2) -> threading.Timer:
    timer = threading.Timer(after, guard.governor.cancel)
    timer.start()
    return timer


@in_loop
async def test_cancel_from_another_thread_stops_the_run() -> None:
    with ScriptedServer([lookups("a"), reply("late", delay=HUNG)]) as server:
        guard = Guard(max_turns(10))
        cancel_soon(guard)
        started = time.monotonic()
        governed = await govern(Lookup(server).agent, guard).run("Find.")
        took = time.monotonic() - started

    assert governed.outcome.status is Status.CANCELLED
    assert took < 0.2 + PROMPTLY
    assert governed.usage.model_calls == 2


@pytest.mark.usefixtures("event_loop_for_run_sync")
def test_cancel_from_another_thread_stops_a_sync_run() -> None:
    with ScriptedServer([lookups("a"), reply("late", delay=HUNG)]) as server:
        guard = Guard(max_turns(10))
        cancel_soon(guard)
        started = time.monotonic()
        governed = govern(Lookup(server).agent, guard).run_sync("Find.")
        took = time.monotonic() - started

    assert governed.outcome.status is Status.CANCELLED
    assert took < 0.2 + PROMPTLY


@in_loop
async def test_a_hung_reply_ends_the_run_timed_out_at_its_deadline() -> None:
    with ScriptedServer([lookups("a"), reply("late", delay=HUNG)]) as server:
        started = time.monotonic()
        governed = await govern(Lookup(server).agent, Guard(timeout(seconds=0.5))).run("Find.")
        took = time.monotonic() - started

    assert governed.outcome.status is Status.TIMED_OUT
    assert governed.outcome.reason == "time_limit"
    assert took < 0.5 + PROMPTLY


@pytest.mark.usefixtures("event_loop_for_run_sync")
def test_a_hung_reply_ends_a_sync_run_timed_out_at_its_deadline() -> None:
    with ScriptedServer([lookups("a"), reply("late", delay=HUNG)]) as server:
        started = time.monotonic()
        governed = govern(Lookup(server).agent, Guard(timeout(seconds=0.5))).run_sync("Find.")
        took = time.monotonic() - started

    assert governed.outcome.status is Status.TIMED_OUT
    assert took < 0.5 + PROMPTLY


@pytest.mark.usefixtures("event_loop_for_run_sync")
def test_a_blocking_sync_tool_does_not_hold_a_sync_run_past_its_deadline() -> None:
    """pydantic-ai runs the tool on a worker thread; the run stops waiting for it at its
    deadline and ends there, ``timed_out``, and the tool's late result is dropped."""
    guard = Guard(timeout(seconds=1))
    results = tool_results(guard)
    release = threading.Event()  # ends the tool's thread once the run has returned
    returned = threading.Event()
    script = [reply(tool_calls=[tool_call("crunch", {"query": "all"})]), done()]
    with ScriptedServer(script) as server:
        agent: Agent[None, str] = Agent(model_for(server))

        @agent.tool_plain
        def crunch(query: str) -> str:
            """Crunch numbers, blocking its thread."""
            release.wait(HUNG)
            returned.set()
            return "crunched"

        deadline = time.monotonic() + 1
        try:
            governed = govern(agent, guard).run_sync("Crunch them all.")
        finally:
            ended = time.monotonic()
            release.set()
        assert len(server.requests) == 1

    assert deadline <= ended < deadline + PROMPTLY  # not when the tool returns
    outcome = governed.outcome
    assert outcome.status is Status.TIMED_OUT
    assert outcome.reason == "time_limit"
    assert "while the tool crunch was running" in outcome.message
    assert governed.result is None
    assert returned.wait(PROMPTLY)  # the tool ran on, and what it returned was dropped
    assert len(results) == 1 and results[0].startswith("The tool did not finish: no answer")


@pytest.mark.usefixtures("event_loop_for_run_sync")
def test_a_synthesis_pass_after_a_tool_overran_a_synthesizing_deadline_has_time() -> None:
    """The run's time is up when its pass is sent: the pass's ``request_timeout`` is its own
    (``SYNTHESIS_SECONDS``), not the run's time left (0), and the pass answers."""
    guard = Guard(timeout(seconds=0.5, on_limit="synthesize"))
    release = threading.Event()  # ends the tool's thread once the run has returned
    sent: list[tuple[dict[str, Any], list[str]]] = []

    def answer(history: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        sent.append((dict(info.model_settings or {}), [t.name for t in info.function_tools]))
        if len(sent) == 1:
            return ModelResponse(parts=[ToolCallPart("crunch", {"query": "all"})])
        return ModelResponse(parts=[TextPart("Best guess: 42.")])

    agent: Agent[None, str] = Agent(FunctionModel(answer, model_name=MODEL))

    @agent.tool_plain
    def crunch(query: str) -> str:
        """Crunch numbers, blocking its thread."""
        release.wait(HUNG)
        return "crunched"

    try:
        governed = govern(agent, guard).run_sync("Crunch them all.")
    finally:
        release.set()

    (first, tools), (synthesis, no_tools) = sent
    assert tools == ["crunch"] and no_tools == []
    assert 0 < first["request_timeout"] <= 0.5
    assert synthesis["request_timeout"] == SYNTHESIS_SECONDS
    outcome = governed.outcome
    assert outcome.status is Status.COMPLETED_WITH_WARNINGS
    assert outcome.reason == "time_limit"
    assert governed.output == "Best guess: 42."
    assert outcome.usage.model_calls == 2


class SettingsSeen:
    """An agent whose model answers at once and records the settings each request came with."""

    def __init__(self) -> None:
        self.settings: list[dict[str, Any]] = []

        def answer(history: list[ModelMessage], info: AgentInfo) -> ModelResponse:
            self.settings.append(dict(info.model_settings or {}))
            return ModelResponse(parts=[TextPart("Done.")])

        self.agent: Agent[None, str] = Agent(
            FunctionModel(answer, model_name=MODEL), model_settings={"max_tokens": MAX_TOKENS}
        )


@pytest.mark.usefixtures("event_loop_for_run_sync")
def test_a_sync_run_bounds_each_request_by_the_time_left() -> None:
    seen = SettingsSeen()

    governed = govern(seen.agent, Guard(timeout(minutes=5))).run_sync("Go.")

    assert governed.completed
    [settings] = seen.settings
    assert 0 < settings["request_timeout"] <= 300


@in_loop
async def test_an_async_run_leaves_the_request_settings_as_they_are() -> None:
    """Its task is cancelled at the deadline: a ``request_timeout`` would only cost
    pydantic-ai a cancel scope per request."""
    seen = SettingsSeen()

    governed = await govern(seen.agent, Guard(timeout(minutes=5))).run("Go.")

    assert governed.completed
    assert seen.settings == [{"max_tokens": MAX_TOKENS}]


# ------------------------------------------------------------------------------------------------
# The example and its docs page


@pytest.mark.usefixtures("event_loop_for_run_sync")
def test_the_example_runs(capsys: pytest.CaptureFixture[str]) -> None:
    spec = importlib.util.spec_from_file_location("pydantic_ai_agent_example", EXAMPLE)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)

    governed = module.main()

    assert governed.outcome.status is Status.COMPLETED_WITH_WARNINGS
    assert governed.outcome.reason == "tool_call_limit"
    printed = capsys.readouterr().out.rstrip("\n") + "\n```"
    assert printed in DOCS.read_text(encoding="utf-8")  # the docs show what it prints


def test_the_docs_show_the_example_verbatim() -> None:
    code = EXAMPLE.read_text(encoding="utf-8")
    assert f"```python\n{code}```" in DOCS.read_text(encoding="utf-8")


def test_govern_is_the_one_entry_point() -> None:
    agent: Agent[None, str] = Agent("test")
    governed = govern(agent, Guard(max_turns(3)))
    assert isinstance(governed, GovernedAgent)
    assert governed.agent is agent
    assert "max_turns(3)" in repr(governed)


@pytest.mark.parametrize(
    ("given", "refusal"),
    [
        (
            {"agent": "openai:gpt-4o"},
            "govern(agent)='openai:gpt-4o' is not valid: expected a pydantic-ai agent, e.g. "
            "pydantic_ai.Agent(model, ...)",
        ),
        (
            {"limits": 5},
            "govern(limits)=5 is not valid: expected a limit such as max_turns(25), a callable "
            "f(usage) -> bool, or None",
        ),
        ({"limits": "max_turns(3)"}, "govern(limits)='max_turns(3)' is not valid: expected "),
    ],
)
def test_govern_refuses_an_argument_of_the_wrong_kind_at_the_call(
    given: dict[str, Any], refusal: str
) -> None:
    """(What is not a guard: test_one_meaning.py.)"""
    arguments: dict[str, Any] = {"agent": Agent("test"), "guard": Guard(max_turns(3)), **given}
    with pytest.raises(InvalidValueError) as raised:
        govern(**arguments)
    assert str(raised.value).startswith(refusal)


def test_a_sub_agents_limits_may_be_a_callable() -> None:
    governed = govern(Agent("test"), Guard(max_turns(3)), limits=lambda usage: usage.turns > 2)
    assert callable(governed.limits)


@pytest.mark.usefixtures("event_loop_for_run_sync")
def test_run_refuses_a_resume_that_is_not_one_before_the_run_starts() -> None:
    seen = SettingsSeen()
    with pytest.raises(InvalidValueError, match=r"^run\(resume\)=5 is not valid: expected True"):
        govern(seen.agent, Guard(max_turns(3))).run_sync("Go.", resume=5)  # type: ignore[arg-type]
    assert seen.settings == []  # no request was sent


def test_the_adapters_package_imports_without_pydantic_ai() -> None:
    code = (
        "import sys; sys.modules['pydantic_ai'] = None; import haltwise.adapters; "
        "assert 'haltwise.adapters.pydantic_ai' not in sys.modules"
    )
    checked = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert checked.returncode == 0, checked.stderr


@pytest.mark.usefixtures("event_loop_for_run_sync")
def test_async_runs_do_not_leak_between_event_loops() -> None:
    with ScriptedServer([done("one"), done("two")]) as server:
        governed = govern(Lookup(server).agent, Guard(max_turns(3)))
        first = asyncio.run(governed.run("One."))
        second = asyncio.run(governed.run("Two."))
    assert (first.output, second.output) == ("one", "two")
