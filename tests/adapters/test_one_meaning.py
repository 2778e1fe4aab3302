"""One meaning everywhere: the same scripted conversation, under the same limits, through every
adapter, stops at the same step with the same ``Outcome``.

The model looks up one city per reply, five times, then answers. Each framework runs for real
against a scripted server (the OpenAI-compatible one; the Anthropic one for the Claude Agent
SDK's CLI). For each limit, every adapter must send the same number of requests, run the tool
the same number of times, and end with the same status, reason and counts.
"""

from __future__ import annotations

import asyncio
import contextlib
import tempfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import pytest

import haltwise
from haltwise import Guard, Status
from haltwise.adapters import Governed
from haltwise.engine.limits import Limit
from haltwise.testing import AnthropicServer, ScriptedServer, reply, tool_call

CITIES = ("Paris", "Oslo", "Rome", "Lima", "Kyiv")
MODEL = "scripted-model"


def script(tool: str) -> list[Any]:
    steps = [
        reply(tool_calls=[tool_call(tool, {"city": city})], usage=(100 + 10 * n, 10))
        for n, city in enumerate(CITIES)
    ]
    return [*steps, reply("All five are sunny.", usage=(200, 6))]


@contextlib.contextmanager
def closing_the_default_loop() -> Iterator[None]:
    """The Agents SDK's and pydantic-ai's ``run_sync`` leave the thread's default event loop
    open for the next run; a test closes it, so that no other test finds it."""
    try:
        yield
    finally:
        asyncio.get_event_loop_policy().get_event_loop().close()
        asyncio.set_event_loop(None)


@dataclass(frozen=True)
class Ran:
    governed: Governed[Any]
    requests: int
    tools: list[str]


def openai_agents(limits: Limit) -> Ran:
    pytest.importorskip("agents")
    from agents import Agent, OpenAIChatCompletionsModel, RunConfig, function_tool
    from openai import AsyncOpenAI

    from haltwise.adapters.openai_agents import govern

    ran: list[str] = []

    @function_tool
    def lookup(city: str) -> str:
        """The weather in a city."""
        ran.append(city)
        return f"sunny in {city}"

    with ScriptedServer(script("lookup"), model=MODEL) as server:
        client = AsyncOpenAI(base_url=server.base_url, api_key="test", max_retries=0)
        model = OpenAIChatCompletionsModel(model=MODEL, openai_client=client)
        agent = Agent(name="weather", model=model, tools=[lookup])
        config = RunConfig(tracing_disabled=True)
        with closing_the_default_loop():
            governed = govern(agent, Guard(limits)).run_sync("Weather?", run_config=config)
        return Ran(governed, len(server.requests), ran)


def pydantic_ai(limits: Limit) -> Ran:
    pytest.importorskip("pydantic_ai")
    from pydantic_ai import Agent
    from pydantic_ai.models.openai import OpenAIChatModel
    from pydantic_ai.providers.openai import OpenAIProvider

    from haltwise.adapters.pydantic_ai import govern

    ran: list[str] = []
    with ScriptedServer(script("lookup"), model=MODEL) as server:
        provider = OpenAIProvider(base_url=server.base_url, api_key="test")
        agent = Agent(OpenAIChatModel(MODEL, provider=provider))

        @agent.tool_plain
        def lookup(city: str) -> str:
            """The weather in a city."""
            ran.append(city)
            return f"sunny in {city}"

        with closing_the_default_loop():
            governed = govern(agent, Guard(limits)).run_sync("Weather?")
        return Ran(governed, len(server.requests), ran)


def langchain(limits: Limit) -> Ran:
    pytest.importorskip("langchain")
    from langchain.agents import create_agent
    from langchain_core.tools import tool
    from langchain_openai import ChatOpenAI

    from haltwise.adapters.langchain import HaltwiseMiddleware, govern

    ran: list[str] = []

    @tool
    def lookup(city: str) -> str:
        """The weather in a city."""
        ran.append(city)
        return f"sunny in {city}"

    guard = Guard(limits)
    with ScriptedServer(script("lookup"), model=MODEL) as server:
        model = ChatOpenAI(
            model=MODEL,
            base_url=server.base_url,
            api_key="test",  # type: ignore[arg-type]  # pydantic makes it a SecretStr
            use_responses_api=False,
            max_retries=0,
        )
        agent = create_agent(model, tools=[lookup], middleware=[HaltwiseMiddleware(guard)])
        governed = govern(agent, guard).run_sync({"messages": [("user", "Weather?")]})
        return Ran(governed, len(server.requests), ran)


def claude_agent_sdk(limits: Limit) -> Ran:
    pytest.importorskip("claude_agent_sdk")
    from claude_agent_sdk import ClaudeAgentOptions, create_sdk_mcp_server, tool

    from haltwise.adapters.claude_agent_sdk import govern

    ran: list[str] = []

    @tool("lookup", "The weather in a city.", {"city": str})
    async def lookup(arguments: dict[str, Any]) -> dict[str, Any]:
        ran.append(arguments["city"])
        return {"content": [{"type": "text", "text": f"sunny in {arguments['city']}"}]}

    with AnthropicServer(script("mcp__t__lookup")) as server, tempfile.TemporaryDirectory() as home:
        options = ClaudeAgentOptions(
            model="claude-sonnet-4-5",
            env=server.claude_code_env(home),
            cwd=home,
            setting_sources=[],
            tools=[],
            mcp_servers={"t": create_sdk_mcp_server("t", tools=[lookup])},
            allowed_tools=["mcp__t__lookup"],
        )
        governed = asyncio.run(govern(options, Guard(limits)).run("Weather?"))
        return Ran(governed, len(server.requests), ran)


