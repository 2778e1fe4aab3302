"""What every bounded loop shares: one decision flow per loop, two thin drivers, the governor.

Each loop writes its logic once, as a generator that yields ``_Call`` requests ("call this
callback with these arguments") and receives a ``_Reply`` (what it returned, or what it raised):
the httpx ``auth_flow`` pattern. ``drive`` runs the callbacks in plain Python; ``adrive`` awaits
the ones that return awaitables. Neither knows anything about loops.

A loop is the agent of its governor: each pass (an attempt, an iteration, a quote) begins with
a ``TurnStarting`` event, so the core's limits (time, turns, which then count passes, a cancel)
are checked before anything more is spent, and between the callbacks of a pass a ``Progress``
event picks up a cancel or a stop. Agents inside a loop report to ``step.governor``, a child of
the same governor, so their model calls, tokens and dollars count against the same budgets and
are refused when those are spent. A governor ``Ask`` goes to the loop's prompter and back
through ``Governor.resolve``; nothing here decides a limit.

What a loop spent is what it did itself, never a difference of its governor's totals, which
other loops on the same governor (in other threads or tasks) and a ``RunStarted`` change too:
its passes (the turns its own ``TurnStarting`` events were admitted for, counted under the
governor's lock), the time since it began, and what the agents in its passes reported to their
``step.governor`` (each child's session totals: the events its parent admitted, no more). So the
shared governor counts every call once, and each loop's ``Outcome.usage`` is its own share.
Events that a callback reports to the shared governor itself are the session's: they count
against its limits, but no loop can tell whose they were.

Everything a loop did is kept in ``Iteration`` records; an outcome that is not plainly
``completed`` saves a checkpoint (the loop's history, its best value when it can be stored as
JSON, and the governor's counts) through the ledger, and ``resume(ref)`` picks it up.
"""

from __future__ import annotations

import inspect
import json
import time
import uuid
from collections.abc import Awaitable, Callable, Generator
from dataclasses import dataclass, replace
from typing import Any, ClassVar, NoReturn, TypeVar

from ..drivers.prompters import Prompter
from ..engine.decisions import Answer, Ask, Choice, Decision, Stop, Warn
from ..engine.errors import ConfigurationError, HaltSignal
from ..engine.events import Progress, RunStarted, TurnStarting
from ..engine.governor import Governor
from ..engine.ledger import Ledger, MemoryLedger
from ..engine.limits import Limit
from ..engine.outcome import Outcome, Status, Usage
from .records import Iteration, LoopResult, Strictness, summarize

__all__ = ["BoundedLoop", "Step"]

T = TypeVar("T")
_CHECKPOINT_VERSION = 1
_MISSING: Any = object()


class _Call:
    """A request from a loop's logic: call ``function(*args)`` and send back what happened."""

    __slots__ = ("args", "function")

    def __init__(self, function: Callable[..., Any], args: tuple[Any, ...]) -> None:
        self.function = function
        self.args = args


class _Reply:
    """What a callback returned (``value``), or what it raised (``error``)."""

    __slots__ = ("error", "value")

    def __init__(self, value: Any = None, error: BaseException | None = None) -> None:
        self.value = value
        self.error = error


#: A loop's decision flow: yields calls, receives replies, returns the result.
Flow = Generator[_Call, _Reply, "LoopResult[Any]"]
#: A loop's logic: the same, returning how it finished.
Logic = Generator[_Call, _Reply, "_Finish"]


class _Halted(BaseException):
    """The governor stopped the loop. A BaseException, so no handler in a loop's logic eats it."""

    def __init__(self, stop: Stop) -> None:
        self.stop = stop
        super().__init__(stop.outcome.message)


@dataclass(frozen=True, slots=True)
class _Finish:
    """How a loop's logic ended, before the shared code turns it into an ``Outcome``."""

    status: Status
    reason: str
    message: str
    value: Any = None
    suggestions: tuple[str, ...] = ()
    #: The outcome's ``partial_output`` when the value has none (what the last pass produced).
    partial: str | None = None


