"""What governing an agent loop costs: the Governor per event, next to doing it by hand.

Contenders, each called once per event of the same pre-built stream (a run = ``RunStarted``,
20 turns of ``TurnStarting ModelRequest ModelResponse (ToolCall ToolResult)x2 TurnEnded``,
``RunEnded``; 162 events), timed side by side in interleaved rounds:

- ``haltwise Governor``: ``Governor.handle`` with ``max_turns(25) | max_tool_calls(50) |
  max_tokens(200_000) | max_cost("5.00") | timeout(minutes=30)``, pricing gpt-4o itself;
- ``bare loop (by hand)``: counters, a ``Decimal`` cost from fixed per-token prices, a
  monotonic clock check and ``if x >= limit`` checks, written out by hand;
- ``pydantic-ai UsageLimits``: a ``RunUsage`` incremented and ``UsageLimits`` checked where
  pydantic-ai's agent graph checks them, with the response's cost given, and again with the
  cost priced per response by ``genai_prices.calc_price`` as pydantic-ai does;
- diagnostics: the Governor with ``ModelResponse.cost`` given (no response pricing), and a
  no-op callable (the driver's loop and one call per event: the floor of any per-event API);
- ``Guard (sync Run)``: the same limits in a ``Guard``, each event sent through ``Run.send``:
  what the driver adds to the engine (goal: at most 1.3x the Governor);
- ``Governor at BASE``: the Governor of an earlier revision (``HALTWISE_BENCH_BASE``, by default
  the one before the governor took a lock and held reservations), extracted with ``git
  archive`` and imported under another name, so that a change to the hot path is measured
  before and after in the same run. Skipped, saying why, outside a git checkout.

Then a run's start and its first LLM call on a Governor made for the run (as a service that
governs each request apart makes one) and on one made once. Then one LLM call as a driver
reports it (its two events built and handled) by the build in
force (compiled, when haltwise was installed with a C compiler) and, when that is the compiled
one, by the pure build beside it (the same sources, copied without their extensions and
imported as ``haltwise_pure``), next to the same at BASE and to the floors: the events built
alone, built and each handed to a no-op, and built and each handled under a lock with a clock
read (what a thread-safe governor with a time limit cannot skip, here written in Python); then
the memory of one governed run (tracemalloc) and of a Governor itself. With ``HALTWISE_PURE=1``
the pure build is the one in force and the only one timed.

``python benchmarks/run.py governor``; ``python benchmarks/bench_governor.py --profile`` prints
a cProfile of the Governor over the same stream (not part of the benchmark's record), and
``--instructions`` counts, under Valgrind (``instructions.py``), the instructions of one LLM call
by the Governor and by the floors, which a loaded machine does not move.
"""

from __future__ import annotations

import gc
import importlib.util
import os
import shutil
import statistics
import sys
import tempfile
import threading
import time
import tracemalloc
from collections.abc import Callable, Sequence
from decimal import Decimal
from pathlib import Path
from typing import Any

from genai_prices import calc_price
from pydantic_ai.usage import RequestUsage, RunUsage, UsageLimits

import haltwise
import instructions
from haltwise import (
    Event,
    Governor,
    Guard,
    Limit,
    ModelRequest,
    ModelResponse,
    Run,
    RunEnded,
    RunStarted,
    Status,
    Stop,
    ToolCall,
    TurnStarting,
    Warn,
)
from haltwise.engine.decisions import CONTINUE, Continue
from revisions import load_revision

#: The default limit set the benchmark governs with, and its numbers for the hand-written loop.
MAX_TURNS = 25
MAX_TOOL_CALLS = 50
MAX_TOKENS = 200_000
MAX_COST = Decimal("5.00")
TIMEOUT_S = 30 * 60.0

TURNS = 20
MODEL = "gpt-4o"
#: gpt-4o's list price in USD per token (input, cached input, output), for the by-hand loop.
PRICE_IN = Decimal("2.50") / 1_000_000
PRICE_CACHED = Decimal("1.25") / 1_000_000
PRICE_OUT = Decimal("10.00") / 1_000_000
PRICES = (PRICE_IN, PRICE_CACHED, PRICE_OUT)
MAX_COST_UNITS = int(MAX_COST * 10**18)

#: Interleaved rounds; each round times every contender over RUNS_PER_BATCH runs, then once
#: more event by event (for the per-type table).
ROUNDS = 150
RUNS_PER_BATCH = 12
MEMORY_RUNS = 100
BUDGET_NS = 1_000
BUDGET_BYTES = 2_048
#: The driver's goal: a ``Guard`` costs at most this much more per event than its Governor.
GUARD_RATIO = 1.3
GUARD = "Guard (sync Run)"

