"""The OpenAI Agents SDK under haltwise: the real SDK against the scripted server.

Every test runs ``agents.Runner`` for real over HTTP (Chat Completions, ``api_key="test"``, no
network) and asserts on what the server received: a limit means the same count here as in any
hand-written loop.
"""

from __future__ import annotations

import asyncio
import importlib.util
import threading
import time
from collections.abc import Callable
from decimal import Decimal
from pathlib import Path
from typing import Any, Literal

import pytest

pytest.importorskip("agents")

from agents import (
    Agent,
    FunctionTool,
    ModelSettings,
    OpenAIChatCompletionsModel,
    RunConfig,
    Runner,
    RunState,
    function_tool,
    handoff,
)
from agents.models.openai_provider import OpenAIProvider
from agents.retry import ModelRetrySettings
from openai import AsyncOpenAI

from haltwise import (
    Answer,
    Ask,
    Choice,
    Guard,
    InvalidValueError,
    MemoryLedger,
    Prices,
    Status,
    max_cost,
    max_model_calls,
    max_tokens,
    max_tool_calls,
    max_turns,
    timeout,
)
from haltwise.adapters import Governed
from haltwise.adapters.openai_agents import GovernedAgent, govern
from haltwise.testing import ScriptedServer, ScriptEntry, Usage, reply, tool_call

MODEL = "scripted-model"
#: Tracing off: nothing tries the network.
CONFIG = RunConfig(tracing_disabled=True)
#: What a hung reply waits before answering: far past every deadline below.
HUNG = 30.0
#: How soon after its deadline (or its cancel) a run must have ended.
PROMPTLY = 1.0
ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "src" / "haltwise" / "examples" / "openai_agents_agent.py"
DOCS = ROOT / "docs" / "adapters" / "openai-agents.md"


def chat_model(server: ScriptedServer) -> OpenAIChatCompletionsModel:
    client = AsyncOpenAI(base_url=server.base_url, api_key="test", max_retries=0)
    return OpenAIChatCompletionsModel(model=MODEL, openai_client=client)


class Tools:
    """Function tools that record what ran."""

    def __init__(self) -> None:
        self.ran: list[str] = []
        #: Hooks called inside a tool body (to look at the run's counts from there).
        self.inside: list[Callable[[], None]] = []

        @function_tool
        def lookup(city: str) -> str:
            """The weather in a city."""
            for look in self.inside:
                look()
            self.ran.append(city)
            return f"sunny in {city}"

        @function_tool(needs_approval=True)
        def delete(path: str) -> str:
            """Delete a file (needs approval)."""
            self.ran.append(f"delete {path}")
            return f"deleted {path}"

        self.lookup: FunctionTool = lookup
        self.delete: FunctionTool = delete


def agent(
    server: ScriptedServer,
    tools: Tools,
    *,
    name: str = "helper",
    max_tokens: int | None = 300,
    settings: ModelSettings | None = None,
    **more: Any,
) -> Agent[Any]:
    return Agent(
        name=name,
        instructions="Answer briefly.",
        model=chat_model(server),
        tools=[tools.lookup, tools.delete],
        model_settings=settings or ModelSettings(max_tokens=max_tokens),
        **more,
    )


def weather(*cities: str, usage: tuple[int, int] = (100, 20)) -> ScriptEntry:
    """A reply that calls ``lookup`` once per city, in parallel."""
    return reply(tool_calls=[tool_call("lookup", {"city": city}) for city in cities], usage=usage)


def run(
    governed: GovernedAgent[Any], prompt: str | RunState[Any] = "What is the weather?"
) -> Governed[Any]:
    return asyncio.run(governed.run(prompt, run_config=CONFIG))


def tool_messages(request: dict[str, Any]) -> list[str]:
    return [message["content"] for message in request["messages"] if message["role"] == "tool"]


def last_user_text(request: dict[str, Any]) -> str:
    users = [message for message in request["messages"] if message["role"] == "user"]
    content = users[-1]["content"]
    assert isinstance(content, str)
    return content


def prompter(*answers: Answer) -> tuple[Callable[[Ask], Answer | None], list[Ask]]:
    """A human who gives ``answers`` in turn, then no answer (the run stops)."""
    asked: list[Ask] = []
    queue = list(answers)

    def answer(ask: Ask) -> Answer | None:
        asked.append(ask)
        return queue.pop(0) if queue else None

    return answer, asked


