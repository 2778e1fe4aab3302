"""The Claude Agent SDK under haltwise, end to end: the real SDK and its bundled Claude Code CLI
against the scripted Anthropic server, over real HTTP, with no network and no key.

Each test starts the CLI (about half a second). What the server received is the proof that a
refused request was never sent; the tools are in-process SDK MCP tools, so what ran is known.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import importlib.util
import json
import os
import socket
import threading
import time
from collections.abc import Awaitable, Callable, Iterator
from decimal import Decimal
from pathlib import Path
from typing import Any, TypeVar

import httpx
import pytest

pytest.importorskip("claude_agent_sdk")

from claude_agent_sdk import (
    AgentDefinition,
    ClaudeAgentOptions,
    ClaudeSDKClient,
    CLINotFoundError,
    HookContext,
    HookInput,
    HookJSONOutput,
    HookMatcher,
    ResultMessage,
    ToolAnnotations,
    create_sdk_mcp_server,
    tool,
)

from haltwise import (
    Answer,
    Ask,
    Choice,
    ConfigurationError,
    Event,
    Guard,
    InvalidValueError,
    Outcome,
    Status,
    Usage,
    max_cost,
    max_model_calls,
    max_tool_calls,
    max_turns,
    timeout,
)
from haltwise.adapters import Governed
from haltwise.adapters.claude_agent_sdk import GovernedClaude, govern
from haltwise.testing import ErrorReply, Reply, ScriptEntry, error, reply, tool_call
from haltwise.testing.anthropic_server import AnthropicServer

MODEL = "claude-sonnet-4-5"
LOOKUP = "mcp__kb__lookup"
FINAL = reply("The answer is 42.", usage=(200, 8))
#: What any one test may take: a hang fails the test instead of the suite.
TEST_SECONDS = 30.0
#: How soon after its deadline (or its cancel) a run must have ended.
PROMPTLY = 1.0

T = TypeVar("T")


def looks(*words: str, usage: tuple[int, int] = (100, 10), text: str | None = None) -> Reply:
    """A reply that looks each word up, all in one response."""
    return reply(
        text, tool_calls=[tool_call(LOOKUP, {"word": word}) for word in words], usage=usage
    )


class Agent:
    """A scripted server, an in-process ``lookup`` tool, and the options that tie them to the
    CLI; ``log`` interleaves what the governor was told with what the tool did."""

    def __init__(self, server: AnthropicServer, home: Path) -> None:
        self.server = server
        self.home = home
        self.ran: list[str] = []
        self.log: list[tuple[str, str]] = []
        self.tool_seconds = 0.0
        #: The ports this process listened on while the tool ran.
        self.listening: set[int] = set()

        @tool(
            "lookup",
            "Look a word up",
            {"word": str},
            annotations=ToolAnnotations(readOnlyHint=True),
        )
        async def lookup(arguments: dict[str, Any]) -> dict[str, Any]:
            word = str(arguments["word"])
            self.ran.append(word)
            self.log.append(("ran", word))
            self.listening |= listening_ports()
            await asyncio.sleep(self.tool_seconds)
            return {"content": [{"type": "text", "text": f"{word} means 42"}]}

        self.tools = create_sdk_mcp_server("kb", tools=[lookup])

    def options(self, **changes: Any) -> ClaudeAgentOptions:
        settings: dict[str, Any] = {
            "env": self.server.claude_code_env(self.home),
            "cwd": str(self.home),
            "model": MODEL,
            "setting_sources": [],
            "tools": [],
            "mcp_servers": {"kb": self.tools},
            "allowed_tools": [LOOKUP],
        }
        settings.update(changes)
        return ClaudeAgentOptions(**settings)

    def watch(self, guard: Guard) -> Guard:
        """Record each event the governor handles (its type and call id) in ``log``."""
        governor = guard.governor
        handle = governor.handle

        def recording(event: Event) -> Any:
            self.log.append((type(event).__name__, getattr(event, "call_id", "")))
            return handle(event)

        governor.handle = recording
        return guard

    def requests(self) -> list[dict[str, Any]]:
        return self.server.requests

    def endpoint_seen(self) -> bool:
        """Whether a port other than the scripted server's listened while the tool ran."""
        server_port = int(self.server.base_url.rsplit(":", 1)[1])
        return bool(self.listening - {server_port})

    def last_message(self, request: int) -> str:
        """The last message of request ``request`` (0-based), as JSON text."""
        return json.dumps(self.requests()[request]["messages"][-1])


@pytest.fixture
def agent_for(tmp_path: Path) -> Iterator[Callable[[list[ScriptEntry]], Agent]]:
    servers: list[AnthropicServer] = []

    def make(script: list[ScriptEntry]) -> Agent:
        server = AnthropicServer(script).start()
        servers.append(server)
        home = tmp_path / f"home{len(servers)}"
        home.mkdir()
        return Agent(server, home)

    yield make
    for server in servers:
        server.close()
        assert server.unknown_requests == []  # the CLI called nothing this server does not know


def run(coroutine: Awaitable[T]) -> T:
    async def bounded() -> T:
        return await asyncio.wait_for(coroutine, TEST_SECONDS)

    return asyncio.run(bounded())


def ask_with(*answers: Answer | Choice | None) -> tuple[Callable[[Ask], Any], list[Ask]]:
    """A prompter giving ``answers`` in turn, and the questions it was asked."""
    asked: list[Ask] = []
    given = iter(answers)

    async def prompter(ask: Ask) -> Answer | Choice | None:
        asked.append(ask)
        await asyncio.sleep(0)  # asked in place, from inside the CLI's hook
        return next(given)

    return prompter, asked


def calls_before_runs(log: list[tuple[str, str]], ran: str) -> list[str]:
    """The call ids reported before the tool first ran on ``ran``."""
    end = log.index(("ran", ran))
    return [call for kind, call in log[:end] if kind == "ToolCall"]


