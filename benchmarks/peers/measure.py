"""The peer comparison's measuring script, run by ``bench_peers.py`` inside ``.peers-venv``.

It imports haltwise (this checkout, installed editable), agentarmor, agentguard47 and
pydantic-ai-slim into one process and times them side by side in interleaved rounds; each
figure is the median of per-round ratios against haltwise. The peers are imported with
``importlib`` and held as ``Any``, so that mypy checks this file in the main environment, where
they are not installed. What each row does and does not check is in ``bench_peers.py``'s
docstring; the per-call objects are built as each peer's own integration builds them.

    benchmarks/.peers-venv/bin/python benchmarks/peers/measure.py

``HALTWISE_PEERS_ROUNDS`` sets the number of rounds (300).
"""

from __future__ import annotations

import gc
import importlib
import os
import statistics
import sys
import time
from collections.abc import Callable
from decimal import Decimal
from types import SimpleNamespace
from typing import Any

from pydantic_ai.usage import RequestUsage, RunUsage, UsageLimits

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # benchmarks/
from haltwise import (
    Block,
    Governor,
    Limit,
    ModelRequest,
    ModelResponse,
    RunStarted,
    Stop,
    ToolCall,
    ToolResult,
    max_cost,
    max_tokens,
    max_tool_calls,
    max_turns,
    stuck,
    timeout,
)
from tool_outputs import long_result, short_result

#: The limit set every contender is given, as far as it has each limit.
MAX_TURNS = 25
MAX_TOOL_CALLS = 50
MAX_TOKENS = 200_000
MAX_COST = Decimal("5.00")
TIMEOUT_S = 30 * 60
MODEL = "gpt-4o"
MAX_OUTPUT = 1024
#: gpt-4o's list price per token (input, cached input, output): pydantic-ai's cost, given.
PRICES = (Decimal("2.50") / 10**6, Decimal("1.25") / 10**6, Decimal("10.00") / 10**6)

#: Calls per timed run; every contender starts a fresh run (untimed) before each.
CALLS_PER_RUN = 20
ROUNDS = int(os.environ.get("HALTWISE_PEERS_ROUNDS", "300"))
WARMUP_RUNS = 20
#: Distinct tool results per size, cycled, so that no cache keyed on content ever hits.
RESULT_POOL = 4_000

#: Issue 15's goals.
CALL_GOAL_NS = 650
CALL_PEER_RATIO = 0.5
TOOL_GOALS_NS = {"3-line": 5_000, "1 KB": 20_000}

Timed = Callable[[], int]


def limits() -> Limit:
    limit: Limit = (
        max_turns(MAX_TURNS)
        | max_tool_calls(MAX_TOOL_CALLS)
        | max_tokens(MAX_TOKENS)
        | max_cost(str(MAX_COST))
        | timeout(seconds=TIMEOUT_S)
    )
    return limit


# ------------------------------------------------------------------------------------------------
# What one run of an agent loop hands the guards


def turn_usage(k: int) -> tuple[int, int, int]:
    """Call ``k``'s (input, output, cache_read) tokens: a context that grows, its prefix cached
    (the same figures as bench_governor)."""
    input_tokens = 1_500 + 400 * k
    output_tokens = 220 + (37 * k) % 90
    cache_read = 0 if k == 0 else (1_500 + 400 * (k - 1)) // 128 * 128
    return input_tokens, output_tokens, cache_read


USAGE = [turn_usage(k) for k in range(CALLS_PER_RUN)]


def conversation(k: int) -> list[dict[str, Any]]:
    """The OpenAI ``messages`` an agent sends on call ``k``: the system prompt and the task,
    then per earlier call the assistant's two tool calls and their two results."""
    messages: list[dict[str, Any]] = [
        {"role": "system", "content": "You are a coding agent. Use the tools to fix the bug."},
        {"role": "user", "content": "Fix the failing test in tests/test_api.py"},
    ]
    for turn in range(k):
        calls = [
            {
                "id": f"call_{turn}{tag}",
                "type": "function",
                "function": {"name": name, "arguments": f'{{"path": "src/m{turn}.py"}}'},
            }
            for tag, name in (("a", "read_file"), ("b", "run_tests"))
        ]
        messages.append({"role": "assistant", "content": None, "tool_calls": calls})
        messages.append(
            {"role": "tool", "tool_call_id": f"call_{turn}a", "content": long_result(turn)}
        )
        messages.append(
            {"role": "tool", "tool_call_id": f"call_{turn}b", "content": short_result(turn)}
        )
    return messages


