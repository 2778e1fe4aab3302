"""haltwise in the OpenAI Agents SDK (``openai-agents``): ``govern(agent, guard)``.

::

    from agents import Agent
    from haltwise import Guard, max_turns, max_cost
    from haltwise.adapters.openai_agents import govern

    governed = govern(Agent(name="helper", tools=[...]), Guard(max_turns(10) | max_cost("0.50")))
    done = await governed.run("What is the answer?")      # or governed.run_sync(...)
    print(done.outcome.status, done.output)                # done.result: the SDK's RunResult

``run`` reports the SDK run to one haltwise run (``guard.arun()``) and returns a ``Governed``:
the uniform ``Outcome`` and the SDK's ``RunResult`` (None when haltwise stopped the run before the
SDK could build one). Where each event comes from:

- the ``Model``: every model of the run is wrapped (``agent.model`` objects of each agent reachable
  by handoffs and ``as_tool``, changed in place; string names through the ``RunConfig``'s
  ``ModelProvider``, wrapped in place too). Before each request it reports ``TurnEnded`` for
  the turn before, ``TurnStarting`` and ``ModelRequest`` (with ``model_settings.max_tokens``; a
  lowered value is sent in a copy of the settings, and Warn notes are added to the request as a
  user message); a refused request is never sent. After it, ``ModelResponse`` from the SDK's
  ``Usage``, then one ``ToolCall`` per function call of the response, all before any tool runs.
- the tools: each ``FunctionTool`` gets a tool input guardrail (a refused call does not run and
  the model sees the refusal as the tool's output, ``reject_content``) and a tool output
  guardrail (``ToolResult``).
- ``as_tool`` sub-agents: their requests and tool calls are reported to the same run, without
  turns of their own (a turn is one round trip of the main loop), so they spend the parent's
  model calls, tool calls, tokens and dollars; a handoff continues the main loop.

A stop ends the SDK run by raising out of the model (the SDK never retries it; the ``async with``
of the guard's run takes it back). With ``synthesize`` (or a human's "wrap up") the next request
of the main loop is instead one tools-free request, counted, whose answer the SDK takes as its
final output. A run paused by the SDK's tool approvals ends ``abandoned`` with reason ``paused``
and a checkpoint; ``run(state)`` with the approved ``RunState`` resumes it with its counts.

The SDK is imported here only: ``haltwise.adapters`` imports without it.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import dataclasses
import itertools
import json
import warnings
from collections.abc import AsyncIterator, Awaitable
from typing import Any, Generic, TypeVar

from agents import (
    Agent,
    FunctionTool,
    Handoff,
    Model,
    ModelProvider,
    ModelSettings,
    ModelTracing,
    RunConfig,
    RunHooks,
    Runner,
    RunResult,
    RunState,
    Tool,
    ToolGuardrailFunctionOutput,
    ToolInputGuardrail,
    ToolInputGuardrailData,
    ToolOutputGuardrail,
    ToolOutputGuardrailData,
)
from agents.agent_output import AgentOutputSchemaBase
from agents.items import ModelResponse, TResponseInputItem, TResponseStreamEvent
from agents.retry import ModelRetryAdvice, ModelRetryAdviceRequest, ModelRetryNormalizedError
from agents.run_error_handlers import RunErrorHandlers
from agents.tool_context import ToolContext
from agents.usage import Usage as SDKUsage
from openai.types.responses import (
    ResponseFunctionToolCall,
    ResponseOutputMessage,
    ResponseOutputText,
    ResponsePromptParam,
)

from ..drivers.guard import AsyncRun, Guard
from ..engine.decisions import Block
from ..engine.errors import HaltError, HaltSignal, InvalidValueError, error_for
from ..engine.events import ModelResponse as ModelResponseEvent
from ..engine.events import ToolCall, ToolResult, TurnEnded, TurnStarting
from ..engine.outcome import Outcome, Status
from ._common import (
    Governed,
    answered,
    checked_guard,
    synthesis_outcome,
    synthesis_seconds,
)

__all__ = ["GovernedAgent", "govern"]

TContext = TypeVar("TContext")

#: What ends a haltwise run from inside the SDK.
_Halt = (HaltError, HaltSignal)

#: Every turn of the main loop starts with the same event: it has no fields.
_TURN_STARTING = TurnStarting()

#: The note that asks for the tools-free final answer of a ``synthesize`` stop.
_WRAP_UP = (
    "{message} Answer the user's request now, from what you have gathered so far, without "
    "calling tools; say plainly what is missing."
)


def govern(agent: Agent[TContext], guard: Guard) -> GovernedAgent[TContext]:
    """``agent``, governed by ``guard``: ``await .run(input)`` or ``.run_sync(input)`` return a
    ``Governed[RunResult]``.

    The models of ``agent`` and of every agent it reaches by handoffs and ``as_tool`` are wrapped
    in place, and its function tools get haltwise's tool guardrails. Outside a governed run
    both pass straight through, so the agents stay usable on their own. An argument of the
    wrong kind raises ``InvalidValueError`` here, naming it.
    """
    if not isinstance(agent, Agent):
        raise InvalidValueError(
            "govern(agent)", agent, "an Agent of the OpenAI Agents SDK, e.g. Agent(name=...)"
        )
    return GovernedAgent(agent, checked_guard(guard, "govern(guard)"))


class GovernedAgent(Generic[TContext]):
    """An SDK agent whose runs report to a ``Guard``. Build it with ``govern``."""

    def __init__(self, agent: Agent[TContext], guard: Guard) -> None:
        #: The starting agent.
        self.agent = agent
        #: The guard whose governor decides; its prompter answers asks.
        self.guard = guard
        #: The checkpoint of the last run the SDK paused for tool approvals, and the decisions
        #: on the calls that wait (None: admitted, else the refusal), so each counts once.
        self._paused: dict[str, Any] | None = None
        self._waiting: dict[str, str | None] = {}
        _govern_agents(agent)

    async def run(
        self,
        input: str | list[TResponseInputItem] | RunState[TContext],
        *,
        context: TContext | None = None,
        run_config: RunConfig | None = None,
        hooks: RunHooks[TContext] | None = None,
        error_handlers: RunErrorHandlers[TContext] | None = None,
        max_turns: int | None = None,
        checkpoint: dict[str, Any] | str | None = None,
        **options: Any,
    ) -> Governed[RunResult]:
        """Run the agent under the guard (``Runner.run``'s arguments pass through).

        ``max_turns`` is the SDK's own limit, None (no limit) by default: haltwise's limits
        govern. A ``RunState`` resumes a paused run with the counts it had: those of the last
        pause of this object, or of ``checkpoint`` (a ledger reference or the checkpoint data,
        for a run paused in another process).
        """
        _govern_agents(self.agent)  # agents or tools added since ``govern``
        config, own_provider = _governed_config(run_config)
        result: RunResult | None = None
        try:
            async with self.guard.arun(_prompt_of(input)) as run:
                session = _Session(self.guard, run)
                if isinstance(input, RunState):
                    self._resume(input, checkpoint, session)
                elif checkpoint is not None:
                    self.guard.governor.restore(checkpoint)
                scope = _SCOPE.set(_Scope(session, main=True))
                try:
                    result = await Runner.run(
                        self.agent,
                        input,
                        context=context,
                        max_turns=max_turns,
                        hooks=hooks,
                        run_config=config,
                        error_handlers=error_handlers,
                        **options,
                    )
                finally:
                    _SCOPE.reset(scope)
                if run.outcome is None:  # the SDK ended the run: finished, or paused
                    await self._ended(run, session, result)
        finally:
            if own_provider is not None:
                await own_provider.aclose()
        assert run.outcome is not None
        return Governed(run.outcome, result)

    def run_sync(
        self, input: str | list[TResponseInputItem] | RunState[TContext], **options: Any
    ) -> Governed[RunResult]:
        """``run`` for synchronous code, on the thread's default event loop (as
        ``Runner.run_sync`` does, so clients bound to that loop keep working)."""
        try:
            asyncio.get_running_loop()
        except RuntimeError:
            pass
        else:
            raise RuntimeError("run_sync() was called inside an event loop: await run() instead")
        loop = _default_loop()
        task = loop.create_task(self.run(input, **options))
        try:
            return loop.run_until_complete(task)
        except BaseException:
            if not task.done():  # KeyboardInterrupt and the like: leave nothing running
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    loop.run_until_complete(task)
            raise

    def _resume(
        self,
        state: RunState[TContext],
        checkpoint: dict[str, Any] | str | None,
        session: _Session,
    ) -> None:
        saved = checkpoint if checkpoint is not None else self._paused
        if saved is not None:
            self.guard.governor.restore(saved)
        session.admitted.update(self._waiting)
        self._paused, self._waiting = None, {}
        for call_id in _call_ids(state.get_interruptions()):
            # Counted when its response arrived, before the pause (maybe in another process).
            session.admitted.setdefault(call_id, None)

    async def _ended(self, run: AsyncRun, session: _Session, result: RunResult | None) -> None:
        assert result is not None
        governor = self.guard.governor
        if result.interruptions:
            count = len(result.interruptions)
            stop = governor.stop(
                "paused",
                f"The run paused: {count} tool call{'s' if count != 1 else ''} "
                "wait for approval. Approve or reject them on result.to_state(), then pass the "
                "state to run() to resume with these counts.",
            )
            run.outcome = stop.outcome
            self._paused = governor.checkpoint()
            waiting = _call_ids(result.interruptions)
            self._waiting = {
                key: session.admitted[key] for key in waiting if key in session.admitted
            }
            return
        await session.end_turn()
        await run.finish(_as_text(result.final_output))

    def __repr__(self) -> str:
        return f"govern({self.agent.name!r}, {self.guard!r})"


# ------------------------------------------------------------------------------------------
# One governed run, as the model wrappers and tool guardrails see it


@dataclasses.dataclass(frozen=True, slots=True)
class _Scope:
    session: _Session
    #: False inside an ``as_tool`` sub-agent: its requests are not turns of the main loop.
    main: bool


#: The governed run of the current task, if any; tool tasks and sub-agent runs inherit it.
_SCOPE: contextvars.ContextVar[_Scope | None] = contextvars.ContextVar(
    "haltwise_openai_agents", default=None
)


@dataclasses.dataclass(slots=True)
class _Request:
    """The arguments of one ``Model.get_response`` / ``stream_response`` call."""

    system_instructions: str | None
    input: str | list[TResponseInputItem]
    settings: ModelSettings
    tools: list[Tool]
    output_schema: AgentOutputSchemaBase | None
    handoffs: list[Handoff[Any, Any]]
    tracing: ModelTracing
    previous_response_id: str | None
    conversation_id: str | None
    prompt: ResponsePromptParam | None
    #: Pairs the request with its response in the governor (sub-agents run concurrently).
    request_id: str = ""


class _Session:
    """Carries out the guard run's decisions for one SDK run (and its sub-agents)."""

    def __init__(self, guard: Guard, run: AsyncRun) -> None:
        self.guard = guard
        self.governor = guard.governor
        self.run = run
        #: Tool calls counted when their response arrived, by call id, until they run: None
        #: when admitted, else the refusal the model is given instead.
        self.admitted: dict[str, str | None] = {}
        #: Whether a turn of the main loop has started and not yet been reported ended.
        self.turn_open = False
        self.turn_text: str | None = None
        self._numbers = itertools.count(1)

    async def respond(self, model: _GovernedModel, request: _Request, main: bool) -> ModelResponse:
        try:
            request = await self._admit(model, request, main)
            try:
                response = await model.send(request)
            except Exception:
                await self._unanswered(model, request)
                raise
            await self._answered(model, request, response, main)
            return response
        except _Halt as halt:
            return await self._halted(model, request, main, halt)

    async def stream(
        self, model: _GovernedModel, request: _Request, main: bool
    ) -> AsyncIterator[TResponseStreamEvent]:
        """A streamed request (``as_tool(on_stream=...)`` sub-agents): a stop raises."""
        request = await self._admit(model, request, main)
        answered = False
        try:
            async for event in model.stream(request):
                if event.type == "response.completed":
                    answered = True
                    response = ModelResponse(
                        output=list(event.response.output),
                        usage=_sdk_usage(event.response.usage),
                        response_id=event.response.id,
                    )
                    await self._answered(model, request, response, main)
                yield event
        except Exception:
            if not answered:
                await self._unanswered(model, request)
            raise

    async def end_turn(self) -> None:
        if self.turn_open:
            self.turn_open = False
            await self.run.send(TurnEnded(self.turn_text))

    async def _admit(self, model: _GovernedModel, request: _Request, main: bool) -> _Request:
        """Report the request before it is sent: the request to send (notes added, max_tokens
        perhaps lowered), or a halt."""
        run = self.run
        stopped = self.governor.stopped
        if stopped is not None:  # a tool call, a tool result or a sub-agent stopped the run
            raise self._halt(stopped.outcome)
        if main:
            if self.turn_open:
                await self.end_turn()
            await run.send(_TURN_STARTING)
            self.turn_open = True
            self.turn_text = None
        asked = request.settings.max_tokens
        request.request_id = f"request-{next(self._numbers)}"
        max_tokens = await run.model_request(
            model.name, max_tokens=asked, request_id=request.request_id
        )
        notes = run.notes()
        if max_tokens != asked:
            request.settings = dataclasses.replace(request.settings, max_tokens=max_tokens)
        if notes:
            request.input = [*_items(request.input), *(_user(note) for note in notes)]
        return request

    async def _answered(
        self, model: _GovernedModel, request: _Request, response: ModelResponse, main: bool
    ) -> None:
        """Report the response, then each tool call it asks for, before any of them runs."""
        run = self.run
        text, calls = _read(response)
        await run.send(
            _response_event(model.name, response.usage, text, len(calls), request.request_id)
        )
        if main:
            self.turn_text = text
        if not calls:
            return
        tools = {tool.name: tool for tool in request.tools if isinstance(tool, FunctionTool)}
        for call in calls:
            tool = tools.get(call.name)
            if tool is None:
                continue  # a handoff, or a tool the SDK does not know: nothing runs
            _guard_tool(tool)  # tools made per turn (MCP servers) have not been seen before
            try:
                decision = await run.send(ToolCall(call.name, call.arguments, call.call_id))
            except _Halt as halt:
                # The run stops; the calls admitted before this one still run, this one does
                # not, and the next request of the main loop ends the run.
                refusal: str | None = f"Not run: {halt.outcome.message}"
            else:
                refusal = decision.reason if isinstance(decision, Block) else None
            self.admitted[call.call_id] = refusal

    async def _halted(
        self,
        model: _GovernedModel,
        request: _Request,
        main: bool,
        halt: HaltError | HaltSignal,
    ) -> ModelResponse:
        """The run stopped: end the SDK run, through its final output when there is an answer."""
        stop = self.governor.stopped
        if not main or stop is None:
            raise halt  # a sub-agent: its tool call fails, and the parent's next request stops
        if stop.synthesize:
            return await self._synthesize(model, request, halt.outcome)
        outcome = halt.outcome
        if (
            outcome.status is Status.COMPLETED_WITH_WARNINGS
            and outcome.partial_output is not None
            and _plain_text(request.output_schema)
        ):
            # A synthesizer of the guard's already answered, or ``best_effort``: the SDK ends
            # with that answer as its final output, without another request.
            return _final_answer(outcome.partial_output)
        raise halt

    async def _synthesize(
        self, model: _GovernedModel, request: _Request, outcome: Outcome
    ) -> ModelResponse:
        """The tools-free request of a ``synthesize`` stop: its answer is the final output."""
        run = self.run
        note = _WRAP_UP.format(message=outcome.message)
        settings = dataclasses.replace(request.settings, tool_choice=None, parallel_tool_calls=None)
        request = dataclasses.replace(
            request,
            input=[*_items(request.input), _user(note)],
            settings=settings,
            tools=[],
            handoffs=[],
        )
        # Admitted when the budget left can pay for it; otherwise this raises, and the run
        # ends with its partial output.
        request.request_id = f"request-{next(self._numbers)}"
        max_tokens = await run.model_request(
            model.name, max_tokens=settings.max_tokens, request_id=request.request_id
        )
        if max_tokens != settings.max_tokens:
            request.settings = dataclasses.replace(settings, max_tokens=max_tokens)
        try:
            # The run has stopped, so its deadline no longer cancels this task: the pass has a
            # bound of its own (cut off there, it raises ``asyncio.TimeoutError``, as a failed
            # pass raises the model's error).
            seconds = synthesis_seconds(run.time_left())
            response = await asyncio.wait_for(model.send(request), seconds)
        except Exception:
            await self._unanswered(model, request)
            run.outcome = self.governor.synthesis_unanswered()
            raise
        text, _ = _read(response)
        await run.send(_response_event(model.name, response.usage, text, 0, request.request_id))
        run.outcome = synthesis_outcome(self.governor, text)
        self.turn_open = False
        if not answered(text):
            raise self._halt(run.outcome)  # a tool call instead of an answer: the stop stands
        return response

    async def _unanswered(self, model: _GovernedModel, request: _Request) -> None:
        """The request failed after it was sent: it counts at what it reserved."""
        await self.run.model_response(
            model=model.name, answered=False, request_id=request.request_id
        )

    def _halt(self, outcome: Outcome) -> HaltError | HaltSignal:
        """The exception for a run that has stopped, as the guard's run raises it."""
        run = self.run
        if run.outcome is None:
            run.outcome = outcome
        error = error_for(run.outcome)
        return HaltSignal(error) if self.guard.signal else error


