"""The agent loop: one loop for ``haltwise chat``, ``haltwise run`` and the demo.

``Agent.send(prompt)`` runs one user prompt to its ``Outcome``. Each step is reported to the
governor through the drivers' flow (``haltwise.drivers.Run``), and its decision is carried out:

- ``Continue``: go on.
- ``Warn``: the note goes into the conversation, as a message the model reads before its next
  request.
- ``Block``: the tool call does not run; the reason is the tool's error.
- ``Ask``: the face's prompter asks the human (the chat's dialog); with no prompter (``run``)
  the run stops: the seeds' silent abort.
- ``Stop``: the run ends; with ``synthesize`` a tools-free pass first writes the best answer from
  what was gathered.

The model is any OpenAI-compatible chat-completions endpoint, called with the ``openai`` client,
streaming, with tools. The stream is read on a helper thread, so that ``cancel()`` (Ctrl-C) ends
the run at once even while the endpoint has not answered yet. The client takes the chunks as
they come, unchecked: each field is checked here, and a reply that is no stream of chunks, or a
chunk with a field of the wrong type, is an ``AgentError`` naming the endpoint and what it sent.

Two threads may use an agent: the one that runs ``send`` and the face's (status for the widget,
``/turn-limit``, ``cancel``, messages typed while the run goes on). The governor is shared under
a lock that is never held while a human is being asked or the model is being waited for.

Faces hear about everything through a ``Listener`` (no-op methods; override what you show).
"""

from __future__ import annotations

import json
import queue
import re
import reprlib
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any

from pydantic import BaseModel

from ..drivers.guard import Guard, Run
from ..drivers.live import APPROVAL_TIMEOUT
from ..drivers.openai_usage import CHARS_PER_TOKEN, estimate, reserved_tokens, token_counts
from ..drivers.prompters import Prompter
from ..engine.decisions import Answer, Ask, Block, Choice, Continue, Decision, Warn
from ..engine.errors import ConfigurationError, HaltError, HaltSignal, HaltwiseError
from ..engine.events import (
    Event,
    Injected,
    ModelRequest,
    ModelResponse,
    RunEnded,
    RunStarted,
    ToolCall,
    ToolResult,
    TurnEnded,
    TurnStarting,
)
from ..engine.governor import Governor
from ..engine.ledger import Ledger
from ..engine.limits import Leaf, Limit, LimitStatus, Unlimited, max_turns
from ..engine.outcome import Outcome, Usage
from ..engine.policies import Evidence
from .store import RunRecord, Store
from .tools import Toolbox, ToolOutput

__all__ = [
    "CHARS_PER_TOKEN",
    "SYSTEM_PROMPT",
    "Agent",
    "AgentError",
    "AgentStatus",
    "Fanout",
    "Listener",
    "without_lone_surrogates",
]

SYSTEM_PROMPT = """\
You are a careful coding agent working in the folder {workspace}.
Use the tools to look before you change anything: read files, list folders, search text.
Change files with edit_file (exact text replacement) or write_file; run commands with \
run_command. Paths are relative to that folder; you cannot leave it.
Messages that start with [haltwise] come from the budget keeper of this session: heed them.
When the task is done, answer with a short summary and no tool call."""

SYNTHESIS_PROMPT = """\
[haltwise] The run has stopped: {reason}
Do not call any tool. From what you have gathered so far, write the best final answer you can \
to the user's request. Say plainly what is done, what is missing or unverified, and what to do \
next."""


class AgentError(HaltwiseError):
    """The model endpoint could not be used (unreachable, refused the key, unknown model), or
    sent something else than a reply (a web page, data that is not JSON, a chunk with a field
    of the wrong type): the message names the endpoint and quotes what it sent."""


class _Cancelled(BaseException):
    """Raised inside the loop when the run is cancelled while it waits (stream, tool, dialog).

    A BaseException, so that the drivers' handlers for ordinary errors let it through.
    """

    #: The reply's text streamed before the cut, kept as the run's partial output.
    partial = ""


class _Interrupted(_Cancelled):
    """Raised inside the loop when the run's deadline passes while the model is being waited
    for: the run ends ``timed_out`` at once, the request counted at what it reserved."""


#: How long the tools-free pass that writes a final answer may take, when the run's own time
#: is already up (it is what a time limit with ``on_limit="synthesize"`` asks for).
SYNTHESIS_SECONDS = 60.0


@dataclass(frozen=True, slots=True)
class AgentStatus:
    """What the widget shows: the turn count of this round, tokens and dollars."""

    #: Turns used in this round.
    turns: int
    #: The turn limit (with any extension), or None when unlimited.
    max_turns: int | None
    #: Tokens of the whole session (input and output).
    tokens: int
    #: Dollars of the whole session; None when some model call had no known price.
    cost: Decimal | None
    #: ``idle``, ``running``, ``asking`` (a question is open) or ``synthesizing``.
    state: str = "idle"
    run_id: str = ""

    def widget(self) -> str:
        """``Turns: 3/25 │ 1,234 tokens │ $0.0012`` (``N/∞`` when unlimited, ``$?`` unknown)."""
        cap = "∞" if self.max_turns is None else str(self.max_turns)
        cost = "$?" if self.cost is None else f"${_money(self.cost)}"
        return f"Turns: {self.turns}/{cap} │ {self.tokens:,} tokens │ {cost}"


