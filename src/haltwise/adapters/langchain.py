"""LangChain v1 ``create_agent`` and LangGraph graphs, governed by haltwise.

::

    guard = Guard(max_turns(10) | max_cost("0.50"), prompter=console_prompter())
    agent = create_agent(model, tools, middleware=[HaltwiseMiddleware(guard)])
    governed = govern(agent, guard).run_sync({"messages": [("user", task)]})
    print(governed.outcome.status, governed.output)

``HaltwiseMiddleware`` is an ``AgentMiddleware``. Its hooks report to the guard's run and carry
out each decision, adding no node to the agent's loop:

- ``wrap_model_call``: ``TurnEnded`` for the turn before and ``TurnStarting`` (once per model
  call of the main loop, not for a retry of it), ``ModelRequest`` with the request's
  ``max_tokens`` before the handler is called, then ``ModelResponse`` from the message's
  ``usage_metadata``. A refused request never reaches the handler: the call answers with one
  closing ``AIMessage`` that says why (as LangChain's ``ModelCallLimitMiddleware`` does) and
  ``jump_to="end"``, so the graph ends cleanly. A lowered ``max_tokens`` and the run's
  ``time_left()`` (as ``timeout``, unless the run interrupts the call at its deadline itself)
  go into the request's ``model_settings``; notes from soft limits go into
  its messages (and the state) as ``[haltwise]`` user messages. A ``synthesize`` stop is
  answered here: one more model call, tools removed, counted, whose answer ends the run, sent
  with a timeout of its own (``synthesis_seconds``: after a time limit's stop the run has no
  time left to give it). It is made once per run: calls that meet the stop meanwhile
  (parallel branches, sub-agents) wait for it, then close with the run's outcome (the answer,
  or the stop if the pass failed).
- ``wrap_tool_call``: the first call of a response to reach the tool node reports ``ToolCall``
  for every call of that response, before any of them runs (LangGraph runs them as parallel
  tasks; the others wait for it). A refused call returns a ``ToolMessage`` with
  ``status="error"`` and the refusal, and never runs; an admitted one runs and is reported as
  ``ToolResult`` (notes are appended to its content). A retried call is reported again. In a
  sync run with a time limit, a tool runs on a thread of its own and is given up on at the
  deadline (``call_within``): Python cannot interrupt a tool that blocks its thread.
- ``before_agent`` / ``after_agent``: ``RunStarted`` / ``RunEnded`` when the agent is invoked
  directly rather than through ``govern``: the middleware alone is a drop-in for
  ``ModelCallLimitMiddleware`` and ``ToolCallLimitMiddleware`` (thread scope is haltwise's
  ``scope="session"``, run scope its default ``scope="run"``).

``govern(agent, guard)`` runs the graph (``invoke`` / ``ainvoke``) inside the guard's run and
returns ``Governed(outcome, state)``; the async ``run`` also interrupts the graph at the run's
deadline or on ``cancel()``. A graph that is not ``create_agent`` uses ``middleware.model_node``
and ``middleware.tool_node``. A sub-agent (an agent called by a tool, a subgraph) with a
middleware of the same guard reports to the same run, without turns of its own; one with
``middleware.child(limits)`` runs on a child governor. Either way it cannot pass the parent's
limits.

Asking: the guard's prompter is asked in place. With ``pause_on_ask=True`` and no prompter, a
question pauses the graph with LangGraph's ``interrupt()`` instead, and
``Command(resume="continue" | "extend 5" | "wrap up" | "abort")`` answers it.

Only this module imports ``langchain`` and ``langgraph``; ``haltwise.adapters`` does not.
"""

from __future__ import annotations

import asyncio
import dataclasses
import threading
import weakref
from collections.abc import (
    Awaitable,
    Callable,
    Generator,
    Iterator,
    Mapping,
    Sequence,
)
from contextlib import contextmanager, suppress
from functools import partial
from typing import Any, TypeVar, cast

from langchain.agents.middleware import (
    AgentMiddleware,
    AgentState,
    ModelRequest,
    ModelResponse,
)
from langchain.agents.middleware.types import ExtendedModelResponse, ModelCallResult
from langchain_core.messages import (
    AIMessage,
    AnyMessage,
    BaseMessage,
    HumanMessage,
    ToolCall,
    ToolMessage,
)
from langchain_core.runnables import Runnable, RunnableBinding, RunnableLambda
from langchain_core.tools import BaseTool
from langgraph.config import get_config
from langgraph.errors import GraphBubbleUp
from langgraph.prebuilt import ToolNode
from langgraph.prebuilt.tool_node import ToolCallRequest
from langgraph.pregel import Pregel
from langgraph.runtime import Runtime
from langgraph.types import Command, interrupt

from ..drivers.bounded import Overdue, call_within
from ..drivers.guard import AsyncRun, Guard, Run
from ..drivers.prompters import parse_answer
from ..engine.decisions import Answer, Ask, Block, Choice, Continue, Decision, Stop, Warn
from ..engine.errors import ConfigurationError, HaltError, HaltSignal, InvalidValueError
from ..engine.events import Event, RunEnded, RunStarted, ToolResult, TurnEnded, TurnStarting
from ..engine.events import ModelRequest as ModelRequestEvent
from ..engine.events import ModelResponse as ModelResponseEvent
from ..engine.events import ToolCall as ToolCallEvent
from ..engine.governor import Governor
from ..engine.limits import Limit
from ..engine.outcome import Outcome, Usage
from ._common import (
    Governed,
    SynthesisPass,
    answered,
    checked_guard,
    checked_limits,
    synthesis_outcome,
    synthesis_seconds,
)

__all__ = ["GovernedAgent", "HaltwiseMiddleware", "govern"]

T = TypeVar("T")

#: How notes and instructions from haltwise are marked in the conversation.
NOTE_PREFIX = "[haltwise] "
#: What the model is told before the tools-free pass that writes a stopped run's answer.
SYNTHESIS_INSTRUCTION = (
    "Do not call any tools. Answer the original request now, as well as you can from what "
    "has been gathered so far, and say plainly what is missing."
)
#: The stops a hook catches: the run's own (``HaltSignal`` when the guard raises signals).
_HALTS = (HaltError, HaltSignal)
#: Where a model's request sets its output budget, in the order they are looked for.
_MAX_TOKENS_KEYS = ("max_tokens", "max_completion_tokens", "max_output_tokens")
#: Request settings that give the model tools; dropped for the tools-free synthesis pass.
_TOOL_SETTINGS = frozenset({"tools", "tool_choice", "parallel_tool_calls", "functions"})
_UNSEEN = object()


