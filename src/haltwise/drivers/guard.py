"""``Guard``: a governor with a prompter and a synthesizer, for hand-written agent loops.

::

    guard = Guard(max_turns(10) | max_cost("0.50"), prompter=console_prompter())
    with guard.run(question) as run:
        while True:
            run.turn()                                  # may ask, or stop the run
            max_tokens = run.model_request(MODEL, max_tokens=1024)  # worst case checked first
            completion = client.chat.completions.create(
                ..., max_tokens=max_tokens, timeout=run.time_left()
            )
            run.model_response(completion)
            ...
    print(run.outcome)

Each method reports one event. ``Continue`` and ``Warn`` return (a warning's note waits in
``run.notes()`` for the model); ``Block`` makes ``tool_call`` return the refusal to give the
model; ``Ask`` goes to the prompter; ``Stop`` raises the typed ``HaltError`` (or ``HaltSignal``),
which the ``with`` block catches, leaving ``run.outcome``. ``AsyncRun`` is the same with
``await``: both run one generator, ``_flow``, so no logic is written twice.

Deadlines: ``run.time_left()`` is the timeout to give what the loop calls. When a call is cut
off by it (the client raises its timeout error), the ``with`` block ends the run ``timed_out``,
counting the request at what it reserved. ``AsyncRun`` goes further: at the deadline, or on
``governor.cancel()`` from any thread, it cancels the task running the block, so even a call
that takes no timeout is interrupted.

Threads and tasks: any number may report events for one run. A question to the human is asked
once, by the thread whose event raised it; the others wait for its answer (the governor tells
them so with ``QuestionOpen``), then report their events again. A synthesized answer is written
once, and every thread that meets the stop ends with that outcome.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import inspect
import sys
import threading
import time
import warnings
from collections import deque
from collections.abc import AsyncIterator, Callable, Generator, Iterator
from dataclasses import fields, replace
from decimal import Decimal
from types import TracebackType
from typing import Any

from ..engine.decisions import CONTINUE, Ask, Block, Continue, Decision, Stop, Warn
from ..engine.errors import (
    ConfigurationError,
    HaltError,
    HaltSignal,
    InvalidValueError,
    QuestionOpen,
    error_for,
)
from ..engine.events import (
    Event,
    Injected,
    ModelRequest,
    ModelResponse,
    Progress,
    RunEnded,
    RunStarted,
    ToolCall,
    ToolResult,
    TurnEnded,
    TurnStarting,
)
from ..engine.governor import Governor, Phase, checked_callable, checked_seconds
from ..engine.ledger import Ledger, MemoryLedger
from ..engine.limits import Limit
from ..engine.outcome import Outcome, Status, Usage
from ..engine.policies import Evidence, Synthesizer
from ..engine.pricing import Pricer
from .bounded import Overdue, call_within
from .live import APPROVAL_TIMEOUT, HEARTBEAT_SECONDS, LiveRun, ledger_prompter
from .openai_usage import CHARS_PER_TOKEN, estimate, read_completion, reserved_tokens
from .prompters import Prompter

__all__ = ["AsyncRun", "Guard", "Run"]

#: What the flow needs from the outside world: ("ask", Ask), ("synthesize", (fn, Evidence)), or
#: ("wait", lock): another thread is asking the human, or writing the final answer.
_Need = tuple[str, Any]

#: How long a thread or task waiting for another's question pauses before it reports its event
#: again when that question is not being asked yet (or, async, between looks at the lock): long
#: enough not to spin, short next to a human's answer.
WAIT_PAUSE = 0.005

#: A synthesizer is given the latest tool results, up to this many characters of them and this
#: many results (always the last one): what fits a final answer's prompt.
EVIDENCE_CHARS = 200_000
EVIDENCE_RESULTS = 200
#: A run keeps its last this many tool calls and results (references to the events, not
#: copies), so its memory stays bounded however long it goes; a synthesizer's evidence is read
#: from them.
TOOL_EVENTS_KEPT = 2 * EVIDENCE_RESULTS
#: The events the evidence is gathered from.
_EVIDENCE = frozenset({ToolCall, ToolResult})
#: The run whose synthesizer is running in this thread or task (tasks it starts inherit it): its
#: model call is the synthesis pass, and a stop it meets is its writer's to handle.
_WRITING: contextvars.ContextVar[_RunBase | None] = contextvars.ContextVar(
    "haltwise_writing", default=None
)
#: The keywords ``model_response`` takes with no completion: the fields of ``ModelResponse``;
#: and with one, whose usage, text and tool calls are read from it.
_RESPONSE_FIELDS = frozenset(field.name for field in fields(ModelResponse))
_WITH_COMPLETION = frozenset({"model", "request_id"})


def answered(text: str | None) -> bool:
    """Whether a synthesizer wrote an answer: some text, not only blanks (the adapters' rule
    too: a pass that wrote blanks, or called a tool instead, has none)."""
    return text is not None and bool(text.strip())


class Guard:
    """A governor plus what it takes to carry out its decisions."""

    def __init__(
        self,
        limits: Limit | Callable[[Usage], bool] | None = None,
        *,
        prompter: Prompter | None = None,
        synthesizer: Synthesizer | None = None,
        signal: bool = False,
        clock: Callable[[], float] = time.monotonic,
        pricer: Pricer | None = None,
        ledger: Ledger | str | None = None,
        governor: Governor | None = None,
        live: bool | None = None,
        approval_timeout: float = APPROVAL_TIMEOUT,
        on_ledger_error: str = "closed",
        heartbeat: float = HEARTBEAT_SECONDS,
    ) -> None:
        # Checked here rather than where each is first used (a stop, a question, a heartbeat),
        # so that a wrong argument fails at this call, named.
        if governor is None:
            try:
                governor = Governor(
                    limits,
                    clock=clock,
                    pricer=pricer,
                    ledger=ledger,
                    on_ledger_error=on_ledger_error,
                )
            except InvalidValueError as error:
                # The governor's settings are this guard's arguments: named as they were given.
                source = error.source.replace("Governor(", "Guard(", 1)
                raise InvalidValueError(source, error.value, error.valid) from None
        elif not isinstance(governor, Governor):
            raise InvalidValueError(
                "Guard(governor)", governor, "a Governor, or None for one made of the limits"
            )
        elif (
            limits is not None
            or clock is not time.monotonic
            or pricer is not None
            or ledger is not None
            or on_ledger_error != "closed"
        ):
            raise ConfigurationError(
                "Guard(governor=...) takes its limits, clock, pricer, ledger and on_ledger_error "
                "from that governor: give them to Governor(...), or leave governor= out and give "
                "them to Guard"
            )
        if prompter is not None:
            checked_callable(prompter, "Guard(prompter)", "a function f(ask) -> answer, or None")
        if synthesizer is not None:
            checked_callable(
                synthesizer, "Guard(synthesizer)", "a function f(evidence) -> answer, or None"
            )
        if not isinstance(signal, bool):
            raise InvalidValueError("Guard(signal)", signal, "True or False")
        if live is not None and not isinstance(live, bool):
            raise InvalidValueError(
                "Guard(live)", live, "True, False, or None (live when the ledger is shared)"
            )
        checked_seconds(approval_timeout, "Guard(approval_timeout)", zero=True)
        checked_seconds(heartbeat, "Guard(heartbeat)")
        #: The governor that decides; shared by every run of this guard (session scope).
        self.governor = governor
        ledger_used = self.governor.ledger
        #: Whether runs register in the ledger, heartbeat, and can be stopped and answered from
        #: elsewhere: by default, when the ledger is shared (not this process's memory).
        self.live = not isinstance(ledger_used, MemoryLedger) if live is None else live
        #: Seconds between a live run's heartbeats.
        self.heartbeat = heartbeat
        if prompter is None and self.live:
            # Headless, with a shared ledger: the human answers with ``haltwise approve``.
            prompter = ledger_prompter(ledger_used, timeout=approval_timeout)
        #: Puts questions to a human; None means "no UI": a limit that asks stops the run.
        self.prompter = prompter
        #: Writes a final answer from the evidence when a limit's policy is ``synthesize``.
        self.synthesizer = synthesizer
        #: Raise ``HaltSignal`` (a BaseException) on a stop instead of ``HaltError``.
        self.signal = signal

    def run(self, prompt: str = "", *, run_id: str | None = None, suppress: bool = True) -> Run:
        """A governed run, as a context manager; ``suppress=False`` lets the stop propagate."""
        return Run(self, prompt, run_id, suppress)

    def arun(
        self, prompt: str = "", *, run_id: str | None = None, suppress: bool = True
    ) -> AsyncRun:
        """The same as ``run``, for ``async with`` and ``await``."""
        return AsyncRun(self, prompt, run_id, suppress)

    def __repr__(self) -> str:
        return f"Guard({self.governor.limits!r})"


class _RunBase:
    """What sync and async runs share: the decision flow, the notes and the evidence."""

    def __init__(self, guard: Guard, prompt: str, run_id: str | None, suppress: bool) -> None:
        self.guard = guard
        self.prompt = prompt
        self._run_id = run_id
        self._suppress = suppress
        #: How the run ended, once it has.
        self.outcome: Outcome | None = None
        self._handle = guard.governor.handle
        self._notes: list[str] = []
        #: The latest tool calls and results (``TOOL_EVENTS_KEPT``): appending is atomic, so
        #: threads that report tool calls need no lock. The governor appends those it answers
        #: ``CONTINUE``; the decision flow, those admitted otherwise (``_record``).
        self._tools: deque[Event] = deque(maxlen=TOOL_EVENTS_KEPT)
        guard.governor.keep_tool_events(self._tools)
        #: Held while a thread asks the human and its answer is applied; the others wait.
        self._asking = threading.Lock()
        #: Held while a thread writes the synthesized answer; the others wait, then take it.
        self._synthesis = threading.Lock()
        #: Whether the synthesizer has run: once per run.
        self._synthesized = False
        self._notes_lock = threading.Lock()
        #: Taken, and kept, by the first call whose usage was unknown: it is said once per run.
        self._estimate_said = threading.Lock()
        #: The run's presence in the ledger, while it is live.
        self._live: LiveRun | None = None

    def _claim_synthesis(self) -> None:
        """A guard with a synthesizer writes every synthesized answer of its runs itself: its
        synthesizer's model call is the synthesis pass, claimed from the start so that no
        request another thread makes after the stop can take its place."""
        if self.guard.synthesizer is not None:
            self.guard.governor.claim_synthesis()

    def _go_live(self) -> None:
        if self.guard.live and self._live is None:
            self._live = LiveRun(
                self.guard.governor, self.guard.governor.ledger, interval=self.guard.heartbeat
            )
            self._live.start()

    def _end_live(self) -> None:
        live, self._live = self._live, None
        if live is not None:
            live.finish(self.outcome or self.guard.governor.outcome)

    @property
    def output(self) -> str | None:
        """The final (or partial, or synthesized) answer, once the run has ended."""
        return None if self.outcome is None else self.outcome.partial_output

    @property
    def usage(self) -> Usage:
        return self.guard.governor.usage

    def notes(self) -> list[str]:
        """Notes for the model from soft limits, since the last call (then cleared)."""
        with self._notes_lock:
            notes, self._notes = self._notes, []
        return notes

    def time_left(self) -> float | None:
        """Seconds until the run's (or a phase's) time limit; None without one. Give it as the
        timeout of each call: the model client's request, a tool, a command."""
        return self.guard.governor.time_left()

    def _flow(self, event: Event, decision: Decision | None) -> Generator[_Need, Any, Decision]:
        """What ``decision``, the governor's answer to ``event``, needs carried out: a human's
        answer, a synthesized answer. None: the governor has a question open (``QuestionOpen``)
        that another thread or task is asking; this one waits for the answer, then reports
        its event again."""
        governor = self.guard.governor
        while decision is None:
            yield ("wait", self._asking)
            with contextlib.suppress(QuestionOpen):  # not answered yet, or not asked yet
                decision = governor.handle(event)
        while isinstance(decision, Ask):
            if not self._asking.acquire(blocking=False):
                # The answer to an earlier question is still being applied: it may change this
                # one, so it is asked once that is done.
                yield ("wait", self._asking)
                continue
            try:
                # Held until the answer has been applied, so that the threads waiting for it
                # report their events again under the limits it left.
                answer = None if self.guard.prompter is None else (yield ("ask", decision))
                decision = self._resolved(decision, answer)
            finally:
                self._asking.release()
        if isinstance(decision, Stop) and type(event) is ModelRequest and _WRITING.get() is self:
            # The synthesizer's own call, which the governor refuses to any other: the pass.
            decision = governor.synthesis_request(event)
        live = self._live
        if live is not None:
            live.saw(event, decision)
        return (yield from self._carry_out(decision, event))

    def _resolved(self, ask: Ask, answer: Any) -> Decision:
        governor = self.guard.governor
        try:
            return governor.resolve(ask, answer)
        except ConfigurationError:
            # A bad answer leaves the question open, and the threads waiting for it would wait
            # for ever: the run stops, as with no answer, and the error says what was wrong.
            governor.resolve(ask, None)
            raise

    def _carry_out(
        self, decision: Decision, event: Event | None
    ) -> Generator[_Need, Any, Decision]:
        if isinstance(decision, Warn):
            with self._notes_lock:
                self._notes.append(decision.message)
        elif isinstance(decision, Stop):
            outcome = yield from self._final_outcome(decision)
            self.outcome = outcome
            if outcome.status is not Status.COMPLETED:
                error = error_for(outcome, provider_called=decision.provider_called)
                raise HaltSignal(error) if self.guard.signal else error
        if event is not None and not isinstance(decision, Block | Stop):
            self._record(event)
        return decision

    def _final_outcome(self, stop: Stop) -> Generator[_Need, Any, Outcome]:
        """The run's outcome after ``stop``: when the stop asks for a synthesized answer, one
        thread or task writes it, once per run; one that meets a stop meanwhile waits for it,
        so that every thread ends the run with the same outcome."""
        if _WRITING.get() is self:
            return stop.outcome  # the synthesizer's own call was refused: the writer goes on
        governor = self.guard.governor
        if not self._synthesis.acquire(blocking=False):
            yield ("wait", self._synthesis)  # another thread is writing the answer
            return governor.outcome or stop.outcome
        try:
            if self._synthesized:
                return governor.outcome or stop.outcome
            synthesizer = stop.synthesizer or self.guard.synthesizer
            if not stop.synthesize or synthesizer is None:
                return stop.outcome
            self._synthesized = True
            governor.claim_synthesis()
            text = yield ("synthesize", (synthesizer, self._evidence_for(stop.outcome)))
            answer = None if text is None else str(text)
            if answered(answer):
                assert answer is not None
                return governor.synthesized(answer)
            # No answer (none, or blanks): the stop stands (saying why when its budget ran
            # out), its usage and checkpoint counting the pass's model call if one was made.
            return governor.synthesis_unanswered()
        finally:
            self._synthesis.release()

    def _interrupt_flow(
        self, message: str, partial_output: str | None, cancelled: bool
    ) -> Generator[_Need, Any, Decision]:
        stop = self.guard.governor.interrupted(
            message, partial_output=partial_output, cancelled=cancelled
        )
        return (yield from self._carry_out(stop, None))

    def _record(self, event: Event) -> None:
        """Keep a tool event admitted after a word with the human or a note. One the governor
        answered ``CONTINUE`` on the way (asked again, or after another thread's question) it
        has kept already, last."""
        if type(event) in _EVIDENCE:
            tools = self._tools
            if not tools or tools[-1] is not event:
                tools.append(event)

    def _evidence_for(self, outcome: Outcome) -> Evidence:
        return Evidence(
            prompt=self.prompt,
            tool_results=self._tool_results(),
            last_text=outcome.partial_output,
            stop_message=outcome.message,
        )

    def _tool_results(self) -> tuple[tuple[str, Any, str], ...]:
        """The latest results with their calls' arguments, as many as the bounds let through."""
        calls: dict[str, ToolCall] = {}
        results: list[tuple[str, Any, str]] = []
        for event in tuple(self._tools):  # a copy: threads may still report
            if type(event) is ToolCall:
                calls[event.call_id] = event
            elif type(event) is ToolResult:
                call = calls.pop(event.call_id, None)
                if call is None:  # its call is no longer kept
                    results.append((event.name, None, event.content))
                else:
                    results.append((call.name, call.arguments, event.content))
        kept: list[tuple[str, Any, str]] = []
        chars = 0
        for result in reversed(results):
            chars += len(result[2])
            if kept and (chars > EVIDENCE_CHARS or len(kept) == EVIDENCE_RESULTS):
                break
            kept.append(result)
        kept.reverse()
        return tuple(kept)

    def _crashed(self, error: BaseException) -> bool:
        """The loop raised: stop the run so its counts are checkpointed, and say why.

        True when the error was the run's own interruption (its deadline passed, or it was
        cancelled): the run then ends ``timed_out`` or ``cancelled``, the error's text in its
        message, and the error need not propagate.
        """
        if self.outcome is None:
            text = str(error) or "no details"
            stop = self.guard.governor.interrupted(
                f"The agent loop raised {type(error).__name__}: {text}",
                cancelled=isinstance(error, asyncio.CancelledError),
            )
            self.outcome = stop.outcome
        return self.outcome.status in (Status.TIMED_OUT, Status.CANCELLED)

    def _catches(self, error: BaseException | None) -> bool:
        if isinstance(error, HaltError | HaltSignal):
            return self._suppress and error.outcome is self.outcome
        if error is not None:
            return self._crashed(error) and self._suppress and isinstance(error, Exception)
        return False

    def _entered(self, name: str, limits: Limit | Callable[[Usage], bool] | None) -> Phase:
        return self.guard.governor.enter_phase(name, limits)

    def _settle_in_phase(self, error: BaseException) -> None:
        """An error leaving a phase whose time is up is judged while the phase is open, so
        that a call cut off by the phase's own deadline ends the run ``timed_out`` in that
        phase. Other errors are the loop's to handle (it may catch them and go on)."""
        if isinstance(error, HaltError | HaltSignal | GeneratorExit):
            return
        if self.guard.governor.time_left() == 0:
            self._crashed(error)

    # Events, built once for both drivers.

    @staticmethod
    def _model_request(
        model: str, max_tokens: int | None, input_tokens: int | None, request_id: str
    ) -> Event:
        return ModelRequest(
            model, max_tokens=max_tokens, input_tokens=input_tokens, request_id=request_id
        )

    def _model_response(
        self, completion: Any, usage: dict[str, Any]
    ) -> tuple[ModelResponse, str | None]:
        """The event ``model_response`` reports, and what was wrong with its usage: None when
        it had token counts; else they were estimated (``openai_usage``: from the reply and
        the run's prompt, each at least what the request reserved)."""
        taken = _RESPONSE_FIELDS if completion is None else _WITH_COMPLETION
        for name, value in usage.items():
            if name not in taken:
                raise InvalidValueError(f"run.model_response({name})", value, _keywords(completion))
        if completion is not None:
            event, problem = read_completion(
                completion,
                model=usage.get("model"),
                request_id=usage.get("request_id", ""),
                prompt_chars=len(self.prompt),
            )
        else:
            cost = usage.pop("cost", None)
            if cost is not None and not isinstance(cost, Decimal):
                cost = Decimal(str(cost))
            problem = None
            if (
                "input_tokens" not in usage
                and "output_tokens" not in usage
                and usage.get("answered", True)
            ):
                # Usage unknown, as from a completion without any. (A call that was not
                # answered counts at what it reserved: the governor's own rule.)
                text = usage.get("text")
                written = len(text) if isinstance(text, str) else 0
                usage["input_tokens"], usage["output_tokens"] = estimate(
                    (0, 0), len(self.prompt), written
                )
                problem = (
                    "no token usage (run.model_response() was given neither a completion nor "
                    "input_tokens= and output_tokens=)"
                )
            event = ModelResponse(cost=cost, **usage)
        if problem is None:
            return event, None
        prompt, output = reserved_tokens(self.guard.governor, event.request_id)
        at_least = replace(
            event,
            input_tokens=max(prompt, event.input_tokens),
            output_tokens=max(output, event.output_tokens),
        )
        return at_least, problem

    def _say_estimated(self, event: ModelResponse, problem: str) -> None:
        """Say, the first time in the run, that a call's usage was unknown (``problem``) and is
        counted at an estimate, and how to count it exactly."""
        if not self._estimate_said.acquire(blocking=False):
            return  # said already
        warnings.warn(
            f"run {self.guard.governor.run_id!r}: a call to model "
            f"{event.model or '(no model name)'!r} reported {problem}, so it counts at an "
            f"estimate ({CHARS_PER_TOKEN} characters a token of its reply and of the run's "
            "prompt), and at least at what its request reserved (its prompt and max_tokens), "
            "never as free. To count it exactly, have the endpoint report usage "
            "(stream_options={'include_usage': True} when streaming) or pass the counts: "
            "run.model_response(input_tokens=..., output_tokens=...). Said once per run.",
            RuntimeWarning,
            stacklevel=3,
        )