def chat_completion(k: int) -> Any:
    """What ``openai``'s ``chat.completions.create`` returns for call ``k`` (attributes only:
    the peers read it with ``getattr``)."""
    input_tokens, output_tokens, cache_read = USAGE[k]
    usage = SimpleNamespace(
        prompt_tokens=input_tokens,
        completion_tokens=output_tokens,
        total_tokens=input_tokens + output_tokens,
        prompt_tokens_details=SimpleNamespace(cached_tokens=cache_read, audio_tokens=0),
        completion_tokens_details=SimpleNamespace(reasoning_tokens=0, audio_tokens=0),
    )
    message = SimpleNamespace(role="assistant", content="Running the tests.", tool_calls=None)
    return SimpleNamespace(
        id=f"chatcmpl-{k}",
        object="chat.completion",
        model=MODEL,
        choices=[SimpleNamespace(index=0, message=message, finish_reason="tool_calls")],
        usage=usage,
    )


def given_cost(k: int) -> Decimal:
    input_tokens, output_tokens, cache_read = USAGE[k]
    price_in, price_cached, price_out = PRICES
    return (
        price_in * (input_tokens - cache_read)
        + price_cached * cache_read
        + price_out * output_tokens
    )


# ------------------------------------------------------------------------------------------------
# One LLM call: each contender returns a function timing CALLS_PER_RUN calls after a fresh run


def haltwise_call(*, cost_given: bool) -> Timed:
    """``ModelRequest`` + ``ModelResponse`` built and handled per call, as a driver reports
    an LLM call; the Governor prices the response itself unless ``cost_given``."""
    governor = Governor(limits())
    handle, clock = governor.handle, time.perf_counter_ns
    costs = [given_cost(k) if cost_given else None for k in range(CALLS_PER_RUN)]
    plan = [(*USAGE[k], costs[k]) for k in range(CALLS_PER_RUN)]

    def run() -> int:
        handle(RunStarted(prompt="Fix the failing test"))
        start = clock()
        for input_tokens, output_tokens, cache_read, cost in plan:
            handle(ModelRequest(model=MODEL, max_tokens=MAX_OUTPUT))
            decision = handle(
                ModelResponse(
                    model=MODEL,
                    input_tokens=input_tokens,
                    output_tokens=output_tokens,
                    cache_read_tokens=cache_read,
                    cost=cost,
                )
            )
        elapsed = clock() - start
        if isinstance(decision, Stop | Block):
            raise AssertionError(f"haltwise stopped the benchmark's run: {decision}")
        return elapsed

    return run


def pydantic_ai_call() -> Timed:
    """Where pydantic-ai's agent graph checks: ``check_before_request`` before the request;
    the model's ``RequestUsage`` (cost given, as a provider that bills it would) added to the
    run's ``RunUsage``, then ``check_tokens`` and ``check_cost``."""
    usage_limits = UsageLimits(
        request_limit=MAX_TURNS,
        tool_calls_limit=MAX_TOOL_CALLS,
        total_tokens_limit=MAX_TOKENS,
        cost_limit=MAX_COST,
    )
    costs = [given_cost(k) for k in range(CALLS_PER_RUN)]
    plan = [(*USAGE[k], costs[k]) for k in range(CALLS_PER_RUN)]
    clock = time.perf_counter_ns

    def run() -> int:
        usage = RunUsage()
        start = clock()
        for input_tokens, output_tokens, cache_read, cost in plan:
            usage_limits.check_before_request(usage)
            request_usage = RequestUsage(
                input_tokens=input_tokens,
                output_tokens=output_tokens,
                cache_read_tokens=cache_read,
            )
            request_usage.cost = cost
            usage.requests += 1
            usage.incr(request_usage)
            usage_limits.check_tokens(usage)
            usage_limits.check_cost(usage, warn_if_cost_unavailable=False)
        elapsed = clock() - start
        assert usage.requests == CALLS_PER_RUN, usage
        assert usage.cost, usage
        return elapsed

    return run