class Step:
    """What a callback sees: where the loop is, what went before, and whom to report to."""

    __slots__ = (
        "_agents",
        "_child",
        "_limits",
        "_parent",
        "history",
        "limit",
        "notes",
        "number",
        "strictness",
    )

    def __init__(
        self,
        number: int,
        limit: int,
        history: tuple[Iteration, ...],
        strictness: Strictness,
        parent: Governor,
        limits: Limit | None,
        agents: list[Governor] | None = None,
    ) -> None:
        #: 1 for the first pass.
        self.number = number
        #: The loop's bound: the last pass's number.
        self.limit = limit
        #: Every earlier pass, oldest first: what was tried and what came of it.
        self.history = history
        #: How strict the judge is on this pass (refine's schedule; ``all`` elsewhere).
        self.strictness = strictness
        #: Notes from the governor's soft limits ("3 model calls left"), for the agent's model.
        self.notes: list[str] = []
        self._parent = parent
        self._limits = limits
        #: Where the child is listed when it is made: the loop sums what its children spent.
        self._agents = agents
        self._child: Governor | None = None

    @property
    def governor(self) -> Governor:
        """A child of the loop's governor, for an agent inside this pass to report to.

        The agent starts its own run on it (``RunStarted``); its model and tool calls count
        against the loop's budgets too, and stop when they are spent. What it spends is the
        loop's ``Outcome.usage``; what is reported to the loop's governor itself is not. Made
        on first use.
        """
        if self._child is None:
            self._child = self._parent.child(self._limits)
            if self._agents is not None:
                self._agents.append(self._child)
        return self._child

    @property
    def previous(self) -> Iteration | None:
        """The last pass, if any."""
        return self.history[-1] if self.history else None

    @property
    def remaining(self) -> int:
        """Passes left after this one."""
        return self.limit - self.number

    @property
    def last(self) -> bool:
        """Whether this is the loop's last pass."""
        return self.number >= self.limit

    def __repr__(self) -> str:
        return f"Step({self.number}/{self.limit}, strictness={self.strictness!r})"