# Exact counts: what the server received.


def test_max_model_calls_lets_exactly_that_many_requests_reach_the_server() -> None:
    tools = Tools()
    with ScriptedServer([weather("Paris")], repeat_last=True) as server:
        done = run(govern(agent(server, tools), Guard(max_model_calls(3))))
        requests = server.requests
    assert len(requests) == 3  # the 4th was refused before it was sent
    assert done.outcome.status is Status.ABANDONED
    assert done.outcome.reason == "model_call_limit"
    assert done.result is None  # the SDK run was ended before it could build a result
    assert done.usage.model_calls == 3
    assert done.usage.input_tokens == 300
    assert done.usage.output_tokens == 60
    assert tools.ran == ["Paris"] * 3
    assert done.outcome.checkpoint is not None


def test_max_turns_lets_exactly_that_many_turns_run() -> None:
    tools = Tools()
    with ScriptedServer([weather("Paris")], repeat_last=True) as server:
        done = run(govern(agent(server, tools), Guard(max_turns(3))))
        requests = server.requests
    assert len(requests) == 3
    assert done.outcome.reason == "turn_limit"
    assert done.usage.turns == 3
    assert done.usage.model_calls == 3
    assert tools.ran == ["Paris"] * 3


def test_max_tool_calls_runs_exactly_that_many_tools_and_refuses_the_next() -> None:
    tools = Tools()
    # Two parallel calls per response: the budget runs out in the middle of the second one.
    with ScriptedServer([weather("Paris", "Rome")], repeat_last=True) as server:
        done = run(govern(agent(server, tools), Guard(max_tool_calls(3))))
        requests = server.requests
    assert tools.ran == ["Paris", "Rome", "Paris"]  # the 3rd ran, the 4th did not
    assert done.outcome.reason == "tool_call_limit"
    assert done.usage.tool_calls == 3
    assert len(requests) == 2  # the run ended at the next request, which was not sent


def test_parallel_tool_calls_are_each_counted_before_any_of_them_runs() -> None:
    tools = Tools()
    guard = Guard(max_tool_calls(10))
    counted: list[int] = []
    tools.inside.append(lambda: counted.append(guard.governor.usage.tool_calls))
    script = [weather("Paris", "Rome", "Oslo"), reply("All sunny.", usage=(150, 5))]
    with ScriptedServer(script) as server:
        done = run(govern(agent(server, tools), guard))
    assert counted == [3, 3, 3]
    assert done.completed
    assert done.output == "All sunny."
    assert done.result is not None
    assert done.result.final_output == "All sunny."
    assert done.usage.tool_calls == 3


def test_a_completed_run_reports_the_sdks_usage_and_its_final_output() -> None:
    tools = Tools()
    script = [
        weather("Paris", usage=(100, 20)),
        reply("Sunny.", usage=Usage(150, 5, cached_tokens=100)),
    ]
    with ScriptedServer(script) as server:
        done = run(govern(agent(server, tools), Guard(max_turns(5))))
    assert done.outcome.status is Status.COMPLETED
    assert done.outcome.message == "The run completed in 2 turns, 2 model calls and 1 tool call."
    assert done.usage.input_tokens == 250
    assert done.usage.output_tokens == 25
    assert done.usage.cache_read_tokens == 100
    assert done.output == "Sunny."


def test_a_model_named_by_a_string_is_governed_through_the_runs_provider() -> None:
    tools = Tools()
    with ScriptedServer([weather("Paris")], repeat_last=True) as server:
        client = AsyncOpenAI(base_url=server.base_url, api_key="test", max_retries=0)
        provider = OpenAIProvider(openai_client=client, use_responses=False)
        helper = Agent(name="helper", model=MODEL, tools=[tools.lookup])
        config = RunConfig(model_provider=provider, tracing_disabled=True)
        done = asyncio.run(
            govern(helper, Guard(max_model_calls(2))).run("Paris?", run_config=config)
        )
        requests = server.requests
    assert len(requests) == 2
    assert done.outcome.reason == "model_call_limit"
    assert tools.ran == ["Paris", "Paris"]