# ------------------------------------------------------------------------------------------
# The live run of each governor


class _Live:
    """A governor's run in progress, and what the hooks keep between them."""

    def __init__(self, run: Run | AsyncRun, owner: str | None) -> None:
        self.run = run
        #: The namespace of the graph that opened the run and ends it (``after_agent``), or
        #: None when ``govern`` did (it ends the run itself). Graphs nested deeper join it.
        self.owner = owner
        #: Tool calls announced by their response: None when admitted, else the refusal.
        self.verdicts: dict[str, str | None] = {}
        #: The responses whose tool calls are announced (or being announced) this turn.
        self.batches: dict[frozenset[str], threading.Event] = {}
        self.lock = threading.Lock()
        #: The state the current turn's model call was made from (a retry of the call shares
        #: it, and is no new turn); whether the turn has tool calls to end, and its text.
        self.turn: object = None
        self.turn_open = False
        self.turn_text: str | None = None
        #: Whether the run interrupts its task at its deadline (``govern``'s async run), so
        #: that async calls need no timeout of their own.
        self.interrupts = owner is None and isinstance(run, AsyncRun)
        #: The tools-free pass of a ``synthesize`` stop: one flow makes it, the others wait.
        self.synthesis = SynthesisPass(run.guard.governor)
        self._view = run if isinstance(run, Run) else None

    @property
    def governor(self) -> Governor:
        return self.run.guard.governor

    def sync_run(self) -> Run:
        """The run, for a synchronous hook (a sync node inside an async run gets a ``Run``
        driving the same state: the same notes, outcome and evidence)."""
        view = self._view
        if view is None:
            run = self.run
            view = self._view = Run(run.guard, run.prompt, None, True)
            view.__dict__ = run.__dict__  # one run's state, two drivers
        return view

    def outcome(self) -> Outcome | None:
        return self.run.outcome or self.governor.outcome


_LIVE: weakref.WeakKeyDictionary[Governor, _Live] = weakref.WeakKeyDictionary()
_LIVE_LOCK = threading.Lock()


@contextmanager
def _bound(run: Run | AsyncRun) -> Iterator[_Live]:
    """Make ``run`` (``govern``'s) the live run of its governor for the hooks, while the block
    runs."""
    live = _Live(run, owner=None)
    governor = run.guard.governor
    with _LIVE_LOCK:
        running = _LIVE.get(governor)
        if running is not None and running.owner is None:
            raise ConfigurationError(
                "this guard is already running a governed agent; a sub-agent joins that run "
                "when it is invoked directly (agent.invoke) with HaltwiseMiddleware(guard), or "
                "runs on a child governor with middleware.child()"
            )
        _LIVE[governor] = live
    try:
        yield live
    finally:
        with _LIVE_LOCK:
            if _LIVE.get(governor) is live:
                del _LIVE[governor]


def _namespace() -> str:
    """The namespace of the graph running the current node ("" for a root graph)."""
    try:
        config = get_config()
    except RuntimeError:  # not inside a graph: a model node or tool node called by hand
        return ""
    namespace = str(config.get("configurable", {}).get("checkpoint_ns", ""))
    return namespace.rpartition("|")[0]


# ------------------------------------------------------------------------------------------
# Flows: what each hook does, written once as a generator and driven sync or async.
#
# A flow yields an ``Event`` (the driver reports it to the run and sends back the decision,
# or throws the stop in), a ``_Call`` (the driver calls the framework: the model handler, the
# tool; whatever that raises is thrown back into the flow) or a ``_Wait`` (another task is
# reporting what this one needs).


class _Framework:
    """A step that is no event for the run: the driver carries it out in the framework."""

    __slots__ = ()


@dataclasses.dataclass(frozen=True, slots=True)
class _Call(_Framework):
    """Call the framework with ``arg`` (a model request, a tool request)."""

    arg: Any


@dataclasses.dataclass(frozen=True, slots=True)
class _Wait(_Framework):
    """Wait until ``done`` is set."""

    done: threading.Event


_Step = Event | _Call | _Wait
_Flow = Generator[_Step, Any, T]


def _drive(flow: _Flow[T], run: Run, call: Callable[[Any], Any]) -> T:
    result: Any
    try:
        step = next(flow)
        while True:
            try:
                if not isinstance(step, _Framework):
                    result = run.send(step)
                elif isinstance(step, _Call):
                    result = call(step.arg)
                else:
                    result = step.done.wait()
            except BaseException as error:
                step = flow.throw(error)
            else:
                step = flow.send(result)
    except StopIteration as done:
        value: T = done.value  # (no typing.cast: a call on every hook)
        return value


async def _adrive(flow: _Flow[T], run: Run | AsyncRun, call: Callable[[Any], Awaitable[Any]]) -> T:
    arun = run if isinstance(run, AsyncRun) else None  # a sync run here: an async sub-agent's
    result: Any
    try:
        step = next(flow)
        while True:
            try:
                if not isinstance(step, _Framework):
                    result = run.send(step) if arun is None else await arun.send(step)
                elif isinstance(step, _Call):
                    result = await call(step.arg)
                else:
                    while not step.done.is_set():  # the reporting task awaits a human
                        await asyncio.sleep(0.005)
                    result = True
            except BaseException as error:
                step = flow.throw(error)
            else:
                step = flow.send(result)
    except StopIteration as done:
        value: T = done.value  # (no typing.cast: a call on every hook)
        return value


def _no_call(arg: Any) -> Any:
    raise AssertionError("this flow calls nothing")


async def _no_acall(arg: Any) -> Any:
    raise AssertionError("this flow calls nothing")


def _report(event: Event) -> _Flow[Decision | None]:
    """Report an event whose stop needs nothing done here: the run's next model call (or tool
    call) finds the run stopped."""
    try:
        decision: Decision = yield event
    except _HALTS:
        return None
    return decision