# ------------------------------------------------------------------------------------------
# The model wrappers


class _GovernedModel(Model):
    """A ``Model`` that reports each request to the governed run of its task, if any."""

    def __init__(self, inner: Model, name: str | None = None) -> None:
        self.inner = inner
        #: The model's name, for pricing.
        self.name = name or _model_name(inner)

    async def get_response(
        self,
        system_instructions: str | None,
        input: str | list[TResponseInputItem],
        model_settings: ModelSettings,
        tools: list[Tool],
        output_schema: AgentOutputSchemaBase | None,
        handoffs: list[Handoff[Any, Any]],
        tracing: ModelTracing,
        *,
        previous_response_id: str | None,
        conversation_id: str | None,
        prompt: ResponsePromptParam | None,
    ) -> ModelResponse:
        request = _Request(
            system_instructions,
            input,
            model_settings,
            tools,
            output_schema,
            handoffs,
            tracing,
            previous_response_id,
            conversation_id,
            prompt,
        )
        scope = _SCOPE.get()
        if scope is None:
            return await self.send(request)
        return await scope.session.respond(self, request, scope.main)

    async def stream_response(
        self,
        system_instructions: str | None,
        input: str | list[TResponseInputItem],
        model_settings: ModelSettings,
        tools: list[Tool],
        output_schema: AgentOutputSchemaBase | None,
        handoffs: list[Handoff[Any, Any]],
        tracing: ModelTracing,
        *,
        previous_response_id: str | None,
        conversation_id: str | None,
        prompt: ResponsePromptParam | None,
    ) -> AsyncIterator[TResponseStreamEvent]:
        request = _Request(
            system_instructions,
            input,
            model_settings,
            tools,
            output_schema,
            handoffs,
            tracing,
            previous_response_id,
            conversation_id,
            prompt,
        )
        scope = _SCOPE.get()
        events = (
            self.stream(request)
            if scope is None
            else scope.session.stream(self, request, scope.main)
        )
        async for event in events:
            yield event

    def send(self, request: _Request) -> Awaitable[ModelResponse]:
        """Send ``request`` through the wrapped model (its coroutine, awaited by the caller)."""
        return self.inner.get_response(
            request.system_instructions,
            request.input,
            request.settings,
            request.tools,
            request.output_schema,
            request.handoffs,
            request.tracing,
            previous_response_id=request.previous_response_id,
            conversation_id=request.conversation_id,
            prompt=request.prompt,
        )

    def stream(self, request: _Request) -> AsyncIterator[TResponseStreamEvent]:
        """Stream ``request`` through the wrapped model."""
        return self.inner.stream_response(
            request.system_instructions,
            request.input,
            request.settings,
            request.tools,
            request.output_schema,
            request.handoffs,
            request.tracing,
            previous_response_id=request.previous_response_id,
            conversation_id=request.conversation_id,
            prompt=request.prompt,
        )

    def get_retry_advice(self, request: ModelRetryAdviceRequest) -> ModelRetryAdvice | None:
        if isinstance(request.error, HaltError):
            # A refused request is not a failed one: never retry it.
            return ModelRetryAdvice(
                suggested=False,
                reason="haltwise stopped the run",
                normalized=ModelRetryNormalizedError(is_abort=True),
            )
        return self.inner.get_retry_advice(request)

    async def close(self) -> None:
        await self.inner.close()

    async def _cleanup_on_run_end(self, owner: object) -> None:
        await self.inner._cleanup_on_run_end(owner)

    def __repr__(self) -> str:
        return f"<governed {self.inner!r}>"


