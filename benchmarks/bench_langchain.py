"""What haltwise adds to a LangChain agent: the same scripted run with and without it.

A ``create_agent`` agent (``ChatOpenAI`` over HTTP to ``haltwise.testing.ScriptedServer``, one
``search`` tool) runs a session of ``TURNS`` turns, each a reply with one tool call, then a
final answer. Contenders, timed side by side in interleaved rounds in one process:

- ``create_agent``: ``agent.invoke(...)``, no middleware;
- ``+ a no-op middleware``: the same agent with a middleware whose ``wrap_model_call`` and
  ``wrap_tool_call`` only call the handler: what LangChain's middleware machinery itself costs,
  the floor of any middleware (each wrap hook runs inside a LangSmith ``traceable`` span; under
  ``ainvoke`` its setup and its end each go through a worker thread);
- ``+ no-op, agent hooks too``: that middleware with do-nothing ``before_agent`` and
  ``after_agent`` as well, haltwise's set of hooks (they open and end a run when the agent is
  invoked without ``govern``): each adds a node, a step of the graph, to every run. The floor
  of haltwise's middleware;
- ``+ haltwise (govern)``: the same agent built with ``HaltwiseMiddleware`` (limits on turns,
  tool calls, tokens and time, none of which trips), run by ``govern(agent,
  guard).run_sync(...)``;
- ``+ haltwise at BASE``: the same with the adapter of another revision
  (``HALTWISE_BENCH_BASE``, by default ``main``), extracted with ``git archive`` and imported
  beside this one, so that a change to the adapter is measured before and after in one run;
- and each again with ``ainvoke`` / ``await govern(...).run(...)``, all in one event loop (as
  in a service: ``asyncio.run`` per run would also start and join the loop's worker threads
  every time, which only the wrap hooks use);
- diagnostic: the bare agent, the no-op middleware and haltwise, async, with LangSmith's
  worker-thread hops run in place (``langsmith.set_runtime_overrides(aio_to_thread=...)``, a
  process-wide choice that is the user's to make, never haltwise's): how much of the async
  floor those hops are.

The ratio (median over rounds of each run's time over the bare agent's in the same round) is
the wall time added. Goal for haltwise: under 1.02. The scripted server answers in a few
milliseconds; a real model takes hundreds, so the same microseconds weigh far less there.

``python benchmarks/run.py langchain``; ``python benchmarks/bench_langchain.py --instructions``
counts the instructions of the same runs instead, under Valgrind (``instructions.py``): the same
comparison, unmoved by the machine's load.
"""

from __future__ import annotations

import asyncio
import importlib
import os
import statistics
import sys
import time
from collections.abc import Awaitable, Callable, Coroutine
from pathlib import Path
from typing import Any

import langsmith
from langchain.agents import create_agent
from langchain.agents.middleware import AgentMiddleware, AgentState
from langchain_core.tools import tool
from langchain_openai import ChatOpenAI

import haltwise
import instructions
from haltwise.adapters.langchain import HaltwiseMiddleware, govern
from haltwise.testing import Reply, ScriptedServer, reply, tool_call
from revisions import load_revision

MODEL = "scripted-model"
TURNS = 10
ROUNDS = 80
#: ``--instructions``: phases per contender, and runs per phase (the counts barely move).
INSTRUCTION_ROUNDS = 2
INSTRUCTION_RUNS = 2
#: The revision whose adapter is timed beside this one's.
BASE_REVISION = os.environ.get("HALTWISE_BENCH_BASE", "main")
#: The graph's input (typed Any: ``create_agent``'s input type takes no ``(role, text)`` pairs).
QUESTION: Any = {"messages": [("user", "Find everything about the parser bug.")]}


@tool
def search(query: str) -> str:
    """Search the web."""
    return f"3 pages about {query}"


def answer(body: dict[str, Any]) -> Reply:
    """Search until ``TURNS`` searches are in the conversation, then answer."""
    done = sum(1 for message in body["messages"] if message["role"] == "tool")
    if done < TURNS:
        query = {"query": f"parser bug, page {done + 1}"}
        return reply(tool_calls=[tool_call("search", query)], usage=(1000 + 60 * done, 20))
    return reply("The round trip drops escapes.", usage=(1000 + 60 * done, 12))


def guard(api: Any = haltwise) -> Any:
    """The benchmark's guard, built with ``api`` (``haltwise``, or the base revision's)."""
    return api.Guard(
        api.max_turns(TURNS + 5)
        | api.max_tool_calls(TURNS + 5)
        | api.max_tokens(1_000_000)
        | api.timeout(minutes=5)
    )