# A whole run


def test_a_run_completes_with_the_clis_answer_and_its_usage(
    agent_for: Callable[[list[ScriptEntry]], Agent],
) -> None:
    agent = agent_for([looks("a", usage=(100, 20)), looks("b", usage=(150, 10)), FINAL])
    governed = govern(agent.options(), Guard(max_turns(10)))

    result = run(governed.run("What do a and b mean?"))

    outcome = result.outcome
    assert outcome.status is Status.COMPLETED
    assert result.output == "The answer is 42."
    assert isinstance(result.result, ResultMessage)
    assert result.result.result == "The answer is 42."
    usage = outcome.usage
    assert (usage.turns, usage.model_calls, usage.tool_calls) == (3, 3, 2)
    assert (usage.input_tokens, usage.output_tokens) == (450, 38)
    # haltwise's price of the API's usage is the CLI's own cost, to the cent and beyond.
    assert result.result.total_cost_usd is not None
    assert usage.cost == Decimal(str(result.result.total_cost_usd)).quantize(Decimal("1e-9"))
    assert agent.ran == ["a", "b"]
    assert len(agent.requests()) == 3
    assert agent.requests()[0]["max_tokens"] == 32_000  # what each request was checked with


def test_cache_reads_and_writes_come_from_the_apis_usage(
    agent_for: Callable[[list[ScriptEntry]], Agent],
) -> None:
    from haltwise.testing.anthropic_server import AnthropicUsage

    usage = AnthropicUsage(1_000, 50, cached_tokens=600, cache_write_tokens=300)
    agent = agent_for([reply("Cached.", usage=usage)])

    result = run(govern(agent.options(), Guard(max_turns(5))).run("Hello?"))

    spent = result.outcome.usage
    assert (spent.input_tokens, spent.cache_read_tokens, spent.cache_write_tokens) == (
        1_000,
        600,
        300,
    )
    assert spent.output_tokens == 50


# Each limit means exactly N


def test_max_model_calls_lets_exactly_n_requests_reach_the_server(
    agent_for: Callable[[list[ScriptEntry]], Agent],
) -> None:
    agent = agent_for([looks("a"), looks("b"), looks("c"), looks("d"), FINAL])

    result = run(govern(agent.options(), Guard(max_model_calls(3))).run("Look it all up."))

    assert len(agent.requests()) == 3  # the 4th was refused before the CLI sent it
    assert result.outcome.status is Status.ABANDONED
    assert result.outcome.reason == "model_call_limit"
    assert result.outcome.usage.model_calls == 3
    assert agent.ran == ["a", "b", "c"]
    assert isinstance(result.result, ResultMessage)  # the CLI ended its run cleanly


def test_max_turns_lets_exactly_n_turns_run(
    agent_for: Callable[[list[ScriptEntry]], Agent],
) -> None:
    agent = agent_for([looks("a"), looks("b"), looks("c"), looks("d"), FINAL])

    result = run(govern(agent.options(), Guard(max_turns(3))).run("Look it all up."))

    assert len(agent.requests()) == 3
    assert result.outcome.reason == "turn_limit"
    assert result.outcome.usage.turns == 3
    assert agent.ran == ["a", "b", "c"]  # the third turn's tool calls ran too


def test_max_tool_calls_counts_parallel_calls_before_any_of_them_runs(
    agent_for: Callable[[list[ScriptEntry]], Agent],
) -> None:
    agent = agent_for([looks("a", "b"), looks("c", "d", "e"), FINAL])
    guard = agent.watch(Guard(max_tool_calls(3)))

    result = run(govern(agent.options(), guard).run("Look it all up."))

    assert agent.ran == ["a", "b", "c"]  # exactly three ran; the refused ones never did
    assert result.outcome.reason == "tool_call_limit"
    assert result.outcome.usage.tool_calls == 3
    assert len(agent.requests()) == 2
    # Every call of a response is reported before any of them runs.
    assert calls_before_runs(agent.log, "a") == ["toolu_scripted_1", "toolu_scripted_2"]
    assert calls_before_runs(agent.log, "c")[-3:] == [
        "toolu_scripted_2",
        "toolu_scripted_3",
        "toolu_scripted_4",
    ]


# Decisions, carried out


def test_a_refused_call_is_a_tool_error_the_model_sees_and_the_run_goes_on(
    agent_for: Callable[[list[ScriptEntry]], Agent],
) -> None:
    agent = agent_for([looks("a"), looks("b"), FINAL])

    result = run(govern(agent.options(), Guard(max_tool_calls(1, tool=LOOKUP))).run("Look up."))

    assert agent.ran == ["a"]
    assert result.outcome.status is Status.COMPLETED
    assert result.output == "The answer is 42."
    refused = json.loads(agent.last_message(2))["content"][0]
    assert refused["is_error"] is True
    assert "max_tool_calls(1, tool='mcp__kb__lookup')" in refused["content"]


def test_a_warning_reaches_the_model_in_the_next_request(
    agent_for: Callable[[list[ScriptEntry]], Agent],
) -> None:
    agent = agent_for([looks("a"), looks("b"), FINAL])

    result = run(govern(agent.options(), Guard(max_turns(4, warn_at=0.5))).run("Look up."))

    assert result.outcome.status is Status.COMPLETED
    assert "Turn 2 of 4: 2 turns left; wrap up soon." in agent.last_message(1)
    assert "turns left" not in agent.last_message(2)  # once per round