def _model_flow(live: _Live, site: _Site, *, bounded: bool) -> _Flow[Any]:
    """One model call: in the run's main loop, a new turn starts (not for a retry of the same
    call); the request is reported before it is sent and its usage after. A stopped run's
    request is never sent: the call answers with the run's closing message, or, for a
    ``synthesize`` stop, with one more call, tools removed, that writes the final answer.

    ``bounded``: send the request with the run's time left as its timeout (not needed when
    the run interrupts its task at the deadline)."""
    governor = live.governor
    main = site.turn is live.turn or site.in_main_loop(live)
    if main and site.turn is not live.turn and governor.stopped is None:
        live.turn = site.turn
        live.batches.clear()
        try:
            if live.turn_open:
                live.turn_open = False
                yield TurnEnded(live.turn_text)
            yield TurnStarting()
        except _HALTS:
            pass
    #: Messages this call adds to the conversation before the model's own (notes, the
    #: synthesis instruction, a partial answer).
    kept: list[AnyMessage] = []
    while True:
        stop = governor.stopped
        if stop is not None:
            if stop.synthesize:
                return (yield from _synthesis_flow(live, site, stop, kept))
            return site.closing([*kept, _closing(live)])
        try:
            decision = yield ModelRequestEvent(site.model, max_tokens=site.max_tokens)
        except _HALTS:
            continue  # stopped: close the run, or write its answer without tools
        kept.extend(_notes(live))
        request = site.prepared(
            kept,
            max_tokens=_sent_max_tokens(decision, site.max_tokens),
            timeout=governor.time_left() if bounded else None,
            tools_free=False,
        )
        try:
            result = yield _Call(request)
        except GraphBubbleUp:
            raise
        except Exception:
            try:
                yield ModelResponseEvent(site.model, answered=False)
            except _HALTS:
                continue  # its time ran out, or it was cancelled: close, or write the answer
            raise
        message = site.message(result)
        text = _text(message)
        yield from _report(_response_event(message, site.model, text))
        if message.tool_calls:
            if main:
                live.turn_open, live.turn_text = True, text
            return site.answer(kept, result)  # a stopped run's tool calls are refused later
        if main and governor.stopped is None:
            yield from _report(TurnEnded(text))
        stop = governor.stopped
        if stop is None or not stop.synthesize:
            return site.answer(kept, result)
        kept.extend(site.messages(result))  # the partial answer stays; the final one follows


def _synthesis_flow(live: _Live, site: _Site, stop: Stop, kept: list[AnyMessage]) -> _Flow[Any]:
    """A model call that meets a ``synthesize`` stop. One flow of the run makes the pass: one
    more call, tools removed, whose answer ends the run. Flows that meet the stop meanwhile
    (parallel branches, sub-agents) wait for it, reporting nothing, then close with the run's
    outcome: the answer, or the stop when the pass was refused, failed or raised.

    The pass is sent with a timeout of its own (``synthesis_seconds``), sync or async: the run
    has stopped, so neither its time left (none, after a time limit) nor its deadline bounds
    it."""
    governor = live.governor
    if stop.synthesizer is not None or live.run.guard.synthesizer is not None:
        # The guard's run writes the answer with its synthesizer (``Guard``): the request,
        # reported again, is refused once that writer is done (the run makes this flow wait
        # for it), and the flow closes with the run's outcome.
        with suppress(*_HALTS):
            yield ModelRequestEvent(site.model, max_tokens=site.max_tokens)
        return site.closing([*kept, _closing(live)])
    synthesis = live.synthesis
    if not synthesis.claim():
        yield _Wait(synthesis.done)
        return site.closing([*kept, _closing(live)])
    try:
        decision = synthesis.request(ModelRequestEvent(site.model, max_tokens=site.max_tokens))
        if isinstance(decision, Stop):  # the budget left cannot pay for the pass
            live.run.outcome = decision.outcome
            return site.closing([*kept, _closing(live)])
        instruction = f"{stop.outcome.message} {SYNTHESIS_INSTRUCTION}"
        kept.extend(_notes(live))
        kept.append(HumanMessage(f"{NOTE_PREFIX}{instruction}"))
        request = site.prepared(
            kept,
            max_tokens=_sent_max_tokens(decision, site.max_tokens),
            timeout=synthesis_seconds(governor.time_left()),
            tools_free=True,
        )
        try:
            result = yield _Call(request)
        except GraphBubbleUp:
            raise
        except Exception:
            # Sent and unanswered: it counts at what it reserved. The stop stands, and the
            # flows waiting for the pass end with it.
            reported = yield from _report(ModelResponseEvent(site.model, answered=False))
            live.run.outcome = governor.synthesis_unanswered()
            if reported is None:  # its time ran out, or it was cancelled: end cleanly
                return site.closing([*kept, _closing(live)])
            raise
        message = site.message(result)
        text = _text(message)
        yield from _report(_response_event(message, site.model, text))
        live.run.outcome = synthesis_outcome(governor, text)
        if not answered(text):  # a tool call instead of an answer: the stop stands
            return site.closing([*kept, _closing(live)])
        return site.answer(kept, result)
    finally:
        synthesis.release()


def _tool_flow(live: _Live, request: ToolCallRequest) -> _Flow[ToolMessage | Command[Any]]:
    """One tool call: a refused one returns the refusal as an error and never runs; an
    admitted one runs and its result is reported."""
    call = request.tool_call
    name, call_id = call["name"], call.get("id") or ""
    verdict = live.verdicts.pop(call_id, _UNSEEN)
    if verdict is _UNSEEN:
        batch = _batch_of(request.state, call_id)
        if batch:
            yield from _announce(live, batch)
            verdict = live.verdicts.pop(call_id, _UNSEEN)
    if verdict is _UNSEEN:  # alone in its response, or announced before and retried
        verdict = yield from _admit(live, name, call["args"], call_id)
    if verdict is not None:
        return ToolMessage(content=str(verdict), tool_call_id=call_id, name=name, status="error")
    try:
        result = yield _Call(request)
    except GraphBubbleUp:
        live.verdicts[call_id] = None  # paused: it runs again on resume, counted once
        raise
    except Overdue as overdue:
        # Given up on at the run's deadline (``_tool_within``): its thread goes on, and what
        # it returns is never reported. Its time ran out, so the run stops here, unless the
        # time limit lets it go on (a human extends it, say); the model is told either way.
        content = f"The tool did not finish: {overdue}."
        yield from _report(ToolResult(name, content, call_id, is_error=True))
        if live.governor.stopped is not None:
            content = f"The tool did not finish: {_outcome(live).message}"
        return ToolMessage(content=content, tool_call_id=call_id, name=name, status="error")
    except Exception as error:
        yield from _report(
            ToolResult(name, f"{type(error).__name__}: {error}", call_id, is_error=True)
        )
        raise
    if isinstance(result, ToolMessage):
        yield from _report(
            ToolResult(name, _text(result) or "", call_id, is_error=result.status == "error")
        )
        return _with_notes(result, live.run.notes())
    yield from _report(ToolResult(name, "", call_id))
    return cast("ToolMessage | Command[Any]", result)