class Run(_RunBase):
    """One governed run in a synchronous loop."""

    def __enter__(self) -> Run:
        self.send(RunStarted(self.prompt, self._run_id))
        self._claim_synthesis()
        self._go_live()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        error: BaseException | None,
        traceback: TracebackType | None,
    ) -> bool:
        try:
            if error is None and self.outcome is None:
                try:
                    self.finish()
                except (HaltError, HaltSignal) as stop:
                    # The block ended after its time ran out, or a cancel: a stop like any.
                    if not self._catches(stop):
                        raise
                return False
            return self._catches(error)
        finally:
            self._end_live()

    def send(self, event: Event) -> Decision:
        """Report any event; carry out the decision."""
        try:  # costs nothing unless it raises
            decision = self._handle(event)
        except QuestionOpen:
            return self._drive(self._flow(event, None))
        if decision is CONTINUE:  # the common case: nothing to carry out
            if self._live is not None:
                self._live.saw(event, decision)
            return decision
        return self._drive(self._flow(event, decision))

    def interrupt(
        self, message: str, *, partial_output: str | None = None, cancelled: bool = False
    ) -> Decision:
        """The loop cut a call off (its deadline, a cancel, an error): end the run, counting
        the requests in flight at what they reserved (``Governor.interrupted``)."""
        return self._drive(self._interrupt_flow(message, partial_output, cancelled))

    @contextlib.contextmanager
    def phase(
        self, name: str, limits: Limit | Callable[[Usage], bool] | None = None
    ) -> Iterator[Phase]:
        """``with run.phase("plan", timeout(seconds=30) | max_turns(5)):`` limits of its own,
        counted from here, checked with the run's; a stop it causes names it. Phases nest."""
        phase = self._entered(name, limits)
        try:
            yield phase
        except BaseException as error:
            self._settle_in_phase(error)
            raise
        finally:
            self.guard.governor.exit_phase(phase)

    def _drive(self, flow: Generator[_Need, Any, Decision]) -> Decision:
        try:
            need = next(flow)
            while True:
                try:
                    result = _fulfil(self, need)
                except (HaltError, HaltSignal):
                    result = None  # the synthesis pass found no budget: keep the partial output
                except Exception:
                    # Resolve as "no answer" so the run stops with its checkpoint, then re-raise.
                    with contextlib.suppress(StopIteration, HaltError, HaltSignal):
                        flow.send(None)
                    raise
                need = flow.send(result)
        except StopIteration as done:
            decision: Decision = done.value
            return decision
        finally:
            flow.close()  # interrupted (Ctrl-C): let go of the locks it holds now, not at GC

    def turn(self) -> Decision:
        """A turn is about to start."""
        return self.send(TurnStarting())

    def model_request(
        self,
        model: str = "",
        *,
        max_tokens: int | None = None,
        input_tokens: int | None = None,
        request_id: str = "",
    ) -> int | None:
        """A model call is about to be sent: the ``max_tokens`` to send it with (yours, or
        lower when a token limit has less left; None when neither says)."""
        decision = self.send(self._model_request(model, max_tokens, input_tokens, request_id))
        return _max_tokens(decision, max_tokens)

    def model_response(self, completion: Any = None, **usage: Any) -> Decision:
        """A model call returned: pass the completion (with ``model=`` or ``request_id=`` if
        need be), or its usage as keywords (``ModelResponse``'s fields: ``input_tokens``,
        ``output_tokens``, ``cost``, ``text``, ...), counted as given.

        A completion with no usage, or with figures that are not token counts, and keywords
        with neither ``input_tokens`` nor ``output_tokens`` (nor ``answered=False``) are a call
        whose usage is unknown: it counts at an estimate from its reply's text and the run's
        prompt, each figure at least what its request reserved, never as free, and a
        ``RuntimeWarning`` says so once per run."""
        event, problem = self._model_response(completion, usage)
        try:
            return self.send(event)
        finally:
            if problem is not None:  # after it is counted: the warning may be an error
                self._say_estimated(event, problem)

    def tool_call(self, name: str, arguments: Any = "", call_id: str = "") -> str | None:
        """A tool is about to be called: the refusal to give the model when it may not run."""
        decision = self.send(ToolCall(name, arguments, call_id))
        return decision.reason if isinstance(decision, Block) else None

    def tool_result(self, name: str, content: str = "", call_id: str = "", **more: Any) -> Decision:
        return self.send(ToolResult(name, content, call_id, **more))

    def turn_ended(self, text: str | None = None) -> Decision:
        return self.send(TurnEnded(text))

    def inject(self, text: str) -> Decision:
        """A user message arrived mid-run (no count resets)."""
        return self.send(Injected(text))

    def progress(self, metric: str = "", value: float | None = None, note: str = "") -> Decision:
        return self.send(Progress(metric, value, note))

    def finish(self, output: str | None = None) -> Outcome:
        """The agent finished on its own."""
        self.send(RunEnded(output))
        assert self.outcome is not None
        return self.outcome