Handler = Callable[[Event], object]


#: The revision whose Governor is timed beside today's (before issue 9: no lock, no reservations).
BASE_REVISION = os.environ.get("HALTWISE_BENCH_BASE", "f31c4bb")


def limits(api: Any = haltwise) -> Limit:
    """The benchmark's limits, built with ``api`` (``haltwise``, or the base revision's)."""
    limit: Limit = (
        api.max_turns(MAX_TURNS)
        | api.max_tool_calls(MAX_TOOL_CALLS)
        | api.max_tokens(MAX_TOKENS)
        | api.max_cost(str(MAX_COST))
        | api.timeout(minutes=30)
    )
    return limit


def load_pure() -> Any:
    """This haltwise's pure build: its package copied without the compiled extensions (and
    their digest) and imported as ``haltwise_pure``, beside the build in force."""
    source = Path(haltwise.__file__).resolve().parent
    package = Path(tempfile.mkdtemp(prefix="haltwise-pure-")) / "haltwise_pure"
    shutil.copytree(
        source, package, ignore=shutil.ignore_patterns("*.so", "*.pyd", "*.c", "_compiled.sha256")
    )
    spec = importlib.util.spec_from_file_location(
        "haltwise_pure", package / "__init__.py", submodule_search_locations=[str(package)]
    )
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["haltwise_pure"] = module
    spec.loader.exec_module(module)
    assert module._compiled.BUILD == "pure"
    return module


def load_base() -> Any:
    """The ``haltwise`` package at ``BASE_REVISION``, imported as ``haltwise_base``; or the
    reason it cannot be (not a git checkout, no such revision)."""
    return load_revision(BASE_REVISION, "haltwise_base")


# ------------------------------------------------------------------------------------------------
# The event stream


def turn_usage(k: int) -> tuple[int, int, int]:
    """Turn ``k``'s (input, output, cache_read) tokens: a context that grows, its prefix cached."""
    input_tokens = 1_500 + 400 * k
    output_tokens = 220 + (37 * k) % 90
    cache_read = 0 if k == 0 else (1_500 + 400 * (k - 1)) // 128 * 128
    return input_tokens, output_tokens, cache_read


def build_run(*, priced: bool = False, api: Any = haltwise) -> list[Event]:
    """One run's events, built once (building them is the driver's cost, not the governor's).

    ``priced=True`` gives each ``ModelResponse`` its cost, as a provider that bills it would;
    ``api`` is the package whose event types to use.
    """
    events: list[Event] = [api.RunStarted(prompt="Fix the failing test in tests/test_api.py")]
    for k in range(TURNS):
        last = k == TURNS - 1
        input_tokens, output_tokens, cache_read = turn_usage(k)
        cost = by_hand_cost(input_tokens, output_tokens, cache_read) if priced else None
        events += [
            api.TurnStarting(),
            api.ModelRequest(model=MODEL, max_tokens=1024),
            api.ModelResponse(
                model=MODEL,
                input_tokens=input_tokens,
                output_tokens=output_tokens,
                cache_read_tokens=cache_read,
                cost=cost,
                text="The test passes now." if last else None,
                tool_calls=2,
            ),
            api.ToolCall("read_file", {"path": f"src/app/module_{k}.py"}, f"call_{k}a"),
            api.ToolResult("read_file", "def handler(request):\n    ...\n" * 20, f"call_{k}a"),
            api.ToolCall("run_tests", {"path": "tests/test_api.py"}, f"call_{k}b"),
            api.ToolResult("run_tests", "1 failed, 41 passed in 2.31s", f"call_{k}b", exit_code=1),
            api.TurnEnded(text="The test passes now." if last else None),
        ]
    events.append(api.RunEnded())
    return events


def by_hand_cost(input_tokens: int, output_tokens: int, cache_read: int) -> Decimal:
    return (
        PRICE_IN * (input_tokens - cache_read)
        + PRICE_CACHED * cache_read
        + PRICE_OUT * output_tokens
    )


# ------------------------------------------------------------------------------------------------
# Contenders: each is one callable per event


class Halt(Exception):
    """A hand-written loop's limit tripped (the benchmark's stream never trips one)."""