def _money(amount: Decimal) -> str:
    return f"{amount:.4f}" if amount < 1 else f"{amount:.2f}"


class Listener:
    """What a face hears from the agent. Every method does nothing; override what you show.

    Methods are called on the thread that runs ``Agent.send``.
    """

    def run_started(self, run_id: str, prompt: str, resumed: bool) -> None:
        """A run started (or a stored run was continued)."""

    def status(self, status: AgentStatus) -> None:
        """The counts changed: redraw the widget."""

    def text(self, delta: str) -> None:
        """A piece of the model's reply, as it streams."""

    def text_done(self) -> None:
        """The model's reply ended (its text, if any, has all been given)."""

    def tool_started(self, name: str, arguments: str, call_id: str) -> None:
        """The model asked for a tool call."""

    def tool_finished(self, name: str, output: ToolOutput, call_id: str) -> None:
        """A tool call returned (or was refused)."""

    def blocked(self, name: str, reason: str, call_id: str = "") -> None:
        """A limit refused a tool call; ``reason`` goes to the model as the tool's error."""

    def note(self, text: str) -> None:
        """A soft limit's note was put into the conversation for the model."""

    def warning(self, text: str) -> None:
        """Something the human should know and the run goes on with (the endpoint's usage
        could not be read); the model does not see it."""

    def injected(self, text: str) -> None:
        """A message the human typed during the run was put into the conversation."""

    def asking(self, ask: Ask) -> None:
        """A limit asks the human (the prompter is called next)."""

    def synthesizing(self, reason: str) -> None:
        """A tools-free pass is writing the final answer (its text streams next)."""

    def event(self, event: Event, decision: Decision) -> None:
        """The governor answered ``event`` with ``decision`` (for logs and ``--json``)."""

    def run_ended(self, outcome: Outcome) -> None:
        """The run ended."""


class Fanout(Listener):
    """Several listeners heard as one, in order."""

    def __init__(self, *listeners: Listener) -> None:
        self.listeners = listeners

    def run_started(self, run_id: str, prompt: str, resumed: bool) -> None:
        for listener in self.listeners:
            listener.run_started(run_id, prompt, resumed)

    def status(self, status: AgentStatus) -> None:
        for listener in self.listeners:
            listener.status(status)

    def text(self, delta: str) -> None:
        for listener in self.listeners:
            listener.text(delta)

    def text_done(self) -> None:
        for listener in self.listeners:
            listener.text_done()

    def tool_started(self, name: str, arguments: str, call_id: str) -> None:
        for listener in self.listeners:
            listener.tool_started(name, arguments, call_id)

    def tool_finished(self, name: str, output: ToolOutput, call_id: str) -> None:
        for listener in self.listeners:
            listener.tool_finished(name, output, call_id)

    def blocked(self, name: str, reason: str, call_id: str = "") -> None:
        for listener in self.listeners:
            listener.blocked(name, reason, call_id)

    def note(self, text: str) -> None:
        for listener in self.listeners:
            listener.note(text)

    def warning(self, text: str) -> None:
        for listener in self.listeners:
            listener.warning(text)

    def injected(self, text: str) -> None:
        for listener in self.listeners:
            listener.injected(text)

    def asking(self, ask: Ask) -> None:
        for listener in self.listeners:
            listener.asking(ask)

    def synthesizing(self, reason: str) -> None:
        for listener in self.listeners:
            listener.synthesizing(reason)

    def event(self, event: Event, decision: Decision) -> None:
        for listener in self.listeners:
            listener.event(event, decision)

    def run_ended(self, outcome: Outcome) -> None:
        for listener in self.listeners:
            listener.run_ended(outcome)


class _AgentRun(Run):
    """A run whose first event the agent reports itself, so that its listener hears it too:
    ``RunStarted``, or for a stored run taken up again an ``Injected`` message (a
    ``RunStarted`` would reset its counts)."""

    def __enter__(self) -> _AgentRun:
        return self

    def started(self) -> None:
        """The run's first event is in: it goes live in the ledger (if it is shared)."""
        self._go_live()


@dataclass
class _Call:
    """A tool call being assembled from the stream."""

    call_id: str = ""
    name: str = ""
    arguments: str = ""


@dataclass
class _Reply:
    """One model reply, assembled from its stream."""

    text: str = ""
    calls: list[_Call] = field(default_factory=list)
    input_tokens: int = 0
    output_tokens: int = 0
    cached_tokens: int = 0
    #: False when the endpoint reported no usage, or figures that are not token counts: the
    #: figures above are then the agent's estimate (``Agent._read_usage``).
    usage_known: bool = False


