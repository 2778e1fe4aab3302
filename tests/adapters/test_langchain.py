"""The LangChain / LangGraph adapter, end to end: the real ``create_agent`` (and a hand-built
``StateGraph``) with ``ChatOpenAI`` talking over HTTP to the scripted server.

Every count is checked against what the server received (``server.requests``) and what the
tools actually ran, not only against haltwise's own usage.
"""

from __future__ import annotations

import asyncio
import importlib.util
import threading
import time
from collections.abc import Callable
from decimal import Decimal
from pathlib import Path
from typing import Any, cast

import pytest

pytest.importorskip("langchain.agents")
pytest.importorskip("langchain_openai")

import openai
from langchain.agents import create_agent
from langchain.agents.middleware import (
    AgentMiddleware,
    ModelCallLimitMiddleware,
    ModelRetryMiddleware,
    ToolCallLimitMiddleware,
    ToolRetryMiddleware,
)
from langchain_core.messages import AIMessage, BaseMessage, ToolMessage
from langchain_core.runnables import RunnableConfig
from langchain_core.tools import BaseTool, tool
from langchain_openai import ChatOpenAI
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import START, MessagesState, StateGraph
from langgraph.prebuilt import tools_condition
from langgraph.types import Command

from haltwise import (
    Answer,
    Ask,
    Choice,
    ConfigurationError,
    Decision,
    Event,
    Governor,
    Guard,
    InvalidValueError,
    Prices,
    Status,
    max_cost,
    max_model_calls,
    max_tokens,
    max_tool_calls,
    max_turns,
    timeout,
)
from haltwise import ModelRequest as ModelRequestEvent
from haltwise import ModelResponse as ModelResponseEvent
from haltwise.adapters import Governed
from haltwise.adapters._common import SYNTHESIS_SECONDS
from haltwise.adapters.langchain import HaltwiseMiddleware, govern
from haltwise.testing import (
    Reply,
    ScriptedServer,
    ScriptEntry,
    Usage,
    error,
    reply,
    tool_call,
)

from .conftest import tool_results

MODEL = "scripted-model"
#: The graph's input (typed Any: ``create_agent``'s input type takes no ``(role, text)`` pairs).
QUESTION: Any = {"messages": [("user", "What is the answer?")]}
#: What a hung reply waits before answering: far past every deadline below.
HUNG = 30.0
#: How soon after its deadline (or its cancel) a run must have ended.
PROMPTLY = 1.0
ROOT = Path(__file__).resolve().parents[2]


def chat_model(server: ScriptedServer, **options: Any) -> ChatOpenAI:
    """Chat Completions (never the Responses API), no retries of its own unless asked."""
    settings: dict[str, Any] = {"max_retries": 0, "max_tokens": 200, **options}
    return ChatOpenAI(
        model=MODEL,
        base_url=server.base_url,
        api_key="test",  # type: ignore[arg-type]  # pydantic turns it into a SecretStr
        use_responses_api=False,
        **settings,
    )


class Searches:
    """A ``search`` tool that records each query it really ran."""

    def __init__(self, seen_by: Callable[[], Any] | None = None) -> None:
        self.ran: list[str] = []
        self.seen: list[Any] = []
        self._seen_by = seen_by

        @tool
        def search(query: str) -> str:
            """Search the web."""
            if self._seen_by is not None:
                self.seen.append(self._seen_by())
            self.ran.append(query)
            return f"results for {query}"

        self.tool: BaseTool = search


def searching(*queries: str, usage: tuple[int, int] = (100, 20)) -> Reply:
    """A reply that asks for one ``search`` per query (in parallel when more than one)."""
    calls = [tool_call("search", {"query": query}) for query in queries]
    return reply(tool_calls=calls, usage=usage)


def loop_script(turns: int, final: str = "The answer is 42.") -> list[Reply]:
    """``turns`` replies that each search once, then the final answer."""
    return [searching(f"q{index}") for index in range(1, turns + 1)] + [reply(final, usage=(50, 5))]


def agent_for(
    server: ScriptedServer,
    guard: Guard,
    tools: list[BaseTool],
    *,
    middleware: list[Any] | None = None,
    **options: Any,
) -> Any:
    model = chat_model(server, **options.pop("model_options", {}))
    return create_agent(
        model, tools=tools, middleware=[*(middleware or []), HaltwiseMiddleware(guard)], **options
    )


def tool_names(body: dict[str, Any]) -> list[str]:
    return [entry["function"]["name"] for entry in body.get("tools", [])]


def messages_of(body: dict[str, Any], role: str) -> list[str]:
    return [str(m.get("content")) for m in body["messages"] if m["role"] == role]


def final_message(governed: Governed[dict[str, Any]]) -> BaseMessage:
    assert governed.result is not None
    message: BaseMessage = governed.result["messages"][-1]
    return message


# ------------------------------------------------------------------------------------------
# One meaning of each limit


def test_max_model_calls_sends_exactly_that_many_requests() -> None:
    searches = Searches()
    guard = Guard(max_model_calls(3))
    with ScriptedServer(loop_script(5)) as server:
        agent = agent_for(server, guard, [searches.tool])
        governed = govern(agent, guard).run_sync(QUESTION)
        requests = server.requests
    assert len(requests) == 3  # the 4th was refused before it was sent
    assert searches.ran == ["q1", "q2", "q3"]
    outcome = governed.outcome
    assert outcome.status is Status.ABANDONED
    assert outcome.reason == "model_call_limit"
    assert outcome.usage.model_calls == 3
    assert outcome.checkpoint is not None
    closing = final_message(governed)
    assert isinstance(closing, AIMessage)
    assert not closing.tool_calls
    assert closing.content == outcome.message  # the graph ended cleanly, saying why


def test_max_turns_runs_exactly_that_many_turns_async() -> None:
    searches = Searches()
    guard = Guard(max_turns(3))

    async def main() -> Governed[dict[str, Any]]:
        with ScriptedServer(loop_script(5)) as server:
            agent = agent_for(server, guard, [searches.tool])
            governed = await govern(agent, guard).run(QUESTION)
            assert len(server.requests) == 3
        return governed

    governed = asyncio.run(main())
    assert searches.ran == ["q1", "q2", "q3"]
    assert governed.outcome.reason == "turn_limit"
    assert governed.outcome.usage.turns == 3
    assert governed.outcome.usage.tool_calls == 3


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_parallel_tool_calls_are_all_reported_before_any_runs_and_refused_ones_never_run(
    mode: str,
) -> None:
    guard = Guard(max_tool_calls(3))
    searches = Searches(seen_by=lambda: guard.governor.usage.tool_calls)
    script = [searching("a", "b", "c", "d", "e"), reply("Never sent.")]
    with ScriptedServer(script) as server:
        governed_agent = govern(agent_for(server, guard, [searches.tool]), guard)
        if mode == "sync":
            governed = governed_agent.run_sync(QUESTION)
        else:
            governed = asyncio.run(governed_agent.run(QUESTION))
        requests = server.requests
    assert len(requests) == 1
    assert sorted(searches.ran) == ["a", "b", "c"]  # exactly three executions
    assert searches.seen == [3, 3, 3]  # each ran after all five were reported
    outcome = governed.outcome
    assert outcome.reason == "tool_call_limit"
    assert outcome.usage.tool_calls == 3
    assert governed.result is not None
    refusals = [
        m for m in governed.result["messages"] if isinstance(m, ToolMessage) and m.status == "error"
    ]
    assert len(refusals) == 2
    assert all("not run" in str(m.content) for m in refusals)