def _announce(live: _Live, calls: list[ToolCall]) -> _Flow[None]:
    """Report every tool call of a response, before any of them runs: the first of its calls
    to reach the tool node does it; the others wait for it."""
    key = frozenset(call.get("id") or "" for call in calls)
    with live.lock:
        done = live.batches.get(key)
        mine = done is None
        if done is None:
            done = live.batches[key] = threading.Event()
    if not mine:
        yield _Wait(done)
        return
    try:
        for call in calls:
            other = call.get("id") or ""
            if other not in live.verdicts:  # announced before the graph paused: counted once
                live.verdicts[other] = yield from _admit(live, call["name"], call["args"], other)
    finally:
        done.set()


def _admit(live: _Live, name: str, arguments: Any, call_id: str) -> _Flow[str | None]:
    """The refusal to give the model for a tool call, or None when it may run."""
    if live.governor.stopped is None:
        try:
            decision = yield ToolCallEvent(name, arguments, call_id)
        except _HALTS:
            pass
        else:
            return decision.reason if isinstance(decision, Block) else None
    return f"This tool call was not run: {_outcome(live).message}"


def _batch_of(state: Any, call_id: str) -> list[ToolCall]:
    """The tool calls of the response in ``state`` that asked for ``call_id`` and others with
    it (empty when it asked for that one alone: it is reported as it comes)."""
    messages = state.get("messages") if isinstance(state, Mapping) else state
    if not isinstance(messages, Sequence):
        return []
    for message in reversed(messages):
        if isinstance(message, AIMessage) and message.tool_calls:
            calls = message.tool_calls
            if len(calls) > 1 and any(call.get("id") == call_id for call in calls):
                return list(calls)
            return []  # only the latest response's calls are still to run
    return []


# ------------------------------------------------------------------------------------------
# Model calls: the create_agent handler, or a runnable in a graph of your own


class _Site:
    """Where a model call is made: what the flow reads from it and how it changes it."""

    #: The model's name (for pricing) and the ``max_tokens`` its requests are sent with.
    model: str
    max_tokens: int | None
    #: The graph state the call is made from: a call made again from the same state (a retry
    #: by another middleware) is no new turn.
    turn: object

    def prepared(
        self,
        kept: list[AnyMessage],
        *,
        max_tokens: int | None,
        timeout: float | None,
        tools_free: bool,
    ) -> Any:
        raise NotImplementedError

    def message(self, result: Any) -> AIMessage:
        messages = self.messages(result)
        for message in reversed(messages):
            if isinstance(message, AIMessage):
                return message
        raise ConfigurationError(f"the model call returned no AIMessage: {messages!r}")

    def messages(self, result: Any) -> list[AnyMessage]:
        raise NotImplementedError

    def in_main_loop(self, live: _Live) -> bool:
        """Whether the call is one of the run's main loop (a turn), not a sub-agent's."""
        return True

    def answer(self, kept: list[AnyMessage], result: Any) -> Any:
        """What the call gives the graph: ``kept``, then the model's own messages."""
        raise NotImplementedError

    def closing(self, messages: list[AnyMessage]) -> Any:
        """What the call gives the graph when the run has stopped: it ends the graph."""
        raise NotImplementedError


class _AgentSite(_Site):
    """A ``create_agent`` model call: its ``ModelRequest``, sent through the handler."""

    def __init__(self, request: ModelRequest[Any]) -> None:
        self.request = request
        self.turn = request.state
        self.model = _model_name(request.model)
        self.max_tokens, self._key = _max_tokens_of(request.model, request.model_settings)

    def prepared(
        self,
        kept: list[AnyMessage],
        *,
        max_tokens: int | None,
        timeout: float | None,
        tools_free: bool,
    ) -> ModelRequest[Any]:
        request = self.request
        changes = _changed_settings(self._key, self.max_tokens, max_tokens, timeout)
        if not kept and not tools_free and not changes:
            return request
        return _overridden(
            request,
            messages=[*request.messages, *kept] if kept else request.messages,
            model_settings={**request.model_settings, **changes},
            tools=[] if tools_free else request.tools,
            tool_choice=None if tools_free else request.tool_choice,
        )

    def in_main_loop(self, live: _Live) -> bool:
        # The agent that opened the run (for ``govern``, the root graph) loops; an agent
        # nested in it (called by a tool, or a subgraph) that joined the run does not.
        return _namespace() == (live.owner or "")

    def messages(self, result: Any) -> list[AnyMessage]:
        if isinstance(result, ExtendedModelResponse):
            result = result.model_response
        if isinstance(result, ModelResponse):
            return cast("list[AnyMessage]", result.result)
        return [cast(AIMessage, result)]

    def answer(self, kept: list[AnyMessage], result: Any) -> ModelCallResult[Any]:
        if not kept:
            return cast("ModelCallResult[Any]", result)
        command = result.command if isinstance(result, ExtendedModelResponse) else None
        inner = result.model_response if isinstance(result, ExtendedModelResponse) else result
        structured = inner.structured_response if isinstance(inner, ModelResponse) else None
        response = ModelResponse(
            result=[*kept, *self.messages(result)], structured_response=structured
        )
        return response if command is None else ExtendedModelResponse(response, command)

    def closing(self, messages: list[AnyMessage]) -> ModelCallResult[Any]:
        # The closing message has no tool calls, so the loop ends there; the jump also ends
        # loops that would not (structured output with no tools goes back to the model).
        end: Command[Any] = Command(update={"jump_to": "end"})
        return ExtendedModelResponse(ModelResponse(result=list[BaseMessage](messages)), end)