class Agent:
    """A tool-using agent over an OpenAI-compatible endpoint, governed by haltwise.

    ``client`` is an ``openai.OpenAI``; ``limits`` the limit expression (or pass ``governor``);
    ``store`` the SQLite store that keeps conversations and checkpoints (optional);
    ``ledger`` where shared budgets are spent and runs are seen live (default: the store);
    ``prompter`` asks the human at a limit. With none, a run seen live in a ledger waits up to
    ``approval_timeout`` seconds for ``haltwise approve``; with no ledger, it stops there.
    """

    def __init__(
        self,
        client: Any,
        model: str,
        toolbox: Toolbox,
        *,
        limits: Limit | None = None,
        governor: Governor | None = None,
        pricer: Any = None,
        clock: Callable[[], float] = time.monotonic,
        store: Store | None = None,
        ledger: Ledger | None = None,
        approval_timeout: float = APPROVAL_TIMEOUT,
        listener: Listener | None = None,
        prompter: Prompter | None = None,
        system_prompt: str | None = None,
        max_output_tokens: int | None = None,
        base_url: str = "",
    ) -> None:
        self.client = client
        self.model = model
        self.toolbox = toolbox
        self.store = store
        self.listener = listener or Listener()
        self.max_output_tokens = max_output_tokens
        self.governor = governor or Governor(
            limits, clock=clock, pricer=pricer, ledger=ledger if ledger is not None else store
        )
        self._lock = self.governor.lock
        self._prompter = prompter
        self.guard = Guard(
            governor=self.governor,
            prompter=None if prompter is None else self._ask,
            synthesizer=self._synthesize,
            approval_timeout=approval_timeout,
        )
        # Stopped from elsewhere (another thread, ``haltwise stop`` through the ledger): the
        # call in flight is cut off as for a cancel.
        self.governor.on_cancel(self._governor_cancelled)
        prompt = (system_prompt or SYSTEM_PROMPT).format(workspace=toolbox.workspace.root)
        #: The conversation, as OpenAI chat messages.
        self.messages: list[dict[str, Any]] = [{"role": "system", "content": prompt}]
        self.conversation_id = (
            store.new_conversation(
                model=model, base_url=base_url, workspace=str(toolbox.workspace.root)
            )
            if store is not None
            else uuid.uuid4().hex[:12]
        )
        self._base_url = base_url
        #: How many messages are already in the store.
        self._saved = 0
        self._continued: str | None = None
        self._state = "idle"
        self._running = False
        self._run_id = ""
        self._cancel = threading.Event()
        self._cancel_reason = "cancelled by the user"
        self._inbox: queue.Queue[str] = queue.Queue()
        self._waiting: queue.Queue[tuple[str, Any]] | None = None
        self._stream_usage = True
        #: False once a model call of the current run had no usable usage (it was said once).
        self._usage_known = True
        self._run: Run | None = None

    # ----------------------------------------------------------------------------------------
    # For faces

    @property
    def running(self) -> bool:
        return self._running

    def status(self) -> AgentStatus:
        """The widget's numbers, now."""
        with self._lock:
            turns, cap = self.governor.turns()
            usage = self.governor.session_usage
        return AgentStatus(
            turns=turns,
            max_turns=cap,
            tokens=usage.total_tokens,
            cost=usage.cost,
            state=self._state,
            run_id=self._run_id,
        )

    def standing(self) -> list[LimitStatus]:
        with self._lock:
            return self.governor.standing()

    def usage(self) -> tuple[Usage, Usage]:
        """What the current (or last) run spent, and what the session spent."""
        with self._lock:
            return self.governor.usage, self.governor.session_usage

    def set_turn_limit(self, value: int | Unlimited) -> AgentStatus:
        """``/turn-limit N|unlimited`` with the design's semantics (``Governor.set_limit``):
        unlimited to N restarts the count; N to M keeps it."""
        with self._lock:
            if self.governor.pending is not None:
                raise ConfigurationError(
                    "a question is open: answer it first (choose 'extend N' to raise the limit)"
                )
            current = _turn_leaf(self.governor.limits)
            options: dict[str, Any] = {}
            if current is not None:
                policy = current.policy
                plain = policy.timeout is None and policy.synthesizer is None
                options = {
                    "scope": current.scope,
                    "warn_at": current.warn_at,
                    "on_limit": policy.name if plain else policy,
                }
            self.governor.set_limit(max_turns(value, **options))
        status = self.status()
        self.listener.status(status)
        return status

    def inject(self, text: str) -> bool:
        """A message typed while the run goes on: it joins the conversation before the next
        model call, with no count reset. False when no run is going on."""
        if not self._running:
            return False
        self._inbox.put(without_lone_surrogates(text))
        return True

    def cancel(self, reason: str = "cancelled by the user") -> bool:
        """Stop the current run as soon as possible (any thread). False when none is running."""
        if not self._running:
            return False
        self._cancel_reason = reason
        self._cut_off()
        return True

    def abandon(self) -> Outcome:
        """End the current run now, without waiting for the thread that runs it, which is
        stuck in a call that does not heed ``cancel()``: the run ends as the cancel would have
        ended it, in the governor and the store. For a face that quits next (a second
        Ctrl-C); if that thread ever finishes, it records its own end over this one."""
        self._tell_governor()
        outcome = self.governor.interrupted("The run was abandoned while it waited.").outcome
        if self.store is not None:
            self.store.end_run(self._run_id, outcome)
        return outcome

    def _governor_cancelled(self) -> None:
        """The governor was cancelled or killed by someone else: it has the reason; the
        agent only cuts off what is in flight."""
        if self._running and not self._cancel.is_set():
            self._cancel_reason = ""
            self._cut_off()

    def _cut_off(self) -> None:
        self._cancel.set()
        waiting = self._waiting
        if waiting is not None:
            waiting.put(("cancel", None))
        self.toolbox.cancel()

    def _tell_governor(self) -> None:
        """Pass a cancel from ``cancel()`` on to the governor (once, and never over the reason
        of a stop from elsewhere)."""
        governor = self.governor
        if (
            self._cancel.is_set()
            and self._cancel_reason
            and not governor.cancel_requested
            and governor.stopped is None
        ):
            governor.cancel(self._cancel_reason)

    def resume(self, record: RunRecord) -> None:
        """Take up a stored run: its conversation and its counts. The next ``send`` continues
        that run (no count reset); later ones start new runs."""
        if record.checkpoint is None:
            raise ConfigurationError(f"run {record.run_id} has no checkpoint to resume from")
        self.messages = list(record.messages) or self.messages
        self.governor.restore(record.checkpoint)
        self._continued = record.run_id
        self._run_id = record.run_id
        self._saved = 0  # the store forks the conversation: everything is written anew
        self.listener.status(self.status())

    # ----------------------------------------------------------------------------------------
    # A run

    def send(self, prompt: str) -> Outcome:
        """Run one user prompt to its outcome.

        Endpoint failures raise ``AgentError`` and configuration problems (a cost limit on a
        model with no price) ``ConfigurationError``, after the run's outcome is recorded.
        A lone surrogate in ``prompt`` (a command line's bytes that were not UTF-8, kept by
        Python as surrogates) is mended as the model's text is: the store, the log and the
        endpoint take only text.
        """
        prompt = without_lone_surrogates(prompt)
        self._cancel.clear()
        while not self._inbox.empty():
            self._inbox.get_nowait()
        continued, self._continued = self._continued, None
        run_id = continued or uuid.uuid4().hex[:12]
        self._run_id = run_id
        self._running = True
        self._usage_known = True
        self._set_state("running")
        if prompt or not continued:
            self.messages.append({"role": "user", "content": prompt})
        if self.store is not None:
            self.store.start_run(self.conversation_id, run_id, prompt)
        self.listener.run_started(run_id, prompt, continued is not None)
        run = _AgentRun(self.guard, prompt, run_id, True)
        self._run = run
        failure: BaseException | None = None
        try:
            with run:
                try:
                    if not continued:
                        self._report(run, RunStarted(prompt, run_id))
                    elif prompt:
                        self._report(run, Injected(prompt))
                    run.started()
                    self._checkpoint()
                    self._loop(run)
                except _Cancelled as cut:
                    # Cancelled, or out of time, while waiting: the run stops now (timed_out or
                    # cancelled), the request in flight counted at what it reserved.
                    self._tell_governor()
                    what = "the run's time ran out" if type(cut) is _Interrupted else "cancelled"
                    self._interrupt(run, f"The model call was cut off: {what}.", cut.partial)
        except (HaltError, HaltSignal) as error:
            # A stop while the run was starting (before the block could catch it).
            run.outcome = run.outcome or error.outcome
        except Exception as error:
            failure = error
        finally:
            self._running = False
            self._run = None
        outcome = run.outcome or self.governor.outcome
        assert outcome is not None
        self._repair()
        self._checkpoint()
        if self.store is not None:
            self.store.end_run(run_id, outcome)
        self._set_state("idle")
        self.listener.run_ended(outcome)
        if failure is not None:
            raise failure
        return outcome

    def _interrupt(self, run: Run, message: str, partial: str) -> None:
        decision = run.interrupt(message, partial_output=partial or None)
        stopped = self.governor.stopped
        self.listener.event(TurnEnded(partial or None), stopped or decision)

    def _loop(self, run: Run) -> None:
        while True:
            self._report(run, TurnStarting())
            self._take_messages(run)
            decision = self._report(
                run, ModelRequest(self.model, max_tokens=self.max_output_tokens)
            )
            # Stored before it is sent: a run killed while it waits resumes with it counted.
            self._checkpoint()
            reply = self._model_call(self.messages, tools=True, max_tokens=_max_tokens(decision))
            self._report(run, _response_event(self.model, reply))
            self.messages.append(_assistant_message(reply))
            for call in reply.calls:
                self._tool(run, call)
            self._report(run, TurnEnded(reply.text or None))
            self._checkpoint()
            if not reply.calls:
                self._report(run, RunEnded(reply.text or None))
                return

    def _take_messages(self, run: Run) -> None:
        """Put the human's typed messages and the limits' notes into the conversation."""
        while True:
            try:
                text = self._inbox.get_nowait()
            except queue.Empty:
                break
            self.messages.append({"role": "user", "content": text})
            self._report(run, Injected(text))
            self.listener.injected(text)
        for note in run.notes():
            self.messages.append({"role": "user", "content": f"[haltwise] {note}"})
            self.listener.note(note)

    def _tool(self, run: Run, call: _Call) -> None:
        self.listener.tool_started(call.name, call.arguments, call.call_id)
        decision = self._report(run, ToolCall(call.name, call.arguments, call.call_id))
        if isinstance(decision, Block):
            self.listener.blocked(call.name, decision.reason, call.call_id)
            output = ToolOutput(decision.reason, is_error=True)
        else:
            output = self.toolbox.call(
                call.name, call.arguments, time_left=self.governor.time_left()
            )
        if self._cancel.is_set():
            raise _Cancelled
        content = f"error: {output.content}" if output.is_error else output.content
        self.messages.append({"role": "tool", "tool_call_id": call.call_id, "content": content})
        self.listener.tool_finished(call.name, output, call.call_id)
        self._report(
            run,
            ToolResult(
                call.name,
                output.content,
                call.call_id,
                is_error=output.is_error,
                exit_code=output.exit_code,
            ),
        )

    def _report(self, run: Run, event: Event) -> Decision:
        """Send ``event`` through the drivers' flow; tell the listener; publish the counts."""
        self._tell_governor()
        try:
            decision = run.send(event)
        except (HaltError, HaltSignal):
            stopped = self.governor.stopped
            if stopped is not None:
                self.listener.event(event, stopped)
            raise
        self.listener.event(event, decision)
        if isinstance(event, TurnStarting | ModelResponse | RunStarted | ToolCall):
            self.listener.status(self.status())
        return decision

    # ----------------------------------------------------------------------------------------
    # Carrying out Ask and Stop(synthesize)

    def _ask(self, ask: Ask) -> Answer | Choice | bool | None:
        assert self._prompter is not None
        self._set_state("asking")
        self.listener.asking(ask)
        try:
            answer = self._prompter(ask)
        finally:
            self._set_state("running")
        if self._cancel.is_set():
            raise _Cancelled
        if answer is not None and not isinstance(answer, Answer | Choice | bool):
            raise ConfigurationError("the chat's prompter must answer synchronously")
        return answer

    def _synthesize(self, evidence: Evidence) -> str | None:
        """The tools-free pass: reported like any model call, so that its worst case is
        budgeted before it is sent and its usage is in the outcome. None: no answer written
        (no budget left for one, or the endpoint failed)."""
        run = self._run
        assert run is not None
        self._set_state("synthesizing")
        self.listener.synthesizing(evidence.stop_message)
        self._repair(f"not run: the run stopped ({evidence.stop_message})")
        # No budget for it raises the run's HaltError; the partial output is kept.
        decision = self._report(run, ModelRequest(self.model, max_tokens=self.max_output_tokens))
        self.messages.append(
            {"role": "user", "content": SYNTHESIS_PROMPT.format(reason=evidence.stop_message)}
        )
        try:
            reply = self._model_call(
                self.messages, tools=False, max_tokens=_max_tokens(decision), synthesis=True
            )
        except (AgentError, _Cancelled):
            self._report(run, ModelResponse(model=self.model, answered=False))
            return None
        self._report(run, _response_event(self.model, reply))
        self.messages.append({"role": "assistant", "content": reply.text})
        return reply.text

    # ----------------------------------------------------------------------------------------
    # The model

    def _model_call(
        self,
        messages: list[dict[str, Any]],
        *,
        tools: bool,
        max_tokens: int | None,
        synthesis: bool = False,
    ) -> _Reply:
        """One streamed model call, bounded by the run's time left (the synthesis pass, which
        comes after the run stopped, by ``SYNTHESIS_SECONDS``)."""
        request: dict[str, Any] = {
            "model": self.model,
            "messages": messages,
            "stream": True,
        }
        if tools:
            request["tools"] = self.toolbox.schemas()
        if max_tokens is not None:
            request["max_tokens"] = max_tokens
        deadline = None
        left = SYNTHESIS_SECONDS if synthesis else self.governor.time_left()
        if left is not None:
            request["timeout"] = max(left, 0.001)
            deadline = time.monotonic() + left
        reply = _Reply()
        calls: dict[int, _Call] = {}
        usage = None
        try:
            for chunk in self._chunks(request, deadline):
                # Some endpoints report usage on every chunk: the last one counts.
                usage = getattr(chunk, "usage", None) or usage
                for text in _take_chunk(chunk, calls):
                    reply.text += text
                    self.listener.text(text)
        except _Cancelled as cut:
            cut.partial = reply.text
            raise
        except _Malformed as malformed:
            raise AgentError(
                f"the model endpoint at {self._endpoint()} sent a chunk that is not a chat "
                f"completion chunk: {malformed}"
            ) from None
        finally:
            self.listener.text_done()
        reply.calls = [calls[index] for index in sorted(calls)]
        for number, call in enumerate(reply.calls, 1):
            call.call_id = call.call_id or f"call_{uuid.uuid4().hex[:8]}_{number}"
            call.name = call.name or "unnamed_tool"
        self._read_usage(reply, usage, request)
        return reply

    def _read_usage(self, reply: _Reply, usage: Any, request: dict[str, Any]) -> None:
        """Take the endpoint's token counts into ``reply``. A call with none, or with a figure
        that is not a count, has unknown usage; the first of a run is said in a warning naming
        the endpoint and the figure.

        Such a call is not an error of the run, nor of the user's settings: the endpoint
        misbehaved, and the answer it gave is as good as any. Nor is its usage zero, or a
        guess from a figure known to be wrong (a negative count, ``1.5``, ``"x"``): it is
        estimated from the sizes of ``request`` and ``reply`` (``CHARS_PER_TOKEN``), each
        figure at least what the request reserved (its prompt and ``max_tokens``), so that the
        token and cost limits go on counting even when nothing was reserved (a run's first
        call, with no ``max_tokens``). ``cached_tokens`` past ``prompt_tokens`` (some proxies
        count the cached tokens outside the prompt) is the exception: the prompt's count is
        the one the limits read, so it stands and the cached count is cut to it, as the
        audit's readers do."""
        counts = None if usage is None else token_counts(usage)
        if isinstance(counts, tuple):
            reply.input_tokens, reply.output_tokens, reply.cached_tokens = counts
            reply.usage_known = True
            return
        prompt = json.dumps([request["messages"], request.get("tools", [])], ensure_ascii=False)
        written = [
            reply.text,
            *(part for call in reply.calls for part in (call.name, call.arguments)),
        ]
        reply.input_tokens, reply.output_tokens = estimate(
            reserved_tokens(self.governor), len(prompt), sum(map(len, written))
        )
        if not self._usage_known:
            return
        self._usage_known = False
        what = "no token usage" if counts is None else f"{counts}, which is not a token count"
        self.listener.warning(
            f"the model endpoint at {self._endpoint()} reported {what}: such a model call "
            f"counts at an estimate ({CHARS_PER_TOKEN} characters a token of its prompt and "
            "reply), and at least at what its request reserved (its prompt and max_tokens), "
            "never as free"
        )

    def _chunks(self, request: dict[str, Any], deadline: float | None) -> Iterator[Any]:
        """The stream's chunks, read on a helper thread so that ``cancel()`` is immediate and
        the wait ends at ``deadline`` (monotonic) whatever the endpoint does."""
        inbox: queue.Queue[tuple[str, Any]] = queue.Queue()
        abandoned = threading.Event()
        with_usage = self._stream_usage
        #: What came back: set once the endpoint answered.
        body = _Body(None)

        def read() -> None:
            nonlocal body
            try:
                stream = self._open(request, with_usage)
                body = _Body(getattr(stream, "response", None))
                try:
                    for chunk in stream:
                        if abandoned.is_set():
                            break
                        inbox.put(("chunk", chunk))
                finally:
                    stream.close()
                inbox.put(("end", None))
            except BaseException as error:  # handed to the agent's thread
                inbox.put(("error", error))

        self._waiting = inbox
        if self._cancel.is_set():
            raise _Cancelled
        reader = threading.Thread(target=read, name="haltwise-model-stream", daemon=True)
        reader.start()
        answered = False
        try:
            while True:
                try:
                    if deadline is None:
                        kind, item = inbox.get()
                    else:
                        kind, item = inbox.get(timeout=max(deadline - time.monotonic(), 0))
                except queue.Empty:
                    raise _Interrupted from None
                if kind == "chunk":
                    answered = answered or bool(getattr(item, "choices", None))
                    yield item
                elif kind == "end":
                    if not answered:
                        # A page, a body of some other API, or an empty stream: no reply,
                        # however the HTTP status reads.
                        raise AgentError(
                            f"the model endpoint at {self._endpoint()} sent no chat completion "
                            f"chunk: it answered {body.describe()}. {_CHECK_URL}"
                        )
                    return
                elif kind == "cancel":
                    raise _Cancelled
                else:
                    raise self._explain(item, body) from item
        finally:
            abandoned.set()
            self._waiting = None

    def _open(self, request: dict[str, Any], with_usage: bool) -> Any:
        import openai

        completions = self.client.chat.completions
        if not with_usage:
            return completions.create(**request)
        try:
            return completions.create(**request, stream_options={"include_usage": True})
        except openai.BadRequestError as error:
            if "stream_options" not in str(error):
                raise
            # An endpoint that does not know stream_options: ask once more without it.
            self._stream_usage = False
            return completions.create(**request)

    def _explain(self, error: BaseException, body: _Body) -> BaseException:
        """A clear ``AgentError`` for the endpoint's failures (``body``: what it sent, as far
        as it was read); anything else unchanged."""
        import openai

        where = self._endpoint()
        if isinstance(error, openai.APITimeoutError):
            return AgentError(f"the model endpoint at {where} did not answer in time")
        if isinstance(error, openai.APIConnectionError):
            return AgentError(
                f"cannot reach the model endpoint at {where} ({error.__cause__ or error}). "
                "Check --base-url (or OPENAI_BASE_URL) and that the server is running; "
                "`haltwise demo` works with no endpoint at all"
            )
        if isinstance(error, openai.AuthenticationError):
            return AgentError(
                f"the endpoint at {where} refused the API key (HTTP 401): "
                "set --api-key or OPENAI_API_KEY"
            )
        if isinstance(error, openai.NotFoundError):
            return AgentError(
                f"the endpoint at {where} does not know model {self.model!r} (HTTP 404): "
                "choose one with --model or HALTWISE_MODEL"
            )
        if isinstance(error, openai.APIStatusError):
            return AgentError(
                f"the model endpoint at {where} answered HTTP {error.status_code}: "
                f"{_error_message(error)}"
            )
        if isinstance(error, openai.APIError):  # an error the endpoint sent in its stream
            return AgentError(
                f"the model endpoint at {where} sent an error in its stream: "
                f"{_shown(_error_message(error))}"
            )
        # Only the endpoint's bytes are decoded and parsed on the stream's thread.
        if isinstance(error, json.JSONDecodeError):
            return AgentError(
                f"the model endpoint at {where} sent stream data that is not JSON "
                f"({error.msg} at character {error.pos}): {_shown(error.doc)}"
            )
        if isinstance(error, UnicodeDecodeError):
            return AgentError(
                f"the model endpoint at {where} sent a stream that is not UTF-8 text "
                f"(byte {error.object[error.start]:#04x}): it answered {body.describe()}. "
                f"{_CHECK_URL}"
            )
        return error

    def _endpoint(self) -> str:
        """The endpoint's address, for messages."""
        return self._base_url or str(getattr(self.client, "base_url", "")) or "the endpoint"

    # ----------------------------------------------------------------------------------------
    # Keeping the conversation whole and stored

    def _repair(self, content: str = "not run: the run stopped first") -> None:
        """Give every tool call of the last reply a result, so the conversation stays valid."""
        messages = self.messages
        index = len(messages) - 1
        while index >= 0 and messages[index].get("role") != "assistant":
            index -= 1
        if index < 0:
            return
        position = index + 1
        answered = set()
        while position < len(messages) and messages[position].get("role") == "tool":
            answered.add(messages[position].get("tool_call_id"))
            position += 1
        for call in messages[index].get("tool_calls") or ():
            if call["id"] not in answered:
                messages.insert(
                    position, {"role": "tool", "tool_call_id": call["id"], "content": content}
                )
                position += 1

    def _checkpoint(self) -> None:
        """The new messages and the counts, in one transaction."""
        if self.store is None:
            return
        new = self.messages[self._saved :]
        self.store.save_turn(
            self.conversation_id, self._run_id, self._saved, new, self.governor.checkpoint()
        )
        self._saved = len(self.messages)

    def _set_state(self, state: str) -> None:
        if self._state != state:
            self._state = state
            self.listener.status(self.status())