def test_the_call_that_writes_the_final_answer_counts_like_any_other() -> None:
    searches = Searches()
    guard = Guard(max_model_calls(2))
    with ScriptedServer(loop_script(2)) as server:
        governed = govern(agent_for(server, guard, [searches.tool]), guard).run_sync(QUESTION)
        requests = server.requests
    assert len(requests) == 2
    assert governed.outcome.reason == "model_call_limit"
    assert governed.output is None  # no answer was written: the final call was refused


def test_a_run_within_its_limits_completes_with_its_answer_and_usage() -> None:
    searches = Searches()
    guard = Guard(max_turns(5) | max_tool_calls(5))
    script = [
        reply(tool_calls=[tool_call("search", {"query": "q"})], usage=Usage(100, 20, 60)),
        reply("The answer is 42.", usage=(150, 10)),
    ]
    with ScriptedServer(script) as server:
        governed = govern(agent_for(server, guard, [searches.tool]), guard).run_sync(QUESTION)
    assert governed.completed
    assert governed.output == "The answer is 42."
    usage = governed.usage
    assert (usage.turns, usage.model_calls, usage.tool_calls) == (2, 2, 1)
    assert (usage.input_tokens, usage.output_tokens) == (250, 30)
    assert usage.cache_read_tokens == 60  # from usage_metadata's input_token_details


def test_retried_model_and_tool_calls_count_each_time_they_are_sent_or_run() -> None:
    failures: list[str] = []

    @tool
    def flaky(query: str) -> str:
        """Fails the first time."""
        if not failures:
            failures.append(query)
            raise RuntimeError("temporarily down")
        return "ok"

    guard = Guard(max_model_calls(10) | max_tool_calls(10))
    script = [
        error(500, "overloaded"),
        reply(tool_calls=[tool_call("flaky", {"query": "q"})], usage=(10, 2)),
        reply("Done.", usage=(10, 2)),
    ]
    retries = [
        ModelRetryMiddleware(max_retries=2, initial_delay=0.0, jitter=False),
        ToolRetryMiddleware(max_retries=2, initial_delay=0.0, jitter=False),
    ]
    with ScriptedServer(script) as server:
        agent = agent_for(server, guard, [flaky], middleware=retries)
        governed = govern(agent, guard).run_sync(QUESTION)
        assert len(server.requests) == 3
    assert governed.completed
    assert governed.usage.model_calls == 3  # the failed request was sent: it counts
    assert governed.usage.tool_calls == 2  # so does the failed tool call
    assert failures == ["q"]


# ------------------------------------------------------------------------------------------
# Sub-agents and subgraphs cannot pass the parent's limits


def sub_agent_tool(sub_agent: Any) -> BaseTool:
    @tool
    def research(topic: str) -> str:
        """Ask the research sub-agent."""
        state = sub_agent.invoke({"messages": [("user", topic)]})
        return str(state["messages"][-1].content)

    return research


@pytest.mark.parametrize("shared", ["same guard", "child governor"])
def test_a_sub_agent_cannot_overspend_the_parent_budget(shared: str) -> None:
    searches = Searches()
    guard = Guard(max_model_calls(4))
    parent_middleware = HaltwiseMiddleware(guard)
    sub_middleware = (
        HaltwiseMiddleware(guard) if shared == "same guard" else parent_middleware.child()
    )
    script = [
        reply(tool_calls=[tool_call("research", {"topic": "x"})], usage=(10, 2)),
        *loop_script(10),  # the sub-agent would search ten times
    ]
    with ScriptedServer(script) as server:
        model = chat_model(server)
        sub_agent = create_agent(model, tools=[searches.tool], middleware=[sub_middleware])
        agent = create_agent(
            model, tools=[sub_agent_tool(sub_agent)], middleware=[parent_middleware]
        )
        governed = govern(agent, guard).run_sync(QUESTION)
        requests = server.requests
    assert len(requests) == 4  # 1 by the parent, 3 by the sub-agent, then the budget was spent
    assert searches.ran == ["q1", "q2", "q3"]
    assert governed.outcome.reason == "model_call_limit"
    assert governed.outcome.usage.model_calls == 4
    assert governed.outcome.usage.tool_calls == 1 + 3  # research, and the sub-agent's searches
    assert governed.outcome.usage.turns == 1  # a sub-agent's round trips are not the run's turns


def test_a_sync_sub_agent_in_an_async_run_reports_to_the_same_run() -> None:
    searches = Searches()
    guard = Guard(max_tool_calls(3))

    async def main() -> tuple[Governed[dict[str, Any]], int]:
        script = [
            reply(tool_calls=[tool_call("research", {"topic": "x"})], usage=(10, 2)),
            *loop_script(10),
        ]
        with ScriptedServer(script) as server:
            model = chat_model(server)
            middleware = HaltwiseMiddleware(guard)
            sub_agent = create_agent(model, tools=[searches.tool], middleware=[middleware])
            agent = create_agent(model, tools=[sub_agent_tool(sub_agent)], middleware=[middleware])
            governed = await govern(agent, guard).run(QUESTION)
            return governed, len(server.requests)

    governed, sent = asyncio.run(main())
    assert searches.ran == ["q1", "q2"]  # research was the first of the three tool calls
    assert sent == 4  # the sub-agent's third search was refused, and the run ended
    assert governed.outcome.reason == "tool_call_limit"


def test_a_custom_graph_with_a_subgraph_counts_against_the_same_limits() -> None:
    searches = Searches()
    guard = Guard(max_tool_calls(3) | max_model_calls(10))
    middleware = HaltwiseMiddleware(guard)

    def build(model: ChatOpenAI) -> Any:
        inner = StateGraph(MessagesState)
        inner.add_node("model", middleware.model_node(model.bind_tools([searches.tool])))
        inner.add_node("tools", middleware.tool_node([searches.tool]))
        inner.add_edge(START, "model")
        inner.add_conditional_edges("model", tools_condition)
        inner.add_edge("tools", "model")
        outer = StateGraph(MessagesState)
        outer.add_node("research", inner.compile())  # a subgraph
        outer.add_node("tools", middleware.tool_node([searches.tool]))
        outer.add_edge(START, "research")
        return outer.compile()

    with ScriptedServer(loop_script(6)) as server:
        graph = build(chat_model(server))
        governed = govern(graph, guard).run_sync(QUESTION)
        requests = server.requests
    assert searches.ran == ["q1", "q2", "q3"]
    assert len(requests) == 4  # the 4th asked for a 4th search, which was refused
    assert governed.outcome.reason == "tool_call_limit"
    closing = final_message(governed)
    assert closing.content == governed.outcome.message