def test_a_synthesize_stop_answers_with_one_tools_free_call_through_the_sdk(
    agent_for: Callable[[list[ScriptEntry]], Agent],
) -> None:
    agent = agent_for([looks("a"), reply("From the evidence: 42.", usage=(300, 12))])

    result = run(
        govern(agent.options(), Guard(max_turns(1, on_limit="synthesize"))).run("What is a?")
    )

    outcome = result.outcome
    assert outcome.status is Status.COMPLETED_WITH_WARNINGS
    assert outcome.reason == "turn_limit"
    assert result.output == "From the evidence: 42."
    assert isinstance(result.result, ResultMessage)
    assert result.result.result == "From the evidence: 42."  # the SDK's own final answer
    synthesis = agent.requests()[1]
    assert synthesis["tools"] == []
    assert 'lookup({\\"word\\": \\"a\\"}) -> a means 42' in json.dumps(synthesis["messages"])
    assert outcome.usage.model_calls == 2  # the pass is a model call, counted
    assert outcome.usage.input_tokens == 400
    assert agent.ran == ["a"]


def test_a_synthesize_stop_at_a_tool_call_lets_the_admitted_calls_run_first(
    agent_for: Callable[[list[ScriptEntry]], Agent],
) -> None:
    agent = agent_for([looks("a", "b", "c"), reply("a and b mean 42; c unchecked.", usage=(90, 9))])
    guard = Guard(max_tool_calls(2, on_limit="synthesize"))

    result = run(govern(agent.options(), guard).run("What do a, b and c mean?"))

    assert agent.ran == ["a", "b"]
    assert result.outcome.reason == "tool_call_limit"
    assert result.output == "a and b mean 42; c unchecked."
    gathered = json.dumps(agent.requests()[1]["messages"])
    assert "a means 42" in gathered and "b means 42" in gathered  # what ran before the pass
    assert agent.requests()[1]["tools"] == []


def test_a_synthesis_pass_that_calls_a_tool_instead_leaves_the_stop_with_its_usage(
    agent_for: Callable[[list[ScriptEntry]], Agent],
) -> None:
    agent = agent_for([looks(str(index), usage=(1000, 100)) for index in range(4)])
    guard = Guard(max_tool_calls(2, on_limit="synthesize"))

    result = run(govern(agent.options(), guard).run("Look them up."))

    assert agent.ran == ["0", "1"]
    assert len(agent.requests()) == 4  # the pass is the fourth request, and the last
    outcome = result.outcome
    assert outcome.status is Status.ABANDONED
    assert outcome.reason == "tool_call_limit"
    assert result.output is None
    # The pass's request counts in the usage returned, as it does in the governor's.
    assert outcome.usage.model_calls == 4
    assert outcome.usage.input_tokens == 4000
    assert counts(outcome.usage) == counts(guard.governor.usage)
    # What the pass reported (the CLI ends it in error, the model having called a tool it does
    # not have, after a result that says what it spent), not its worst case (its max_tokens).
    assert outcome.usage.output_tokens == 400
    # The governor's outcome and the checkpoint saved at the stop count the pass too.
    assert guard.governor.outcome == outcome
    assert outcome.checkpoint is not None
    saved = guard.governor.ledger.load_checkpoint(outcome.checkpoint)["run"]
    assert (saved["model_calls"], saved["output_tokens"]) == (4, 400)


def counts(usage: Usage) -> Usage:
    """The counts of ``usage``, its elapsed time left out (it goes on after the run)."""
    return dataclasses.replace(usage, elapsed=0.0)


def test_dollars_are_refused_before_the_request_is_sent(
    agent_for: Callable[[list[ScriptEntry]], Agent],
) -> None:
    # claude-sonnet-4-5: $3 in, $15 out per million. The first response costs $0.0045; the
    # second request's worst case (1,000 in, max_tokens 1,000) is $0.018: over $0.02 in all.
    agent = agent_for([looks("a", usage=(1_000, 100)), FINAL])
    governed = govern(agent.options(), Guard(max_cost("0.02")), max_tokens=1_000)

    result = run(governed.run("Look up."))

    assert len(agent.requests()) == 1
    assert agent.requests()[0]["max_tokens"] == 1_000  # the worst case is what the CLI sends
    assert result.outcome.reason == "cost_limit"
    assert "would be exceeded" in result.outcome.message
    assert result.outcome.usage.cost == Decimal("0.0045")


# Ask: the prompter is asked in place, from the CLI's hook


def test_ask_continue_resets_the_round(agent_for: Callable[[list[ScriptEntry]], Agent]) -> None:
    agent = agent_for([looks("a"), looks("b"), FINAL])
    prompter, asked = ask_with(Choice.CONTINUE)

    result = run(
        govern(agent.options(), Guard(max_turns(2, on_limit="ask"), prompter=prompter)).run("Go.")
    )

    assert result.outcome.status is Status.COMPLETED
    assert [ask.question for ask in asked] == ["You've used 2 turns. Continue?"]
    assert len(agent.requests()) == 3


def test_ask_extend_raises_the_limit(agent_for: Callable[[list[ScriptEntry]], Agent]) -> None:
    agent = agent_for([looks("a"), looks("b"), looks("c"), FINAL])
    prompter, asked = ask_with(Answer(Choice.EXTEND, 1), Choice.ABORT)

    result = run(
        govern(agent.options(), Guard(max_turns(2, on_limit="ask"), prompter=prompter)).run("Go.")
    )

    assert len(asked) == 2  # at turn 3, and at turn 4 once the extension was used
    assert result.outcome.reason == "declined"
    assert len(agent.requests()) == 3
    assert result.outcome.usage.turns == 3


def test_ask_wrap_up_writes_the_answer(agent_for: Callable[[list[ScriptEntry]], Agent]) -> None:
    agent = agent_for([looks("a"), reply("Wrapped up: 42.", usage=(120, 6))])
    prompter, _ = ask_with(Choice.WRAP_UP)

    result = run(
        govern(agent.options(), Guard(max_turns(1, on_limit="ask"), prompter=prompter)).run("Go.")
    )

    assert result.outcome.status is Status.COMPLETED_WITH_WARNINGS
    assert result.output == "Wrapped up: 42."
    assert agent.requests()[1]["tools"] == []