def _response_event(model: str, reply: _Reply) -> ModelResponse:
    """The reply as the governor counts it: its usage as the endpoint reported it, or the
    agent's estimate of it (``Agent._read_usage``)."""
    return ModelResponse(
        model=model,
        input_tokens=reply.input_tokens,
        output_tokens=reply.output_tokens,
        cache_read_tokens=reply.cached_tokens,
        text=reply.text or None,
        tool_calls=len(reply.calls),
    )


#: A UTF-16 surrogate. In a Python string it is half of a pair, never a character of its own:
#: JSON's ``"\ud800"`` decodes to one, and no UTF-8 encoder takes it.
_SURROGATE = re.compile("[\ud800-\udfff]")


def without_lone_surrogates(text: str) -> str:
    """``text`` with each lone surrogate replaced by U+FFFD (the replacement character), and a
    pair that came as two characters made one.

    A model, or a proxy that cuts UTF-16 text, may stream a lone surrogate; kept, it would fail
    whatever writes the text next: the event log, the store, the terminal, the next request.
    The reply's text and its tool names and call ids pass through here as they arrive, and so
    do the human's prompts: a command line's bytes that are not UTF-8 come as surrogates too
    (``haltwise run $'\\xff'``)."""
    if _SURROGATE.search(text) is None:
        return text
    return text.encode("utf-16-le", "surrogatepass").decode("utf-16-le", "replace")