class BareLoop:
    """The same bookkeeping, by hand: what a careful hand-written agent loop does inline."""

    __slots__ = ("cost", "last_input", "started", "tokens", "tool_calls", "turns")

    def __init__(self) -> None:
        self.turns = 0
        self.tool_calls = 0
        self.tokens = 0
        self.last_input = 0
        self.cost = Decimal(0)
        self.started = 0.0

    def handle(self, event: Any) -> None:  # Any: narrowing each branch would cost an isinstance
        kind = type(event)
        now = time.monotonic()
        if kind is RunStarted:
            self.turns = self.tool_calls = self.tokens = self.last_input = 0
            self.cost = Decimal(0)
            self.started = now
            return
        if now - self.started >= TIMEOUT_S:
            raise Halt("timeout")
        if kind is ToolCall:
            if self.tool_calls >= MAX_TOOL_CALLS:
                raise Halt("tool calls")
            self.tool_calls += 1
        elif kind is ModelResponse:
            self.tokens += event.input_tokens + event.output_tokens
            self.last_input = event.input_tokens
            self.cost += (
                PRICE_IN * (event.input_tokens - event.cache_read_tokens)
                + PRICE_CACHED * event.cache_read_tokens
                + PRICE_OUT * event.output_tokens
            )
            if self.tokens > MAX_TOKENS:
                raise Halt("tokens")
            if self.cost > MAX_COST:
                raise Halt("cost")
        elif kind is ModelRequest:
            if self.tokens >= MAX_TOKENS:
                raise Halt("tokens")
            if self.cost >= MAX_COST:
                raise Halt("cost")
            worst = PRICE_IN * self.last_input + PRICE_OUT * (event.max_tokens or 0)
            if self.cost + worst > MAX_COST:
                raise Halt("cost (worst case)")
        elif kind is TurnStarting:
            if self.turns >= MAX_TURNS:
                raise Halt("turns")
            self.turns += 1


class PydanticAILimits:
    """``UsageLimits`` checked on a ``RunUsage`` where pydantic-ai's agent graph checks them.

    The request limit is checked as each step (turn) starts; a response is counted, its usage
    added and the token and cost limits checked; a tool call is counted and checked. pydantic-ai
    has no time limit and no worst-case cost check before a request, so those events do nothing.
    With ``price=True`` each response is priced by ``genai_prices.calc_price`` first, as
    pydantic-ai's ``fill_response_cost`` does; otherwise its cost comes with it.
    """

    __slots__ = ("limits", "price", "usage", "usages")

    def __init__(self, run: Sequence[Event], *, price: bool) -> None:
        self.limits = UsageLimits(
            request_limit=MAX_TURNS,
            tool_calls_limit=MAX_TOOL_CALLS,
            total_tokens_limit=MAX_TOKENS,
            cost_limit=MAX_COST,
        )
        self.price = price
        self.usage = RunUsage()
        # The responses' usage as pydantic-ai's models hand it over: one RequestUsage each.
        self.usages: dict[int, RequestUsage] = {}
        for event in run:
            if isinstance(event, ModelResponse):
                usage = RequestUsage(
                    input_tokens=event.input_tokens,
                    output_tokens=event.output_tokens,
                    cache_read_tokens=event.cache_read_tokens,
                )
                usage.cost = calc_price(usage, model_ref=MODEL, provider_id="openai").total_price
                self.usages[id(event)] = usage

    def handle(self, event: Any) -> None:
        kind = type(event)
        if kind is ToolCall:
            self.usage.tool_calls += 1
            self.limits.check_before_tool_call(self.usage)
        elif kind is ModelResponse:
            request_usage = self.usages[id(event)]
            if self.price:
                request_usage.cost = calc_price(
                    request_usage, model_ref=MODEL, provider_id="openai"
                ).total_price
            usage = self.usage
            usage.requests += 1
            usage.incr(request_usage)
            self.limits.check_tokens(usage)
            self.limits.check_cost(usage, warn_if_cost_unavailable=False)
        elif kind is TurnStarting:
            self.limits.check_before_request(self.usage)
        elif kind is RunStarted:
            self.usage = RunUsage()


def guard_send() -> Callable[[Event], object]:
    """``Run.send`` of a ``Guard``'s synchronous run, which takes every event of the stream as a
    hand-written loop reports them (``RunStarted`` and ``RunEnded`` too: the governor starts
    and ends each run). One ``Run`` serves every run of the stream: building one costs about
    0.7 us, a few ns per event, left out here like the loop's own."""
    run: Run = Guard(limits()).run("benchmark")
    return run.send