# ------------------------------------------------------------------------------------------
# Decisions carried out: Warn, Block, Ask, synthesize


def test_a_warning_reaches_the_model_in_the_next_request() -> None:
    searches = Searches()
    guard = Guard(max_turns(4, warn_at=0.5))
    with ScriptedServer(loop_script(3)) as server:
        governed = govern(agent_for(server, guard, [searches.tool]), guard).run_sync(QUESTION)
        requests = server.requests
    assert governed.completed
    notes = [messages_of(body, "user")[1:] for body in requests]
    assert notes[0] == []
    assert notes[1] == ["[haltwise] Turn 2 of 4: 2 turns left; wrap up soon."]
    assert requests[1]["messages"][-1]["role"] == "user"  # after the tool result it follows
    assert notes[2] == notes[3] == notes[1]  # it stays in the conversation, once


def test_a_warning_at_a_tool_call_is_appended_to_the_tool_result_it_follows() -> None:
    searches = Searches()
    guard = Guard(max_tool_calls(4, warn_at=0.5))
    with ScriptedServer(loop_script(2)) as server:
        governed = govern(agent_for(server, guard, [searches.tool]), guard).run_sync(QUESTION)
        requests = server.requests
    assert governed.completed
    second_result = requests[2]["messages"][-1]
    assert second_result["role"] == "tool"
    assert second_result["content"] == (
        "results for q2\n\n[haltwise] 2 of 4 tool calls used: 2 left; start wrapping up."
    )
    assert requests[1]["messages"][-1]["content"] == "results for q1"


def test_a_blocked_tool_call_is_a_tool_error_and_the_run_goes_on() -> None:
    searches = Searches()
    guard = Guard(max_tool_calls(1, tool="search"))
    with ScriptedServer(loop_script(2)) as server:
        governed = govern(agent_for(server, guard, [searches.tool]), guard).run_sync(QUESTION)
        requests = server.requests
    assert governed.completed
    assert governed.output == "The answer is 42."
    assert searches.ran == ["q1"]
    assert len(requests) == 3
    refusal = requests[2]["messages"][-1]
    assert refusal["role"] == "tool"
    assert "max_tool_calls(1, tool='search')" in refusal["content"]


def asking(*answers: Answer | Choice | None) -> tuple[Callable[[Ask], Any], list[Ask]]:
    asked: list[Ask] = []
    replies = iter(answers)

    def prompter(ask: Ask) -> Any:
        asked.append(ask)
        return next(replies)

    return prompter, asked


def test_ask_continue_starts_a_new_round() -> None:
    searches = Searches()
    prompter, asked = asking(Choice.CONTINUE)
    guard = Guard(max_turns(2, on_limit="ask"), prompter=prompter)
    with ScriptedServer(loop_script(3)) as server:
        governed = govern(agent_for(server, guard, [searches.tool]), guard).run_sync(QUESTION)
        assert len(server.requests) == 4
    assert governed.completed
    assert [ask.question for ask in asked] == ["You've used 2 turns. Continue?"]


def test_ask_extend_then_abort() -> None:
    searches = Searches()
    prompter, asked = asking(Answer(Choice.EXTEND, 1), Choice.ABORT)
    guard = Guard(max_turns(2, on_limit="ask"), prompter=prompter)
    with ScriptedServer(loop_script(5)) as server:
        governed = govern(agent_for(server, guard, [searches.tool]), guard).run_sync(QUESTION)
        assert len(server.requests) == 3  # 2 turns, 1 more, then the human declined
    assert len(asked) == 2
    assert governed.outcome.status is Status.ABANDONED
    assert governed.outcome.reason == "declined"
    assert searches.ran == ["q1", "q2", "q3"]


def test_ask_wrap_up_writes_the_answer_with_one_tools_free_call() -> None:
    searches = Searches()
    prompter, _ = asking(Choice.WRAP_UP)
    guard = Guard(max_turns(2, on_limit="ask"), prompter=prompter)
    script = [*loop_script(2)[:2], reply("From what I found: 42, probably.", usage=(80, 9))]
    with ScriptedServer(script) as server:
        governed = govern(agent_for(server, guard, [searches.tool]), guard).run_sync(QUESTION)
        requests = server.requests
    assert len(requests) == 3
    assert tool_names(requests[0]) == ["search"]
    assert tool_names(requests[2]) == []  # the synthesis pass has no tools
    assert "wrap up" in messages_of(requests[2], "user")[-1]
    assert governed.outcome.status is Status.COMPLETED_WITH_WARNINGS
    assert governed.output == "From what I found: 42, probably."
    assert final_message(governed).content == governed.output  # the framework's final answer
    assert governed.usage.model_calls == 3  # the synthesis pass counts
    assert governed.usage.output_tokens == 20 + 20 + 9


def test_ask_abort_declines() -> None:
    prompter, _ = asking(Choice.ABORT)
    guard = Guard(max_turns(1, on_limit="ask"), prompter=prompter)
    with ScriptedServer(loop_script(3)) as server:
        governed = govern(agent_for(server, guard, [Searches().tool]), guard).run_sync(QUESTION)
        assert len(server.requests) == 1
    assert governed.outcome.reason == "declined"


def test_no_prompter_means_the_ask_stops_the_run() -> None:
    guard = Guard(max_turns(1, on_limit="ask"))
    with ScriptedServer(loop_script(3)) as server:
        governed = govern(agent_for(server, guard, [Searches().tool]), guard).run_sync(QUESTION)
        assert len(server.requests) == 1
    assert governed.outcome.reason == "turn_limit"
    assert "No answer came" in governed.outcome.message