class NoOp(AgentMiddleware[AgentState[Any], Any, Any]):
    """A middleware that only passes the calls on: what any wrap hook costs in LangChain."""

    def wrap_model_call(self, request: Any, handler: Callable[[Any], Any]) -> Any:
        return handler(request)

    async def awrap_model_call(self, request: Any, handler: Callable[[Any], Any]) -> Any:
        return await handler(request)

    def wrap_tool_call(self, request: Any, handler: Callable[[Any], Any]) -> Any:
        return handler(request)

    async def awrap_tool_call(self, request: Any, handler: Callable[[Any], Any]) -> Any:
        return await handler(request)


class NoOpWithAgentHooks(NoOp):
    """``NoOp`` with haltwise's other hooks, which do nothing either: a node each in the graph."""

    def before_agent(self, state: Any, runtime: Any) -> None:
        return None

    async def abefore_agent(self, state: Any, runtime: Any) -> None:
        return None

    def after_agent(self, state: Any, runtime: Any) -> None:
        return None

    async def aafter_agent(self, state: Any, runtime: Any) -> None:
        return None


#: A contender: how it runs the session synchronously, and asynchronously.
Contender = tuple[str, Callable[[], Any], Callable[[], Coroutine[Any, Any, Any]]]


def contenders(server: ScriptedServer, base: Any) -> list[Contender]:
    """The agent bare, with the floors, and governed (also at ``base``, the base revision's
    package, unless it is a string: the reason it could not be loaded)."""
    model = ChatOpenAI(
        model=MODEL,
        base_url=server.base_url,
        api_key="test",  # type: ignore[arg-type]  # pydantic turns it into a SecretStr
        use_responses_api=False,
        max_retries=0,
        max_completion_tokens=200,
    )
    bare = create_agent(model, tools=[search])
    noop = create_agent(model, tools=[search], middleware=[NoOp()])
    noop_hooks = create_agent(model, tools=[search], middleware=[NoOpWithAgentHooks()])
    run_guard = guard()
    governed = govern(
        create_agent(model, tools=[search], middleware=[HaltwiseMiddleware(run_guard)]), run_guard
    )

    def checked(outcome: Any) -> None:
        # (a string comparison: the base revision has a Status enum of its own)
        assert outcome.status == "completed", outcome
        assert outcome.usage.tool_calls == TURNS

    # The async runs return None to asyncio.run: on its way out, asyncio.run formats its main
    # task's repr (Python 3.11), result included, which would time the repr of a whole state.
    async def arun(agent: Any) -> None:
        await agent.ainvoke(QUESTION)

    async def arun_governed() -> None:
        checked((await governed.run(QUESTION)).outcome)

    players: list[Contender] = [
        ("create_agent", lambda: bare.invoke(QUESTION), lambda: arun(bare)),
        ("+ a no-op middleware", lambda: noop.invoke(QUESTION), lambda: arun(noop)),
        ("+ no-op, agent hooks too", lambda: noop_hooks.invoke(QUESTION), lambda: arun(noop_hooks)),
        (
            "+ haltwise (govern)",
            lambda: checked(governed.run_sync(QUESTION).outcome),
            arun_governed,
        ),
    ]
    if not isinstance(base, str):
        adapter = importlib.import_module(f"{base.__name__}.adapters.langchain")
        base_guard = guard(base)
        middleware = adapter.HaltwiseMiddleware(base_guard)
        at_base = adapter.govern(
            create_agent(model, tools=[search], middleware=[middleware]), base_guard
        )

        async def arun_at_base() -> None:
            checked((await at_base.run(QUESTION)).outcome)

        players.append(
            (
                f"+ haltwise at {BASE_REVISION}",
                lambda: checked(at_base.run_sync(QUESTION).outcome),
                arun_at_base,
            )
        )
    return players


#: A contender as timed: a name and one run (a sync one is called from a coroutine).
Timed = tuple[str, Callable[[], Awaitable[None]]]


def timed_runs(server: ScriptedServer, base: Any) -> list[Timed]:
    """Every contender, sync and async, and the async diagnostic rows."""
    players = contenders(server, base)
    runs: list[Timed] = [(name, _called(play)) for name, play, _ in players]
    runs += [(f"{name}, async", aplay) for name, _, aplay in players]
    runs += [
        (f"{name}, async, {INLINE}", _hops_inline(aplay))
        for name, _, aplay in players
        if name in ("create_agent", "+ a no-op middleware", "+ haltwise (govern)")
    ]
    return runs