@pytest.mark.parametrize(("answer", "reason"), [(Choice.ABORT, "declined"), (None, "turn_limit")])
def test_ask_abort_or_no_answer_stops_the_run(
    agent_for: Callable[[list[ScriptEntry]], Agent], answer: Choice | None, reason: str
) -> None:
    agent = agent_for([looks("a"), FINAL])
    prompter, asked = ask_with(answer)

    result = run(
        govern(agent.options(), Guard(max_turns(1, on_limit="ask"), prompter=prompter)).run("Go.")
    )

    assert len(asked) == 1
    assert result.outcome.status is Status.ABANDONED
    assert result.outcome.reason == reason
    assert len(agent.requests()) == 1


# Sub-agents


def routed(
    main: list[Reply], sub: list[Reply] | list[ErrorReply]
) -> Callable[[dict[str, Any]], Reply | ErrorReply]:
    """One script per agent: a sub-agent's requests are the ones without the Agent tool."""
    queues: dict[bool, Iterator[Reply | ErrorReply]] = {True: iter(main), False: iter(sub)}

    def answer(body: dict[str, Any]) -> Reply | ErrorReply:
        is_main = any(entry.get("name") == "Agent" for entry in body.get("tools", []))
        return next(queues[is_main])

    return answer


def delegate(prompt: str, *, background: bool = False) -> Reply:
    arguments = {
        "description": "look up",
        "prompt": prompt,
        "subagent_type": "helper",
        "run_in_background": background,
    }
    return reply("Delegating.", tool_calls=[tool_call("Agent", arguments)], usage=(100, 20))


def sub_agent_options(agent: Agent) -> ClaudeAgentOptions:
    helper = AgentDefinition(
        description="Looks words up", prompt="You look words up.", tools=[LOOKUP], model="inherit"
    )
    return agent.options(
        tools=["Agent"], allowed_tools=[LOOKUP, "Agent"], agents={"helper": helper}
    )


def test_a_sub_agents_calls_count_against_the_parents_limits(
    agent_for: Callable[[list[ScriptEntry]], Agent],
) -> None:
    sub = [looks(word, usage=(50, 5)) for word in "abcdef"]
    answer = routed([delegate("Look everything up."), FINAL], sub)
    agent = agent_for([answer] * 8)

    result = run(govern(sub_agent_options(agent), Guard(max_model_calls(3))).run("Go."))

    # The parent's request, then the sub-agent's first two: its third is refused, and the
    # parent sends nothing more.
    assert len(agent.requests()) == 3
    assert result.outcome.reason == "model_call_limit"
    assert agent.ran == ["a", "b"]
    assert result.outcome.usage.tool_calls == 3  # the Agent call and the sub-agent's two


def test_a_sub_agents_tool_calls_are_refused_by_the_parents_tool_budget(
    agent_for: Callable[[list[ScriptEntry]], Agent],
) -> None:
    sub = [looks("a", usage=(50, 5)), looks("b", usage=(60, 5)), reply("sub: done", usage=(70, 6))]
    answer = routed([delegate("Look a and b up."), FINAL], sub)
    agent = agent_for([answer] * 5)

    result = run(govern(sub_agent_options(agent), Guard(max_tool_calls(2))).run("Go."))

    assert agent.ran == ["a"]  # the Agent call was the first of the two
    assert result.outcome.reason == "tool_call_limit"


def test_a_sub_agents_usage_is_counted_in_full(
    agent_for: Callable[[list[ScriptEntry]], Agent],
) -> None:
    sub = [looks("a", usage=(50, 5)), reply("sub: a means 42", usage=(70, 6))]
    answer = routed([delegate("Look a up."), FINAL], sub)
    agent = agent_for([answer] * 4)

    result = run(govern(sub_agent_options(agent), Guard(max_turns(5))).run("Go."))

    assert result.outcome.status is Status.COMPLETED
    usage = result.outcome.usage
    assert (usage.model_calls, usage.turns, usage.tool_calls) == (4, 2, 2)
    assert (usage.input_tokens, usage.output_tokens) == (100 + 50 + 70 + 200, 20 + 5 + 6 + 8)
    assert isinstance(result.result, ResultMessage) and result.result.total_cost_usd is not None
    assert usage.cost == Decimal(str(result.result.total_cost_usd)).quantize(Decimal("1e-9"))


def test_a_background_sub_agent_is_governed_until_the_cli_has_told_the_parent(
    agent_for: Callable[[list[ScriptEntry]], Agent],
) -> None:
    sub = [looks("a", usage=(50, 5)), reply("sub: a means 42", usage=(70, 6))]
    main = [delegate("Look a up.", background=True), reply("Waiting.", usage=(120, 5)), FINAL]
    agent = agent_for([routed(main, sub)] * 5)

    result = run(govern(sub_agent_options(agent), Guard(max_turns(5))).run("Go."))

    # The parent's turn ends while the sub-agent works; the CLI then starts a turn of its own
    # to give the parent the sub-agent's answer, and the run ends after it.
    assert result.output == "The answer is 42."
    assert result.outcome.usage.model_calls == len(agent.requests()) == 5
    assert result.outcome.usage.turns == 3


def test_a_background_sub_agent_cannot_overspend(
    agent_for: Callable[[list[ScriptEntry]], Agent],
) -> None:
    sub = [looks(word, usage=(50, 5)) for word in "abcdef"]
    main = [delegate("Look everything up.", background=True), reply("Waiting.", usage=(120, 5))]
    agent = agent_for([routed([*main, FINAL], sub)] * 8)

    result = run(govern(sub_agent_options(agent), Guard(max_model_calls(3))).run("Go."))

    # Whichever loop asks for a fourth is refused at the endpoint: the three counted are the
    # three the server got, and nothing more goes, the sub-agent's news included.
    assert len(agent.requests()) == 3
    assert result.outcome.reason == "model_call_limit"
    assert result.outcome.usage.model_calls == 3