def noop(event: Event) -> None:
    return None


# ------------------------------------------------------------------------------------------------
# Checking the stream never trips anything


def check_decision(event: Event, decision: object) -> None:
    if type(event) is RunEnded:
        assert isinstance(decision, Stop), decision
        assert decision.outcome.status is Status.COMPLETED, decision.outcome
    else:
        assert isinstance(decision, Continue | Warn), (event, decision)


# ------------------------------------------------------------------------------------------------
# Timing


def time_batch(handle: Handler, run: Sequence[Event], runs: int) -> float:
    """ns per event over ``runs`` runs, gc off."""
    gc.disable()
    try:
        start = time.perf_counter_ns()
        for _ in range(runs):
            for event in run:
                handle(event)
        elapsed = time.perf_counter_ns() - start
    finally:
        gc.enable()
    return elapsed / (runs * len(run))


def time_each(
    handle: Handler, run: Sequence[Event], samples: dict[type, list[int]], *, check: bool
) -> None:
    """Time one run event by event, adding each event's ns (timer pair included) to samples.

    The run is driven twice and only the second is kept, so that its ``RunStarted`` is timed
    warm, after a ``RunEnded``, as in a session, rather than after the other contenders ran.
    """
    clock = time.perf_counter_ns
    laps: list[tuple[Event, int, object]] = []
    gc.disable()
    try:
        for event in run:
            handle(event)
        for event in run:
            start = clock()
            decision = handle(event)
            laps.append((event, clock() - start, decision))
    finally:
        gc.enable()
    for event, ns, decision in laps:
        samples.setdefault(type(event), []).append(ns)
        if check:
            check_decision(event, decision)


def timer_overhead() -> float:
    """The median cost of an empty ``perf_counter_ns`` pair, to take off per-event timings."""
    clock = time.perf_counter_ns
    pairs = []
    gc.disable()
    try:
        for _ in range(2_000):
            start = clock()
            pairs.append(clock() - start)
    finally:
        gc.enable()
    return statistics.median(pairs)


class Contender:
    def __init__(self, name: str, handle: Handler, run: Sequence[Event], *, check: bool) -> None:
        self.name = name
        self.handle = handle
        self.run = run
        self.check = check
        self.batches: list[float] = []
        self.samples: dict[type, list[int]] = {}


def contenders() -> list[Contender]:
    run = build_run()
    priced_run = build_run(priced=True)
    governor = Governor(limits())
    priced_governor = Governor(limits())
    bare = BareLoop()
    pydantic_given = PydanticAILimits(run, price=False)
    pydantic_priced = PydanticAILimits(run, price=True)
    return [
        Contender("haltwise Governor", governor.handle, run, check=True),
        Contender("bare loop (by hand)", bare.handle, run, check=False),
        Contender("pydantic-ai UsageLimits", pydantic_given.handle, run, check=False),
        Contender("  + calc_price per response", pydantic_priced.handle, run, check=False),
        Contender("Governor, response cost given", priced_governor.handle, priced_run, check=True),
        Contender(GUARD, guard_send(), run, check=True),
        Contender("no-op callable (loop floor)", noop, run, check=False),
        *base_contenders(),
    ]


def base_contenders() -> list[Contender]:
    base = load_base()
    if isinstance(base, str):
        print(f"(the Governor at the base revision is not timed: {base})")
        return []
    governor = base.Governor(limits(base))
    run = build_run(api=base)
    return [Contender(f"Governor at {BASE_REVISION}", governor.handle, run, check=False)]


def measure_speed() -> tuple[list[Contender], float]:
    players = contenders()
    for player in players:  # warm-up: pricers resolve gpt-4o, caches fill, code is hot
        for _ in range(3):
            for event in player.run:
                player.handle(event)
    overheads = []
    for round_no in range(ROUNDS):
        shift = round_no % len(players)
        order = players[shift:] + players[:shift]
        for player in order:
            player.batches.append(time_batch(player.handle, player.run, RUNS_PER_BATCH))
        for player in reversed(order):
            time_each(player.handle, player.run, player.samples, check=player.check)
        if round_no % 10 == 0:
            overheads.append(timer_overhead())
        gc.collect()
    return players, statistics.median(overheads)


