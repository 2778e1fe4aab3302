"""pydantic-ai under haltwise: ``govern(agent, guard)`` and the capability that reports each step.

::

    governed = govern(agent, Guard(max_turns(10) | max_cost("0.50")))
    result = await governed.run("What changed in the parser?")   # or governed.run_sync(...)
    result.outcome.status, result.output, result.result          # Governed[AgentRunResult]

Five of pydantic-ai's capability hooks carry everything, in one capability (no model or toolset
is wrapped). pydantic-ai does work of its own for each capability a run has, on every step,
whichever hooks it overrides (a copy of the run context for each hook it calls): that is the
floor ``benchmarks/bench_pydantic_ai.py`` measures.

- ``before_model_request`` (once per step): ``TurnEnded`` for the step before, ``TurnStarting``;
  notes from soft limits go into the request through ``RunContext.enqueue``;
- ``prepare_model_request`` (once per attempt, before it is sent): ``ModelRequest`` with the
  ``max_tokens`` of the model settings, lowered there when a token limit says so; under
  ``run_sync``, the run's time left as the attempt's ``request_timeout`` (``run`` cancels its
  task at the deadline instead); the synthesis pass's own (``synthesis_seconds``) under both;
- ``after_model_request``: ``ModelResponse`` from pydantic-ai's ``RequestUsage``, then a
  ``ToolCall`` for each call the response makes, all of them before any runs (output tools too:
  the call that writes the final answer counts like any other);
- ``wrap_tool_execute``: a refused call fails there with the refusal (``ToolFailed``: the model
  sees it as the tool's result and the run goes on) and never runs; the others report
  ``ToolResult`` (an error, a retry, a failure are results too). Under ``run_sync``, the wait
  for a tool ends at the run's deadline (``run`` cancels its task there instead): a sync tool
  blocks pydantic-ai's worker thread, which nothing can interrupt;
- ``wrap_output_validate``: the same refusal for a call of an output tool, which runs no tool
  hooks.

A stop raises haltwise's ``HaltError`` out of the hook; pydantic-ai lets it through and
``govern(...).run()`` turns it into ``Governed(outcome, None)``. A stop that synthesizes (or a
human's "wrap up") makes the next request the tools-free pass: tools removed, the reason given
to the model, its answer the run's ``AgentRunResult.output``.

Sub-agents: a governed agent run from inside a tool of a governed run of the same guard reports
to a child of that run's governor (``Governor.child``), so it can never spend past the parent's
limits. What does not live here: the decisions (``haltwise.engine``) and how they are carried
out in a loop (``haltwise.drivers.guard``).
"""

from __future__ import annotations

import asyncio
import dataclasses
import inspect
import itertools
import threading
from collections.abc import Awaitable, Callable, Coroutine, Sequence
from contextvars import ContextVar
from typing import Any, Generic, TypeVar, cast

from pydantic_ai import DeferredToolResults, RunContext, ToolFailed
from pydantic_ai.agent import AbstractAgent
from pydantic_ai.capabilities import (
    AbstractCapability,
    RawOutput,
    ValidatedToolArgs,
    WrapOutputValidateHandler,
    WrapToolExecuteHandler,
)
from pydantic_ai.exceptions import ApprovalRequired, CallDeferred, ModelRetry, SkipToolExecution
from pydantic_ai.messages import ModelRequest as AgentRequest
from pydantic_ai.messages import ModelResponse as AgentResponse
from pydantic_ai.messages import ToolCallPart, ToolReturnPart
from pydantic_ai.models import ModelRequestContext
from pydantic_ai.output import OutputContext
from pydantic_ai.run import AgentRunResult
from pydantic_ai.settings import ModelSettings
from pydantic_ai.tools import ToolDefinition
from pydantic_core import to_json

from ..drivers.bounded import Overdue
from ..drivers.guard import AsyncRun, Guard, Run
from ..engine.decisions import Block, Continue, Decision, Stop, Warn
from ..engine.errors import (
    ConfigurationError,
    HaltError,
    HaltSignal,
    InvalidValueError,
    error_for,
)
from ..engine.events import (
    Event,
    ModelRequest,
    ModelResponse,
    ToolCall,
    ToolResult,
    TurnEnded,
    TurnStarting,
)
from ..engine.governor import Governor
from ..engine.limits import Limit
from ..engine.outcome import Status, Usage
from ._common import (
    Governed,
    Resume,
    checked_guard,
    checked_limits,
    saved_counts,
    synthesis_outcome,
    synthesis_seconds,
)