def agentarmor_call(*, whole_conversation: bool) -> Timed:
    """agentarmor's patched ``chat.completions.create``: ``ArmorCore._wrap_sync`` around the
    SDK method, wrapped again by ``_with_sdk_flag``, exactly as ``ArmorCore.patch`` installs
    it; the SDK method itself returns a prebuilt response. A fresh ``ArmorCore`` (its budget
    and its rate window) per run, untimed."""
    armor = importlib.import_module("agentarmor")
    responses = [chat_completion(k) for k in range(CALLS_PER_RUN)]
    prompts = [conversation(k if whole_conversation else 0) for k in range(CALLS_PER_RUN)]
    plan = list(zip(prompts, responses, strict=True))
    clock = time.perf_counter_ns
    box: dict[str, Any] = {}

    def create(*args: Any, **kwargs: Any) -> Any:  # the SDK's own method: the response
        return box["response"]

    def run() -> int:
        core = armor.ArmorCore(budget=f"${MAX_COST}", rate_limit=f"{MAX_TURNS}/hour")
        wrapped = core._with_sdk_flag(core._wrap_sync(create, provider="openai"))
        start = clock()
        for messages, response in plan:
            box["response"] = response
            wrapped(model=MODEL, messages=messages, max_tokens=MAX_OUTPUT)
        elapsed = clock() - start
        budget = core.modules["budget"]
        assert len(budget.calls) == CALLS_PER_RUN, budget.report()
        assert budget.spent > 0, budget.report()
        return elapsed

    return run


class NullSink:
    """A trace sink that drops events (agentguard's default writes each one to a JSONL file)."""

    def emit(self, event: dict[str, Any]) -> None:
        return None


def agentguard_setup() -> tuple[Any, Any]:
    """A tracer and budget guard as ``agentguard.init(budget_usd=5.00)`` builds them (its
    ``default`` profile: LoopGuard(5, window 6), budget warning at 80%), with the budget's
    token and call caps and a started ``TimeoutGuard`` added to the tracer's guards, and a
    sink that drops events."""
    guards = importlib.import_module("agentguard.guards")
    tracing = importlib.import_module("agentguard.tracing")
    budget = guards.BudgetGuard(
        max_tokens=MAX_TOKENS,
        max_calls=MAX_TURNS,
        max_cost_usd=float(MAX_COST),
        warn_at_pct=0.8,
        on_warning=lambda message: None,
    )
    deadline = guards.TimeoutGuard(max_seconds=TIMEOUT_S)
    deadline.start()
    tracer = tracing.Tracer(
        sink=NullSink(),
        service="bench",
        guards=[guards.LoopGuard(max_repeats=5, window=6), budget, deadline],
    )
    return tracer, budget


def agentguard_call() -> Timed:
    """agentguard's patched ``chat.completions.create`` (``instrument._traced_chat_method``, as
    ``patch_openai`` installs it): a span, ``BudgetGuard.check`` before the request, the cost
    resolved from the response's usage with its price table, an ``llm.result`` event (each
    event runs the tracer's guards), ``BudgetGuard.consume``. A fresh tracer and budget per run,
    untimed."""
    instrument = importlib.import_module("agentguard.instrument")
    responses = [chat_completion(k) for k in range(CALLS_PER_RUN)]
    prompts = [conversation(k) for k in range(CALLS_PER_RUN)]
    plan = list(zip(prompts, responses, strict=True))
    clock = time.perf_counter_ns
    box: dict[str, Any] = {}

    def create(*args: Any, **kwargs: Any) -> Any:
        return box["response"]

    def run() -> int:
        tracer, budget = agentguard_setup()
        traced = instrument._traced_chat_method(create, tracer, budget)
        start = clock()
        for messages, response in plan:
            box["response"] = response
            traced(model=MODEL, messages=messages, max_tokens=MAX_OUTPUT)
        elapsed = clock() - start
        state = budget.state
        assert state.calls_used == CALLS_PER_RUN, state
        assert state.cost_used > 0, state
        assert state.tokens_used == sum(i + o for i, o, _ in USAGE), state
        return elapsed

    return run


# ------------------------------------------------------------------------------------------------
# One tool call and its result


class Results:
    """Distinct results of one size, handed out in turn, never repeating within a measurement."""

    def __init__(self, make: Callable[[int], str], offset: int) -> None:
        self.pool = [make(offset + index) for index in range(RESULT_POOL)]
        self.next = 0

    def take(self, count: int) -> list[str]:
        start = self.next % RESULT_POOL
        if start + count > RESULT_POOL:
            start = 0
        self.next = start + count
        return self.pool[start : start + count]


def tool_args(index: int) -> tuple[str, dict[str, Any]]:
    """Call ``index``'s tool and arguments: three tools in turn (two alternating would trip
    agentguard's FuzzyLoopGuard), arguments that differ within a run."""
    if index % 3 == 0:
        return "bash", {"command": f"pytest -x tests/test_mod_{index % 40:02d}.py -k case_{index}"}
    if index % 3 == 1:
        return "run_tests", {"path": f"tests/test_api_{index % 10}.py", "verbose": True}
    return "read_file", {"path": f"src/app/module_{index}.py"}