def print_speed(players: list[Contender], overhead: float) -> float:
    base = players[0]
    events = len(base.run)
    print(
        f"per event, {events} events/run x {RUNS_PER_BATCH} runs, median of {ROUNDS} interleaved "
        "rounds"
    )
    print(f"{'':34}{'ns/event':>9}{'vs haltwise':>13}{'p10-p90 ns':>15}")
    governor_ns = statistics.median(base.batches)
    ratios: dict[str, float] = {}
    for player in players:
        ratio = ratios[player.name] = statistics.median(
            mine / theirs for mine, theirs in zip(player.batches, base.batches, strict=True)
        )
        deciles = statistics.quantiles(player.batches, n=10)
        spread = f"{deciles[0]:.0f}-{deciles[-1]:.0f}"
        print(
            f"{player.name:34}{statistics.median(player.batches):>9.0f}{ratio:>12.2f}x{spread:>15}"
        )
    verdict = "PASS" if governor_ns <= BUDGET_NS else "OVER"
    print(f"budget ~{BUDGET_NS} ns/event: {verdict} ({governor_ns:.0f} ns)")
    guard = ratios[GUARD]
    verdict = "PASS" if guard <= GUARD_RATIO else "OVER"
    print(f"goal: Guard at most {GUARD_RATIO}x the Governor: {verdict} ({guard:.2f}x)")
    print(
        "(pydantic-ai rows check no time limit and reserve no worst-case cost before a request;"
        "\n its agent also deepcopies RunUsage before each batch of tool calls, not counted here)"
    )

    kinds = list(dict.fromkeys(type(event) for event in base.run))
    shown = players[:3]
    print(
        f"\nper event type, ns (median of single-event timings, {overhead:.0f} ns timer pair "
        "taken off)"
    )
    header = "".join(f"{_short(p.name):>12}" for p in shown)
    print(f"{'event':16}{'per run':>8}{header}")
    totals = [0.0] * len(shown)
    for kind in kinds:
        count = sum(1 for event in base.run if type(event) is kind)
        cells = []
        for index, player in enumerate(shown):
            ns = max(0.0, statistics.median(player.samples[kind]) - overhead)
            totals[index] += ns * count
            cells.append(f"{ns:>12.0f}")
        print(f"{kind.__name__:16}{count:>8}{''.join(cells)}")
    weighted = "".join(f"{total / events:>12.0f}" for total in totals)
    print(f"{'weighted mean':16}{events:>8}{weighted}")
    return governor_ns


def _short(name: str) -> str:
    return {"haltwise Governor": "haltwise", "bare loop (by hand)": "by hand"}.get(
        name, "pydantic-ai"
    )


# ------------------------------------------------------------------------------------------------
# One LLM call

#: Calls per run in the one-call measurement (a run restarts between batches, so no limit trips).
CALLS_PER_RUN = 20
#: Issue 15's goal for one LLM call, events built, recorded and checked: 2x the fastest peer.
CALL_GOAL_NS = 650


def call_loop(api: Any, handle: Handler | None) -> Callable[[], int]:
    """A timed run of ``CALLS_PER_RUN`` LLM calls as a driver reports them: a ``ModelRequest``
    and a ``ModelResponse`` built and handled per call (``handle`` None: only built). Returns
    a function that times one such run, in ns, after a ``RunStarted`` it does not time."""
    request, response, started = api.ModelRequest, api.ModelResponse, api.RunStarted
    clock = time.perf_counter_ns
    usage = [turn_usage(k) for k in range(CALLS_PER_RUN)]

    def built_and_handled() -> int:
        assert handle is not None
        handle(started("Fix the failing test"))
        start = clock()
        for input_tokens, output_tokens, cache_read in usage:
            handle(request(model=MODEL, max_tokens=1024))
            handle(
                response(
                    model=MODEL,
                    input_tokens=input_tokens,
                    output_tokens=output_tokens,
                    cache_read_tokens=cache_read,
                )
            )
        return clock() - start

    def built() -> int:
        start = clock()
        for input_tokens, output_tokens, cache_read in usage:
            request(model=MODEL, max_tokens=1024)
            response(
                model=MODEL,
                input_tokens=input_tokens,
                output_tokens=output_tokens,
                cache_read_tokens=cache_read,
            )
        return clock() - start

    return built if handle is None else built_and_handled