class _RunnableSite(_Site):
    """A model runnable (``model.bind_tools(tools)``) called by a custom graph's node."""

    def __init__(self, runnable: Runnable[Any, Any], state: Mapping[str, Any], key: str) -> None:
        self.runnable = runnable
        self.turn = state
        self.history: list[AnyMessage] = list(state[key])
        chat, settings = _unwrap(runnable)
        self.model = _model_name(chat)
        self.max_tokens, self._key = _max_tokens_of(chat, settings)

    def prepared(
        self,
        kept: list[AnyMessage],
        *,
        max_tokens: int | None,
        timeout: float | None,
        tools_free: bool,
    ) -> tuple[Runnable[Any, Any], list[AnyMessage]]:
        runnable = self.runnable
        if tools_free:
            chat, settings = _unwrap(runnable)
            kept_settings = {k: v for k, v in settings.items() if k not in _TOOL_SETTINGS}
            runnable = chat.bind(**kept_settings) if kept_settings else chat
        extra = _changed_settings(self._key, self.max_tokens, max_tokens, timeout)
        return (runnable.bind(**extra) if extra else runnable), [*self.history, *kept]

    def messages(self, result: Any) -> list[AnyMessage]:
        return [cast(AIMessage, result)]

    def answer(self, kept: list[AnyMessage], result: Any) -> list[AnyMessage]:
        return [*kept, *self.messages(result)]

    def closing(self, messages: list[AnyMessage]) -> list[AnyMessage]:
        return messages  # no tool calls: a tools_condition edge ends the graph


def _unwrap(runnable: Runnable[Any, Any]) -> tuple[Runnable[Any, Any], dict[str, Any]]:
    """The chat model inside bindings, and the settings they add to its requests."""
    settings: dict[str, Any] = {}
    while isinstance(runnable, RunnableBinding):
        settings = {**runnable.kwargs, **settings}
        runnable = runnable.bound
    return runnable, settings


def _model_name(model: Any) -> str:
    for attribute in ("model_name", "model", "model_id"):
        value = getattr(model, attribute, None)
        if isinstance(value, str) and value:
            return value
    return ""


def _max_tokens_of(model: Any, settings: Mapping[str, Any]) -> tuple[int | None, str]:
    """The ``max_tokens`` a request is sent with (its settings', else the model's), and the
    setting that carries it."""
    for source in (settings, getattr(model, "__dict__", None)):
        if not source:
            continue
        for key in _MAX_TOKENS_KEYS:
            value = source.get(key)
            if isinstance(value, int) and not isinstance(value, bool):
                return value, key
    return None, _MAX_TOKENS_KEYS[0]


def _changed_settings(
    key: str, asked: int | None, allowed: int | None, timeout: float | None
) -> dict[str, Any]:
    """The request settings haltwise changes: ``max_tokens`` (in the setting ``key``) when
    lowered from ``asked`` to ``allowed``, and the ``timeout``."""
    changes: dict[str, Any] = {}
    if allowed is not None and allowed != asked:
        changes[key] = allowed
    if timeout is not None:
        changes["timeout"] = timeout
    return changes


def _overridden(request: ModelRequest[Any], **changes: Any) -> ModelRequest[Any]:
    """``request.override(**changes)``, built as a copy of its fields. ``override`` goes
    through ``ModelRequest.__init__``, which sets every field inside
    ``warnings.catch_warnings()`` (its ``__setattr__`` warns): some 15 us, paid on each model
    call of a run with a deadline. A request with no ``__dict__`` is left to ``override``."""
    fields = getattr(request, "__dict__", None)
    if fields is None:
        return request.override(**changes)
    copied: ModelRequest[Any] = object.__new__(type(request))
    copied.__dict__.update(fields, **changes)
    return copied


def _sent_max_tokens(decision: Decision, asked: int | None) -> int | None:
    """The ``max_tokens`` to send: lowered by the decision, else as asked."""
    if isinstance(decision, Continue | Warn) and decision.max_tokens is not None:
        return decision.max_tokens
    return asked


def _response_event(message: AIMessage, model: str, text: str | None) -> ModelResponseEvent:
    usage: Mapping[str, Any] = message.usage_metadata or {}
    details: Mapping[str, Any] = usage.get("input_token_details") or {}
    answered_by = message.response_metadata.get("model_name")
    return ModelResponseEvent(
        model=answered_by if isinstance(answered_by, str) and answered_by else model,
        input_tokens=int(usage.get("input_tokens") or 0),
        output_tokens=int(usage.get("output_tokens") or 0),
        cache_read_tokens=int(details.get("cache_read") or 0),
        cache_write_tokens=int(details.get("cache_creation") or 0),
        text=text,
        tool_calls=len(message.tool_calls),
    )


# ------------------------------------------------------------------------------------------
# What the model is shown


def _text(message: BaseMessage) -> str | None:
    content = message.content
    if isinstance(content, str):  # what ``message.text`` gives, without building it
        return content or None
    return str(message.text) or None


def _outcome(live: _Live) -> Outcome:
    outcome = live.outcome()
    assert outcome is not None, "a stopped run has an outcome"
    return outcome


def _closing(live: _Live) -> AIMessage:
    """The message that ends a stopped run: its answer when it has one, else why it stopped."""
    outcome = _outcome(live)
    answered = outcome.ok and outcome.partial_output
    return AIMessage(
        content=outcome.partial_output if answered else outcome.message,
        response_metadata={"haltwise": {"status": str(outcome.status), "reason": outcome.reason}},
    )


def _notes(live: _Live) -> list[AnyMessage]:
    return [HumanMessage(f"{NOTE_PREFIX}{note}") for note in live.run.notes()]


def _with_notes(message: ToolMessage, notes: list[str]) -> ToolMessage:
    if not notes:
        return message
    added = "\n\n".join(f"{NOTE_PREFIX}{note}" for note in notes)
    content = message.content
    if isinstance(content, str):
        updated: Any = f"{content}\n\n{added}" if content else added
    else:
        updated = [*content, {"type": "text", "text": added}]
    return message.model_copy(update={"content": updated})