def test_a_background_sub_agent_that_ends_in_an_api_error_cannot_wake_the_parent_past_the_limit(
    agent_for: Callable[[list[ScriptEntry]], Agent],
) -> None:
    # The sub-agent's request fails (the CLI sends it three times, then gives up, running no
    # SubagentStop hook) while the parent's second request is in flight. Its news needs a sixth
    # request, sent with no hook before it: the endpoint refuses it.
    sub = [error(400, "the sub-agent's request failed")] * 3
    waiting = reply("Waiting.", usage=(120, 5), delay=1.0)
    main = [delegate("Look a up.", background=True), waiting, FINAL]
    agent = agent_for([routed(main, sub)] * 7)

    result = run(govern(sub_agent_options(agent), Guard(max_model_calls(5))).run("Go."))

    assert len(agent.requests()) == 5  # the parent's two, the sub-agent's three
    assert result.outcome.reason == "model_call_limit"
    assert result.outcome.usage.model_calls == 5
    assert result.output == "Waiting."


def test_a_background_sub_agent_that_ends_on_its_own_cannot_wake_the_parent_past_the_limit(
    agent_for: Callable[[list[ScriptEntry]], Agent],
) -> None:
    # The sub-agent answers while the parent's second request is in flight: its news would need
    # a fourth request, which the CLI sends with no hook before it once that turn ends.
    sub = [reply("sub: done", usage=(70, 6), delay=0.5)]
    waiting = reply("Waiting.", usage=(120, 5), delay=1.0)
    main = [delegate("Look a up.", background=True), waiting, FINAL]
    agent = agent_for([routed(main, sub)] * 4)

    result = run(govern(sub_agent_options(agent), Guard(max_model_calls(3))).run("Go."))

    assert len(agent.requests()) == 3  # the parent's two and the sub-agent's one
    assert result.outcome.reason == "model_call_limit"
    assert result.outcome.usage.model_calls == 3


# Resume, cancel, deadlines


def test_a_resumed_session_keeps_the_counts(
    agent_for: Callable[[list[ScriptEntry]], Agent],
) -> None:
    agent = agent_for([looks("a"), looks("b"), looks("c"), FINAL])
    guard = Guard(max_turns(2))
    governed = govern(agent.options(), guard)
    first = run(governed.run("Look it all up."))
    assert first.outcome.reason == "turn_limit"

    guard.governor.set_limit(max_turns(3))  # the human allows one more turn
    second = run(governed.run("Go on.", resume=first))  # its counts, and the CLI's session

    assert second.outcome.reason == "turn_limit"
    assert second.outcome.usage.turns == 3  # two before, one now
    assert len(agent.requests()) == 3
    resumed = json.dumps(agent.requests()[2]["messages"])
    assert "a means 42" in resumed and "Go on." in resumed  # the CLI's session went on


def test_a_synthesized_run_resumes_its_own_session(
    agent_for: Callable[[list[ScriptEntry]], Agent],
) -> None:
    agent = agent_for([looks("a"), reply("Wrapped: 42.", usage=(50, 5)), FINAL])
    guard = Guard(max_turns(1, on_limit="synthesize"))
    governed = govern(agent.options(), guard)
    first = run(governed.run("Look it up."))
    assert first.output == "Wrapped: 42."

    guard.governor.set_limit(max_turns(3))
    second = run(governed.run("Now finish.", resume=first))

    assert second.output == "The answer is 42."
    assert "a means 42" in json.dumps(agent.requests()[2]["messages"])  # the agent's session


def test_a_run_resumed_in_a_new_process_keeps_the_counts(
    agent_for: Callable[[list[ScriptEntry]], Agent],
) -> None:
    agent = agent_for([looks("a"), looks("b"), FINAL])
    first_guard = Guard(max_model_calls(1))
    first = run(govern(agent.options(), first_guard).run("Look it all up."))
    assert isinstance(first.result, ResultMessage)
    saved = first_guard.governor.checkpoint()  # JSON-ready: what a new process would load

    later = Guard(max_model_calls(2))
    second = run(
        govern(agent.options(), later).run(
            "Go on.", resume=saved, session_id=first.result.session_id
        )
    )

    assert second.outcome.reason == "model_call_limit"
    assert second.outcome.usage.model_calls == 2
    assert (second.outcome.usage.input_tokens, second.outcome.usage.output_tokens) == (200, 20)
    assert len(agent.requests()) == 2


def listening_ports() -> set[int]:
    """The TCP ports this process listens on (from ``/proc``: no port is guessed)."""
    mine = set()
    for fd in Path("/proc/self/fd").iterdir():
        with contextlib.suppress(OSError):
            target = os.readlink(fd)
            if target.startswith("socket:["):
                mine.add(target[8:-1])
    ports = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        for line in Path(table).read_text().splitlines()[1:]:
            fields = line.split()
            if fields[3] == "0A" and fields[9] in mine:  # 0A: LISTEN
                ports.add(int(fields[1].rsplit(":", 1)[1], 16))
    return ports


def test_cancel_from_another_thread_stops_the_run(
    agent_for: Callable[[list[ScriptEntry]], Agent],
) -> None:
    agent = agent_for([looks("a"), looks("b"), FINAL])
    agent.tool_seconds = 30.0  # the tool hangs: only the cancel ends the run
    guard = Guard(max_turns(10))
    cancelled_at: list[float] = []

    def cancel_once_the_tool_runs() -> None:
        while not agent.ran:
            time.sleep(0.01)
        cancelled_at.append(time.monotonic())
        guard.governor.cancel("the user pressed stop")

    threading.Thread(target=cancel_once_the_tool_runs, daemon=True).start()
    before = listening_ports()
    result = run(govern(agent.options(), guard).run("Look up."))
    ended = time.monotonic()

    assert result.outcome.status is Status.CANCELLED
    assert ended - cancelled_at[0] < PROMPTLY + 1.0  # the CLI is told, then let go
    assert len(agent.requests()) == 1
    assert agent.endpoint_seen()  # the run listened for the CLI's requests...
    assert listening_ports() <= before  # ...and no more