def main() -> None:
    base = load_revision(BASE_REVISION, "haltwise_base")
    if isinstance(base, str):
        print(f"(the adapter at {BASE_REVISION} is not timed: {base})")
    with ScriptedServer([answer], repeat_last=True) as server:
        runs = timed_runs(server, base)
        # One event loop for every run, as in a service: a loop per run would also start and
        # join the loop's worker threads on every run, which only the wrap hooks use.
        wall, cpu = asyncio.run(measure(runs))
    names = [name for name, _ in runs]
    print(
        f"one run = {TURNS} turns (a tool call each) + a final answer, over HTTP; median of "
        f"{ROUNDS} interleaved rounds (CPU: this process's, the server's threads included)"
    )
    print(
        f"{'':42}{'wall ms':>9}{'vs bare':>9}{'best':>8}{'CPU ms':>9}{'vs bare':>9}{'CPU/turn':>10}"
    )
    bare = names[0]
    synced = sum(1 for name in names if "async" not in name)
    for section in (names[:synced], names[synced:]):
        for name in section:
            added = (statistics.median(cpu[name]) - statistics.median(cpu[bare])) / (TURNS + 1)
            print(
                f"{name:42}{statistics.median(wall[name]) * 1e3:>9.1f}"
                f"{_ratio(wall[name], wall[bare]):>8.3f}x{min(wall[name]) / min(wall[bare]):>7.3f}x"
                f"{statistics.median(cpu[name]) * 1e3:>9.1f}{_ratio(cpu[name], cpu[bare]):>8.3f}x"
                f"{added * 1e6:>7.0f} us"
            )
        bare = f"{bare}, async"
    print("(best: the fastest run of each over the bare agent's fastest, less sensitive to load)")
    print("goal: haltwise's wall time under 1.02x the bare agent's")


async def measure(runs: list[Timed]) -> tuple[dict[str, list[float]], dict[str, list[float]]]:
    """Wall and CPU seconds of each run, over ``ROUNDS`` interleaved rounds."""
    for _, play in runs:  # warm-up: imports, connection pools, code paths
        await play()
    wall: dict[str, list[float]] = {name: [] for name, _ in runs}
    cpu: dict[str, list[float]] = {name: [] for name, _ in runs}
    for round_no in range(ROUNDS):
        shift = round_no % len(runs)
        for name, play in runs[shift:] + runs[:shift]:
            started, started_cpu = time.perf_counter(), time.process_time()
            await play()
            wall[name].append(time.perf_counter() - started)
            cpu[name].append(time.process_time() - started_cpu)
    return wall, cpu


async def phases() -> None:
    """``--phases``, under callgrind (``count_instructions``)."""
    with ScriptedServer([answer], repeat_last=True) as server:
        runs = timed_runs(server, load_revision(BASE_REVISION, "haltwise_base"))
        await instructions.run_phases(runs, INSTRUCTION_ROUNDS, INSTRUCTION_RUNS)


def count_instructions() -> None:
    phases = instructions.counted(
        Path(__file__),
        f"one run ({TURNS} turns and a final answer over HTTP, the scripted "
        f"server's included), {INSTRUCTION_ROUNDS} phases of {INSTRUCTION_RUNS} runs each",
    )
    if phases is None:
        return
    instructions.report(
        phases,
        INSTRUCTION_RUNS,
        lambda name: "create_agent, async" if "async" in name else "create_agent",
    )


def _called(play: Callable[[], Any]) -> Callable[[], Awaitable[None]]:
    async def run() -> None:
        play()

    return run


#: The diagnostic rows' label: LangSmith's worker-thread hops made inline.
INLINE = "hops inline"


async def _inline(
    default: Callable[..., Awaitable[Any]],
    context: Any,
    func: Callable[..., Any],
    /,
    *args: Any,
    **kwargs: Any,
) -> Any:
    return context.run(func, *args, **kwargs)


def _hops_inline(aplay: Callable[[], Coroutine[Any, Any, Any]]) -> Callable[[], Awaitable[None]]:
    """``aplay`` with LangSmith's ``aio_to_thread`` (the setup and the end of the span of each
    async wrap hook, sent to a worker thread) run in place: ``set_runtime_overrides``, the
    user's process-wide choice. Diagnostic: what of the async floor those hops are."""

    async def run() -> None:
        langsmith.set_runtime_overrides(aio_to_thread=_inline)
        try:
            await aplay()
        finally:
            langsmith.set_runtime_overrides()

    return run


def _ratio(mine: list[float], theirs: list[float]) -> float:
    """The median over rounds of one contender's time over the other's, in the same round."""
    return statistics.median(a / b for a, b in zip(mine, theirs, strict=True))


if __name__ == "__main__":
    if "--instructions" in sys.argv:
        count_instructions()
    elif "--phases" in sys.argv:
        asyncio.run(phases())
    else:
        main()