def _prompt_of(value: Any) -> str:
    """The user's prompt in a graph's input (its last human message)."""
    messages = value.get("messages") if isinstance(value, Mapping) else value
    if isinstance(messages, str):
        return messages
    if not isinstance(messages, Sequence):
        return ""
    for message in reversed(messages):
        if isinstance(message, HumanMessage):
            return _text(message) or ""
        if isinstance(message, tuple) and len(message) == 2 and message[0] in ("user", "human"):
            return str(message[1])
        if isinstance(message, Mapping) and message.get("role") in ("user", "human"):
            return str(message.get("content", ""))
    return ""


def _final_text(state: Any) -> str | None:
    messages = state.get("messages") if isinstance(state, Mapping) else None
    if messages and isinstance(messages[-1], AIMessage):
        return _text(messages[-1])
    return None


# ------------------------------------------------------------------------------------------
# Asking the human with LangGraph's own pause


def _pause_for_answer(ask: Ask) -> Answer | Choice | bool | None:
    """A prompter that pauses the graph (``interrupt()``) until ``Command(resume=...)``
    brings the human's answer: ``"continue"``, ``"extend 5"``, ``"wrap up"``, ``"abort"``, a
    ``Choice``, an ``Answer`` or ``{"choice": "extend", "amount": 5}``."""
    value = interrupt(
        {
            "haltwise": "ask",
            "question": ask.question,
            "reason": ask.reason,
            "limit": ask.limit,
            "choices": [str(choice) for choice in ask.choices],
        }
    )
    if value is None or isinstance(value, Answer | Choice | bool):
        return value
    if isinstance(value, str):
        return parse_answer(value)
    if isinstance(value, Mapping):
        try:
            return Answer(Choice(value["choice"]), value.get("amount"))
        except (KeyError, ValueError) as error:
            raise ConfigurationError(
                f"Command(resume={value!r}) is not an answer: {error}"
            ) from error
    raise ConfigurationError(
        f"Command(resume={value!r}) is not an answer: give 'continue', 'extend N', "
        "'wrap up', 'abort', a Choice, an Answer or {'choice': ..., 'amount': ...}"
    )


# ------------------------------------------------------------------------------------------
# The middleware


class HaltwiseMiddleware(AgentMiddleware[AgentState[Any], Any, Any]):
    """haltwise's limits in a LangChain agent: ``create_agent(..., middleware=[...])``.

    Put it last in the list: it is then the innermost ``wrap_model_call`` and
    ``wrap_tool_call``, so it sees every request actually sent and every tool actually run
    (retries by other middleware included). ``pause_on_ask=True`` makes a limit that asks,
    when the guard has no prompter, pause the graph with ``interrupt()`` (a checkpointer is
    needed); resume it with ``Command(resume="continue")`` and the like.
    """

    def __init__(self, guard: Guard, *, pause_on_ask: bool = False) -> None:
        super().__init__()
        self.guard = checked_guard(guard, "HaltwiseMiddleware(guard)")
        if not isinstance(pause_on_ask, bool):
            raise InvalidValueError(
                "HaltwiseMiddleware(pause_on_ask)", pause_on_ask, "True or False"
            )
        self.pause_on_ask = pause_on_ask

    @property
    def outcome(self) -> Outcome | None:
        """How the guard's latest run ended (when the agent was invoked without ``govern``)."""
        return self.guard.governor.outcome

    def child(self, limits: Limit | Callable[[Usage], bool] | None = None) -> HaltwiseMiddleware:
        """A middleware for a sub-agent: its own run on a child governor (with ``limits`` of
        its own, if given), whose spending counts against this guard's limits too."""
        checked_limits(limits, "HaltwiseMiddleware.child(limits)")
        guard = Guard(
            governor=self.guard.governor.child(limits),
            prompter=self.guard.prompter,
            synthesizer=self.guard.synthesizer,
            signal=self.guard.signal,
        )
        return HaltwiseMiddleware(guard, pause_on_ask=self.pause_on_ask)

    def run_guard(self) -> Guard:
        """The guard a run is driven with: this one, or (pausing on asks) the same governor
        with a prompter that pauses the graph."""
        guard = self.guard
        if not self.pause_on_ask or guard.prompter is not None:
            return guard
        return Guard(
            governor=guard.governor,
            prompter=_pause_for_answer,
            synthesizer=guard.synthesizer,
            signal=guard.signal,
        )

    # The run: opened by ``govern``, or here when the agent is invoked directly.

    def _open(self, owner: str, run: Run | AsyncRun) -> _Live:
        live = _Live(run, owner)
        with _LIVE_LOCK:
            _LIVE[self.guard.governor] = live
        return live

    def _joins(self, owner: str) -> bool:
        live = _LIVE.get(self.guard.governor)
        # A run opened by ``govern``, or by a graph this one is nested in, is joined; one left
        # open at this level by a graph that crashed is replaced.
        return live is not None and live.owner != owner

    def _live(self) -> _Live:
        return _LIVE.get(self.guard.governor) or self._resumed()

    def _resumed(self) -> _Live:
        """A run for a hook that finds none: the graph was resumed mid-run, with no
        ``before_agent``; it carries on with a run of its own."""
        run = self.run_guard().run("")
        live = self._open(_namespace(), run)
        _drive(_report(RunStarted()), run, _no_call)
        return live

    async def _aresumed(self) -> _Live:
        """``_resumed`` for an async hook (which looks the live run up itself, awaiting no
        coroutine on the way: one per hook adds up)."""
        run = self.run_guard().arun("")
        live = self._open(_namespace(), run)
        await _adrive(_report(RunStarted()), run, _no_acall)
        return live

    def before_agent(self, state: AgentState[Any], runtime: Runtime[Any]) -> dict[str, Any] | None:
        owner = _namespace()
        if not self._joins(owner):
            prompt = _prompt_of(state)
            run = self.run_guard().run(prompt)
            self._open(owner, run)
            _drive(_report(RunStarted(prompt)), run, _no_call)
        return None

    async def abefore_agent(
        self, state: AgentState[Any], runtime: Runtime[Any]
    ) -> dict[str, Any] | None:
        owner = _namespace()
        if not self._joins(owner):
            prompt = _prompt_of(state)
            run = self.run_guard().arun(prompt)
            self._open(owner, run)
            await _adrive(_report(RunStarted(prompt)), run, _no_acall)
        return None

    def after_agent(self, state: AgentState[Any], runtime: Runtime[Any]) -> dict[str, Any] | None:
        live = self._ended(_namespace())
        if live is not None and live.governor.stopped is None:
            _drive(_report(_run_ended(state)), live.sync_run(), _no_call)
        return None

    async def aafter_agent(
        self, state: AgentState[Any], runtime: Runtime[Any]
    ) -> dict[str, Any] | None:
        live = self._ended(_namespace())
        if live is not None and live.governor.stopped is None:
            await _adrive(_report(_run_ended(state)), live.run, _no_acall)
        return None

    def _ended(self, owner: str) -> _Live | None:
        """The live run, taken out of the registry, when this graph opened it."""
        with _LIVE_LOCK:
            live = _LIVE.get(self.guard.governor)
            if live is None or live.owner != owner:
                return None
            del _LIVE[self.guard.governor]
            return live

    # The loop.

    def wrap_model_call(
        self,
        request: ModelRequest[Any],
        handler: Callable[[ModelRequest[Any]], ModelResponse[Any]],
    ) -> ModelCallResult[Any]:
        live = self._live()
        result: ModelCallResult[Any] = _drive(
            _model_flow(live, _AgentSite(request), bounded=True), live.sync_run(), handler
        )
        return result

    async def awrap_model_call(
        self,
        request: ModelRequest[Any],
        handler: Callable[[ModelRequest[Any]], Awaitable[ModelResponse[Any]]],
    ) -> ModelCallResult[Any]:
        live = _LIVE.get(self.guard.governor) or await self._aresumed()
        result: ModelCallResult[Any] = await _adrive(
            _model_flow(live, _AgentSite(request), bounded=not live.interrupts), live.run, handler
        )
        return result

    def wrap_tool_call(
        self,
        request: ToolCallRequest,
        handler: Callable[[ToolCallRequest], ToolMessage | Command[Any]],
    ) -> ToolMessage | Command[Any]:
        live = self._live()
        call = partial(_tool_within, live.governor, handler)
        return _drive(_tool_flow(live, request), live.sync_run(), call)

    async def awrap_tool_call(
        self,
        request: ToolCallRequest,
        handler: Callable[[ToolCallRequest], Awaitable[ToolMessage | Command[Any]]],
    ) -> ToolMessage | Command[Any]:
        live = _LIVE.get(self.guard.governor) or await self._aresumed()
        return await _adrive(_tool_flow(live, request), live.run, handler)

    # Graphs of your own.

    def model_node(
        self, model: Runnable[Any, Any], *, messages_key: str = "messages"
    ) -> RunnableLambda[Any, dict[str, Any]]:
        """A node for a ``StateGraph`` of your own that calls ``model`` (for example
        ``chat_model.bind_tools(tools)``) on the state's messages, governed as
        ``create_agent``'s model calls are. Each call is a turn. A stopped run's node answers
        with its closing message, which has no tool calls, so a ``tools_condition`` edge ends
        the graph. Run the tool calls with ``tool_node``: it reports and refuses them."""
        if not isinstance(model, Runnable):
            raise InvalidValueError(
                "model_node(model)",
                model,
                "a LangChain chat model or runnable, e.g. chat_model.bind_tools(tools)",
            )
        node = _ModelNode(self, model, messages_key)
        return RunnableLambda(node.invoke, afunc=node.ainvoke, name="haltwise_model")

    def tool_node(self, tools: Sequence[BaseTool | Callable[..., Any]], **options: Any) -> ToolNode:
        """A ``ToolNode`` whose calls are governed (``options`` go to ``ToolNode``)."""
        return ToolNode(
            tools,
            wrap_tool_call=self.wrap_tool_call,
            awrap_tool_call=self.awrap_tool_call,
            **options,
        )