def test_a_hung_reply_ends_the_run_timed_out_at_the_deadline(
    agent_for: Callable[[list[ScriptEntry]], Agent],
) -> None:
    agent = agent_for([reply("Too late.", delay=30)])
    # Time enough for the CLI to start and send its request (under half a second, unloaded).
    guard = Guard(timeout(seconds=3))
    governed = govern(agent.options(), guard)
    outcomes: list[Outcome] = []

    async def timed() -> float:
        started = time.monotonic()
        result = await governed.run("Hello?")
        outcomes.append(result.outcome)
        return time.monotonic() - started

    took = run(timed())

    assert outcomes[0].status is Status.TIMED_OUT
    assert outcomes[0].reason == "time_limit"
    assert 3 <= took < 3 + PROMPTLY + 1.0  # the CLI is told, then let go
    assert len(agent.requests()) == 1
    assert outcomes[0].usage.model_calls == 1  # sent and never answered: counted all the same


def test_a_retried_request_counts_and_a_retry_past_the_limit_is_not_sent(
    agent_for: Callable[[list[ScriptEntry]], Agent],
) -> None:
    agent = agent_for([error(500, "overloaded, try again"), FINAL, FINAL])
    retried = run(govern(agent.options(), Guard(max_turns(5))).run("Hello?"))
    assert retried.outcome.status is Status.COMPLETED
    assert retried.outcome.usage.model_calls == 2  # the failed attempt and its retry
    assert len(agent.requests()) == 2

    other = agent_for([error(500, "overloaded, try again"), FINAL])
    refused = run(govern(other.options(), Guard(max_model_calls(1))).run("Hello?"))
    assert refused.outcome.reason == "model_call_limit"
    assert len(other.requests()) == 1  # the CLI was stopped before its retry


# Wiring


def test_the_options_own_hooks_still_run(agent_for: Callable[[list[ScriptEntry]], Agent]) -> None:
    agent = agent_for([looks("a"), FINAL])
    seen: list[str] = []

    async def own(data: HookInput, tool_use_id: str | None, context: HookContext) -> HookJSONOutput:
        seen.append(str(data.get("tool_name")))
        return {}

    options = agent.options(hooks={"PreToolUse": [HookMatcher(hooks=[own])]})
    result = run(govern(options, Guard(max_turns(5))).run("Look up."))

    assert result.outcome.status is Status.COMPLETED
    assert seen == [LOOKUP]


def test_a_client_is_governed_run_after_run_in_one_session(
    agent_for: Callable[[list[ScriptEntry]], Agent],
) -> None:
    agent = agent_for([looks("a"), reply("First.", usage=(10, 2)), reply("Second.", usage=(10, 2))])

    async def two_runs() -> list[Governed[ResultMessage]]:
        client = ClaudeSDKClient(agent.options())
        governed = govern(client, Guard(max_turns(5)))
        try:
            return [await governed.run("One?"), await governed.run("Two?")]
        finally:
            await client.disconnect()

    first, second = run(two_runs())

    assert (first.output, second.output) == ("First.", "Second.")
    assert (first.outcome.usage.turns, second.outcome.usage.turns) == (2, 1)  # a run per prompt
    # The CLI's usage totals grow over the session; each run counts only its own.
    assert (second.outcome.usage.input_tokens, second.outcome.usage.output_tokens) == (10, 2)
    assert "One?" in json.dumps(agent.requests()[2]["messages"])  # the same CLI session


def test_a_connected_client_cannot_be_governed(
    agent_for: Callable[[list[ScriptEntry]], Agent],
) -> None:
    agent = agent_for([FINAL])

    async def connected() -> None:
        client = ClaudeSDKClient(agent.options())
        await client.connect()
        try:
            with pytest.raises(ConfigurationError, match="before connecting it"):
                await govern(client, Guard(max_turns(1))).run("Hi?")
        finally:
            await client.disconnect()

    run(connected())


def test_an_unpriced_model_under_a_cost_limit_is_a_configuration_error(
    agent_for: Callable[[list[ScriptEntry]], Agent],
) -> None:
    agent = agent_for([FINAL])
    governed = govern(agent.options(model="claude-unknown-model"), Guard(max_cost("1.00")))

    before = listening_ports()
    with pytest.raises(ConfigurationError, match="claude-unknown-model"):
        run(governed.run("Hi?"))
    assert agent.requests() == []
    assert listening_ports() <= before  # the run's endpoint closed with it


def test_a_cli_that_cannot_start_leaves_nothing_listening(
    agent_for: Callable[[list[ScriptEntry]], Agent],
) -> None:
    agent = agent_for([FINAL])
    governed = govern(agent.options(cli_path=str(agent.home / "no-such-cli")), Guard(max_turns(2)))
    before = listening_ports()

    with pytest.raises(CLINotFoundError):
        run(governed.run("Hi?"))

    assert listening_ports() <= before


# The example and its docs page

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "src" / "haltwise" / "examples" / "claude_agent_sdk_agent.py"
DOCS = ROOT / "docs" / "adapters" / "claude-agent-sdk.md"


def test_the_example_runs(capsys: pytest.CaptureFixture[str]) -> None:
    spec = importlib.util.spec_from_file_location("claude_agent_sdk_agent_example", EXAMPLE)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)

    result = module.main()

    assert result.outcome.status is Status.COMPLETED_WITH_WARNINGS
    assert result.outcome.reason == "tool_call_limit"
    assert result.output == result.result.result
    assert (result.usage.model_calls, result.usage.tool_calls) == (2, 2)
    printed = capsys.readouterr().out.rstrip("\n") + "\n```"
    assert printed in DOCS.read_text(encoding="utf-8")  # the docs show what it prints