class _GovernedProvider(ModelProvider):
    """Wraps the models a ``ModelProvider`` resolves by name (agents whose model is a string)."""

    def __init__(self, inner: ModelProvider) -> None:
        self.inner = inner

    def get_model(self, model_name: str | None) -> Model:
        model = self.inner.get_model(model_name)
        return model if isinstance(model, _GovernedModel) else _GovernedModel(model, model_name)

    async def aclose(self) -> None:
        await self.inner.aclose()


def _governed_config(config: RunConfig | None) -> tuple[RunConfig, ModelProvider | None]:
    """The run's ``RunConfig``, its models wrapped in place as the agents' are (outside a
    governed run they pass straight through); and the provider to close after the run when
    haltwise made it (``Runner`` closes only the providers it makes itself)."""
    own = None
    if config is None:
        config = RunConfig()
        own = config.model_provider
    if not isinstance(config.model_provider, _GovernedProvider):
        config.model_provider = _GovernedProvider(config.model_provider)
    if isinstance(config.model, Model) and not isinstance(config.model, _GovernedModel):
        config.model = _GovernedModel(config.model)
    return config, own


# ------------------------------------------------------------------------------------------
# Agents and tools


def _govern_agents(agent: Agent[Any]) -> None:
    """Wrap the models and guard the tools of ``agent`` and of every agent it reaches."""
    seen: set[int] = set()
    waiting: list[Agent[Any]] = [agent]
    while waiting:
        current = waiting.pop()
        if id(current) in seen:
            continue
        seen.add(id(current))
        if isinstance(current.model, Model) and not isinstance(current.model, _GovernedModel):
            current.model = _GovernedModel(current.model)
        for tool in current.tools:
            if isinstance(tool, FunctionTool):
                _guard_tool(tool)
                child = tool._agent_instance  # set by Agent.as_tool
                if isinstance(child, Agent):
                    waiting.append(child)
        for handoff in current.handoffs:
            if isinstance(handoff, Agent):
                waiting.append(handoff)
            elif handoff._agent_ref is not None:
                target = handoff._agent_ref()
                if isinstance(target, Agent):
                    waiting.append(target)