ADAPTERS: dict[str, Callable[[Limit], Ran]] = {
    "openai-agents": openai_agents,
    "pydantic-ai": pydantic_ai,
    "langchain": langchain,
    "claude-agent-sdk": claude_agent_sdk,
}


@dataclass(frozen=True)
class Expected:
    status: Status
    reason: str
    requests: int
    tools_run: int
    model_calls: int
    tool_calls: int
    turns: int


SCENARIOS: dict[str, tuple[Callable[[], Limit], Expected]] = {
    # The fourth call is refused before it runs; the run ends there.
    "max_tool_calls(3)": (
        lambda: haltwise.max_tool_calls(3),
        Expected(Status.ABANDONED, "tool_call_limit", 4, 3, 4, 3, 4),
    ),
    # The fourth request is refused before it is sent.
    "max_model_calls(3)": (
        lambda: haltwise.max_model_calls(3),
        Expected(Status.ABANDONED, "model_call_limit", 3, 3, 3, 3, 4),
    ),
    # The third turn is refused before its request is sent.
    "max_turns(2)": (
        lambda: haltwise.max_turns(2),
        Expected(Status.ABANDONED, "turn_limit", 2, 2, 2, 2, 2),
    ),
    # Within every limit: five lookups and the answer.
    "max_turns(10)": (
        lambda: haltwise.max_turns(10),
        Expected(Status.COMPLETED, "completed", 6, 5, 6, 5, 6),
    ),
}


@pytest.mark.parametrize("scenario", list(SCENARIOS))
@pytest.mark.parametrize("adapter", list(ADAPTERS))
def test_the_same_limits_stop_every_framework_at_the_same_step(adapter: str, scenario: str) -> None:
    make_limits, expected = SCENARIOS[scenario]
    ran = ADAPTERS[adapter](make_limits())
    outcome = ran.governed.outcome
    usage = outcome.usage
    got = Expected(
        outcome.status,
        outcome.reason,
        ran.requests,
        len(ran.tools),
        usage.model_calls,
        usage.tool_calls,
        usage.turns,
    )
    assert got == expected, outcome.message
    assert ran.tools == list(CITIES[: expected.tools_run])
    if expected.status is Status.COMPLETED:
        assert ran.governed.output == "All five are sunny."
    else:
        assert outcome.checkpoint is not None


# ------------------------------------------------------------------------------------------
# The same checks at the call: a guard that is not one is refused by ``govern`` itself, with
# the same message, in every adapter (never later, deep inside the framework's run). LangChain's
# ``govern`` may be given no guard (it takes its middleware's); the others need one.


def govern_openai_agents(guard: Any) -> object:
    pytest.importorskip("agents")
    from agents import Agent

    from haltwise.adapters.openai_agents import govern

    return govern(Agent(name="helper"), guard)


def govern_pydantic_ai(guard: Any) -> object:
    pytest.importorskip("pydantic_ai")
    from pydantic_ai import Agent

    from haltwise.adapters.pydantic_ai import govern

    return govern(Agent("test"), guard)


def govern_langchain(guard: Any) -> object:
    pytest.importorskip("langchain")
    from langchain.agents import create_agent
    from langchain_openai import ChatOpenAI

    from haltwise.adapters.langchain import HaltwiseMiddleware, govern

    model = ChatOpenAI(model=MODEL, base_url="http://127.0.0.1:9", api_key="test")  # type: ignore[arg-type]
    agent = create_agent(model, middleware=[HaltwiseMiddleware(Guard(haltwise.max_turns(3)))])
    return govern(agent, guard)


def govern_claude_agent_sdk(guard: Any) -> object:
    pytest.importorskip("claude_agent_sdk")
    from claude_agent_sdk import ClaudeAgentOptions

    from haltwise.adapters.claude_agent_sdk import govern

    return govern(ClaudeAgentOptions(), guard)


GOVERN: dict[str, Callable[[Any], object]] = {
    "openai-agents": govern_openai_agents,
    "pydantic-ai": govern_pydantic_ai,
    "langchain": govern_langchain,
    "claude-agent-sdk": govern_claude_agent_sdk,
}

#: What ``govern`` takes as its guard, as every refusal says.
A_GUARD = (
    "a haltwise Guard, e.g. Guard(max_turns(10)) (a Governor goes in as "
    "Guard(governor=governor), limits as Guard(limits))"
)
#: Guards that are not guards, and the message each is refused with.
NOT_GUARDS: dict[str, tuple[Callable[[], Any], str]] = {
    "a governor": (
        lambda: haltwise.Governor(haltwise.max_turns(3)),
        f"govern(guard)=Governor(max_turns(3)) is not valid: expected {A_GUARD}",
    ),
    "limits": (
        lambda: haltwise.max_turns(3),
        f"govern(guard)=max_turns(3) is not valid: expected {A_GUARD}",
    ),
    "settings": (
        lambda: {"max_turns": 3},
        f"govern(guard)={{'max_turns': 3}} is not valid: expected {A_GUARD}",
    ),
}


@pytest.mark.parametrize("given", list(NOT_GUARDS))
@pytest.mark.parametrize("adapter", list(GOVERN))
def test_every_govern_refuses_what_is_not_a_guard_at_the_call(adapter: str, given: str) -> None:
    make_guard, refusal = NOT_GUARDS[given]
    with pytest.raises(haltwise.InvalidValueError) as raised:
        GOVERN[adapter](make_guard())
    assert str(raised.value) == refusal