def test_the_docs_show_the_example_verbatim() -> None:
    code = EXAMPLE.read_text(encoding="utf-8")
    assert f"```python\n{code}```" in DOCS.read_text(encoding="utf-8")


def test_govern_takes_options_or_a_client() -> None:
    governed = govern(ClaudeAgentOptions(model=MODEL), Guard(max_turns(3)))
    assert isinstance(governed, GovernedClaude)
    assert repr(governed) == "govern(ClaudeAgentOptions, Guard(max_turns(3)))"
    options = governed.governed_options()
    assert options.include_partial_messages is True
    assert options.env["CLAUDE_CODE_MAX_OUTPUT_TOKENS"] == "32000"
    assert set(options.hooks or {}) >= {"UserPromptSubmit", "PreToolUse", "PostToolBatch"}


@pytest.mark.parametrize(
    ("given", "refusal"),
    [
        (
            {"agent": "not options"},
            "govern(agent)='not options' is not valid: expected ClaudeAgentOptions or a "
            "ClaudeSDKClient not connected yet",
        ),
        (
            {"max_tokens": 0},
            "govern(max_tokens)=0 is not valid: expected a positive number of tokens, e.g. "
            "8192, or None",
        ),
        ({"max_tokens": True}, "govern(max_tokens)=True is not valid: expected a positive"),
        ({"max_tokens": "8k"}, "govern(max_tokens)='8k' is not valid: expected a positive"),
    ],
)
def test_govern_refuses_an_argument_of_the_wrong_kind_at_the_call(
    given: dict[str, Any], refusal: str
) -> None:
    """(What is not a guard: test_one_meaning.py.)"""
    arguments: dict[str, Any] = {
        "agent": ClaudeAgentOptions(model=MODEL),
        "guard": Guard(max_turns(3)),
        **given,
    }
    with pytest.raises(InvalidValueError) as raised:
        govern(**arguments)
    assert str(raised.value).startswith(refusal)


@pytest.mark.parametrize(
    ("given", "refusal"),
    [
        (
            {"on_message": "print"},
            "run(on_message)='print' is not valid: expected a function f(message), or None",
        ),
        ({"resume": 5}, "run(resume)=5 is not valid: expected True or a Governed"),
    ],
)
def test_run_refuses_an_argument_of_the_wrong_kind_before_the_cli_starts(
    given: dict[str, Any], refusal: str
) -> None:
    governed = govern(ClaudeAgentOptions(model=MODEL), Guard(max_turns(3)))
    with pytest.raises(InvalidValueError) as raised:
        asyncio.run(governed.run("What is a?", **given))
    assert str(raised.value).startswith(refusal)
    assert governed.guard.governor.outcome is None  # no run was started


# The Messages endpoint itself, with httpx as the client