def _escaped(arguments: str) -> str:
    """A tool call's JSON arguments with each surrogate written as its JSON escape: the same
    JSON, now encodable. The tool then refuses a lone surrogate in an argument, as it refuses
    an escaped one, with an error the model can act on; U+FFFD in its place would have a
    ``write_file`` write text the model never wrote."""
    return _SURROGATE.sub(lambda found: f"\\u{ord(found.group()):04x}", arguments)


#: What to check when an endpoint answers with something else than a stream of chunks.
_CHECK_URL = "Check --base-url (or OPENAI_BASE_URL): it must be an OpenAI-compatible API"
#: The most characters or bytes of what an endpoint sent that a message quotes.
_SHOWN = 200
#: A wrong value in a chunk, as a message shows it (``repr``: escaped, and cut short).
_brief = reprlib.Repr()
_brief.maxstring = _brief.maxother = _brief.maxlong = 60


def _shown(text: str | bytes) -> str:
    """What an endpoint sent, quoted for a message: its first ``_SHOWN`` characters (bytes
    that are not UTF-8 as ``\\xff``), with every control character escaped (``repr``), so
    that it can neither break the line nor write to the terminal."""
    head = text[:_SHOWN]
    shown = head.decode("utf-8", "backslashreplace") if isinstance(head, bytes) else head
    return repr(shown) + (" ..." if len(text) > _SHOWN else "")