def test_the_runs_config_is_governed_in_place_once_and_passes_through_outside_govern() -> None:
    tools = Tools()
    script = [weather("Paris"), reply("Sunny."), weather("Rome"), reply("Hot.")]
    script += [weather("Oslo"), reply("Cold.")]
    with ScriptedServer(script) as server:
        client = AsyncOpenAI(base_url=server.base_url, api_key="test", max_retries=0)
        provider = OpenAIProvider(openai_client=client, use_responses=False)
        helper = Agent(name="helper", model=MODEL, tools=[tools.lookup])
        config = RunConfig(model_provider=provider, tracing_disabled=True)
        governed = govern(helper, Guard(max_model_calls(5)))
        first = asyncio.run(governed.run("Paris?", run_config=config))
        wrapped = config.model_provider
        second = asyncio.run(governed.run("Rome?", run_config=config))
        counted = governed.guard.governor.usage
        result = asyncio.run(Runner.run(helper, "Oslo?", run_config=config))
    assert first.completed and second.completed
    assert first.usage.model_calls == second.usage.model_calls == 2
    assert wrapped is not provider  # wrapped in place, as the agents' models are
    assert config.model_provider is wrapped  # and only once
    assert result.final_output == "Cold."  # outside govern: nothing counted, nothing refused
    after = governed.guard.governor.usage
    assert (after.model_calls, after.tool_calls) == (counted.model_calls, counted.tool_calls)
    assert tools.ran == ["Paris", "Rome", "Oslo"]


# Sub-agents and handoffs: one run, the parent's limits.


@pytest.mark.parametrize("signal", [False, True])  # True: the stop is a BaseException
def test_a_sub_agent_as_a_tool_spends_the_parents_budget(signal: bool) -> None:
    tools = Tools()
    script: list[ScriptEntry] = [
        reply(tool_calls=[tool_call("researcher", {"input": "weather in Paris"})]),
        *[weather("Paris")] * 10,  # the sub-agent never stops on its own
    ]
    with ScriptedServer(script) as server:
        researcher = agent(server, tools, name="researcher")
        parent = Agent(
            name="parent",
            model=chat_model(server),
            tools=[researcher.as_tool("researcher", "Researches a question.")],
        )
        guard = Guard(max_model_calls(4), signal=signal)
        done = run(govern(parent, guard))
        requests = server.requests
    assert len(requests) == 4  # 1 by the parent, 3 by the sub-agent; no more
    assert done.outcome.reason == "model_call_limit"
    assert done.usage.model_calls == 4
    assert tools.ran == ["Paris"] * 3
    assert done.usage.tool_calls == 4  # the sub-agent tool call, and its three lookups
    assert done.usage.turns == 1  # the sub-agent's requests are not turns of the main loop


def test_a_sub_agent_that_finishes_leaves_the_main_loop_counting_its_own_turns() -> None:
    tools = Tools()
    script = [
        reply(tool_calls=[tool_call("researcher", {"input": "weather in Paris"})]),
        weather("Paris"),
        reply("Paris is sunny."),
        weather("Rome"),
        reply("Paris and Rome are sunny."),
    ]
    with ScriptedServer(script) as server:
        researcher = agent(server, tools, name="researcher")
        parent = agent(server, tools, name="parent")
        parent.tools = [researcher.as_tool("researcher", "Researches a question."), tools.lookup]
        done = run(govern(parent, Guard(max_turns(3))))
    assert done.completed
    assert done.output == "Paris and Rome are sunny."
    assert done.usage.turns == 3  # the parent's three requests; not the researcher's two
    assert done.usage.model_calls == 5
    assert done.usage.tool_calls == 3
    assert tools.ran == ["Paris", "Rome"]