class _ModelNode:
    """The callable behind ``HaltwiseMiddleware.model_node``."""

    def __init__(self, middleware: HaltwiseMiddleware, model: Runnable[Any, Any], key: str):
        self.middleware = middleware
        self.model = model
        self.key = key

    def invoke(self, state: Mapping[str, Any]) -> dict[str, Any]:
        live = self.middleware._live()
        site = _RunnableSite(self.model, state, self.key)
        flow = _model_flow(live, site, bounded=True)
        messages = _drive(flow, live.sync_run(), _invoke_model)
        return {self.key: messages}

    async def ainvoke(self, state: Mapping[str, Any]) -> dict[str, Any]:
        live = _LIVE.get(self.middleware.guard.governor) or await self.middleware._aresumed()
        site = _RunnableSite(self.model, state, self.key)
        flow = _model_flow(live, site, bounded=not live.interrupts)
        messages = await _adrive(flow, live.run, _ainvoke_model)
        return {self.key: messages}


def _tool_within(
    governor: Governor,
    handler: Callable[[ToolCallRequest], ToolMessage | Command[Any]],
    request: ToolCallRequest,
) -> ToolMessage | Command[Any]:
    """A synchronous tool call, waited for no longer than the run's time left: a tool that
    blocks its thread cannot be interrupted, so with a time limit it runs on a thread of its
    own, given up on at the deadline (``Overdue``)."""
    return call_within(governor.time_left(), handler, request, name="haltwise-tool")


def _invoke_model(arg: tuple[Runnable[Any, Any], list[AnyMessage]]) -> Any:
    runnable, messages = arg
    return runnable.invoke(messages)


async def _ainvoke_model(arg: tuple[Runnable[Any, Any], list[AnyMessage]]) -> Any:
    runnable, messages = arg
    return await runnable.ainvoke(messages)


def _run_ended(state: Mapping[str, Any]) -> Event:
    return RunEnded(_final_text(state))


# ------------------------------------------------------------------------------------------
# govern


def _middleware_in(
    graph: Pregel[Any, Any, Any, Any], found: list[HaltwiseMiddleware] | None = None
) -> list[HaltwiseMiddleware]:
    """The haltwise middleware a compiled graph's nodes (its subgraphs' too) were built with."""
    found = [] if found is None else found
    for node in graph.nodes.values():
        bound = node.bound
        if isinstance(bound, Pregel):
            _middleware_in(bound, found)
            continue
        candidates = [
            getattr(bound, "func", None),
            getattr(bound, "afunc", None),
            getattr(bound, "_wrap_tool_call", None),
        ]
        for candidate in candidates:
            owner = getattr(candidate, "__self__", None)
            owner = getattr(owner, "middleware", owner)
            if isinstance(owner, HaltwiseMiddleware) and owner not in found:
                found.append(owner)
    return found