def test_synthesize_at_the_tool_budget_answers_through_the_agent() -> None:
    searches = Searches()
    guard = Guard(max_tool_calls(2, on_limit="synthesize"))
    script = [*loop_script(3)[:3], reply("Best answer so far: 42.", usage=(90, 7))]
    with ScriptedServer(script) as server:
        governed = govern(agent_for(server, guard, [searches.tool]), guard).run_sync(QUESTION)
        requests = server.requests
    assert searches.ran == ["q1", "q2"]
    assert len(requests) == 4
    assert tool_names(requests[3]) == []
    assert requests[3]["messages"][-2]["role"] == "tool"  # the refused third call, answered
    assert governed.outcome.status is Status.COMPLETED_WITH_WARNINGS
    assert governed.outcome.reason == "tool_call_limit"
    assert governed.output == "Best answer so far: 42."
    assert final_message(governed).content == "Best answer so far: 42."
    assert governed.usage.model_calls == 4


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_a_synthesis_pass_that_calls_a_tool_instead_ends_abandoned_with_no_output(
    mode: str,
) -> None:
    searches = Searches()
    guard = Guard(max_tool_calls(2, on_limit="synthesize"))
    script = [searching(f"q{index}", usage=(1000, 100)) for index in range(1, 6)]
    with ScriptedServer(script) as server:
        governed_agent = govern(agent_for(server, guard, [searches.tool]), guard)
        if mode == "sync":
            governed = governed_agent.run_sync(QUESTION)
        else:
            governed = asyncio.run(governed_agent.run(QUESTION))
        requests = server.requests
    assert searches.ran == ["q1", "q2"]
    assert len(requests) == 4  # the pass, answered with a tool call, is not made again
    assert tool_names(requests[3]) == []
    outcome = governed.outcome
    assert outcome.status is Status.ABANDONED
    assert outcome.reason == "tool_call_limit"
    assert "Answered from" not in outcome.message
    assert governed.output is None
    assert final_message(governed).content == outcome.message  # no tool call is left to run
    assert governed.usage.model_calls == 4
    assert governed.usage.input_tokens == 4000


def test_synthesize_at_the_model_call_limit_answers_in_the_same_step_async() -> None:
    guard = Guard(max_model_calls(2, on_limit="synthesize"))

    async def main() -> tuple[Governed[dict[str, Any]], list[dict[str, Any]]]:
        script = [*loop_script(2)[:2], reply("Probably 42.", usage=(60, 4))]
        with ScriptedServer(script) as server:
            agent = agent_for(server, guard, [Searches().tool])
            governed = await govern(agent, guard).run(QUESTION)
            return governed, server.requests

    governed, requests = asyncio.run(main())
    assert len(requests) == 3
    assert tool_names(requests[2]) == []
    assert governed.output == "Probably 42."
    assert governed.usage.model_calls == 3


# Two flows at the synthesis pass at once: parallel sub-agents of one run, on threads (sync) or
# tasks (async). One writes the answer; the other waits for it, reporting nothing meanwhile.

#: How long a run with two flows at the synthesis pass may take before the test calls it hung.
BOUNDED = 15.0
#: What the scripted server waits, at most, for the other flow before it answers anyway.
GATE = 5.0
#: The synthesized answer.
SYNTHESIZED = "Best answer so far: 42."


class WatchingGovernor(Governor):
    """A governor that counts the model requests reported to it after the run stopped (a flow
    that loops on refused requests reports them by the thousand), and notes when a response
    arrives after the stop."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.requests_after_stop = 0
        self.response_after_stop = threading.Event()
        decide = self.handle

        def handle(event: Event) -> Decision:
            stopped = self.stopped is not None
            decision = decide(event)
            if stopped and isinstance(event, ModelRequestEvent):
                self.requests_after_stop += 1
            elif stopped and isinstance(event, ModelResponseEvent):
                self.response_after_stop.set()
            return decision

        self.handle = handle


def finished_within(seconds: float, work: Callable[[], Any]) -> Any:
    """``work()``'s result; the test fails, rather than hangs, when it takes longer."""
    results: list[Any] = []
    failures: list[BaseException] = []

    def run() -> None:
        try:
            results.append(work())
        except BaseException as failure:  # handed to the test's thread
            failures.append(failure)

    worker = threading.Thread(target=run, name="governed-run", daemon=True)
    worker.start()
    worker.join(seconds)
    if worker.is_alive():
        pytest.fail(f"the run had not ended after {seconds} s: a flow waits for ever")
    if failures:
        raise failures[0]
    return results[0]


def two_researchers(server: ScriptedServer, guard: Guard, mode: str, ended: dict[str, str]) -> Any:
    """A parent agent whose ``research`` tool runs a sub-agent of the same guard; ``ended``
    records how each sub-agent's run ended (its last message, or the error it raised)."""
    model = chat_model(server)
    middleware = HaltwiseMiddleware(guard)
    sub_agent: Any = create_agent(model, tools=[Searches().tool], middleware=[middleware])

    def record(topic: str, state: dict[str, Any]) -> str:
        ended[topic] = str(state["messages"][-1].content)
        return ended[topic]

    if mode == "sync":

        @tool
        def research(topic: str) -> str:
            """Ask the research sub-agent."""
            try:
                return record(topic, sub_agent.invoke({"messages": [("user", topic)]}))
            except openai.APIError as failure:
                ended[topic] = f"raised: {failure}"
                return "The research failed."

        return create_agent(model, tools=[research], middleware=[HaltwiseMiddleware(guard)])

    @tool
    async def aresearch(topic: str) -> str:
        """Ask the research sub-agent."""
        try:
            return record(topic, await sub_agent.ainvoke({"messages": [("user", topic)]}))
        except openai.APIError as failure:
            ended[topic] = f"raised: {failure}"
            return "The research failed."

    aresearch.name = "research"
    return create_agent(model, tools=[aresearch], middleware=[HaltwiseMiddleware(guard)])


def synthesis_at_once_script(
    governor: WatchingGovernor, synthesis: Reply | Any
) -> list[ScriptEntry]:
    """The parent asks two researchers at once. The request of the one admitted (the model
    call limit is 2) is held until the other, refused, has sent the synthesis pass; the pass
    is answered once the held response has reached the governor after the stop, so that both
    flows are at the synthesis pass together."""
    pass_sent = threading.Event()

    def sub_agent_reply(body: dict[str, Any]) -> Any:
        if tool_names(body):  # the admitted researcher's first request
            pass_sent.wait(GATE)
            return reply("Partial: maybe 42.", usage=(20, 5))
        pass_sent.set()  # the synthesis pass (no tools)
        governor.response_after_stop.wait(GATE)
        return synthesis

    parent = reply(
        tool_calls=[
            tool_call("research", {"topic": "a"}),
            tool_call("research", {"topic": "b"}),
        ],
        usage=(10, 2),
    )
    return [parent, sub_agent_reply, sub_agent_reply]