@pytest.mark.parametrize("include_usage", [True, None])
def test_a_streamed_sub_agent_is_governed_the_same_way(include_usage: bool | None) -> None:
    tools = Tools()
    streamed: list[object] = []

    async def on_stream(event: object) -> None:
        streamed.append(event)

    script: list[ScriptEntry] = [
        reply(tool_calls=[tool_call("researcher", {"input": "weather in Paris"})], usage=(50, 5)),
        *[weather("Paris")] * 10,
    ]
    with ScriptedServer(script) as server:
        settings = ModelSettings(max_tokens=300, include_usage=include_usage)
        researcher = agent(server, tools, name="researcher", settings=settings)
        as_tool = researcher.as_tool("researcher", "Researches.", on_stream=on_stream)
        parent = Agent(name="parent", model=chat_model(server), tools=[as_tool])
        done = run(govern(parent, Guard(max_model_calls(3))))
        requests = server.requests
    assert [request.get("stream", False) for request in requests] == [False, True, True]
    assert streamed
    assert done.outcome.reason == "model_call_limit"
    assert tools.ran == ["Paris", "Paris"]
    if include_usage:
        assert (done.usage.input_tokens, done.usage.output_tokens) == (50 + 200, 5 + 40)
    else:  # the stream said nothing of its usage: each reply counts at what it reserved
        assert done.usage.output_tokens == 5 + 300 + 300


def test_a_handoff_continues_the_main_loop_and_its_turns() -> None:
    tools = Tools()
    script = [
        reply(tool_calls=[tool_call("transfer_to_specialist", {})]),
        weather("Paris"),
        weather("Rome"),
    ]
    with ScriptedServer(script) as server:
        specialist = agent(server, tools, name="specialist")
        triage = Agent(name="triage", model=chat_model(server), handoffs=[handoff(specialist)])
        done = run(govern(triage, Guard(max_turns(2))))
        requests = server.requests
    assert len(requests) == 2  # the triage agent's turn, then the specialist's
    assert done.outcome.reason == "turn_limit"
    assert tools.ran == ["Paris"]


# Decisions: warn, block, ask, synthesize.


def test_a_warning_reaches_the_model_in_the_next_request() -> None:
    tools = Tools()
    script = [weather("Paris"), weather("Rome"), reply("Sunny.")]
    with ScriptedServer(script) as server:
        done = run(govern(agent(server, tools), Guard(max_turns(4, warn_at=0.5))))
        requests = server.requests
    assert done.completed
    assert "turn" not in last_user_text(requests[0]).lower()
    assert last_user_text(requests[1]) == "Turn 2 of 4: 2 turns left; wrap up soon."
    assert last_user_text(requests[2]) == "What is the weather?"  # shown once


def test_a_blocked_tool_call_is_a_tool_error_for_the_model_and_the_run_goes_on() -> None:
    tools = Tools()
    script = [weather("Paris", "Rome"), reply("Paris is sunny; Rome is unknown.")]
    with ScriptedServer(script) as server:
        done = run(govern(agent(server, tools), Guard(max_tool_calls(1, tool="lookup"))))
        requests = server.requests
    assert tools.ran == ["Paris"]
    paris, rome = tool_messages(requests[1])
    assert paris == "sunny in Paris"
    assert "lookup" in rome
    assert "1 of 1" in rome, rome
    assert done.completed
    assert done.output == "Paris is sunny; Rome is unknown."
    assert done.usage.tool_calls == 1


def test_ask_continue_starts_a_new_round() -> None:
    tools = Tools()
    answer, asked = prompter(Answer(Choice.CONTINUE))
    script = [weather("Paris"), weather("Rome"), reply("Sunny.")]
    with ScriptedServer(script) as server:
        guard = Guard(max_turns(2, on_limit="ask"), prompter=answer)
        done = run(govern(agent(server, tools), guard))
    assert len(asked) == 1
    assert asked[0].question == "You've used 2 turns. Continue?"
    assert done.completed
    assert done.usage.turns == 3


def test_ask_extend_raises_the_limit() -> None:
    tools = Tools()
    answer, asked = prompter(Answer(Choice.EXTEND, 1))
    with ScriptedServer([weather("Paris")], repeat_last=True) as server:
        guard = Guard(max_model_calls(2, on_limit="ask"), prompter=answer)
        done = run(govern(agent(server, tools), guard))
        requests = server.requests
    assert len(asked) == 2  # at 2, then at 3 (extended by one), with no more answers
    assert len(requests) == 3
    assert done.outcome.reason == "model_call_limit"
    assert done.usage.model_calls == 3


def test_ask_abort_stops_the_run() -> None:
    tools = Tools()
    answer, asked = prompter(Answer(Choice.ABORT))
    with ScriptedServer([weather("Paris")], repeat_last=True) as server:
        guard = Guard(max_turns(1, on_limit="ask"), prompter=answer)
        done = run(govern(agent(server, tools), guard))
        requests = server.requests
    assert len(asked) == 1
    assert len(requests) == 1
    assert done.outcome.reason == "declined"
    assert done.outcome.status is Status.ABANDONED