class Upstream:
    """A Messages API that streams its events one by one, each only once the client has read
    the one before: an endpoint that held any of them back would never get the next."""

    EVENTS = (
        {"type": "message_start", "message": {"usage": {"input_tokens": 30, "output_tokens": 1}}},
        {"type": "content_block_start", "index": 0, "content_block": {"type": "text"}},
        {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": "Hi"}},
        {"type": "message_delta", "usage": {"output_tokens": 7}},
        {"type": "message_stop"},
    )

    def __init__(self) -> None:
        self.read = asyncio.Event()
        self.heads: list[str] = []

    async def serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        head = (await reader.readuntil(b"\r\n\r\n")).decode("latin-1")
        self.heads.append(head)
        length = next(
            (
                int(line.split(":")[1])
                for line in head.split("\r\n")
                if line.lower().startswith("content-length")
            ),
            0,
        )
        await reader.readexactly(length)
        if head.startswith("GET /v1/models"):
            body = b'{"data": []}'
            writer.write(b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\n")
            writer.write(b"content-length: %d\r\nconnection: close\r\n\r\n%s" % (len(body), body))
        else:
            writer.write(b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\n")
            writer.write(b"connection: close\r\n\r\n")
            for event in self.EVENTS:
                self.read.clear()
                writer.write(f"event: {event['type']}\ndata: {json.dumps(event)}\n\n".encode())
                await writer.drain()
                await asyncio.wait_for(self.read.wait(), 5.0)
        await writer.drain()
        writer.close()


def test_the_endpoint_streams_each_event_through_as_it_comes() -> None:
    from haltwise.adapters._messages_proxy import Exchange, MessagesProxy

    upstream = Upstream()
    asked: list[Exchange] = []
    reported: list[tuple[str, dict[str, int], str, bool]] = []

    async def gate(exchange: Exchange) -> tuple[str, None]:
        asked.append(exchange)
        return "r1", None

    async def report(exchange: Exchange) -> None:
        usage = dict(exchange.usage)
        reported.append((exchange.request_id, usage, "".join(exchange.text), exchange.complete))

    async def exchange() -> list[str]:
        server = await asyncio.start_server(upstream.serve, "127.0.0.1", 0)
        port = server.sockets[0].getsockname()[1]
        proxy = MessagesProxy(f"http://127.0.0.1:{port}", gate, report)
        seen: list[str] = []
        try:
            base = await proxy.start()
            async with httpx.AsyncClient(base_url=base) as client:
                body = {"model": MODEL, "max_tokens": 64, "stream": True, "messages": []}
                headers = {"x-api-key": "secret", "x-claude-code-agent-id": "a1"}
                async with client.stream(
                    "POST", "/v1/messages?beta=true", json=body, headers=headers
                ) as response:
                    async for line in response.aiter_lines():
                        if line.startswith("event:"):
                            seen.append(line.split(": ")[1])
                            if line.endswith("message_stop"):
                                assert reported  # reported before the client had the end
                            upstream.read.set()
                models = await client.get("/v1/models")
                assert models.json() == {"data": []}
        finally:
            await proxy.close()
            server.close()
            await server.wait_closed()
        return seen

    seen = run(exchange())

    assert seen == [event["type"] for event in Upstream.EVENTS]
    assert [(e.model, e.max_tokens, e.agent_id) for e in asked] == [(MODEL, 64, "a1")]
    assert reported == [("r1", {"input_tokens": 30, "output_tokens": 7}, "Hi", True)]
    post, get = upstream.heads
    assert post.startswith("POST /v1/messages?beta=true HTTP/1.1")
    assert "x-api-key: secret" in post  # credentials go on as the CLI sent them
    assert get.startswith("GET /v1/models")  # not a model request: forwarded, not asked about


def test_the_endpoint_refuses_with_a_final_error_and_reports_an_unreachable_upstream() -> None:
    from haltwise.adapters._messages_proxy import Exchange, MessagesProxy

    reported: list[tuple[str, bool, dict[str, int]]] = []
    verdicts = iter([(None, "haltwise: Model calls limit reached"), ("r2", None)])

    async def gate(exchange: Exchange) -> tuple[str, None] | tuple[None, str]:
        return next(verdicts)  # type: ignore[return-value]

    async def report(exchange: Exchange) -> None:
        reported.append((exchange.request_id, exchange.complete, dict(exchange.usage)))

    async def exchange() -> tuple[httpx.Response, httpx.Response]:
        with contextlib.closing(socket.socket()) as unused:
            unused.bind(("127.0.0.1", 0))  # bound, never listening: nothing answers there
            port = unused.getsockname()[1]
            proxy = MessagesProxy(f"http://127.0.0.1:{port}", gate, report)
            try:
                async with httpx.AsyncClient(base_url=await proxy.start()) as client:
                    body = {"model": MODEL, "max_tokens": 64, "messages": []}
                    refused = await client.post("/v1/messages", json=body)
                    unreachable = await client.post("/v1/messages", json=body)
            finally:
                await proxy.close()
        return refused, unreachable

    refused, unreachable = run(exchange())

    assert refused.status_code == 400  # the CLI retries 429 and 5xx, not this
    assert refused.headers["x-should-retry"] == "false"
    assert refused.json() == {
        "type": "error",
        "error": {
            "type": "invalid_request_error",
            "message": "haltwise: Model calls limit reached",
        },
    }
    assert unreachable.status_code == 502
    assert unreachable.json()["error"]["type"] == "api_error"
    assert reported == [("r2", True, {})]  # answered, with nothing spent


def test_a_cloud_backend_the_endpoint_cannot_see_is_a_configuration_error(
    agent_for: Callable[[list[ScriptEntry]], Agent],
) -> None:
    agent = agent_for([FINAL])
    env = {**agent.server.claude_code_env(agent.home), "CLAUDE_CODE_USE_BEDROCK": "1"}
    governed = govern(agent.options(env=env), Guard(max_turns(2)))

    with pytest.raises(ConfigurationError, match="CLAUDE_CODE_USE_BEDROCK"):
        run(governed.run("Hi?"))
    assert agent.requests() == []


def test_the_endpoint_reads_a_plain_answer_for_its_usage_text_and_calls(
    agent_for: Callable[[list[ScriptEntry]], Agent],
) -> None:
    from haltwise.adapters._messages_proxy import Exchange, MessagesProxy

    agent = agent_for([looks("a", "b", usage=(300, 25), text="Both.")])
    reported: list[tuple[dict[str, int], str, int, bool]] = []

    async def gate(exchange: Exchange) -> tuple[str, None]:
        return "r1", None

    async def report(exchange: Exchange) -> None:
        usage = dict(exchange.usage)
        reported.append((usage, "".join(exchange.text), exchange.tool_calls, exchange.complete))

    async def exchange() -> dict[str, Any]:
        proxy = MessagesProxy(agent.server.base_url, gate, report)
        try:
            async with httpx.AsyncClient(base_url=await proxy.start()) as client:
                body = {"model": MODEL, "max_tokens": 64, "messages": []}
                answer = await client.post("/v1/messages", json=body)
                return dict(answer.json())
        finally:
            await proxy.close()

    message = run(exchange())

    assert [block["type"] for block in message["content"]] == ["text", "tool_use", "tool_use"]
    usage = {"input_tokens": 300, "output_tokens": 25}
    usage |= {"cache_creation_input_tokens": 0, "cache_read_input_tokens": 0}
    assert reported == [(usage, "Both.", 2, True)]


def test_the_endpoint_closes_a_connection_that_does_not_speak_http_and_serves_the_next(
    agent_for: Callable[[list[ScriptEntry]], Agent],
) -> None:
    from haltwise.adapters._messages_proxy import HEAD_LIMIT, Exchange, MessagesProxy

    agent = agent_for([FINAL])

    async def gate(exchange: Exchange) -> tuple[str, None]:
        return "r1", None

    async def report(exchange: Exchange) -> None:
        pass

    async def hostile(port: int, sent: bytes) -> bytes:
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        writer.write(sent)
        await writer.drain()
        answer = await asyncio.wait_for(reader.read(), timeout=10)
        writer.close()
        return answer

    async def exchange() -> tuple[list[bytes], int]:
        proxy = MessagesProxy(agent.server.base_url, gate, report)
        try:
            base_url = await proxy.start()
            answers = [
                await hostile(proxy.port, b"NOT HTTP AT ALL\r\n\r\n"),
                await hostile(proxy.port, b"GET / HTTP/1.1\r\nX: " + b"a" * HEAD_LIMIT),
                await hostile(
                    proxy.port, b"POST /v1/messages HTTP/1.1\r\nContent-Length: x\r\n\r\n"
                ),
            ]
            async with httpx.AsyncClient(base_url=base_url) as client:
                body = {"model": MODEL, "max_tokens": 64, "messages": []}
                status = (await client.post("/v1/messages", json=body)).status_code
            return answers, status
        finally:
            await proxy.close()

    answers, status = run(exchange())

    assert all(b"200 OK" not in answer for answer in answers)
    assert status == 200