def governed_run(agent: Any, guard: Guard, mode: str) -> Governed[dict[str, Any]]:
    governed_agent = govern(agent, guard)
    if mode == "sync":
        return governed_agent.run_sync(QUESTION)
    return asyncio.run(governed_agent.run(QUESTION))


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_two_flows_at_the_synthesis_pass_make_one_call_and_both_end_with_its_answer(
    mode: str,
) -> None:
    governor = WatchingGovernor(max_model_calls(2, on_limit="synthesize"))
    guard = Guard(governor=governor)
    ended: dict[str, str] = {}
    script = synthesis_at_once_script(governor, reply(SYNTHESIZED, usage=(90, 7)))
    with ScriptedServer(script) as server:
        agent = two_researchers(server, guard, mode, ended)
        governed = finished_within(BOUNDED, lambda: governed_run(agent, guard, mode))
        requests = server.requests
    assert len(requests) == 3  # the parent's, the admitted researcher's, and ONE synthesis pass
    assert [tool_names(body) for body in requests[1:]].count([]) == 1
    assert governor.requests_after_stop <= 2  # each flow meets the stop once, then waits
    outcome = governed.outcome
    assert outcome.status is Status.COMPLETED_WITH_WARNINGS
    assert outcome.reason == "model_call_limit"
    assert governed.output == SYNTHESIZED
    assert ended == {"a": SYNTHESIZED, "b": SYNTHESIZED}  # the writer's, and the waiter's
    assert outcome.usage.model_calls == 3


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_a_failed_synthesis_pass_releases_the_flow_waiting_for_it_with_the_stop(
    mode: str,
) -> None:
    governor = WatchingGovernor(max_model_calls(2, on_limit="synthesize"))
    guard = Guard(governor=governor)
    ended: dict[str, str] = {}
    script = synthesis_at_once_script(governor, error(500, "the model is overloaded"))
    with ScriptedServer(script) as server:
        agent = two_researchers(server, guard, mode, ended)
        governed = finished_within(BOUNDED, lambda: governed_run(agent, guard, mode))
        requests = server.requests
    assert len(requests) == 3  # one synthesis pass, never a second
    outcome = governed.outcome
    assert outcome.status is Status.ABANDONED
    assert outcome.reason == "model_call_limit"
    assert governed.output is None  # no answer was written
    # The writer raised the model's error; the waiter ended with the stop, saying why.
    raised, closed = sorted(ended.values(), key=lambda text: not text.startswith("raised"))
    assert raised.startswith("raised: ") and "the model is overloaded" in raised
    assert closed == outcome.message
    assert final_message(governed).content == outcome.message
    assert governor.requests_after_stop <= 3  # the parent's next call met the stop once more


# ------------------------------------------------------------------------------------------
# Dollars and tokens: checked before the request is sent


def test_a_request_whose_worst_case_cost_does_not_fit_is_never_sent() -> None:
    # $1 in, $10 out per million tokens. The first request's worst case (prompt unknown, 1000
    # out) is $0.0100; it costs $0.0003, and the second's worst case (100 in, 1000 out) is
    # $0.0101: $0.0104 in all, past the $0.0102 limit.
    prices = Prices({MODEL: {"input": "1", "output": "10"}})
    guard = Guard(max_cost("0.0102"), pricer=prices)
    with ScriptedServer(loop_script(3)) as server:
        agent = agent_for(server, guard, [Searches().tool], model_options={"max_tokens": 1000})
        governed = govern(agent, guard).run_sync(QUESTION)
        requests = server.requests
    assert len(requests) == 1  # the second would have exceeded: never sent
    assert governed.outcome.reason == "cost_limit"
    assert governed.outcome.usage.cost == Decimal("0.0003")


def test_a_limit_passed_by_a_response_keeps_it_and_refuses_its_tool_calls() -> None:
    searches = Searches()
    guard = Guard(max_tokens(250))
    script = [
        searching("q1", usage=(100, 20)),
        reply("Partial: 41?", tool_calls=[tool_call("search", {"query": "q2"})], usage=(150, 30)),
        reply("Never sent."),
    ]
    with ScriptedServer(script) as server:
        governed = govern(agent_for(server, guard, [searches.tool]), guard).run_sync(QUESTION)
        assert len(server.requests) == 2
    assert searches.ran == ["q1"]
    assert governed.outcome.reason == "token_limit"
    assert governed.outcome.partial_output == "Partial: 41?"
    assert governed.outcome.usage.total_tokens == 300  # the response was counted in full
    assert governed.result is not None
    *_, response, refusal, closing = governed.result["messages"]
    assert response.content == "Partial: 41?"
    assert isinstance(refusal, ToolMessage) and refusal.status == "error"
    assert closing.content == governed.outcome.message


def test_max_tokens_is_lowered_to_what_a_token_limit_leaves() -> None:
    guard = Guard(max_tokens(output=230))
    with ScriptedServer(loop_script(2)) as server:
        agent = agent_for(server, guard, [Searches().tool], model_options={"max_tokens": 200})
        governed = govern(agent, guard).run_sync(QUESTION)
        requests = server.requests
    assert [body["max_completion_tokens"] for body in requests] == [200, 200, 190]
    assert governed.completed


def test_a_request_haltwise_changes_is_the_one_override_would_build() -> None:
    """The run's time left goes into a copy of the request, made without
    ``ModelRequest.override`` (which costs some 15 us a call): it must be what ``override``
    builds, seen by a middleware after haltwise's."""
    seen: list[tuple[Any, Any]] = []

    class Probe(AgentMiddleware[Any, Any, Any]):
        def wrap_model_call(self, request: Any, handler: Callable[[Any], Any]) -> Any:
            rebuilt = request.override(model_settings=dict(request.model_settings))
            seen.append((request, rebuilt))
            return handler(request)

    guard = Guard(timeout(minutes=5))
    with ScriptedServer(loop_script(1)) as server:
        agent = create_agent(
            chat_model(server),
            tools=[Searches().tool],
            middleware=[HaltwiseMiddleware(guard), Probe()],
        )
        governed = govern(agent, guard).run_sync(QUESTION)
    assert governed.completed
    assert len(seen) == 2
    for sent, rebuilt in seen:
        assert type(sent) is type(rebuilt)
        assert vars(sent) == vars(rebuilt)
        assert 0 < sent.model_settings["timeout"] <= 300


# ------------------------------------------------------------------------------------------
# Drop-in for LangChain's own limit middleware: same limits, same stop step


THREAD: RunnableConfig = {"configurable": {"thread_id": "t"}}


def run_langchain_limits(
    script: list[Any], middleware: list[Any], invocations: int = 1
) -> tuple[int, list[str], list[Any]]:
    """Requests sent, searches run and final messages with LangChain's own middleware."""
    searches = Searches()
    finals = []
    with ScriptedServer(script) as server:
        agent = create_agent(
            chat_model(server),
            tools=[searches.tool],
            middleware=middleware,
            checkpointer=InMemorySaver(),
        )
        for _ in range(invocations):
            state = agent.invoke(QUESTION, THREAD)
            finals.append(state["messages"][-1])
        return len(server.requests), searches.ran, finals


def run_haltwise_limits(
    script: list[Any], guard: Guard, invocations: int = 1
) -> tuple[int, list[str], list[Any]]:
    searches = Searches()
    finals = []
    with ScriptedServer(script) as server:
        agent = agent_for(server, guard, [searches.tool], checkpointer=InMemorySaver())
        governed_agent = govern(agent, guard)
        for _ in range(invocations):
            governed = governed_agent.run_sync(QUESTION, THREAD)
            finals.append(final_message(governed))
        return len(server.requests), searches.ran, finals