class AsyncRun(_RunBase):
    """One governed run in an async loop; prompters and synthesizers may be async."""

    def __init__(self, guard: Guard, prompt: str, run_id: str | None, suppress: bool) -> None:
        super().__init__(guard, prompt, run_id, suppress)
        self._task: asyncio.Task[Any] | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._timer: asyncio.TimerHandle | None = None
        self._armed_for: float | None = None
        #: Set when this run cancelled its own task (deadline or ``cancel()``).
        self._interrupting = False
        self._unsubscribe: Callable[[], None] | None = None

    async def __aenter__(self) -> AsyncRun:
        await self.send(RunStarted(self.prompt, self._run_id))
        self._claim_synthesis()
        self._task = asyncio.current_task()
        self._loop = asyncio.get_running_loop()
        loop = self._loop

        def cancelled() -> None:  # on the cancelling thread: hand over to the loop's
            loop.call_soon_threadsafe(self._interrupt_task)

        def moved() -> None:  # under the governor's lock, on the thread that moved it
            loop.call_soon_threadsafe(self._arm)

        governor = self.guard.governor
        unsubscribed = (governor.on_cancel(cancelled), governor.on_deadline(moved))

        def unsubscribe() -> None:
            for listener in unsubscribed:
                listener()

        self._unsubscribe = unsubscribe
        self._arm()
        self._go_live()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        error: BaseException | None,
        traceback: TracebackType | None,
    ) -> bool:
        self._disarm()
        interrupted = self._interrupting and isinstance(error, asyncio.CancelledError)
        if interrupted and self._task is not None and sys.version_info >= (3, 11):
            self._task.uncancel()  # the cancellation was ours, and it ends here
        try:
            if error is None and self.outcome is None:
                try:
                    await self.finish()
                except (HaltError, HaltSignal) as stop:
                    if not self._catches(stop):  # as in ``Run.__exit__``
                        raise
                return False
            if interrupted:
                if self.outcome is None:
                    self._crashed(error)  # type: ignore[arg-type]
                return self._suppress
            return self._catches(error)
        finally:
            self._end_live()

    def _arm(self) -> None:
        """Cancel the block's task when the deadline passes (re-armed after each event, and
        whenever the governor moves the deadline: ``set_limit`` from anywhere, say)."""
        if self._task is None or self._loop is None or self.outcome is not None:
            return
        governor = self.guard.governor
        deadline = governor.deadline()
        if deadline == self._armed_for:
            return
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        self._armed_for = deadline
        if deadline is not None:
            left = max(0.0, deadline - governor.now())
            self._timer = self._loop.call_later(left, self._expire)

    def _expire(self) -> None:
        self._timer = None
        self._armed_for = None
        left = self.guard.governor.time_left()
        if left is None:
            return
        if left > 0:
            self._arm()  # the limit was extended meanwhile
            return
        self._interrupt_task()

    def _interrupt_task(self) -> None:
        if self._task is not None and self.outcome is None and not self._task.done():
            self._interrupting = True
            self._task.cancel()

    def _disarm(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        if self._unsubscribe is not None:
            self._unsubscribe()
            self._unsubscribe = None

    async def send(self, event: Event) -> Decision:
        try:  # as in ``Run.send``
            decision = self._handle(event)
        except QuestionOpen:
            decision = await self._adrive(self._flow(event, None))
        else:
            if decision is CONTINUE:
                if self._live is not None:
                    self._live.saw(event, decision)
            else:
                decision = await self._adrive(self._flow(event, decision))
        self._arm()
        return decision

    async def interrupt(
        self, message: str, *, partial_output: str | None = None, cancelled: bool = False
    ) -> Decision:
        return await self._adrive(self._interrupt_flow(message, partial_output, cancelled))

    @contextlib.asynccontextmanager
    async def phase(
        self, name: str, limits: Limit | Callable[[Usage], bool] | None = None
    ) -> AsyncIterator[Phase]:
        phase = self._entered(name, limits)
        self._arm()
        try:
            yield phase
        except BaseException as error:
            self._settle_in_phase(error)
            raise
        finally:
            self.guard.governor.exit_phase(phase)
            self._arm()

    async def _adrive(self, flow: Generator[_Need, Any, Decision]) -> Decision:
        try:
            need = next(flow)
            while True:
                try:
                    result = await _afulfil(self, need)
                except (HaltError, HaltSignal):
                    result = None  # the synthesis pass found no budget: keep the partial output
                except Exception:
                    with contextlib.suppress(StopIteration, HaltError, HaltSignal):
                        flow.send(None)
                    raise
                need = flow.send(result)
        except StopIteration as done:
            decision: Decision = done.value
            return decision
        finally:
            flow.close()  # cancelled: let go of the locks it holds now, not at GC

    async def turn(self) -> Decision:
        return await self.send(TurnStarting())

    async def model_request(
        self,
        model: str = "",
        *,
        max_tokens: int | None = None,
        input_tokens: int | None = None,
        request_id: str = "",
    ) -> int | None:
        decision = await self.send(self._model_request(model, max_tokens, input_tokens, request_id))
        return _max_tokens(decision, max_tokens)

    async def model_response(self, completion: Any = None, **usage: Any) -> Decision:
        event, problem = self._model_response(completion, usage)  # as in ``Run.model_response``
        try:
            return await self.send(event)
        finally:
            if problem is not None:
                self._say_estimated(event, problem)

    async def tool_call(self, name: str, arguments: Any = "", call_id: str = "") -> str | None:
        decision = await self.send(ToolCall(name, arguments, call_id))
        return decision.reason if isinstance(decision, Block) else None

    async def tool_result(
        self, name: str, content: str = "", call_id: str = "", **more: Any
    ) -> Decision:
        return await self.send(ToolResult(name, content, call_id, **more))

    async def turn_ended(self, text: str | None = None) -> Decision:
        return await self.send(TurnEnded(text))

    async def inject(self, text: str) -> Decision:
        return await self.send(Injected(text))

    async def progress(
        self, metric: str = "", value: float | None = None, note: str = ""
    ) -> Decision:
        return await self.send(Progress(metric, value, note))

    async def finish(self, output: str | None = None) -> Outcome:
        await self.send(RunEnded(output))
        assert self.outcome is not None
        return self.outcome


# Carrying out what the flow needs.


def _fulfil(run: _RunBase, need: _Need) -> Any:
    kind, payload = need
    if kind == "wait":
        if payload.acquire(blocking=False):
            # Not taken yet: the thread whose event raised the question is about to ask it.
            payload.release()
            time.sleep(WAIT_PAUSE)
            return None
        with payload:  # held by the thread that asks (or writes the answer) until it is done
            return None
    if kind == "synthesize":
        synthesizer, evidence = payload
        writing = _WRITING.set(run)
        try:
            result = synthesizer(evidence)
        finally:
            _WRITING.reset(writing)
    else:
        result = _ask_within(run.guard.prompter, payload)
    if inspect.isawaitable(result):
        if inspect.iscoroutine(result):
            result.close()
        role = "prompter" if kind == "ask" else "synthesizer"
        raise ConfigurationError(f"the {role} is async: use guard.arun() and async with")
    return result


def _ask_within(prompter: Prompter | None, ask: Ask) -> Any:
    """The prompter's answer; with a timeout, None once it has passed (the run then stops)."""
    assert prompter is not None
    try:
        # With a timeout, on a daemon thread: a prompter blocked on input must not keep the
        # process alive.
        return call_within(ask.timeout, prompter, ask, name="haltwise-prompter")
    except Overdue:
        return None


async def _afulfil(run: _RunBase, need: _Need) -> Any:
    kind, payload = need
    if kind == "wait":
        # A pause first, even when the lock is free (the task whose event raised the question
        # may not have taken it yet), then looks: a task never blocks the loop on a lock that
        # another task holds.
        await asyncio.sleep(WAIT_PAUSE)
        while payload.locked():
            await asyncio.sleep(WAIT_PAUSE)
        return None
    if kind == "ask":
        return await _aask(run.guard.prompter, payload)
    synthesizer, evidence = payload
    writing = _WRITING.set(run)
    try:
        result = synthesizer(evidence)
        return (await result) if inspect.isawaitable(result) else result
    finally:
        _WRITING.reset(writing)


async def _aask(prompter: Prompter | None, ask: Ask) -> Any:
    """The prompter's answer; with a timeout, None once it has passed (the run then stops).

    A synchronous prompter runs on a thread of its own, so that the loop goes on (other tasks,
    the run's deadline) while the human thinks, and its wait can be cut short."""
    assert prompter is not None
    loop = asyncio.get_running_loop()
    until = None if ask.timeout is None else loop.time() + ask.timeout
    # An async function, or an object whose ``__call__`` is one, starts on the loop.
    asynchronous = inspect.iscoroutinefunction(prompter) or inspect.iscoroutinefunction(
        type(prompter).__call__
    )
    reply: Any = prompter(ask) if asynchronous else _on_a_thread(loop, prompter, ask)
    try:
        while inspect.isawaitable(reply):  # a plain function may return an awaitable, too
            left = None if until is None else max(0.0, until - loop.time())
            reply = await asyncio.wait_for(reply, left)
    except asyncio.TimeoutError:
        return None
    return reply


def _on_a_thread(
    loop: asyncio.AbstractEventLoop, prompter: Prompter, ask: Ask
) -> asyncio.Future[Any]:
    """``prompter(ask)`` on a daemon thread (a prompter blocked on input must neither keep the
    process alive nor hold up the loop's shutdown), as a future of ``loop``."""
    future: asyncio.Future[Any] = loop.create_future()
    context = contextvars.copy_context()

    def settle(reply: Any, error: BaseException | None) -> None:
        if future.done():  # given up on: its time ran out, or the task was cancelled
            return
        if error is None:
            future.set_result(reply)
        else:
            future.set_exception(error)

    def ask_it() -> None:
        reply: Any = None
        failure: BaseException | None = None
        try:
            reply = context.run(prompter, ask)
        except BaseException as error:  # handed to the loop's task below
            failure = error
        with contextlib.suppress(RuntimeError):  # the loop has closed: no one is waiting
            loop.call_soon_threadsafe(settle, reply, failure)

    threading.Thread(target=ask_it, name="haltwise-prompter", daemon=True).start()
    return future


def _keywords(completion: Any) -> str:
    """What ``model_response`` takes as keywords, with ``completion`` or without one."""
    if completion is None:
        return "one of ModelResponse's fields: " + ", ".join(sorted(_RESPONSE_FIELDS))
    return (
        "model= or request_id= with a completion (its usage, text and tool calls are read from "
        "it); to give them yourself, pass them as keywords and no completion"
    )


def _max_tokens(decision: Decision, asked: int | None) -> int | None:
    """The ``max_tokens`` to send a request with: lowered by the decision, else as asked."""
    if isinstance(decision, Continue | Warn) and decision.max_tokens is not None:
        return decision.max_tokens
    return asked