def test_ask_wrap_up_answers_through_the_sdks_final_output() -> None:
    tools = Tools()
    answer, _ = prompter(Answer(Choice.WRAP_UP))
    script = [weather("Paris"), reply("From what I found: Paris is sunny.", usage=(200, 9))]
    with ScriptedServer(script) as server:
        guard = Guard(max_turns(1, on_limit="ask"), prompter=answer)
        done = run(govern(agent(server, tools), guard))
        requests = server.requests
    assert len(requests) == 2
    assert "tools" not in requests[1]  # the wrap-up request is tools-free
    assert "without calling tools" in last_user_text(requests[1])
    assert done.outcome.status is Status.COMPLETED_WITH_WARNINGS
    assert done.result is not None
    assert done.result.final_output == "From what I found: Paris is sunny."
    assert done.output == "From what I found: Paris is sunny."
    assert done.usage.model_calls == 2  # the wrap-up request counts


def test_no_prompter_means_the_ask_stops_the_run() -> None:
    tools = Tools()
    with ScriptedServer([weather("Paris")], repeat_last=True) as server:
        done = run(govern(agent(server, tools), Guard(max_turns(1, on_limit="ask"))))
        requests = server.requests
    assert len(requests) == 1
    assert done.outcome.reason == "turn_limit"


def test_synthesize_writes_the_final_output_with_one_more_tools_free_request() -> None:
    tools = Tools()
    script = [weather("Paris", "Rome"), weather("Oslo"), reply("Paris and Rome are sunny.")]
    with ScriptedServer(script) as server:
        guard = Guard(max_tool_calls(2, on_limit="synthesize"))
        done = run(govern(agent(server, tools), guard))
        requests = server.requests
    assert tools.ran == ["Paris", "Rome"]
    assert len(requests) == 3
    assert "tools" not in requests[2]
    assert tool_messages(requests[2])[:2] == ["sunny in Paris", "sunny in Rome"]
    assert "Tool-call budget spent" in last_user_text(requests[2])
    assert done.outcome.status is Status.COMPLETED_WITH_WARNINGS
    assert done.outcome.reason == "tool_call_limit"
    assert done.result is not None
    assert done.result.final_output == "Paris and Rome are sunny."
    assert done.usage.model_calls == 3
    assert done.usage.tool_calls == 2


@pytest.mark.parametrize("on_limit", ["synthesize", "ask"])
def test_a_synthesis_pass_that_calls_a_tool_instead_ends_abandoned_with_no_output(
    on_limit: Literal["synthesize", "ask"],
) -> None:
    tools = Tools()
    answer, _ = prompter(Answer(Choice.WRAP_UP))  # for "ask": the human chooses to wrap up
    script = [weather("Paris", "Rome"), weather("Oslo"), weather("Oslo"), reply("Too late.")]
    with ScriptedServer(script) as server:
        guard = Guard(max_tool_calls(2, on_limit=on_limit), prompter=answer)
        done = run(govern(agent(server, tools), guard))
        requests = server.requests
    assert tools.ran == ["Paris", "Rome"]
    assert len(requests) == 3  # the pass, answered with a tool call, is not made again
    assert "tools" not in requests[2]
    assert done.outcome.status is Status.ABANDONED
    assert done.outcome.reason == "tool_call_limit"
    assert "Answered from" not in done.outcome.message
    assert done.output is None
    assert done.usage.model_calls == 3  # the pass counts
    assert done.usage.input_tokens == 300


def test_a_synthesizer_given_to_the_guard_writes_the_final_output() -> None:
    tools = Tools()
    seen: list[Any] = []

    def synthesizer(evidence: Any) -> str:
        seen.append(evidence)
        return "Paris is sunny (from the notes)."

    with ScriptedServer([weather("Paris")], repeat_last=True) as server:
        guard = Guard(max_turns(2, on_limit="synthesize"), synthesizer=synthesizer)
        done = run(govern(agent(server, tools), guard))
        requests = server.requests
    assert len(requests) == 2  # the synthesizer answered: no tools-free request was needed
    assert seen[0].tool_results[0][2] == "sunny in Paris"
    assert done.outcome.status is Status.COMPLETED_WITH_WARNINGS
    assert done.result is not None
    assert done.result.final_output == "Paris is sunny (from the notes)."