class ByHandCalls:
    """The Governor's work for one LLM call under the benchmark's limits, written inline with
    ints: the deadline read from a monotonic clock, the token and worst-case cost checks before
    the request, its reservation held until the answer, usage counted for the run and the
    session, then checked. What pure Python costs for it at best (no lock, no dispatch)."""

    __slots__ = ("deadline", "flight", "rates", "run", "session")

    def __init__(self) -> None:
        per_token = 10**18 // 1_000_000
        self.rates = tuple(int(price * 1_000_000) * per_token for price in PRICES)
        #: model calls, input, output, cache read tokens, cost, the last prompt's size
        self.run = [0, 0, 0, 0, 0, 0]
        self.session = [0, 0, 0, 0, 0, 0]
        self.flight: list[tuple[int, int, int]] = []
        self.deadline = 0.0

    def handle(self, event: Any) -> object:
        kind = type(event)
        if time.monotonic() >= self.deadline and kind is not RunStarted:
            raise Halt("timeout")
        run, session = self.run, self.session
        rate_in, rate_cached, rate_out = self.rates
        if kind is ModelRequest:
            prompt, wanted = run[5], event.max_tokens
            held = run[1] + run[2] + sum(p + w for p, w, _ in self.flight)
            if held + prompt + wanted > MAX_TOKENS:
                raise Halt("tokens")
            worst = prompt * rate_in + wanted * rate_out
            if run[4] + sum(c for _, _, c in self.flight) + worst > MAX_COST_UNITS:
                raise Halt("cost")
            run[0] += 1
            session[0] += 1
            self.flight.append((prompt, wanted, worst))
        elif kind is ModelResponse:
            if self.flight:
                self.flight.pop(0)
            i, o, cr = event.input_tokens, event.output_tokens, event.cache_read_tokens
            cost = (i - cr) * rate_in + cr * rate_cached + o * rate_out
            for tally in (run, session):
                tally[1] += i
                tally[2] += o
                tally[3] += cr
                tally[4] += cost
                tally[5] = i
            if run[1] + run[2] > MAX_TOKENS or run[4] > MAX_COST_UNITS:
                raise Halt("tokens or cost")
        elif kind is RunStarted:
            self.run = [0, 0, 0, 0, 0, 0]
            self.deadline = time.monotonic() + TIMEOUT_S
        return CONTINUE


class LockedClock:
    """What any governor that may be called from several threads and keeps a time limit does
    for each event, and nothing else: take a lock, read the monotonic clock against the
    deadline, give the lock back. With the events built, the floor under the 650 ns goal, in
    Python (the compiled Governor takes its own lock without a Python call)."""

    __slots__ = ("due", "lock")

    def __init__(self) -> None:
        self.lock = threading.RLock()
        self.due = time.monotonic() + TIMEOUT_S

    def handle(self, event: object) -> object:
        with self.lock:
            if time.monotonic() >= self.due:
                raise Halt("timeout")
            return CONTINUE


def measure_llm_call() -> None:
    """One LLM call recorded and checked with the benchmark's limits, per call, side by side."""
    build = haltwise._compiled.BUILD
    loops = {
        f"haltwise Governor ({build})": call_loop(haltwise, Governor(limits()).handle),
        f"  its two events, built only ({build})": call_loop(haltwise, None),
        "  built, each handed to a no-op": call_loop(haltwise, noop),
        "  built, each under a lock with a clock read": call_loop(haltwise, LockedClock().handle),
    }
    if build == "compiled":  # else the build in force is the pure one
        pure = load_pure()
        loops["haltwise Governor (pure)"] = call_loop(pure, pure.Governor(limits(pure)).handle)
        loops["  its two events, built only (pure)"] = call_loop(pure, None)
    loops["by hand in ints (pure-Python floor)"] = call_loop(haltwise, ByHandCalls().handle)
    base = load_base()
    if not isinstance(base, str):
        loops[f"Governor at {BASE_REVISION}"] = call_loop(base, base.Governor(limits(base)).handle)
        loops[f"  its events at {BASE_REVISION}, built"] = call_loop(base, None)
    for loop in loops.values():  # warm-up
        for _ in range(20):
            loop()
    times: dict[str, list[float]] = {name: [] for name in loops}
    names = list(loops)
    gc.disable()
    try:
        for round_no in range(ROUNDS * 4):
            shift = round_no % len(names)
            for name in names[shift:] + names[:shift]:
                times[name].append(loops[name]() / CALLS_PER_RUN)
    finally:
        gc.enable()
    first = times[names[0]]
    print(
        f"\none LLM call (ModelRequest + ModelResponse built and handled), ns per call, "
        f"median of {ROUNDS * 4} interleaved runs of {CALLS_PER_RUN} calls"
    )
    print(f"{'':42}{'ns/call':>9}{'vs haltwise':>13}")
    for name in names:
        ratio = statistics.median(
            mine / theirs for mine, theirs in zip(times[name], first, strict=True)
        )
        print(f"{name:42}{statistics.median(times[name]):>9.0f}{ratio:>12.2f}x")
    print(f"(build in force: {build}, {haltwise._compiled.REASON})")
    for name in dict.fromkeys((names[0], "haltwise Governor (pure)")):
        ns = statistics.median(times[name])
        verdict = "PASS" if ns <= CALL_GOAL_NS else "OVER"
        print(f"goal: one LLM call at most {CALL_GOAL_NS} ns, {name}: {verdict} ({ns:.0f} ns)")