__all__ = ["GovernedAgent", "HaltwiseCapability", "govern"]

OutputT = TypeVar("OutputT")
T = TypeVar("T")

#: What the model is told when a limit stops the run with a synthesized answer.
SYNTHESIS_PROMPT = (
    "[haltwise] The run has stopped: {reason}\n"
    "Do not call any tool. From what you have gathered so far, write the best final answer you "
    "can to the user's request. Say plainly what is done, what is missing or unverified, and "
    "what to do next."
)

#: Where a sub-agent reports: the governed run whose tools are running in this context.
_current: ContextVar[_Session | None] = ContextVar("haltwise_pydantic_ai_run", default=None)
_request_ids = itertools.count(1)
#: Every turn's ``TurnStarting``: the event has no fields, so one value serves them all.
_TURN_STARTING = TurnStarting()


def govern(
    agent: AbstractAgent[Any, OutputT],
    guard: Guard,
    *,
    limits: Limit | Callable[[Usage], bool] | None = None,
) -> GovernedAgent[OutputT]:
    """``agent`` under ``guard``'s limits: ``run`` / ``run_sync`` return ``Governed``.

    ``limits`` are a sub-agent's own (a child governor's), checked with those of the run it is
    called from; they are only for an agent run from a tool of a governed run of ``guard``.
    An argument of the wrong kind raises ``InvalidValueError`` here, naming it.
    """
    if not isinstance(agent, AbstractAgent):
        raise InvalidValueError(
            "govern(agent)", agent, "a pydantic-ai agent, e.g. pydantic_ai.Agent(model, ...)"
        )
    return GovernedAgent(
        agent, checked_guard(guard, "govern(guard)"), checked_limits(limits, "govern(limits)")
    )


class GovernedAgent(Generic[OutputT]):
    """A pydantic-ai agent whose runs are governed; built by ``govern``."""

    def __init__(
        self,
        agent: AbstractAgent[Any, OutputT],
        guard: Guard,
        limits: Limit | Callable[[Usage], bool] | None,
    ) -> None:
        self.agent = agent
        self.guard = guard
        #: A sub-agent's own limits (see ``govern``).
        self.limits = limits

    def __repr__(self) -> str:
        return f"govern({self.agent!r}, {self.guard!r})"

    async def run(
        self,
        user_prompt: str | Sequence[Any] | None = None,
        *,
        resume: Resume = None,
        **kwargs: Any,
    ) -> Governed[AgentRunResult[OutputT]]:
        """``agent.run(user_prompt, **kwargs)`` under the guard.

        ``resume`` continues a run with the counts it had instead of starting new ones: True
        (or the ``Governed`` it returned) for the last run of this guard in this process, a
        checkpoint reference (``outcome.checkpoint``) or ``governor.checkpoint()`` data for one
        from elsewhere. Give pydantic-ai's own state with it (``message_history=``,
        ``deferred_tool_results=``).
        """
        guard = self._guard_under(_current.get())
        saved = saved_counts(guard.governor, resume)
        result: AgentRunResult[OutputT] | None = None
        async with guard.arun(_prompt_text(user_prompt)) as run:
            session = self._session(run, saved, kwargs, child=guard is not self.guard)
            token = _current.set(session)
            try:
                finished = await self.agent.run(user_prompt, **session.with_capability(kwargs))
            except Exception:
                await session.failed()
                raise
            finally:
                _current.reset(token)
            result = finished
            await session.settle(finished)
        assert run.outcome is not None
        return Governed(run.outcome, result)

    def run_sync(
        self,
        user_prompt: str | Sequence[Any] | None = None,
        *,
        resume: Resume = None,
        **kwargs: Any,
    ) -> Governed[AgentRunResult[OutputT]]:
        """``agent.run_sync(user_prompt, **kwargs)`` under the guard (see ``run``).

        The prompter is asked on the calling thread; ``governor.cancel()`` from another thread
        cancels the pydantic-ai run (``RunContext.cancel``), and the run's time left bounds each
        request (``request_timeout``).
        """
        guard = self._guard_under(None)
        saved = saved_counts(guard.governor, resume)
        result: AgentRunResult[OutputT] | None = None
        with guard.run(_prompt_text(user_prompt)) as run:
            session = self._session(run, saved, kwargs, child=False)
            token = _current.set(session)  # the run's tasks copy it: sub-agents find the run
            try:
                finished = self.agent.run_sync(user_prompt, **session.with_capability(kwargs))
            except Exception:
                _at_once(session.failed())
                raise
            finally:
                _current.reset(token)
                session.unhook_cancel()
            result = finished
            _at_once(session.settle(finished))
        assert run.outcome is not None
        return Governed(run.outcome, result)

    def _guard_under(self, parent: _Session | None) -> Guard:
        """The guard of this run: ours, or a child of the run this agent is called from."""
        if parent is not None and parent.guard is self.guard:
            outer = parent.run.guard
            return Guard(
                governor=outer.governor.child(self.limits),
                prompter=outer.prompter,
                signal=outer.signal,
            )
        if self.limits is not None:
            raise ConfigurationError(
                "govern(..., limits=...) is for a sub-agent run from a tool of a governed run of "
                "the same guard; at the top level, give the limits to the Guard itself"
            )
        return self.guard

    def _session(
        self,
        run: Run | AsyncRun,
        saved: dict[str, Any] | str | None,
        kwargs: dict[str, Any],
        *,
        child: bool,
    ) -> _Session:
        if saved is not None:
            # After RunStarted: the run is live again with the counts it had.
            run.guard.governor.restore(saved)
        session = _Session(run, self.guard, child=child)
        session.counted = _deferred_ids(kwargs.get("deferred_tool_results"))
        return session