class _Body:
    """The first bytes of a streamed reply's body, kept as the ``openai`` client reads them
    (decoded from any content encoding), to show what came back when it held no chunk.

    ``response`` is the stream's ``httpx`` response, or None when there is none to watch."""

    def __init__(self, response: Any) -> None:
        self.response = response
        self.start = b""
        if response is None:
            return
        read = response.iter_bytes

        def iter_bytes(chunk_size: int | None = None) -> Iterator[bytes]:
            for piece in read(chunk_size):
                if len(self.start) <= _SHOWN:
                    self.start += piece[: _SHOWN + 1 - len(self.start)]
                yield piece

        response.iter_bytes = iter_bytes

    def describe(self) -> str:
        """``HTTP 200 with '<html>...' (content type 'text/html')``, as far as it is known."""
        response = self.response
        if response is None:
            return "with no chunk"
        kind = response.headers.get("content-type")
        body = _shown(self.start) if self.start else "an empty body"
        typed = f"content type {_shown(kind)}" if kind else "no content type"
        return f"HTTP {response.status_code} with {body} ({typed})"


class _Malformed(Exception):
    """A field of a stream chunk holds what the chat-completions API never sends there."""

    def __init__(self, field: str, value: Any, expected: str) -> None:
        super().__init__(f"{field} is {_brief.repr(value)}, where {expected} belongs")