def haltwise_tool(results: Results, *, with_limits: bool = True) -> Timed:
    """``ToolCall`` + ``ToolResult`` through a Governor with the limits and ``stuck()`` (or
    ``stuck()`` alone, as ``bench_stuck`` times it)."""
    governor = Governor(limits() | stuck() if with_limits else stuck())
    handle, clock = governor.handle, time.perf_counter_ns
    calls = [(*tool_args(index), f"call_{index}") for index in range(CALLS_PER_RUN)]

    def run() -> int:
        handle(RunStarted(prompt="Fix the failing test"))
        outputs = results.take(CALLS_PER_RUN)
        start = clock()
        for (name, args, call_id), output in zip(calls, outputs, strict=True):
            handle(ToolCall(name, args, call_id))
            decision = handle(ToolResult(name, output, call_id, exit_code=1))
        elapsed = clock() - start
        if isinstance(decision, Stop | Block):  # a benchmark that trips measures nothing
            raise AssertionError(f"haltwise stopped the benchmark's run: {decision}")
        return elapsed

    return run


def pydantic_ai_tool(results: Results) -> Timed:
    """pydantic-ai per tool call: the run's ``tool_calls`` counted and
    ``check_before_tool_call``; the result is not looked at."""
    usage_limits = UsageLimits(request_limit=MAX_TURNS, tool_calls_limit=MAX_TOOL_CALLS)
    clock = time.perf_counter_ns

    def run() -> int:
        usage = RunUsage()
        results.take(CALLS_PER_RUN)
        start = clock()
        for _ in range(CALLS_PER_RUN):
            usage.tool_calls += 1
            usage_limits.check_before_tool_call(usage)
        return clock() - start

    return run


def agentguard_traced_tool(results: Results) -> Timed:
    """agentguard's ``trace_tool`` around the tool (a span, a ``tool.result`` event with the
    result's first 500 characters; every event runs the tracer's LoopGuard, BudgetGuard and
    TimeoutGuard). Its LoopGuard sees event names and data, not the call's arguments."""
    instrument = importlib.import_module("agentguard.instrument")
    clock = time.perf_counter_ns
    calls = [tool_args(index) for index in range(CALLS_PER_RUN)]
    box: dict[str, Any] = {}
    tools: dict[str, Any] = {}

    def tool(**kwargs: Any) -> str:
        return str(box["output"])

    def run() -> int:
        tracer, _ = agentguard_setup()
        for name in ("bash", "run_tests", "read_file"):
            tools[name] = instrument.trace_tool(tracer, name=f"tool.{name}")(tool)
        outputs = results.take(CALLS_PER_RUN)
        start = clock()
        for (name, args), output in zip(calls, outputs, strict=True):
            box["output"] = output
            tools[name](**args)
        return clock() - start

    return run


def agentguard_loop_guards(results: Results) -> Timed:
    """agentguard's loop guards called by hand before each tool call, as its README shows:
    ``LoopGuard.check`` (the same name and arguments n times in a row) and
    ``FuzzyLoopGuard.check`` (one tool too often in a window; A-B-A-B). No result is seen."""
    guards = importlib.import_module("agentguard.guards")
    clock = time.perf_counter_ns
    calls = [tool_args(index) for index in range(CALLS_PER_RUN)]

    def run() -> int:
        loop = guards.LoopGuard(max_repeats=3, window=6)
        fuzzy = guards.FuzzyLoopGuard()  # its defaults: 5 of one tool in 10, A-B-A-B-A-B
        results.take(CALLS_PER_RUN)
        start = clock()
        for name, args in calls:
            loop.check(name, args)
            fuzzy.check(name, args)
        return clock() - start

    return run


# ------------------------------------------------------------------------------------------------
# Timing and the table


def measure(loops: dict[str, Timed], rounds: int) -> dict[str, list[float]]:
    """ns per call of each contender, one run each per round, the order rotated every round."""
    for loop in loops.values():
        for _ in range(WARMUP_RUNS):
            loop()
    times: dict[str, list[float]] = {name: [] for name in loops}
    names = list(loops)
    gc.collect()
    gc.disable()
    try:
        for round_no in range(rounds):
            shift = round_no % len(names)
            for name in names[shift:] + names[:shift]:
                times[name].append(loops[name]() / CALLS_PER_RUN)
            if round_no % 50 == 49:
                gc.enable()
                gc.collect()
                gc.disable()
    finally:
        gc.enable()
    return times