def _at_once(step: Coroutine[Any, Any, T]) -> T:
    """Run a coroutine that never waits (a sync ``Run`` answers every event at once)."""
    try:
        step.send(None)
    except StopIteration as done:
        result: T = done.value
        return result
    step.close()
    raise RuntimeError("a sync run's settlement waited on something")  # pragma: no cover


def _deferred_ids(results: DeferredToolResults | None) -> set[str]:
    """The calls a resumed run is given results for: counted when the model made them."""
    if results is None:
        return set()
    return {*results.approvals, *results.calls}


def _prompt_text(user_prompt: str | Sequence[Any] | None) -> str:
    if isinstance(user_prompt, str):
        return user_prompt
    if user_prompt is None:
        return ""
    return " ".join(part for part in user_prompt if isinstance(part, str))


def _as_text(value: Any) -> str:
    if isinstance(value, str):
        return value
    try:
        return to_json(value).decode()
    except Exception:  # an object pydantic cannot serialize: its repr will do for a fingerprint
        return repr(value)


def _error_text(error: BaseException) -> str:
    message = getattr(error, "message", None)
    text = message if isinstance(message, str) else str(error)
    return f"{type(error).__name__}: {text}" if text else type(error).__name__


class _Session:
    """One governed pydantic-ai run: the guard's run and what the hooks share."""

    def __init__(self, run: Run | AsyncRun, guard: Guard, *, child: bool) -> None:
        self.run = run
        #: The guard the user gave (a sub-agent of the same guard reports to this run).
        self.guard = guard
        #: A sub-agent's run: when a limit says "synthesize", the parent writes the answer.
        self.child = child
        #: The run stopped with a synthesized answer to come: the next request is tools-free.
        self.wrapping_up = False
        self.synthesis_sent = False
        #: A stop at a tool call, raised once the calls admitted before it have run.
        self.halted: HaltError | HaltSignal | None = None
        #: The text of the last response, while its turn is open (its tools may still run).
        self.turn_open = False
        self.turn_text: str | None = None
        #: Refusals for the calls of the current response, by call id.
        self.refused: dict[str, str] = {}
        #: Calls admitted whose result is not reported yet (a call whose arguments fail
        #: validation never reaches a tool hook: its result is read from the history).
        self.unanswered: dict[str, str] = {}
        #: Calls already counted by the run that deferred them (``deferred_tool_results``).
        self.counted: set[str] = set()
        #: Request ids of the attempts sent and not yet answered (a run sends one at a time).
        self.in_flight: list[str] = []
        #: The run, by kind: an async run's ``send`` is awaited, and it cancels its own task
        #: when its time is up; a sync run answers at once, and cannot.
        self.async_run = run if isinstance(run, AsyncRun) else None
        self.sync_run = None if isinstance(run, AsyncRun) else run
        self._cancel_hooked = False
        self._unsubscribe: Callable[[], None] | None = None

    @property
    def governor(self) -> Governor:
        return self.run.guard.governor

    def with_capability(self, kwargs: dict[str, Any]) -> dict[str, Any]:
        # Last: the innermost layer, so that it sees the settings other capabilities chose and
        # the raw results of the tools.
        capabilities = [*(kwargs.get("capabilities") or ()), HaltwiseCapability(self)]
        # An unnamed agent's name is looked for among its caller's names, on every run: the
        # caller is ``GovernedAgent``, where it is never found.
        return {"infer_name": False, **kwargs, "capabilities": capabilities}

    async def send(self, event: Event) -> Decision:
        """Report ``event``; a stop that synthesizes comes back as its ``Stop`` (the run goes on
        to the tools-free pass), any other stop raises."""
        try:
            if self.async_run is not None:
                return await self.async_run.send(event)
            assert self.sync_run is not None
            return self.sync_run.send(event)
        except (HaltError, HaltSignal):
            stop = self.governor.stopped
            if stop is not None and stop.synthesize and not self.child:
                self.wrapping_up = True
                return stop
            raise

    def stopped_error(self) -> BaseException:
        """The run's stop, raised again (a second tools-free pass is not allowed). After a
        pass that wrote no answer the stop stands, counting the pass."""
        if self.synthesis_sent and not self.child:
            self.run.outcome = self.governor.synthesis_unanswered()
        outcome = self.run.outcome
        assert outcome is not None
        error = error_for(outcome)
        return HaltSignal(error) if self.run.guard.signal else error

    async def failed(self) -> None:
        """pydantic-ai's run raised (the model's error, say): if the synthesis pass was under
        way, it ended there with no answer. Its request, sent and never answered, counts at
        what it reserved, and the stop stands, counting it; the error goes on."""
        if not self.synthesis_sent or self.child:
            return
        while self.in_flight:
            request_id = self.in_flight.pop(0)
            await self.send(ModelResponse(answered=False, request_id=request_id))
        self.run.outcome = self.governor.synthesis_unanswered()

    async def end_turn(self, messages: Sequence[Any]) -> None:
        """The step's tools have run: results the tool hooks did not see, then ``TurnEnded``."""
        if self.unanswered:
            await self._results_from(messages[-1] if messages else None)
        if self.turn_open and not self.wrapping_up:
            self.turn_open = False
            await self.send(TurnEnded(self.turn_text))

    async def _results_from(self, request: Any) -> None:
        unanswered, self.unanswered = self.unanswered, {}
        if not isinstance(request, AgentRequest) or self.wrapping_up:
            return
        for part in request.parts:
            if isinstance(part, ToolReturnPart) and part.tool_call_id in unanswered:
                name = unanswered[part.tool_call_id]
                content = part.model_response_str()
                failed = part.outcome != "success"
                await self.send(ToolResult(name, content, part.tool_call_id, is_error=failed))

    async def within_time_left(self, running: Awaitable[T]) -> T:
        """A tool's run, waited for no longer than a sync run's time left (``Overdue`` then).

        pydantic-ai runs a sync tool on a worker thread and awaits it, which Python cannot
        interrupt. An async run's task is cancelled at its deadline (``AsyncRun``), which gives
        that thread up; a sync run has no task of haltwise's to cancel, so the wait itself is
        cut off here, and the thread left to end on its own."""
        left = None if self.sync_run is None else self.run.time_left()
        if left is None:
            return await running
        try:
            return await asyncio.wait_for(running, left)
        except asyncio.TimeoutError as error:
            # wait_for's own comes from cancelling the call; one the tool raised is its result.
            if isinstance(error.__cause__, asyncio.CancelledError):
                raise Overdue(f"no answer within {left:.3g}s") from None
            raise

    def hook_cancel(self, ctx: RunContext[Any]) -> None:
        """A sync run has no task to cancel: ``cancel()`` cancels the pydantic-ai run."""
        if self._cancel_hooked or self.sync_run is None:
            return
        self._cancel_hooked = True
        lock = threading.Lock()

        def cancel() -> None:
            with lock:
                if self._unsubscribe is not None:
                    ctx.cancel()

        self._unsubscribe = self.governor.on_cancel(cancel)

    def unhook_cancel(self) -> None:
        if self._unsubscribe is not None:
            self._unsubscribe()
            self._unsubscribe = None

    async def settle(self, result: AgentRunResult[Any]) -> None:
        """pydantic-ai's run returned: its output is the final (or the synthesized) answer."""
        if self.halted is not None:
            return  # a step that was stopped ended the run: the stop stands
        output = _as_text(result.output)
        stop = self.governor.stopped
        if self.wrapping_up and stop is not None and stop.synthesize:
            self.run.outcome = synthesis_outcome(self.governor, output)
            return
        if self.run.outcome is None:
            await self.end_turn(())
            finished = self.run.finish(output)
            if inspect.isawaitable(finished):
                await finished