class _Run:
    """The state of one run of a loop: its governor, history, best value and checkpoint key."""

    def __init__(
        self,
        loop: BoundedLoop,
        governor: Governor,
        prompter: Prompter | None,
        resumed: dict[str, Any] | None,
    ) -> None:
        self.loop = loop
        self.governor = governor
        self.prompter = prompter
        self.history: list[Iteration] = []
        #: Loop-specific state that a checkpoint keeps (JSON-compatible).
        self.state: dict[str, Any] = {}
        #: Values (best so far, current candidate) kept by name; dumped into checkpoints.
        self.values: dict[str, Any] = {}
        self.notes: list[str] = []
        #: A pass that produced a value not judged yet: recorded if the loop stops before that.
        self.pending: Iteration | None = None
        #: Whether a pass has just begun, so its first callback needs no check of its own.
        self.fresh = False
        self.loop_id = uuid.uuid4().hex[:8]
        #: What earlier runs of the loop spent (a resumed checkpoint's usage).
        self.prior = Usage()
        #: Turns of the governor that this run's own ``TurnStarting`` events were admitted for.
        self.turns = 0
        #: The child governors of this run's passes (``step.governor``), in the order made.
        self.agents: list[Governor] = []
        self.saved_values: dict[str, Any] = {}
        if resumed is not None:
            self.history = [Iteration.from_dict(item) for item in resumed.get("history", ())]
            self.state = dict(resumed.get("state", {}))
            self.saved_values = dict(resumed.get("values", {}))
            self.loop_id = str(resumed.get("loop_id", self.loop_id))
            self.prior = _usage_from_dict(resumed.get("usage", {}))
        #: When this run began, on the governor's clock.
        self.started = governor.now()

    # -- passes ----------------------------------------------------------------------------

    @property
    def number(self) -> int:
        """Passes made so far (resumed ones included)."""
        return len(self.history)

    def next_step(
        self, limit: int, strictness: Strictness = "all", number: int | None = None
    ) -> Generator[_Call, _Reply, Step]:
        """Begin a pass: a turn of the loop's governor (limits checked), then its ``Step``."""
        yield from self.turn()
        step = Step(
            self.number + 1 if number is None else number,
            limit,
            tuple(self.history),
            strictness,
            self.governor,
            self.loop.step_limits,
            self.agents,
        )
        step.notes.extend(self.notes)
        self.notes.clear()
        return step

    def record(self, iteration: Iteration) -> Iteration:
        self.pending = None
        self.history.append(iteration)
        return iteration

    def unjudged(self, number: int, label: str, value: Any, started: float) -> None:
        """A pass made ``value``; until it is judged and recorded, a stop records it as is."""
        self.pending = Iteration(
            number,
            label,
            summary=summarize(value),
            error="not judged: the loop was stopped first",
            elapsed=self.now() - started,
        )

    def now(self) -> float:
        return self.governor.now()

    # -- values ----------------------------------------------------------------------------

    def keep(self, name: str, value: Any) -> None:
        self.values[name] = value

    def kept(self, name: str, default: Any = None) -> Any:
        return self.values.get(name, default)

    def restored(self, name: str) -> Any:
        """A value saved in the checkpoint this run resumed from, or ``_MISSING``."""
        if name not in self.saved_values:
            return _MISSING
        return self.loop._load_value(self.saved_values[name])

    # -- talking to the governor and the callbacks ------------------------------------------

    def begin(self) -> Generator[_Call, _Reply, None]:
        """Start a run on the governor when none has started (a loop nested in a run does not)."""
        with self.governor.lock:
            # Looked at and started as one step: of loops starting together on a fresh governor,
            # one starts the run, and no second RunStarted resets what the others have counted.
            if self.governor.run_id:
                return
            decision = self.decide(self.governor.handle, RunStarted(prompt=repr(self.loop)))
        yield from self.carry_out(decision)

    def turn(self) -> Generator[_Call, _Reply, None]:
        """A pass is about to start: to the loop's governor, a turn (counted, and checked before
        anything is spent: time, turns, a cancel). Raises ``_Halted`` when it may not start."""
        yield from self.send(TurnStarting())
        self.fresh = True

    def check(self, what: str) -> Generator[_Call, _Reply, None]:
        """Between the callbacks of a pass: has the governor stopped or been cancelled?"""
        yield from self.send(
            Progress(metric=f"loop.{self.loop.kind}", value=float(self.number), note=what)
        )

    def send(self, event: TurnStarting | Progress) -> Generator[_Call, _Reply, None]:
        yield from self.carry_out(self.decide(self.governor.handle, event))

    def carry_out(self, decision: Decision) -> Generator[_Call, _Reply, None]:
        """Put a question to the prompter until it is settled; keep a note; halt at a stop."""
        while isinstance(decision, Ask):
            answer = None
            if self.prompter is not None:
                reply = yield _Call(self.prompter, (decision,))
                answer = _as_answer(reply.value) if reply.error is None else None
            decision = self.decide(self.governor.resolve, decision, answer)
        if isinstance(decision, Warn):
            self.notes.append(decision.message)
        elif isinstance(decision, Stop):
            raise _Halted(decision)

    def decide(self, decide: Callable[..., Decision], *args: Any) -> Decision:
        """``decide(*args)``, a ``handle`` or a ``resolve`` of the governor, counting the turn it
        admits as this run's. The governor's lock (reentrant, and held by the governor only
        while it decides) keeps other loops' turns out of the count; a turn's before-checks
        may refuse it, its after-checks stop the run once it is counted, so only the count
        tells whether it was."""
        governor = self.governor
        with governor.lock:
            before = governor.session_usage.turns
            decision = decide(*args)
            self.turns += governor.session_usage.turns - before
        return decision

    def call(self, function: Callable[..., Any], *args: Any) -> Generator[_Call, _Reply, _Reply]:
        """Check with the governor, then call ``function(*args)``: its reply, raised or not."""
        if self.fresh:
            self.fresh = False  # the pass's turn was just checked
        else:
            yield from self.check(getattr(function, "__name__", "callback"))
        reply = yield _Call(function, args)
        return reply

    # -- ending ----------------------------------------------------------------------------

    def spent(self) -> Usage:
        """What this run of the loop spent, earlier runs' included (see the module's docstring).

        Each child's session totals, not its run's: an agent may start several runs on it.
        """
        spent = self.prior + Usage(turns=self.turns, elapsed=max(0.0, self.now() - self.started))
        for agent in self.agents:
            # Its turns are the agent's own, not the loop's passes; its time is the loop's.
            spent += replace(agent.session_usage, turns=0, elapsed=0.0)
        return spent

    def checkpoint_data(self, status: Status, reason: str) -> dict[str, Any]:
        values = {}
        for name, value in self.values.items():
            stored = self.loop._dump_value(value)
            if stored is not _MISSING:
                values[name] = stored
        return {
            "version": _CHECKPOINT_VERSION,
            "kind": self.loop.kind,
            "loop": repr(self.loop),
            "loop_id": self.loop_id,
            "status": str(status),
            "reason": reason,
            "history": [iteration.to_dict() for iteration in self.history],
            "state": self.state,
            "values": values,
            "usage": _usage_to_dict(self.spent()),
            "governor": self.governor.checkpoint(),
        }

    def save(self, status: Status, reason: str) -> str:
        key = f"{self.governor.run_id or 'loop'}.{self.loop.kind}-{self.loop_id}"
        return self.loop.ledger.save_checkpoint(key, self.checkpoint_data(status, reason))

    def result(self, finish: _Finish) -> LoopResult[Any]:
        checkpoint = None
        suggestions = finish.suggestions
        if finish.status is not Status.COMPLETED:
            checkpoint = self.save(finish.status, finish.reason)
            suggestions = (*suggestions, f"Resume from checkpoint {checkpoint}")
        outcome = Outcome(
            status=finish.status,
            reason=finish.reason,
            message=finish.message,
            usage=self.spent(),
            run_id=self.governor.run_id,
            partial_output=finish.partial if finish.value is None else _partial(finish.value),
            suggestions=suggestions,
            checkpoint=checkpoint,
            # As the engine's: the bound or detector that ended the loop, None when it was done.
            limit=None if finish.reason == "completed" else repr(self.loop),
        )
        return LoopResult(outcome, finish.value, tuple(self.history))

    def halted(self, stop: Stop) -> LoopResult[Any]:
        """The governor stopped the loop: its outcome, with the loop's best effort and history."""
        stopped = stop.outcome
        if self.pending is not None:
            self.record(self.pending)
        value = self.loop._best_effort(self)
        checkpoint = self.save(stopped.status, stopped.reason)
        suggestions = tuple(
            text for text in stopped.suggestions if not text.startswith("Resume from checkpoint")
        )
        note = self.loop._halt_note(self)
        outcome = Outcome(
            status=stopped.status,
            reason=stopped.reason,
            message=_sentences(stopped.message, note),
            usage=self.spent(),
            run_id=stopped.run_id or self.governor.run_id,
            partial_output=_partial(value),
            suggestions=(*suggestions, f"Resume from checkpoint {checkpoint}"),
            checkpoint=checkpoint,
            limit=stopped.limit,
        )
        return LoopResult(outcome, value, tuple(self.history))