def _take_chunk(chunk: Any, calls: dict[int, _Call]) -> Iterator[str]:
    """Read one stream chunk: its tool-call pieces go into ``calls`` (by their ``index``); the
    pieces of the reply's text are yielded. ``_Malformed`` names the first field that holds
    what the API never sends there. The ``openai`` client builds chunks without checking
    them, so each field is checked here; the tool-call ``arguments``, which the API sends as
    JSON text, are taken as an object too, written back as that JSON."""
    _kind(chunk, "the chunk", "a chat completion chunk (an object)")
    choices = _field(chunk, "choices", "", (list,), "a list of choices")
    for number, choice in enumerate(choices or ()):
        where = f"choices[{number}]"
        _kind(choice, where, "a choice (an object)")
        delta = _field(choice, "delta", where, (BaseModel,), "a delta (an object)")
        if delta is None:
            continue
        where += ".delta"
        content = _field(delta, "content", where, (str,), "text")
        if content:
            yield without_lone_surrogates(content)
        parts = _field(delta, "tool_calls", where, (list,), "a list of tool calls")
        for count, part in enumerate(parts or ()):
            _take_part(part, f"{where}.tool_calls[{count}]", calls)


def _take_part(part: Any, where: str, calls: dict[int, _Call]) -> None:
    """One piece of a tool call (``Agent._model_call``): its id, name and arguments."""
    _kind(part, where, "a tool call (an object)")
    index = _field(part, "index", where, (int,), "the tool call's number (an integer)")
    call = calls.setdefault(len(calls) if index is None else index, _Call())
    call_id = _field(part, "id", where, (str,), "the tool call's id (text)")
    if call_id:
        call.call_id = without_lone_surrogates(call_id)
    function = _field(part, "function", where, (BaseModel,), "a function (an object)")
    if function is None:
        return
    where += ".function"
    name = _field(function, "name", where, (str,), "the tool's name (text)")
    if name and not call.name:
        call.name = without_lone_surrogates(name)
    arguments = _field(function, "arguments", where, (str, dict), "JSON text")
    if isinstance(arguments, dict):
        arguments = json.dumps(arguments, ensure_ascii=False)
    if arguments:
        call.arguments += _escaped(arguments)