def test_best_effort_ends_the_sdk_run_with_the_partial_output() -> None:
    tools = Tools()
    script = [reply("Checking Paris.", tool_calls=[tool_call("lookup", {"city": "Paris"})])]
    with ScriptedServer(script, repeat_last=True) as server:
        guard = Guard(max_turns(1, on_limit="best_effort"))
        done = run(govern(agent(server, tools), guard))
        requests = server.requests
    assert len(requests) == 1
    assert done.outcome.status is Status.COMPLETED_WITH_WARNINGS
    assert done.result is not None
    assert done.result.final_output == "Checking Paris."


# Dollars and tokens: checked before the request is sent.


def test_a_request_whose_worst_case_cost_does_not_fit_is_never_sent() -> None:
    tools = Tools()
    prices = Prices({MODEL: {"input": "1", "output": "10"}})  # USD per million tokens
    # 100 in + 20 out = $0.0003 each; the worst case of the next one: 100 in + 1000 out = $0.0101.
    with ScriptedServer([weather("Paris")], repeat_last=True) as server:
        guard = Guard(max_cost("0.0105"), pricer=prices)
        done = run(govern(agent(server, tools, max_tokens=1000), guard))
        requests = server.requests
    assert len(requests) == 2
    assert done.outcome.reason == "cost_limit"
    assert done.outcome.cost == Decimal("0.0006")  # the two requests sent, and nothing else


def test_cached_tokens_are_priced_as_cache_reads() -> None:
    tools = Tools()
    prices = Prices({MODEL: {"input": "1", "output": "10", "cache_read": "0.1"}})
    with ScriptedServer([reply("Hi.", usage=Usage(1000, 10, cached_tokens=800))]) as server:
        done = run(govern(agent(server, tools), Guard(max_cost("1"), pricer=prices)))
    assert done.usage.input_tokens == 1000  # cached tokens included, priced once
    assert done.usage.cache_read_tokens == 800
    # 200 fresh at $1/M, 800 cached at $0.1/M, 10 out at $10/M.
    assert done.outcome.cost == Decimal("0.00038")


def test_max_tokens_is_lowered_to_what_a_token_limit_leaves() -> None:
    tools = Tools()
    with ScriptedServer([weather("Paris", usage=(100, 20)), reply("Sunny.")]) as server:
        done = run(govern(agent(server, tools, max_tokens=5000), Guard(max_tokens(1000))))
        requests = server.requests
    assert requests[0]["max_tokens"] == 1000
    # 120 spent; the next prompt is taken to be as long as the last one (100).
    assert requests[1]["max_tokens"] == 1000 - 120 - 100
    assert done.completed


# The SDK's own machinery: retries, its turn limit, approvals and RunState.


def test_the_sdk_never_retries_a_refused_request() -> None:
    tools = Tools()
    retry_everything = ModelRetrySettings(max_retries=3, policy=lambda context: True)
    settings = ModelSettings(max_tokens=300, retry=retry_everything)
    with ScriptedServer([weather("Paris")], repeat_last=True) as server:
        done = run(govern(agent(server, tools, settings=settings), Guard(max_model_calls(1))))
        requests = server.requests
    assert len(requests) == 1
    assert done.outcome.reason == "model_call_limit"


def test_the_sdks_own_turn_limit_does_not_fire_before_haltwise() -> None:
    tools = Tools()
    with ScriptedServer([weather("Paris")], repeat_last=True) as server:
        done = run(govern(agent(server, tools), Guard(max_turns(12))))
        requests = server.requests
    assert len(requests) == 12  # past the SDK's default of 10
    assert done.outcome.reason == "turn_limit"