def test_run_limit_of_model_calls_stops_where_model_call_limit_middleware_does() -> None:
    script = loop_script(6)
    theirs = run_langchain_limits(script, [ModelCallLimitMiddleware(run_limit=3)])
    ours = run_haltwise_limits(script, Guard(max_model_calls(3)))
    assert ours[:2] == theirs[:2] == (3, ["q1", "q2", "q3"])
    assert not ours[2][-1].tool_calls and not theirs[2][-1].tool_calls


def test_thread_limit_maps_to_session_scope() -> None:
    # Two prompts on one thread: 2 calls each would be needed; the thread allows 3.
    script = [searching("q1"), reply("First.", usage=(10, 1)), searching("q2"), reply("Never.")]
    theirs = run_langchain_limits(script, [ModelCallLimitMiddleware(thread_limit=3)], 2)
    ours = run_haltwise_limits(script, Guard(max_model_calls(3, scope="session")), 2)
    assert ours[:2] == theirs[:2] == (3, ["q1", "q2"])
    assert ours[2][0].content == theirs[2][0].content == "First."


def test_tool_call_limits_stop_or_block_where_tool_call_limit_middleware_does() -> None:
    script = loop_script(4)
    theirs = run_langchain_limits(
        script, [ToolCallLimitMiddleware(run_limit=2, exit_behavior="end")]
    )
    ours = run_haltwise_limits(script, Guard(max_tool_calls(2)))
    assert ours[:2] == theirs[:2] == (3, ["q1", "q2"])
    theirs = run_langchain_limits(
        script, [ToolCallLimitMiddleware(run_limit=2, exit_behavior="continue")]
    )
    ours = run_haltwise_limits(script, Guard(max_tool_calls(2, on_limit="block")))
    assert ours[:2] == theirs[:2] == (5, ["q1", "q2"])
    assert ours[2][-1].content == theirs[2][-1].content == "The answer is 42."


def test_the_middleware_alone_is_a_drop_in_without_govern() -> None:
    guard = Guard(max_model_calls(3))
    middleware = HaltwiseMiddleware(guard)
    with ScriptedServer(loop_script(5) + loop_script(1)) as server:
        agent = create_agent(chat_model(server), tools=[Searches().tool], middleware=[middleware])
        state = agent.invoke(QUESTION)
        assert len(server.requests) == 3
        assert middleware.outcome is not None
        assert middleware.outcome.reason == "model_call_limit"
        assert state["messages"][-1].content == middleware.outcome.message
        state = agent.invoke(QUESTION)  # a new prompt is a new run: its counts start afresh
        assert len(server.requests) == 6
    assert middleware.outcome.reason == "completed"
    assert middleware.outcome.usage.model_calls == 3
    assert state["messages"][-1].content == "The answer is 42."


def test_the_middleware_alone_under_ainvoke() -> None:
    guard = Guard(max_tool_calls(2))
    middleware = HaltwiseMiddleware(guard)

    async def main() -> dict[str, Any]:
        with ScriptedServer(loop_script(5)) as server:
            agent = create_agent(
                chat_model(server), tools=[Searches().tool], middleware=[middleware]
            )
            state: dict[str, Any] = await agent.ainvoke(QUESTION)
            assert len(server.requests) == 3
            return state

    state = asyncio.run(main())
    assert middleware.outcome is not None
    assert middleware.outcome.reason == "tool_call_limit"
    assert state["messages"][-1].content == middleware.outcome.message


def test_govern_needs_the_middleware_and_its_guard() -> None:
    guard = Guard(max_turns(3))
    with ScriptedServer([]) as server:
        bare = create_agent(chat_model(server), tools=[Searches().tool])
        with pytest.raises(ConfigurationError, match="no haltwise middleware"):
            govern(bare, guard)
        agent = agent_for(server, Guard(max_turns(3)), [Searches().tool])
        with pytest.raises(ConfigurationError, match="another guard"):
            govern(agent, guard)
        pausing = create_agent(
            chat_model(server), middleware=[HaltwiseMiddleware(guard, pause_on_ask=True)]
        )
        with pytest.raises(ConfigurationError, match="checkpointer"):
            govern(pausing, guard)


def refusal_of(call: Callable[[], object]) -> str:
    with pytest.raises(InvalidValueError) as raised:
        call()
    return str(raised.value)


def test_the_middleware_and_govern_refuse_an_argument_of_the_wrong_kind_at_the_call() -> None:
    """(What is not a guard, given to ``govern``: test_one_meaning.py.)"""
    guard = Guard(max_turns(3))
    middleware = HaltwiseMiddleware(guard)
    not_a_guard: Any = Governor(max_turns(3))
    assert refusal_of(lambda: HaltwiseMiddleware(not_a_guard)) == (
        "HaltwiseMiddleware(guard)=Governor(max_turns(3)) is not valid: expected a haltwise "
        "Guard, e.g. Guard(max_turns(10)) (a Governor goes in as Guard(governor=governor), "
        "limits as Guard(limits))"
    )
    assert refusal_of(lambda: HaltwiseMiddleware(guard, pause_on_ask=cast(Any, "yes"))) == (
        "HaltwiseMiddleware(pause_on_ask)='yes' is not valid: expected True or False"
    )
    assert refusal_of(lambda: middleware.child(cast(Any, 5))) == (
        "HaltwiseMiddleware.child(limits)=5 is not valid: expected a limit such as "
        "max_turns(25), a callable f(usage) -> bool, or None"
    )
    assert refusal_of(lambda: middleware.model_node(cast(Any, MODEL))) == (
        f"model_node(model)={MODEL!r} is not valid: expected a LangChain chat model or "
        "runnable, e.g. chat_model.bind_tools(tools)"
    )
    assert isinstance(middleware.child(lambda usage: usage.turns > 2), HaltwiseMiddleware)
    with ScriptedServer([]) as server:
        graph = StateGraph(MessagesState)
        graph.add_node("model", middleware.model_node(chat_model(server)))
        graph.add_edge(START, "model")
        not_compiled = refusal_of(lambda: govern(cast(Any, graph), guard))
    assert not_compiled.startswith("govern(agent)=<langgraph.graph.state.StateGraph object")
    assert not_compiled.endswith(
        " is not valid: expected a compiled LangGraph graph (create_agent's agent, or "
        "StateGraph.compile())"
    )


# ------------------------------------------------------------------------------------------
# Resume: counts kept across a crash, and LangGraph's own pause for the human