class BoundedLoop:
    """What every loop shares: its ledger, how values are stored, the flow and the drivers."""

    #: The loop's kind, in checkpoints and events: ``attempts``, ``refine``, ...
    kind: ClassVar[str] = "loop"
    #: Whether a stopped loop keeps its best effort as its value (refine, simplify do).
    keeps_best_effort: ClassVar[bool] = True

    def __init__(
        self,
        *,
        ledger: Ledger | None,
        dump: Callable[[Any], Any] | None,
        load: Callable[[Any], Any] | None,
        step_limits: Limit | None,
        args: str,
    ) -> None:
        #: Where checkpoints go; ``resume(ref)`` reads them back from here.
        self.ledger: Ledger = ledger if ledger is not None else MemoryLedger()
        #: Limits of each pass's child governor (``step.governor``), inside the loop's.
        self.step_limits = step_limits
        self._dump = dump
        self._load = load
        self._args = args

    def __repr__(self) -> str:
        return f"{self.kind}({self._args})"

    # -- what each loop writes ---------------------------------------------------------------

    def _logic(self, run: _Run, callbacks: tuple[Any, ...]) -> Logic:
        raise NotImplementedError

    def _best_effort(self, run: _Run) -> Any:
        return run.kept("best") if self.keeps_best_effort else None

    def _halt_note(self, run: _Run) -> str:
        return f"The {self.kind} loop stopped after {run.number} passes; nothing tried is lost."

    # -- the shared flow ---------------------------------------------------------------------

    def _flow(self, run: _Run, callbacks: tuple[Any, ...]) -> Flow:
        try:
            yield from run.begin()
            finish = yield from self._logic(run, callbacks)
            if finish.status is Status.ABANDONED:
                # Giving up may be the session's doing (cancelled, out of time): say so.
                yield from run.check("finish")
        except _Halted as halted:
            return run.halted(halted.stop)
        except GeneratorExit:
            raise
        except BaseException as error:
            # Interrupted (Ctrl-C, task cancelled) or broken: keep what was tried, then re-raise.
            ref = run.save(Status.CANCELLED, "interrupted")
            if hasattr(error, "add_note"):
                error.add_note(f"haltwise: {self!r} saved checkpoint {ref}")
            raise
        return run.result(finish)

    def _start(
        self,
        callbacks: tuple[Any, ...],
        governor: Governor | None,
        clock: Callable[[], float] | None,
        prompter: Prompter | None,
        resume: str | None,
    ) -> Flow:
        if governor is not None and clock is not None:
            raise ConfigurationError(
                "give the clock to the Governor, not to the loop: the loop uses its governor's"
            )
        resumed = None
        if resume is not None:
            resumed = self.ledger.load_checkpoint(resume)
            if resumed.get("kind") != self.kind or resumed.get("version") != _CHECKPOINT_VERSION:
                raise ConfigurationError(
                    f"checkpoint {resume!r} is not a {self.kind} loop's (it is "
                    f"{resumed.get('kind')!r}, version {resumed.get('version')!r})"
                )
        if governor is None:
            governor = Governor(None, clock=clock or time.monotonic, ledger=self.ledger)
        if resumed is not None and not governor.run_id and "governor" in resumed:
            # A fresh governor takes up the counts the loop had (a live one keeps its own).
            governor.restore(resumed["governor"])
        return self._flow(_Run(self, governor, prompter, resumed), callbacks)

    # -- storing values ----------------------------------------------------------------------

    def _dump_value(self, value: Any) -> Any:
        try:
            stored = value if self._dump is None else self._dump(value)
            json.dumps(stored, allow_nan=False)
        except Exception:
            return _MISSING
        return stored

    def _load_value(self, stored: Any) -> Any:
        return stored if self._load is None else self._load(stored)