def _guard_tool(tool: FunctionTool) -> None:
    """Put haltwise's guardrails first on ``tool`` (once); the user's lists are not mutated."""
    before = _BEFORE_AGENT_TOOL if tool._is_agent_tool else _BEFORE_TOOL
    inputs = tool.tool_input_guardrails or []
    if not inputs or inputs[0] is not before:
        tool.tool_input_guardrails = [before, *(g for g in inputs if g is not before)]
    outputs = tool.tool_output_guardrails or []
    if not outputs or outputs[0] is not _AFTER_TOOL:
        tool.tool_output_guardrails = [_AFTER_TOOL, *(g for g in outputs if g is not _AFTER_TOOL)]


#: What a tool input guardrail returns; the SDK awaits it only when it is awaitable.
_Verdict = ToolGuardrailFunctionOutput | Awaitable[ToolGuardrailFunctionOutput]


def _before_tool(data: ToolInputGuardrailData) -> _Verdict:
    return _check_tool(data, agent_tool=False)


def _before_agent_tool(data: ToolInputGuardrailData) -> _Verdict:
    return _check_tool(data, agent_tool=True)


def _check_tool(data: ToolInputGuardrailData, agent_tool: bool) -> _Verdict:
    """Right before a tool runs: refuse it (the model sees why), or let it run. A call counted
    when its response arrived (all but those of a resumed run) is let run without an await."""
    scope = _SCOPE.get()
    if scope is None:
        return _ALLOW
    session, context = scope.session, data.context
    if context.tool_call_id not in session.admitted:
        return _count_tool(session, context, agent_tool)
    refusal = session.admitted.pop(context.tool_call_id)
    if refusal is not None:
        return _refuse(session, context, refusal)
    return _let_run(session, agent_tool)