class HaltwiseCapability(AbstractCapability[Any]):
    """The pydantic-ai capability that reports one governed run's steps to its guard.

    ``govern(...).run()`` adds one to each run it starts (``capabilities=``); it holds that run's
    state, so it is never shared between runs.
    """

    def __init__(self, session: _Session) -> None:
        super().__init__()
        self._session = session

    def __repr__(self) -> str:
        return f"HaltwiseCapability({self._session.run.guard!r})"

    async def before_model_request(
        self, ctx: RunContext[Any], request_context: ModelRequestContext
    ) -> ModelRequestContext:
        session = self._session
        session.hook_cancel(ctx)
        if session.halted is not None:
            raise session.halted  # the calls admitted before the stop have run
        if session.turn_open or session.unanswered:
            await session.end_turn(ctx.messages)
        if not session.wrapping_up:
            await session.send(_TURN_STARTING)
        if session.wrapping_up:
            return self._tools_free(ctx, request_context)
        for note in session.run.notes():
            ctx.enqueue(note)
        return request_context

    def _tools_free(
        self, ctx: RunContext[Any], request_context: ModelRequestContext
    ) -> ModelRequestContext:
        """The synthesis pass: no tools, and the reason the run stopped."""
        session = self._session
        if session.synthesis_sent:
            raise session.stopped_error()  # the pass did not answer: the partial output stands
        session.synthesis_sent = True
        outcome = session.run.outcome
        reason = outcome.message if outcome is not None else "a limit was reached."
        ctx.enqueue(SYNTHESIS_PROMPT.format(reason=reason))
        parameters = dataclasses.replace(
            request_context.model_request_parameters, function_tools=[], native_tools=[]
        )
        return dataclasses.replace(request_context, model_request_parameters=parameters)

    async def prepare_model_request(
        self, ctx: RunContext[Any], request_context: ModelRequestContext
    ) -> ModelRequestContext:
        session = self._session
        model = request_context.model.model_name
        while session.in_flight:
            # An earlier attempt failed and this one replaces it: sent, and never answered, it
            # counts at what it reserved, never as free.
            request_id = session.in_flight.pop(0)
            await session.send(ModelResponse(model, answered=False, request_id=request_id))
        settings = request_context.model_settings or {}
        asked = settings.get("max_tokens")
        request_id = f"pydantic-ai-{next(_request_ids)}"
        decision = await session.send(
            ModelRequest(
                model, max_tokens=asked if isinstance(asked, int) else None, request_id=request_id
            )
        )
        if isinstance(decision, Stop):
            raise session.stopped_error()  # stopped at the request: there is no pass to make
        session.in_flight.append(request_id)
        changes: dict[str, Any] = {}
        lowered = decision.max_tokens if isinstance(decision, Continue | Warn) else None
        if lowered is not None and lowered != asked:
            changes["max_tokens"] = lowered
        if session.wrapping_up:
            # The run has stopped, so no deadline of its own cuts the pass off: it has its own.
            left: float | None = synthesis_seconds(session.run.time_left())
        elif session.async_run is not None:
            # The async run cancels its task at the deadline; a ``request_timeout`` as well would
            # cost pydantic-ai a cancel scope and a timer on every attempt, to do the same.
            left = None
        else:
            left = session.run.time_left()
        if left is not None:
            own = settings.get("request_timeout")
            if not isinstance(own, int | float) or own > left:
                changes["request_timeout"] = max(left, 0.001)
        if changes:  # this attempt's settings only: a copy
            request_context.model_settings = cast(ModelSettings, {**settings, **changes})
        return request_context

    async def after_model_request(
        self,
        ctx: RunContext[Any],
        *,
        request_context: ModelRequestContext,
        response: AgentResponse,
    ) -> AgentResponse:
        session = self._session
        text, calls = response.text, response.tool_calls
        if session.in_flight:  # else a response a hook made up: no request of ours was sent
            usage = response.usage
            await session.send(
                ModelResponse(
                    response.model_name or request_context.model.model_name,
                    input_tokens=usage.input_tokens,
                    output_tokens=usage.output_tokens,
                    cache_read_tokens=usage.cache_read_tokens,
                    cache_write_tokens=usage.cache_write_tokens,
                    text=text,
                    tool_calls=len(calls),
                    request_id=session.in_flight.pop(0),
                )
            )
        session.turn_open = True
        session.turn_text = text
        session.refused = {}
        for call in calls:  # every call counted before any of them runs
            await self._admit(call, ctx)
        return response

    async def _admit(self, call: ToolCallPart, ctx: RunContext[Any]) -> None:
        session = self._session
        call_id = call.tool_call_id
        if session.halted is not None or session.wrapping_up:
            if session.halted is not None or not _is_output_tool(call, ctx):
                session.refused[call_id] = "Not run: the run has stopped."
            return
        if call_id in session.counted:
            return
        arguments = call.args if call.args is not None else ""
        try:
            decision = await session.send(ToolCall(call.tool_name, arguments, call_id))
        except (HaltError, HaltSignal) as error:
            if error.outcome.status in (Status.CANCELLED, Status.TIMED_OUT):
                raise
            # A limit: the calls admitted before this one run (they were counted), then the run
            # ends before the next request; this one and the rest never run.
            session.halted = error
            session.refused[call_id] = f"Not run: {error.outcome.message}"
            return
        if isinstance(decision, Stop):
            session.refused[call_id] = f"Not run: {decision.outcome.message}"
        elif isinstance(decision, Block):
            session.refused[call_id] = decision.reason
        else:
            session.unanswered[call_id] = call.tool_name

    async def wrap_tool_execute(
        self,
        ctx: RunContext[Any],
        *,
        call: ToolCallPart,
        tool_def: ToolDefinition,
        args: ValidatedToolArgs,
        handler: WrapToolExecuteHandler,
    ) -> Any:
        session = self._session
        refusal = session.refused.get(call.tool_call_id)
        if refusal is not None:
            raise ToolFailed(refusal)  # the model sees it as the tool's result; it never runs
        try:
            result = await session.within_time_left(handler(args))
        except (SkipToolExecution, CallDeferred, ApprovalRequired):
            session.unanswered.pop(call.tool_call_id, None)
            raise  # not run (yet): there is no result to report
        except Overdue as overdue:
            # Given up on at the run's deadline: pydantic-ai's worker thread goes on, and what
            # the tool returns is never reported. Its time ran out, so reporting that stops
            # the run (it raises), unless the time limit lets it go on (a human extends it) or
            # synthesizes an answer: the model is told the tool did not finish.
            await self._result(call, f"The tool did not finish: {overdue}.", is_error=True)
            stop = session.governor.stopped
            reason = overdue if stop is None else stop.outcome.message
            raise ToolFailed(f"The tool did not finish: {reason}") from None
        except Exception as error:
            await self._result(call, _error_text(error), is_error=True)
            raise
        await self._result(call, _as_text(result))
        return result

    async def _result(self, call: ToolCallPart, content: str, *, is_error: bool = False) -> None:
        session = self._session
        if session.unanswered.pop(call.tool_call_id, None) is not None:
            await session.send(
                ToolResult(call.tool_name, content, call.tool_call_id, is_error=is_error)
            )

    async def wrap_output_validate(
        self,
        ctx: RunContext[Any],
        *,
        output_context: OutputContext,
        output: RawOutput,
        handler: WrapOutputValidateHandler,
    ) -> Any:
        # Output tools run no tool hooks: a refused call of one is refused here.
        call = output_context.tool_call
        refusal = None if call is None else self._session.refused.get(call.tool_call_id)
        if refusal is not None:
            raise ModelRetry(refusal)
        return await handler(output)


def _is_output_tool(call: ToolCallPart, ctx: RunContext[Any]) -> bool:
    definition = ctx.tools.get(call.tool_name)
    return definition is not None and definition.kind == "output"