def test_a_thread_resumed_after_a_crash_keeps_its_counts() -> None:
    searches = Searches()
    guard = Guard(max_model_calls(4))
    config = {"configurable": {"thread_id": "crash"}}
    script = [*loop_script(2)[:2], error(500, "boom"), *loop_script(5)[2:]]
    with ScriptedServer(script) as server:
        agent = agent_for(server, guard, [searches.tool], checkpointer=InMemorySaver())
        governed_agent = govern(agent, guard)
        with pytest.raises(openai.InternalServerError):
            governed_agent.run_sync(QUESTION, config)
        crashed = guard.governor.outcome
        assert crashed is not None and crashed.reason == "error"
        assert len(server.requests) == 3
        governed = governed_agent.run_sync(None, config)  # LangGraph resumes the thread
        requests = server.requests
    assert len(requests) == 4  # one more request: 3 were already spent
    assert governed.outcome.reason == "model_call_limit"
    assert governed.outcome.usage.model_calls == 4
    assert governed.outcome.run_id == crashed.run_id
    assert searches.ran == ["q1", "q2", "q3"]


def test_pause_on_ask_uses_interrupt_and_resumes_with_the_humans_choice() -> None:
    searches = Searches()
    guard = Guard(max_turns(2, on_limit="ask"))
    config = {"configurable": {"thread_id": "pause"}}
    with ScriptedServer(loop_script(3)) as server:
        agent = create_agent(
            chat_model(server),
            tools=[searches.tool],
            middleware=[HaltwiseMiddleware(guard, pause_on_ask=True)],
            checkpointer=InMemorySaver(),
        )
        governed_agent = govern(agent, guard)
        paused = governed_agent.run_sync(QUESTION, config)
        assert len(server.requests) == 2
        assert paused.result is not None
        (pause,) = paused.result["__interrupt__"]
        assert pause.value["question"] == "You've used 2 turns. Continue?"
        assert "paused for a human" in paused.outcome.message
        extended = governed_agent.run_sync(Command(resume="extend 1"), config)
        assert len(server.requests) == 3
        assert extended.result is not None and extended.result.get("__interrupt__")
        done = governed_agent.run_sync(Command(resume="continue"), config)
        assert len(server.requests) == 4
    assert done.completed
    assert done.output == "The answer is 42."
    assert searches.ran == ["q1", "q2", "q3"]
    assert done.usage.model_calls == 4  # counted across the pauses


# ------------------------------------------------------------------------------------------
# Cancel and deadlines


def test_cancel_from_another_thread_stops_the_run_at_its_next_hook() -> None:
    guard = Guard(max_turns(10))
    started, cancelled = threading.Event(), threading.Event()

    @tool
    def slow(query: str) -> str:
        """Takes a while."""
        started.set()
        cancelled.wait(5)
        return "done"

    def cancel() -> None:
        started.wait(5)
        guard.governor.cancel()
        cancelled.set()

    canceller = threading.Thread(target=cancel)
    script = [reply(tool_calls=[tool_call("slow", {"query": "q"})]), *loop_script(3)]
    with ScriptedServer(script) as server:
        canceller.start()
        governed = govern(agent_for(server, guard, [slow]), guard).run_sync(QUESTION)
        canceller.join()
        assert len(server.requests) == 1
    assert governed.outcome.status is Status.CANCELLED
    assert final_message(governed).content == "The run was cancelled."


def test_cancel_interrupts_a_hung_async_model_call() -> None:
    guard = Guard(max_turns(10))

    async def main() -> tuple[Governed[dict[str, Any]], float, float]:
        with ScriptedServer([reply("Never.", delay=HUNG)]) as server:
            timer = threading.Timer(0.3, guard.governor.cancel)
            agent = agent_for(server, guard, [Searches().tool], model_options={"timeout": None})
            started = time.monotonic()
            timer.start()
            governed = await govern(agent, guard).run(QUESTION)
            return governed, started, time.monotonic()

    governed, started, ended = asyncio.run(main())
    assert ended - started < 0.3 + PROMPTLY
    assert governed.outcome.status is Status.CANCELLED
    assert governed.result is None


def timed_out_promptly(governed: Governed[dict[str, Any]], deadline: float, ended: float) -> None:
    assert deadline <= ended < deadline + PROMPTLY
    assert governed.outcome.status is Status.TIMED_OUT
    assert governed.outcome.reason == "time_limit"
    assert governed.outcome.partial_output == "Searching."
    assert governed.outcome.usage.model_calls == 2  # the hung one counts, at its reservation


def hung_script() -> list[Any]:
    first = reply("Searching.", tool_calls=[tool_call("search", {"query": "q"})], usage=(40, 8))
    return [first, reply("Too late.", delay=HUNG)]


def test_a_hung_reply_ends_the_run_timed_out_within_a_second_of_its_deadline() -> None:
    guard = Guard(timeout(seconds=1))
    with ScriptedServer(hung_script()) as server:
        agent = agent_for(server, guard, [Searches().tool])
        governed_agent = govern(agent, guard)
        deadline = time.monotonic() + 1
        governed = governed_agent.run_sync(QUESTION)  # time_left() is the request's timeout
        ended = time.monotonic()
    timed_out_promptly(governed, deadline, ended)
    assert final_message(governed).content == governed.outcome.message


def test_a_hung_reply_ends_an_async_run_timed_out_within_a_second_of_its_deadline() -> None:
    guard = Guard(timeout(seconds=1))

    async def main() -> tuple[Governed[dict[str, Any]], float, float]:
        with ScriptedServer(hung_script()) as server:
            # No timeout of its own: only the run's deadline can end the call.
            agent = agent_for(server, guard, [Searches().tool], model_options={"timeout": None})
            deadline = time.monotonic() + 1
            governed = await govern(agent, guard).run(QUESTION)
            return governed, deadline, time.monotonic()

    governed, deadline, ended = asyncio.run(main())
    timed_out_promptly(governed, deadline, ended)


def test_a_blocking_sync_tool_does_not_hold_an_async_run_past_its_deadline() -> None:
    guard = Guard(timeout(seconds=1))
    release = threading.Event()  # ends the tool's thread once the run has returned

    @tool
    def crunch(query: str) -> str:
        """Crunch numbers, blocking its thread."""
        release.wait(HUNG)
        return "crunched"

    async def main() -> tuple[Governed[dict[str, Any]], float, float]:
        script = [reply(tool_calls=[tool_call("crunch", {"query": "all"})]), reply("Done.")]
        with ScriptedServer(script) as server:
            agent = agent_for(server, guard, [crunch])
            deadline = time.monotonic() + 1
            try:
                governed = await govern(agent, guard).run(QUESTION)
            finally:
                ended = time.monotonic()
                release.set()
            return governed, deadline, ended

    governed, deadline, ended = asyncio.run(main())
    assert deadline <= ended < deadline + PROMPTLY  # not when the tool's thread returns
    assert governed.outcome.status is Status.TIMED_OUT
    assert governed.outcome.reason == "time_limit"
    assert governed.result is None