async def _count_tool(
    session: _Session, context: ToolContext[Any], agent_tool: bool
) -> ToolGuardrailFunctionOutput:
    """A call not seen in a response (resumed, or called another way): counted now."""
    try:
        refusal = await session.run.tool_call(
            context.tool_name, context.tool_arguments, context.tool_call_id
        )
    except _Halt as halt:
        refusal = f"Not run: {halt.outcome.message}"
    if refusal is not None:
        return await _refuse(session, context, refusal)
    return _let_run(session, agent_tool)


async def _refuse(
    session: _Session, context: ToolContext[Any], refusal: str
) -> ToolGuardrailFunctionOutput:
    """The tool does not run: the model sees ``refusal`` as its output."""
    result = ToolResult(context.tool_name, refusal, context.tool_call_id, is_error=True)
    with contextlib.suppress(*_Halt):  # as in ``_after_tool``: the next request ends the run
        await session.run.send(result)
    return ToolGuardrailFunctionOutput.reject_content(refusal)


def _let_run(session: _Session, agent_tool: bool) -> ToolGuardrailFunctionOutput:
    if agent_tool:
        # This task goes on to run the sub-agent (the SDK starts it in a task made from here):
        # its requests are the sub-agent's, not turns of the main loop.
        _SCOPE.set(_Scope(session, main=False))
    return _ALLOW