def _field(owner: Any, name: str, where: str, kinds: tuple[type, ...], expected: str) -> Any:
    """``owner.name``, if it is None (or missing) or one of ``kinds`` (never a bool)."""
    value = getattr(owner, name, None)
    if value is None or (isinstance(value, kinds) and not isinstance(value, bool)):
        return value
    raise _Malformed(f"{where}.{name}" if where else name, value, f"{expected} or null")


def _kind(value: Any, where: str, expected: str) -> None:
    """Check that ``value`` is an object of the API (the client builds one from a JSON object)."""
    if not isinstance(value, BaseModel):
        raise _Malformed(where, value, expected)


def _max_tokens(decision: Decision) -> int | None:
    """The ``max_tokens`` the governor admitted a request with (None: as asked)."""
    return decision.max_tokens if isinstance(decision, Continue | Warn) else None


def _assistant_message(reply: _Reply) -> dict[str, Any]:
    message: dict[str, Any] = {"role": "assistant", "content": reply.text or None}
    if reply.calls:
        message["tool_calls"] = [
            {
                "id": call.call_id,
                "type": "function",
                "function": {"name": call.name, "arguments": call.arguments},
            }
            for call in reply.calls
        ]
    elif not reply.text:
        message["content"] = ""
    return message


def _turn_leaf(limits: Limit) -> Leaf | None:
    for leaf in limits.leaves():
        if leaf.reason == "turn_limit":
            return leaf
    return None


def _error_message(error: Any) -> str:
    body = getattr(error, "body", None)
    if isinstance(body, dict):
        inner = body.get("error", body)
        if isinstance(inner, dict) and inner.get("message"):
            return str(inner["message"])
    return str(getattr(error, "message", error))