def test_a_run_resumed_from_the_sdks_run_state_keeps_its_counts() -> None:
    tools = Tools()
    script = [
        reply(tool_calls=[tool_call("delete", {"path": "old.txt"})], usage=(100, 20)),
        weather("Paris"),
        weather("Rome"),
        reply("Done."),
    ]
    with ScriptedServer(script) as server:
        governed = govern(agent(server, tools), Guard(max_model_calls(3)))
        paused = run(governed, "Clean up, then check the weather.")
        assert paused.outcome.status is Status.ABANDONED
        assert paused.outcome.reason == "paused"
        assert paused.usage.model_calls == 1
        assert paused.result is not None
        state = paused.result.to_state()
        (approval,) = state.get_interruptions()
        state.approve(approval)
        resumed = run(governed, state)
        requests = server.requests
    assert tools.ran == ["delete old.txt", "Paris", "Rome"]
    assert len(requests) == 3  # 1 before the pause, 2 after: the limit spans both
    assert resumed.outcome.reason == "model_call_limit"
    assert resumed.usage.model_calls == 3
    assert resumed.usage.tool_calls == 3  # delete counted once, when its response arrived
    assert resumed.outcome.run_id == paused.outcome.run_id


def test_a_run_state_resumed_in_a_new_process_takes_its_counts_from_the_checkpoint() -> None:
    tools = Tools()
    ledger = MemoryLedger()
    script = [
        reply(tool_calls=[tool_call("delete", {"path": "old.txt"})], usage=(100, 20)),
        weather("Paris"),
        weather("Rome"),
    ]

    async def main() -> tuple[Governed[Any], Governed[Any]]:
        with ScriptedServer(script) as server:
            first = govern(agent(server, tools), Guard(max_model_calls(2), ledger=ledger))
            paused = await first.run("Clean up.", run_config=CONFIG)
            assert paused.result is not None
            saved = paused.result.to_state().to_string()
            assert paused.outcome.checkpoint is not None
            # Later, elsewhere: the same agent, a new guard on the same ledger.
            later = agent(server, tools)
            second = govern(later, Guard(max_model_calls(2), ledger=ledger))
            state = await RunState.from_string(later, saved)
            state.approve(state.get_interruptions()[0])
            resumed = await second.run(
                state, run_config=CONFIG, checkpoint=paused.outcome.checkpoint
            )
            assert len(server.requests) == 2
        return paused, resumed

    paused, resumed = asyncio.run(main())
    assert resumed.outcome.run_id == paused.outcome.run_id
    assert resumed.outcome.reason == "model_call_limit"
    assert resumed.usage.model_calls == 2
    assert tools.ran == ["delete old.txt", "Paris"]


# Cancel and deadlines: the run ends promptly, however the SDK is waiting.


def test_cancel_from_another_thread_stops_a_hung_run() -> None:
    tools = Tools()
    guard = Guard(max_turns(10))
    cancelled_at: list[float] = []

    def cancel() -> None:
        cancelled_at.append(time.monotonic())
        guard.governor.cancel()

    timer = threading.Timer(0.3, cancel)
    with ScriptedServer([weather("Paris"), reply("Never.", delay=HUNG)]) as server:
        try:
            timer.start()
            done = run(govern(agent(server, tools), guard))
            ended = time.monotonic()
        finally:
            timer.cancel()
            timer.join()
    assert cancelled_at[0] <= ended < cancelled_at[0] + PROMPTLY
    assert done.outcome.status is Status.CANCELLED
    assert done.outcome.reason == "cancelled"
    assert done.usage.model_calls == 2


def test_a_hung_reply_ends_the_run_timed_out_within_a_second_of_its_deadline() -> None:
    tools = Tools()
    guard = Guard(timeout(seconds=1))

    async def main() -> tuple[Governed[Any], float | None, float]:
        script = [weather("Paris"), reply("Too late.", delay=HUNG)]
        with ScriptedServer(script) as server:
            governed = govern(agent(server, tools), guard)
            task = asyncio.ensure_future(governed.run("What is the weather?", run_config=CONFIG))
            await asyncio.sleep(0)
            deadline = guard.governor.deadline()
            done = await task
            return done, deadline, time.monotonic()

    done, deadline, ended = asyncio.run(main())
    assert deadline is not None
    assert deadline <= ended < deadline + PROMPTLY
    assert done.outcome.status is Status.TIMED_OUT
    assert done.outcome.reason == "time_limit"
    assert done.usage.model_calls == 2
    assert done.usage.output_tokens == 20 + 300  # the hung request at what it reserved
    assert tools.ran == ["Paris"]