async def _after_tool(data: ToolOutputGuardrailData) -> ToolGuardrailFunctionOutput:
    scope = _SCOPE.get()
    if scope is not None:
        context = data.context
        output = data.output if isinstance(data.output, str) else _as_text(data.output) or ""
        try:
            await scope.session.run.send(
                ToolResult(context.tool_name, output, context.tool_call_id)
            )
        except _Halt:
            # The stop ends the run at the next request: raised from here, it would reach the
            # model as the tool's error instead.
            return _ALLOW
    return _ALLOW


#: One "let it run" answer for every call: the SDK only reads it.
_ALLOW = ToolGuardrailFunctionOutput.allow()
_BEFORE_TOOL: ToolInputGuardrail[Any] = ToolInputGuardrail(_before_tool, name="haltwise")
_BEFORE_AGENT_TOOL: ToolInputGuardrail[Any] = ToolInputGuardrail(
    _before_agent_tool, name="haltwise"
)
_AFTER_TOOL: ToolOutputGuardrail[Any] = ToolOutputGuardrail(_after_tool, name="haltwise")


# ------------------------------------------------------------------------------------------
# Small helpers


def _call_ids(items: list[Any]) -> list[str]:
    """The call ids of tool approval items."""
    ids = (getattr(item.raw_item, "call_id", None) for item in items)
    return [call_id for call_id in ids if isinstance(call_id, str)]