def govern(agent: Pregel[Any, Any, Any, Any], guard: Guard | None = None) -> GovernedAgent:
    """``agent`` (a ``create_agent`` agent, or a compiled ``StateGraph``), run under ``guard``.

    The agent must have been built with a ``HaltwiseMiddleware`` of the same guard
    (``create_agent(..., middleware=[HaltwiseMiddleware(guard)])``, or its ``model_node`` /
    ``tool_node`` in a graph of your own); ``guard`` may be left out to use that one's.
    """
    if not isinstance(agent, Pregel):
        raise InvalidValueError(
            "govern(agent)",
            agent,
            "a compiled LangGraph graph (create_agent's agent, or StateGraph.compile())",
        )
    found = _middleware_in(agent)
    if not found:
        raise ConfigurationError(
            "this agent has no haltwise middleware, so nothing would be governed: build it "
            "with create_agent(..., middleware=[HaltwiseMiddleware(guard)]) (or, for a graph "
            "of your own, middleware.model_node(...) and middleware.tool_node(...))"
        )
    if guard is None:
        middleware = found[0]
    else:
        checked_guard(guard, "govern(guard)")
        matching = [m for m in found if m.guard.governor is guard.governor]
        if not matching:
            raise ConfigurationError(
                "the agent's HaltwiseMiddleware was built with another guard: pass the same "
                "Guard to HaltwiseMiddleware(guard) and govern(agent, guard), or leave the "
                "guard out of govern()"
            )
        middleware = matching[0]
    if middleware.pause_on_ask and agent.checkpointer is None:
        raise ConfigurationError(
            "HaltwiseMiddleware(pause_on_ask=True) pauses the graph with interrupt(), which "
            "needs a checkpointer: create_agent(..., checkpointer=InMemorySaver())"
        )
    return GovernedAgent(agent, middleware)


class GovernedAgent:
    """A LangGraph agent with haltwise: ``run`` (async) and ``run_sync`` return ``Governed``.

    Each call is one run of the guard (``RunStarted``): run-scoped counts start afresh,
    session-scoped ones go on. Continuing a thread (input ``None`` or a ``Command``, as after
    a pause or a crash) keeps the counts its last run had; ``resume=`` restores any
    checkpoint (``outcome.checkpoint``, or ``governor.checkpoint()`` data from another
    process).
    """

    def __init__(self, agent: Pregel[Any, Any, Any, Any], middleware: HaltwiseMiddleware):
        self.agent = agent
        self.middleware = middleware
        self.guard = middleware.guard
        #: By thread id: the counts each thread's last run ended with, and the tool calls it
        #: had admitted but not run (a pause), for a run that continues it.
        self._threads: dict[str, tuple[dict[str, Any], dict[str, str | None]]] = {}

    def run_sync(
        self,
        input: Any,
        config: Mapping[str, Any] | None = None,
        *,
        resume: str | dict[str, Any] | None = None,
        **options: Any,
    ) -> Governed[dict[str, Any]]:
        """``agent.invoke(input, config, **options)`` as one governed run."""
        result: Any = None
        with self.middleware.run_guard().run(_prompt_of(input)) as run:
            with _bound(run) as live:
                self._continue(live, input, config, resume)
                try:
                    result = self.agent.invoke(input, cast(Any, config), **options)
                finally:
                    self._keep(live, config)
            if run.outcome is None and not _paused(result):
                run.finish(_final_text(result))
        return Governed(self._outcome(run, result), result)

    async def run(
        self,
        input: Any,
        config: Mapping[str, Any] | None = None,
        *,
        resume: str | dict[str, Any] | None = None,
        **options: Any,
    ) -> Governed[dict[str, Any]]:
        """``await agent.ainvoke(input, config, **options)`` as one governed run; the run's
        deadline, or ``cancel()`` from any thread, interrupts the graph."""
        result: Any = None
        async with self.middleware.run_guard().arun(_prompt_of(input)) as run:
            with _bound(run) as live:
                self._continue(live, input, config, resume)
                try:
                    result = await self.agent.ainvoke(input, cast(Any, config), **options)
                finally:
                    self._keep(live, config)
            if run.outcome is None and not _paused(result):
                await run.finish(_final_text(result))
        return Governed(self._outcome(run, result), result)

    def _continue(
        self,
        live: _Live,
        input: Any,
        config: Mapping[str, Any] | None,
        resume: str | dict[str, Any] | None,
    ) -> None:
        governor = self.guard.governor
        if resume is not None:
            governor.restore(resume)
            return
        thread = _thread_of(config)
        saved = self._threads.get(thread) if thread is not None else None
        if saved is not None and (input is None or isinstance(input, Command)):
            counts, verdicts = saved
            governor.restore(counts)
            live.verdicts.update(verdicts)

    def _keep(self, live: _Live, config: Mapping[str, Any] | None) -> None:
        thread = _thread_of(config)
        if thread is not None:
            pending: dict[str, str | None] = {
                call: verdict for call, verdict in live.verdicts.items() if verdict is None
            }
            self._threads[thread] = (self.guard.governor.checkpoint(), pending)

    def _outcome(self, run: Run | AsyncRun, result: Any) -> Outcome:
        outcome = run.outcome
        if _paused(result):
            if outcome is None:  # paused by something else (a tool's interrupt(), HITL)
                outcome = self.guard.governor.stop(
                    "paused", "The graph paused (interrupt()); resume it with Command(resume=...)."
                ).outcome
            else:  # paused on haltwise's question
                outcome = dataclasses.replace(
                    outcome,
                    message=f"{outcome.message} The graph is paused for a human: resume it "
                    "with Command(resume='continue' | 'extend N' | 'wrap up' | 'abort').",
                )
        assert outcome is not None
        return outcome

    def __repr__(self) -> str:
        return f"govern({type(self.agent).__name__}, {self.guard!r})"


def _thread_of(config: Mapping[str, Any] | None) -> str | None:
    thread = (config or {}).get("configurable", {}).get("thread_id")
    return None if thread is None else str(thread)


def _paused(result: Any) -> bool:
    return isinstance(result, Mapping) and bool(result.get("__interrupt__"))