# ----------------------------------------------------------------------------------------------
# Drivers: run the callbacks a flow asks for. Nothing else.


def drive(flow: Flow) -> LoopResult[Any]:
    """Run ``flow`` to its end, calling each callback it asks for."""
    try:
        request = next(flow)
        while True:
            try:
                value = request.function(*request.args)
            except (Exception, HaltSignal) as error:
                reply = _Reply(error=error)
            except BaseException as error:
                flow.throw(error)
                raise
            else:
                if inspect.isawaitable(value):
                    _refuse_awaitable(request, value)
                reply = _Reply(value)
            request = flow.send(reply)
    except StopIteration as done:
        result: LoopResult[Any] = done.value
        return result
    finally:
        flow.close()


async def adrive(flow: Flow) -> LoopResult[Any]:
    """Run ``flow`` to its end, awaiting each callback that returns an awaitable."""
    try:
        request = next(flow)
        while True:
            try:
                value = request.function(*request.args)
                if inspect.isawaitable(value):
                    value = await value
            except (Exception, HaltSignal) as error:
                reply = _Reply(error=error)
            except BaseException as error:
                flow.throw(error)
                raise
            else:
                reply = _Reply(value)
            request = flow.send(reply)
    except StopIteration as done:
        result: LoopResult[Any] = done.value
        return result
    finally:
        flow.close()