def _items(input: str | list[TResponseInputItem]) -> list[TResponseInputItem]:
    return [_user(input)] if isinstance(input, str) else list(input)


def _user(text: str) -> TResponseInputItem:
    return {"role": "user", "content": text}


def _read(response: ModelResponse) -> tuple[str | None, list[ResponseFunctionToolCall]]:
    """The response's text (None without any) and its function calls, in one pass."""
    parts: list[str] = []
    calls: list[ResponseFunctionToolCall] = []
    for item in response.output:
        if isinstance(item, ResponseFunctionToolCall):
            calls.append(item)
        elif isinstance(item, ResponseOutputMessage):
            parts.extend(part.text for part in item.content if isinstance(part, ResponseOutputText))
    return ("".join(parts) if parts else None), calls


def _response_event(
    model: str, usage: SDKUsage, text: str | None, tool_calls: int, request_id: str
) -> ModelResponseEvent:
    """The ``ModelResponse`` event of a response, from the SDK's ``Usage``. A response with no
    tokens at all is one whose provider did not say (a stream without ``include_usage``): it
    counts at what its request reserved, never as free."""
    if not usage.input_tokens and not usage.output_tokens:
        return ModelResponseEvent(
            model, text=text, tool_calls=tool_calls, request_id=request_id, answered=False
        )
    details = usage.input_tokens_details
    return ModelResponseEvent(
        model,
        input_tokens=usage.input_tokens,
        output_tokens=usage.output_tokens,
        cache_read_tokens=getattr(details, "cached_tokens", 0) or 0,
        cache_write_tokens=getattr(details, "cache_write_tokens", 0) or 0,
        text=text,
        tool_calls=tool_calls,
        request_id=request_id,
    )