def print_table(title: str, times: dict[str, list[float]]) -> dict[str, tuple[float, float]]:
    """Print ns/call and the median per-round ratio against the first row; return both."""
    names = list(times)
    first = times[names[0]]
    print(f"\n{title}")
    print(f"{'':44}{'ns/call':>10}{'vs haltwise':>13}{'p10-p90 ns':>17}")
    figures = {}
    for name in names:
        ns = statistics.median(times[name])
        ratio = statistics.median(a / b for a, b in zip(times[name], first, strict=True))
        deciles = statistics.quantiles(times[name], n=10)
        spread = f"{deciles[0]:.0f}-{deciles[-1]:.0f}"
        print(f"{name:44}{ns:>10.0f}{ratio:>12.2f}x{spread:>17}")
        figures[name] = (ns, ratio)
    return figures


def verdict(ok: bool) -> str:
    return "PASS" if ok else "OVER"


def versions() -> str:
    from importlib.metadata import version

    packages = ("haltwise", "agentarmor", "agentguard47", "pydantic-ai-slim")
    return ", ".join(f"{name} {version(name)}" for name in packages)


def main() -> None:
    from haltwise import _compiled

    print(f"Python {sys.version.split()[0]}; {versions()}")
    # A stale or missing compile puts the pure build in force: the figures are then its.
    print(f"haltwise build in force: {_compiled.BUILD} ({_compiled.REASON})")
    print(
        f"limits: turns {MAX_TURNS}, tool calls {MAX_TOOL_CALLS}, tokens {MAX_TOKENS:,}, "
        f"${MAX_COST}, {TIMEOUT_S // 60} min (each peer as far as it has them); "
        f"{ROUNDS} interleaved rounds of {CALLS_PER_RUN} calls, median of per-round ratios"
    )
    calls = measure(
        {
            "haltwise Governor (prices gpt-4o itself)": haltwise_call(cost_given=False),
            "  its response cost given": haltwise_call(cost_given=True),
            "agentarmor (patched create)": agentarmor_call(whole_conversation=True),
            "  its prompt 2 messages, not the run's": agentarmor_call(whole_conversation=False),
            "pydantic-ai UsageLimits (cost given)": pydantic_ai_call(),
            "agentguard47 (patched create)": agentguard_call(),
        },
        ROUNDS,
    )
    call_figures = print_table(
        "one LLM call, recorded and checked (request + response), ns per call", calls
    )

    tool_figures: dict[str, dict[str, tuple[float, float]]] = {}
    for size, make, offset in (("3-line", short_result, 10_000), ("1 KB", long_result, 50_000)):
        results = Results(make, offset)
        loops = {
            "haltwise ToolCall+ToolResult, limits|stuck()": haltwise_tool(results),
            "  stuck() alone": haltwise_tool(results, with_limits=False),
            "pydantic-ai check_before_tool_call": pydantic_ai_tool(results),
            "agentguard47 trace_tool (tracer's guards)": agentguard_traced_tool(results),
            "agentguard47 LoopGuard+FuzzyLoopGuard.check": agentguard_loop_guards(results),
        }
        tool_figures[size] = print_table(
            f"one tool call and its {size} result, ns per call", measure(loops, ROUNDS)
        )
    print("(agentarmor has no per-tool-call hook: its tool firewall checks tool names inside")
    print(" the model's response, which the LLM call row already runs through its hooks)")

    print("\ngoals (issue 15):")
    names = list(call_figures)
    haltwise_ns = call_figures[names[0]][0]
    peers = {
        name: figures
        for name, figures in call_figures.items()
        if name != names[0] and not name.startswith(" ")
    }
    fastest = min(peers, key=lambda name: peers[name][1])
    fastest_ratio = 1 / peers[fastest][1]
    print(
        f"  LLM call at most {CALL_GOAL_NS} ns: "
        f"{verdict(haltwise_ns <= CALL_GOAL_NS)} ({haltwise_ns:.0f} ns)"
    )
    print(
        f"  LLM call at most {CALL_PEER_RATIO}x the fastest peer ({fastest.strip()}): "
        f"{verdict(fastest_ratio <= CALL_PEER_RATIO)} ({fastest_ratio:.2f}x)"
    )
    for size, goal in TOOL_GOALS_NS.items():
        ns = next(iter(tool_figures[size].values()))[0]
        print(
            f"  tool call + {size} result with stuck() at most {goal / 1000:.0f} us: "
            f"{verdict(ns <= goal)} ({ns / 1000:.2f} us)"
        )


if __name__ == "__main__":
    main()