def _refuse_awaitable(request: _Call, value: Awaitable[Any]) -> NoReturn:
    if inspect.iscoroutine(value):
        value.close()
    name = getattr(request.function, "__name__", repr(request.function))
    raise ConfigurationError(
        f"the callback {name} returned an awaitable: run async callbacks with arun() or aresume()"
    )


# ----------------------------------------------------------------------------------------------
# Small helpers


def describe_error(error: BaseException) -> str:
    """``"ValueError: boom"``; for a stop, its reason code and message."""
    outcome = getattr(error, "outcome", None)
    if isinstance(outcome, Outcome):
        return f"{type(error).__name__} ({outcome.reason}): {outcome.message}"
    text = str(error)
    return f"{type(error).__name__}: {text}" if text else type(error).__name__


def _as_answer(value: Any) -> Answer | Choice | bool | None:
    """A prompter's reply as something ``Governor.resolve`` takes; anything else is no answer."""
    if isinstance(value, Answer | bool) or value is None:
        return value
    if isinstance(value, Choice) and value is not Choice.EXTEND:
        return value
    return None


def _sentences(first: str, second: str) -> str:
    """Two sentences as one message (the governor's messages may end without a full stop)."""
    first = first.strip()
    if first and not first.endswith((".", "!", "?")):
        first += "."
    return f"{first} {second}".strip()


def _partial(value: Any) -> str | None:
    return None if value is None else summarize(value, 2000)


def _usage_to_dict(usage: Usage) -> dict[str, Any]:
    return {
        "turns": usage.turns,
        "model_calls": usage.model_calls,
        "tool_calls": usage.tool_calls,
        "input_tokens": usage.input_tokens,
        "output_tokens": usage.output_tokens,
        "cache_read_tokens": usage.cache_read_tokens,
        "cache_write_tokens": usage.cache_write_tokens,
        "cost": None if usage.cost is None else str(usage.cost),
        "elapsed": usage.elapsed,
    }


def _usage_from_dict(data: dict[str, Any]) -> Usage:
    from decimal import Decimal

    cost = data.get("cost", "0")
    return Usage(
        turns=int(data.get("turns", 0)),
        model_calls=int(data.get("model_calls", 0)),
        tool_calls=int(data.get("tool_calls", 0)),
        input_tokens=int(data.get("input_tokens", 0)),
        output_tokens=int(data.get("output_tokens", 0)),
        cache_read_tokens=int(data.get("cache_read_tokens", 0)),
        cache_write_tokens=int(data.get("cache_write_tokens", 0)),
        cost=None if cost is None else Decimal(cost),
        elapsed=float(data.get("elapsed", 0.0)),
    )