# ------------------------------------------------------------------------------------------------
# Memory


def drive(governor: Governor, run: Sequence[Event]) -> None:
    for event in run:
        governor.handle(event)


def measure_memory() -> tuple[int, int]:
    """Print the memory figures; return (retained bytes per run, high-water bytes per run)."""
    run = build_run()
    made = limits()
    drive(Governor(made), run)  # genai-prices' data and every code path loaded
    gc.collect()
    gc.disable()
    tracemalloc.start()
    try:
        keep = [tracemalloc.Filter(False, tracemalloc.__file__)]
        # Warm: the filter's pattern is compiled on first use, and abc caches fill.
        governors = [Governor(made) for _ in range(2)]
        tracemalloc.take_snapshot().filter_traces(keep)
        sizes = []
        for _ in range(5):  # the governors are kept alive, so none is freed inside a diff
            before = tracemalloc.take_snapshot().filter_traces(keep)
            governors.append(Governor(made))
            after = tracemalloc.take_snapshot().filter_traces(keep)
            sizes.append(sum(stat.size_diff for stat in after.compare_to(before, "filename")))
        own = int(statistics.median(sizes))
        governor = governors[-1]

        first_before = tracemalloc.get_traced_memory()[0]
        drive(governor, run)  # its first run: its Prices() is built and resolves gpt-4o
        first = tracemalloc.get_traced_memory()[0] - first_before
        drive(governor, run)  # a warm-up run, so that the runs measured are steady

        # Retained: nothing is recorded inside the loop, whose own ints would count too.
        start = tracemalloc.get_traced_memory()[0]
        for _ in range(MEMORY_RUNS):
            drive(governor, run)
        retained = (tracemalloc.get_traced_memory()[0] - start) / MEMORY_RUNS

        high_waters = []
        event_peaks: dict[type, list[int]] = {}
        for _ in range(MEMORY_RUNS // 5):
            run_start = tracemalloc.get_traced_memory()[0]
            tracemalloc.reset_peak()
            drive(governor, run)
            high_waters.append(tracemalloc.get_traced_memory()[1] - run_start)

        # Where the allocations are: each event's own high-water mark, summed over a run.
        for event in run:
            current = tracemalloc.get_traced_memory()[0]
            tracemalloc.reset_peak()
            governor.handle(event)
            event_peaks.setdefault(type(event), []).append(
                tracemalloc.get_traced_memory()[1] - current
            )
    finally:
        tracemalloc.stop()
        gc.enable()

    high_water = int(statistics.median(high_waters))
    print(f"\nmemory (tracemalloc, gc off; {MEMORY_RUNS} warm runs of {len(run)} events)")
    print(f"  Governor object, constructed       {own:>7,} B   (snapshot diff; limits pre-built)")
    print(f"  its first run (Prices() built)     {first:>7,} B   retained")
    print(f"  retained per run, steady state     {retained:>7,.0f} B   ", end="")
    print("PASS" if retained < BUDGET_BYTES else "OVER", f"(budget < {BUDGET_BYTES:,} B)")
    print(f"  high-water above start, per run    {high_water:>7,} B   ", end="")
    print("PASS" if high_water < BUDGET_BYTES else "OVER", f"(budget < {BUDGET_BYTES:,} B)")
    volume = sum(sum(peaks) for peaks in event_peaks.values())
    print(f"  sum of per-event high-waters       {volume:>7,} B   (~bytes allocated per run)")
    parts = ", ".join(
        f"{kind.__name__} {sum(peaks) / len(peaks):.0f}"
        for kind, peaks in event_peaks.items()
        if sum(peaks)
    )
    print(f"    by event type, B/event: {parts or 'none'}")
    return int(retained), high_water


#: Runs per round of ``measure_new_run``, and its rounds.
NEW_RUNS = 50
NEW_ROUNDS = 40


def measure_new_run() -> None:
    """A Governor made for each run, as a service that governs each request apart makes one:
    its construction, ``RunStarted`` and the run's first LLM call (priced by haltwise), beside
    the same run started on a Governor made once; interleaved rounds, medians."""
    made = limits()

    def first_call(governor: Governor) -> None:
        governor.handle(RunStarted(prompt="Fix the failing test"))
        governor.handle(ModelRequest(model=MODEL, max_tokens=1024))
        governor.handle(ModelResponse(model=MODEL, input_tokens=1_200, output_tokens=300))

    reused = Governor(made)
    players: dict[str, Callable[[], None]] = {
        "a Governor made for the run": lambda: first_call(Governor(made)),
        "a Governor made once, its run started": lambda: first_call(reused),
    }
    times: dict[str, list[float]] = {name: [] for name in players}
    for run in players.values():
        for _ in range(NEW_RUNS):
            run()
    for _ in range(NEW_ROUNDS):
        for name, run in players.items():
            started = time.perf_counter()
            for _ in range(NEW_RUNS):
                run()
            times[name].append((time.perf_counter() - started) / NEW_RUNS * 1e6)
    print("\nA run's start and its first LLM call, µs (median of interleaved rounds)")
    for name, measured in times.items():
        print(f"  {name:40} {statistics.median(measured):>8.1f}")


# ------------------------------------------------------------------------------------------------


def main() -> None:
    players, overhead = measure_speed()
    print_speed(players, overhead)
    measure_llm_call()
    measure_new_run()
    measure_memory()


#: ``--instructions``: LLM calls per phase, and phases per contender (the counts barely move).
INSTRUCTION_CALLS = 2_000
INSTRUCTION_ROUNDS = 3


def phases() -> None:
    """``--phases``, under callgrind (``count_instructions``): one LLM call, built and handled
    by each contender, ``INSTRUCTION_CALLS`` times a phase. The Governor's limits are the
    benchmark's with numbers no run of these calls reaches (the same checks, every call on the
    fast path), so that no ``RunStarted`` between runs is counted with the calls."""
    governor = Governor(
        haltwise.max_turns(MAX_TURNS)
        | haltwise.max_tool_calls(MAX_TOOL_CALLS)
        | haltwise.max_tokens(10**12)
        | haltwise.max_cost("1000000")
        | haltwise.timeout(minutes=30)
    )
    governor.handle(RunStarted(prompt="Fix the failing test in tests/test_api.py"))
    usage = [turn_usage(k % TURNS) for k in range(INSTRUCTION_CALLS)]

    def calls(handle: Handler | None) -> Callable[[], None]:
        def run() -> None:
            for input_tokens, output_tokens, cache_read in usage:
                request = ModelRequest(model=MODEL, max_tokens=1024)
                response = ModelResponse(
                    model=MODEL,
                    input_tokens=input_tokens,
                    output_tokens=output_tokens,
                    cache_read_tokens=cache_read,
                )
                if handle is not None:
                    handle(request)
                    handle(response)

        return run

    players = {
        "haltwise Governor": calls(governor.handle),
        "its two events, built only": calls(None),
        "built, each handed to a no-op": calls(noop),
        "built, each under a lock with a clock read": calls(LockedClock().handle),
    }
    for run in players.values():
        run()
    for _ in range(INSTRUCTION_ROUNDS):
        for name, run in players.items():
            instructions.mark(name)
            run()
    instructions.mark("end")


def count_instructions() -> None:
    counted = instructions.counted(Path(__file__), "one LLM call, its two events built and handled")
    if counted is None:
        return
    fewest: dict[str, int] = {}
    for name, count in counted:
        fewest[name] = min(fewest.get(name, count), count)
    for name, count in fewest.items():
        print(f"  {name:44} {count / INSTRUCTION_CALLS / 1000:>8.1f} k")


def profile() -> None:
    """cProfile the Governor over the stream (off the record: cProfile inflates small calls)."""
    import cProfile
    import pstats

    run = build_run()
    governor = Governor(limits())
    drive(governor, run)
    profiler = cProfile.Profile()
    profiler.enable()
    for _ in range(2_000):
        drive(governor, run)
    profiler.disable()
    stats = pstats.Stats(profiler)
    stats.sort_stats("tottime").print_stats(25)


if __name__ == "__main__":
    if "--profile" in sys.argv[1:]:
        profile()
    elif "--phases" in sys.argv[1:]:
        phases()
    elif "--instructions" in sys.argv[1:]:
        count_instructions()
    else:
        main()