def test_a_blocking_sync_tool_does_not_hold_a_sync_run_past_its_deadline() -> None:
    """The tool runs on a thread of its own, given up on at the run's deadline: the run ends
    there, ``timed_out``, the graph closing cleanly, and the tool's late result is dropped."""
    guard = Guard(timeout(seconds=1))
    results = tool_results(guard)
    release = threading.Event()  # ends the tool's thread once the run has returned
    returned = threading.Event()

    @tool
    def crunch(query: str) -> str:
        """Crunch numbers, blocking its thread."""
        release.wait(HUNG)
        returned.set()
        return "crunched"

    script = [reply("Crunching.", tool_calls=[tool_call("crunch", {"query": "all"})])]
    with ScriptedServer([*script, reply("Never sent.")]) as server:
        agent = agent_for(server, guard, [crunch])
        deadline = time.monotonic() + 1
        try:
            governed = govern(agent, guard).run_sync(QUESTION)
        finally:
            ended = time.monotonic()
            release.set()
        assert len(server.requests) == 1
    assert deadline <= ended < deadline + PROMPTLY  # not when the tool returns
    outcome = governed.outcome
    assert outcome.status is Status.TIMED_OUT
    assert outcome.reason == "time_limit"
    assert "while the tool crunch was running" in outcome.message
    assert governed.result is not None
    *_, told, closing = governed.result["messages"]
    assert isinstance(told, ToolMessage) and told.status == "error"
    assert told.content == f"The tool did not finish: {outcome.message}"
    assert closing.content == outcome.message
    assert returned.wait(PROMPTLY)  # the tool ran on, and what it returned was dropped
    assert len(results) == 1 and results[0].startswith("The tool did not finish: no answer")


class Timeouts(AgentMiddleware[Any, Any, Any]):
    """Records the ``timeout`` each model request is sent with; put after haltwise's middleware
    (inside it), it sees the request as haltwise changed it."""

    def __init__(self) -> None:
        super().__init__()
        self.sent: list[Any] = []

    def wrap_model_call(self, request: Any, handler: Callable[[Any], Any]) -> Any:
        self.sent.append(request.model_settings.get("timeout"))
        return handler(request)

    async def awrap_model_call(self, request: Any, handler: Callable[[Any], Any]) -> Any:
        self.sent.append(request.model_settings.get("timeout"))
        return await handler(request)


def synthesized_after_the_deadline(governed: Governed[dict[str, Any]], model_calls: int) -> None:
    outcome = governed.outcome
    assert outcome.status is Status.COMPLETED_WITH_WARNINGS
    assert outcome.reason == "time_limit"
    assert governed.output == "Best guess: 42."
    assert final_message(governed).content == "Best guess: 42."
    assert outcome.usage.model_calls == model_calls


def test_a_synthesis_pass_after_a_tool_overran_a_synthesizing_deadline_has_time() -> None:
    """The run's time is up when its pass is sent (a sync tool was given up on at the
    deadline): the pass's timeout is its own, ``SYNTHESIS_SECONDS``, not the run's time left
    (0, with which it could never be answered), and its answer ends the run."""
    guard = Guard(timeout(seconds=1, on_limit="synthesize"))
    timeouts = Timeouts()
    release = threading.Event()  # ends the tool's thread once the run has returned

    @tool
    def crunch(query: str) -> str:
        """Crunch numbers, blocking its thread."""
        release.wait(HUNG)
        return "crunched"

    script = [
        reply("Crunching.", tool_calls=[tool_call("crunch", {"query": "all"})]),
        reply("Best guess: 42.", delay=0.3),
    ]
    with ScriptedServer(script) as server:
        agent = create_agent(
            chat_model(server), tools=[crunch], middleware=[HaltwiseMiddleware(guard), timeouts]
        )
        try:
            governed = govern(agent, guard).run_sync(QUESTION)
        finally:
            release.set()
        requests = server.requests
    assert len(requests) == 2
    assert tool_names(requests[1]) == []  # the pass
    first, synthesis = timeouts.sent
    assert 0 < first <= 1
    assert synthesis == SYNTHESIS_SECONDS
    synthesized_after_the_deadline(governed, model_calls=2)


def test_a_model_call_cut_off_at_a_synthesizing_deadline_is_followed_by_the_pass() -> None:
    guard = Guard(timeout(seconds=1, on_limit="synthesize"))
    timeouts = Timeouts()
    with ScriptedServer([*hung_script(), reply("Best guess: 42.")]) as server:
        agent = create_agent(
            chat_model(server),
            tools=[Searches().tool],
            middleware=[HaltwiseMiddleware(guard), timeouts],
        )
        deadline = time.monotonic() + 1
        governed = govern(agent, guard).run_sync(QUESTION)
        ended = time.monotonic()
        requests = server.requests
    assert ended < deadline + PROMPTLY  # the hung call was cut off at the deadline
    assert len(requests) == 3
    assert tool_names(requests[2]) == []  # the pass
    assert timeouts.sent[-1] == SYNTHESIS_SECONDS
    synthesized_after_the_deadline(governed, model_calls=3)  # the cut-off call counts


def test_an_async_runs_synthesis_pass_has_a_timeout_of_its_own() -> None:
    """``run`` sends its calls with no timeout (its task is cancelled at the deadline), but
    once the run has stopped nothing cancels it: the pass is bounded by itself."""
    guard = Guard(max_tool_calls(1, on_limit="synthesize") | timeout(minutes=5))
    timeouts = Timeouts()

    async def main() -> Governed[dict[str, Any]]:
        script = [searching("q1", "q2"), reply("Best guess: 42.")]
        with ScriptedServer(script) as server:
            agent = create_agent(
                chat_model(server),
                tools=[Searches().tool],
                middleware=[HaltwiseMiddleware(guard), timeouts],
            )
            return await govern(agent, guard).run(QUESTION)

    governed = asyncio.run(main())
    assert governed.output == "Best guess: 42."
    assert governed.outcome.reason == "tool_call_limit"
    assert timeouts.sent == [None, SYNTHESIS_SECONDS]


# ------------------------------------------------------------------------------------------
# The example in docs/adapters/langchain.md

EXAMPLE = ROOT / "src" / "haltwise" / "examples" / "langchain_agent.py"
DOCS = ROOT / "docs" / "adapters" / "langchain.md"


def test_the_example_runs(capsys: pytest.CaptureFixture[str]) -> None:
    spec = importlib.util.spec_from_file_location("langchain_agent_example", EXAMPLE)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    governed = module.main()
    assert governed.outcome.reason == "tool_call_limit"
    assert governed.outcome.status is Status.COMPLETED_WITH_WARNINGS
    printed = capsys.readouterr().out
    assert printed.rstrip("\n") + "\n```" in DOCS.read_text(encoding="utf-8")


def test_the_docs_show_the_example_verbatim() -> None:
    code = EXAMPLE.read_text(encoding="utf-8")
    assert f"```python\n{code}```" in DOCS.read_text(encoding="utf-8")