def _sdk_usage(usage: Any) -> SDKUsage:
    """The SDK's ``Usage`` from a streamed response's (OpenAI Responses) usage."""
    if usage is None:
        return SDKUsage()
    return SDKUsage(
        requests=1,
        input_tokens=usage.input_tokens,
        output_tokens=usage.output_tokens,
        total_tokens=usage.total_tokens,
        input_tokens_details=usage.input_tokens_details,
        output_tokens_details=usage.output_tokens_details,
    )


def _final_answer(text: str) -> ModelResponse:
    """A response that is only ``text``: the SDK takes it as the run's final output."""
    message = ResponseOutputMessage(
        id="haltwise-final",
        type="message",
        role="assistant",
        status="completed",
        content=[ResponseOutputText(type="output_text", text=text, annotations=[])],
    )
    return ModelResponse(output=[message], usage=SDKUsage(), response_id=None)


def _plain_text(schema: AgentOutputSchemaBase | None) -> bool:
    return schema is None or schema.is_plain_text()


def _model_name(model: Model) -> str:
    """The name to price ``model`` by: its ``model`` attribute (as the SDK's OpenAI and LiteLLM
    models have), else its class's name, so that a missing price names something findable."""
    name = getattr(model, "model", None)
    return name if isinstance(name, str) and name else type(model).__name__


def _prompt_of(input: object) -> str:
    """The user's prompt, for the run's evidence: the text, or the last user message's."""
    if isinstance(input, str):
        return input
    if isinstance(input, list):
        for item in reversed(input):
            if isinstance(item, dict) and item.get("role") == "user":
                content = item.get("content")
                if isinstance(content, str):
                    return content
    return ""


def _as_text(value: object) -> str | None:
    if value is None or isinstance(value, str):
        return value
    dump = getattr(value, "model_dump_json", None)
    if callable(dump):
        return str(dump())
    try:
        return json.dumps(value, default=str)
    except (TypeError, ValueError):
        return str(value)


def _default_loop() -> asyncio.AbstractEventLoop:
    """The thread's default event loop, made if missing: the one ``Runner.run_sync`` uses."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        policy = asyncio.get_event_loop_policy()
        try:
            loop = policy.get_event_loop()
        except RuntimeError:
            loop = None
        if loop is None or loop.is_closed():
            loop = policy.new_event_loop()
            policy.set_event_loop(loop)
    return loop