def test_a_synthesis_pass_does_not_outlive_the_time_the_run_has_left() -> None:
    """Once the run has stopped, its deadline no longer cancels the task: the tools-free pass
    is bounded by itself (``synthesis_seconds``: here the second the run has left), and a pass
    cut off there writes no answer, the stop standing with the pass counted."""
    tools = Tools()
    guard = Guard(max_tool_calls(1, on_limit="synthesize") | timeout(seconds=1))
    script = [weather("Paris", "Rome"), reply("Too late.", delay=HUNG)]
    with ScriptedServer(script) as server:
        governed = govern(agent(server, tools), guard)
        deadline = time.monotonic() + 1
        with pytest.raises(asyncio.TimeoutError):
            run(governed)
        ended = time.monotonic()
        requests = server.requests
    assert ended < deadline + PROMPTLY  # not when the hung reply comes (30 s)
    assert len(requests) == 2
    assert "tools" not in requests[1]  # the pass
    outcome = guard.governor.outcome
    assert outcome is not None
    assert outcome.status is Status.ABANDONED
    assert outcome.reason == "tool_call_limit"
    assert outcome.partial_output is None
    assert outcome.usage.model_calls == 2
    assert tools.ran == ["Paris"]


def test_run_sync_runs_on_the_threads_default_loop_like_runner_run_sync() -> None:
    tools = Tools()
    script = [weather("Paris"), reply("Sunny."), weather("Rome"), reply("Sunny too.")]
    try:
        with ScriptedServer(script) as server:
            governed = govern(agent(server, tools), Guard(max_turns(5)))
            first = governed.run_sync("Paris?", run_config=CONFIG)
            second = governed.run_sync("Rome?", run_config=CONFIG)  # the same client, again
    finally:
        _close_default_loop()
    assert (first.output, second.output) == ("Sunny.", "Sunny too.")
    assert second.usage.turns == 2  # a new run: counts start again
    assert tools.ran == ["Paris", "Rome"]


def test_run_sync_refuses_to_run_inside_an_event_loop() -> None:
    async def main() -> None:
        with ScriptedServer([]) as server:
            governed = govern(agent(server, Tools()), Guard(max_turns(5)))
            with pytest.raises(RuntimeError, match="await run"):
                governed.run_sync("Paris?")

    asyncio.run(main())


def _close_default_loop() -> None:
    """``run_sync`` leaves the thread's default loop open for the next run, as the SDK does;
    a test closes it, so that no other test finds it."""
    loop = asyncio.get_event_loop_policy().get_event_loop()
    loop.close()
    asyncio.set_event_loop(None)


# Arguments: checked by govern itself (what is not a guard: test_one_meaning.py).


@pytest.mark.parametrize("given", ["helper", Agent])
def test_govern_refuses_what_is_not_an_agent_at_the_call(given: Any) -> None:
    with pytest.raises(InvalidValueError) as raised:
        govern(given, Guard(max_turns(3)))
    assert str(raised.value) == (
        f"govern(agent)={given!r} is not valid: expected an Agent of the OpenAI Agents SDK, "
        "e.g. Agent(name=...)"
    )


# Outside a governed run the agents are left as they were.


def test_governed_agents_run_ungoverned_outside_govern() -> None:
    tools = Tools()
    with ScriptedServer([weather("Paris"), reply("Sunny.")]) as server:
        helper = agent(server, tools)
        govern(helper, Guard(max_model_calls(1)))
        result = asyncio.run(Runner.run(helper, "What is the weather?", run_config=CONFIG))
    assert result.final_output == "Sunny."
    assert tools.ran == ["Paris"]


# The example in the docs.


def test_the_example_runs_and_the_docs_show_what_it_prints(
    capsys: pytest.CaptureFixture[str],
) -> None:
    spec = importlib.util.spec_from_file_location("openai_agents_example", EXAMPLE)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    done = module.main()
    assert done.outcome.status is Status.COMPLETED_WITH_WARNINGS
    assert done.outcome.reason == "tool_call_limit"
    assert done.result.final_output == done.output
    assert done.usage.tool_calls == 3
    assert done.usage.model_calls == 6
    printed = capsys.readouterr().out
    assert f"```\n{printed}```" in DOCS.read_text(encoding="utf-8")


def test_the_docs_show_the_example_verbatim() -> None:
    code = EXAMPLE.read_text(encoding="utf-8")
    assert f"```python\n{code}```" in DOCS.read_text(encoding="utf-8")
