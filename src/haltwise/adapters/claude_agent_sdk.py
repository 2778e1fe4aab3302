"""The Claude Agent SDK under haltwise: ``govern(options_or_client, guard)`` and its hooks.

::

    governed = govern(ClaudeAgentOptions(model="claude-sonnet-4-5", ...), Guard(max_turns(10)))
    result = await governed.run("Why does the parser test fail?")
    result.outcome.status, result.output, result.result          # Governed[ResultMessage]

The agent loop runs in the Claude Code CLI that the SDK starts. haltwise sees it in three
places: a local endpoint in front of the Anthropic Messages API (``_messages_proxy``), which the
CLI is given as ``ANTHROPIC_BASE_URL`` for the run; the CLI's hooks (``ClaudeAgentOptions.hooks``,
answered in this process); and the SDK's message stream. Where each event comes from:

- the endpoint: ``ModelRequest`` for every ``POST /v1/messages`` the CLI sends (the main loop's,
  every sub-agent's, retries, the turn that gives a background sub-agent's news, requests the
  CLI makes on its own), with the request's own ``model`` and ``max_tokens``, before it is
  forwarded; refused, it never leaves: the CLI gets a 400 (which ends its turn; it retries a
  429 or a 5xx) and is interrupted. ``ModelResponse`` with the API's usage, text and number of
  tool calls, read from the answer as it streams through, reported the moment the answer is
  whole, before the CLI has its last bytes;
- ``UserPromptSubmit``: ``TurnStarting`` (and ``Injected`` for a turn the CLI starts on its own
  to give a background sub-agent's news); ``PostToolBatch`` (once every call of a response has
  resolved): ``TurnEnded`` and ``TurnStarting`` for the main loop. Notes from soft limits go into
  the next request as the hook's ``additionalContext``. A news turn that no hook precedes (the
  CLI starts one so after an interrupt) is counted when its first message arrives;
- ``PreToolUse``: ``ToolCall``. For the main loop the hook waits until the whole response has
  arrived (the stream's ``message_start`` to ``message_stop``, hence
  ``include_partial_messages=True``), then reports every call of it before any runs; a refused
  call is denied (``permissionDecision: "deny"`` with the refusal as its reason: the model sees
  a tool error and the run goes on);
- ``PostToolUse`` / ``PostToolUseFailure``: ``ToolResult``;
- ``SubagentStop``: a background sub-agent ended, and the CLI owes the main loop a turn with its
  news: the run waits for that turn before it ends.

A stop in a hook answers ``continue: false``: the CLI ends the run cleanly. Whatever else still
runs (a background sub-agent) gets its next request refused at the endpoint. A stop elsewhere
(at the endpoint, a usage limit passed by a response, ``cancel()``, a deadline) interrupts the
client. A stop that synthesizes (or a human's "wrap up") writes the final answer with one more
model call through the SDK (``query()`` with no tools, from the evidence gathered, straight to
the real endpoint), counted like any other; its ``ResultMessage`` is the run's result.

What does not live here: the decisions (``haltwise.engine``) and how they are carried out in a
loop (``haltwise.drivers.guard``); the scripted Anthropic server the tests run the CLI against
(``haltwise.testing.AnthropicServer``).
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import itertools
import json
import os
import urllib.parse
from collections.abc import AsyncGenerator, Awaitable, Callable, Mapping
from typing import Any, cast

from claude_agent_sdk import (
    AssistantMessage,
    ClaudeAgentOptions,
    ClaudeSDKClient,
    HookContext,
    HookInput,
    HookJSONOutput,
    HookMatcher,
    Message,
    ResultMessage,
    StreamEvent,
    SystemMessage,
    ToolUseBlock,
    query,
)

from ..drivers.guard import AsyncRun, Guard
from ..engine.decisions import Block, Decision, Stop
from ..engine.errors import ConfigurationError, HaltError, HaltSignal, InvalidValueError
from ..engine.events import (
    Event,
    Injected,
    ModelRequest,
    ModelResponse,
    ToolCall,
    ToolResult,
    TurnEnded,
    TurnStarting,
)
from ..engine.governor import Governor
from ..engine.policies import Evidence
from ._common import (
    SYNTHESIS_SECONDS,
    Governed,
    Resume,
    answered,
    checked_guard,
    saved_counts,
    synthesis_seconds,
)
from ._messages_proxy import Exchange, MessagesProxy

__all__ = ["GovernedClaude", "govern"]

#: What the model is told when a limit stops the run with a synthesized answer.
SYNTHESIS_PROMPT = (
    "[haltwise] The run has stopped: {reason}\n"
    "Do not call any tool. From what was gathered so far (below), write the best final answer "
    "you can to the user's request. Say plainly what is done, what is missing or unverified, "
    "and what to do next.\n\n"
    "The user's request:\n{prompt}\n\nWhat was gathered:\n{gathered}"
)
#: The CLI's default ``max_tokens`` for current models; haltwise sets it so it knows it.
DEFAULT_MAX_TOKENS = 32_000
#: How long the CLI waits for a haltwise hook: a human may take this long to answer an ask
#: (the guard's own ``ask(timeout=...)`` is what bounds a question).
HOOK_TIMEOUT_SECONDS = 24 * 60 * 60.0
#: How long a stopped run's CLI is given to end its turn when interrupted.
INTERRUPT_SECONDS = 2.0
#: How long a tool's hook waits for the rest of its response before reporting the call alone
#: (the CLI announces calls while the response is still streaming).
RESPONSE_WAIT_SECONDS = 30.0
#: How long the run waits, after a result, for the turn the CLI owes a background sub-agent
#: that finished (it starts it at once; the wait only matters if the CLI took the news in
#: an earlier request instead).
OWED_TURN_SECONDS = 5.0
#: Where the CLI sends its requests when ``ANTHROPIC_BASE_URL`` does not say.
ANTHROPIC_API = "https://api.anthropic.com"
ANTHROPIC_API_HOST = "api.anthropic.com"
#: Settings that make the CLI call a cloud's model service instead of the Anthropic API.
OTHER_BACKENDS = (
    "CLAUDE_CODE_USE_BEDROCK",
    "CLAUDE_CODE_USE_VERTEX",
    "CLAUDE_CODE_USE_FOUNDRY",
    "CLAUDE_CODE_USE_ANTHROPIC_AWS",
    "CLAUDE_CODE_USE_ANTHROPIC_GOOGLE_CLOUD",
    "CLAUDE_CODE_USE_MANTLE",
)

_request_ids = itertools.count(1)

Hook = Callable[[HookInput, "str | None", HookContext], Awaitable[HookJSONOutput]]


def govern(
    agent: ClaudeAgentOptions | ClaudeSDKClient, guard: Guard, *, max_tokens: int | None = None
) -> GovernedClaude:
    """``agent`` under ``guard``'s limits: ``run`` returns ``Governed[ResultMessage]``.

    ``agent`` is the ``ClaudeAgentOptions`` to run with (a client is made for each run), or a
    ``ClaudeSDKClient`` that is not connected yet (haltwise's hooks are registered when it
    connects; it stays connected between runs, one session). ``max_tokens`` is what the CLI sends
    as each request's ``max_tokens`` (``CLAUDE_CODE_MAX_OUTPUT_TOKENS``), the worst case a cost
    or token limit is checked with before a request; by default the options' own setting, else
    ``DEFAULT_MAX_TOKENS``. An argument of the wrong kind raises ``InvalidValueError`` here,
    naming it.
    """
    return GovernedClaude(agent, guard, max_tokens)


class GovernedClaude:
    """Claude Agent SDK runs governed by a guard; built by ``govern``."""

    def __init__(
        self,
        agent: ClaudeAgentOptions | ClaudeSDKClient,
        guard: Guard,
        max_tokens: int | None,
    ) -> None:
        if isinstance(agent, ClaudeSDKClient):
            self.client: ClaudeSDKClient | None = agent
            options = agent.options
        elif isinstance(agent, ClaudeAgentOptions):
            self.client = None
            options = agent
        else:
            raise InvalidValueError(
                "govern(agent)", agent, "ClaudeAgentOptions or a ClaudeSDKClient not connected yet"
            )
        self.guard = checked_guard(guard, "govern(guard)")
        #: The options as the user gave them; each run adds haltwise's hooks to a copy.
        self.options = options
        self.max_tokens = _max_tokens(options, max_tokens)
        #: Every message of the last run, stream events left out unless the options asked.
        self.messages: list[Message] = []
        self._session: _Session | None = None
        self._connected = False
        #: The port of the Messages endpoint that a client given to ``govern`` was connected to:
        #: each of its runs listens there again (the CLI keeps the base URL it started with).
        self._proxy_port = 0
        #: The last run's result and its CLI session (a synthesized answer's result is not it).
        self._last: tuple[Governed[ResultMessage] | None, str | None] = (None, None)

    def __repr__(self) -> str:
        return f"govern({type(self.client or self.options).__name__}, {self.guard!r})"

    def hooks(self) -> dict[str, list[HookMatcher]]:
        """haltwise's hooks, merged with those of the options: what a governed run uses."""
        own: dict[str, Hook] = {
            "UserPromptSubmit": self._hook(_Session.on_prompt),
            "PreToolUse": self._hook(_Session.on_pre_tool_use),
            "PostToolUse": self._hook(_Session.on_post_tool_use),
            "PostToolUseFailure": self._hook(_Session.on_tool_failure),
            "PostToolBatch": self._hook(_Session.on_tool_batch),
            "SubagentStop": self._hook(_Session.on_sub_agent_stop),
        }
        merged: dict[str, list[HookMatcher]] = {
            event: list(matchers) for event, matchers in (self.options.hooks or {}).items()
        }
        for event, hook in own.items():
            matcher = HookMatcher(hooks=[hook], timeout=HOOK_TIMEOUT_SECONDS)
            merged.setdefault(event, []).append(matcher)
        return merged

    def _hook(
        self, handler: Callable[[_Session, dict[str, Any]], Awaitable[HookJSONOutput]]
    ) -> Hook:
        async def hook(
            data: HookInput, tool_use_id: str | None, context: HookContext
        ) -> HookJSONOutput:
            session = self._session
            if session is None:
                return {}  # a hook of no governed run (the client is used directly)
            if session.finished:
                # The run is over and its CLI is closing: nothing more may be sent (a turn the
                # CLI starts on its own, for a background sub-agent that finished).
                return cast(
                    HookJSONOutput, {"continue_": False, "stopReason": "haltwise: run over"}
                )
            session.hooks_running += 1
            try:
                return await handler(session, cast("dict[str, Any]", data))
            except Exception as error:
                # The CLI would read a failed hook as "no opinion" and go on: stop it instead,
                # and raise the error from run() once the CLI has ended.
                session.failure = session.failure or error
                return cast(
                    HookJSONOutput, {"continue_": False, "stopReason": f"haltwise: {error}"}
                )
            finally:
                # The CLI may cancel a hook (an interrupt does): either way it is answered.
                session.hooks_running -= 1
                session._end_if_stopped()

        return hook

    def governed_options(self, **changes: Any) -> ClaudeAgentOptions:
        """The options a governed run uses: haltwise's hooks added, the stream events that carry
        usage turned on, ``max_tokens`` made known to the CLI."""
        env = dict(self.options.env)
        env.setdefault("CLAUDE_CODE_MAX_OUTPUT_TOKENS", str(self.max_tokens))
        env.update(changes.pop("env", {}))
        return dataclasses.replace(
            self.options,
            hooks=cast(Any, self.hooks()),
            include_partial_messages=True,
            env=env,
            **changes,
        )

    async def run(
        self,
        prompt: str,
        *,
        resume: Resume = None,
        session_id: str | None = None,
        on_message: Callable[[Message], object] | None = None,
    ) -> Governed[ResultMessage]:
        """Run ``prompt`` under the guard until the agent answers or a limit stops it.

        ``resume`` continues a run with the counts it had instead of starting new ones: True (or
        a ``Governed``) for the last run of this guard in this process, a checkpoint reference
        (``outcome.checkpoint``) or ``governor.checkpoint()`` data for one from elsewhere. The
        CLI session to continue is ``session_id`` (the ``ResultMessage.session_id``), or the
        one of a ``Governed`` given as ``resume``. ``on_message`` sees each message as it
        arrives.
        """
        if self._session is not None:
            raise ConfigurationError("this governed agent is already running; runs do not overlap")
        if on_message is not None and not callable(on_message):
            raise InvalidValueError("run(on_message)", on_message, "a function f(message), or None")
        governor = self.guard.governor
        saved = saved_counts(governor, resume)
        if session_id is None and self.client is None and resume is not None:
            session_id = self._session_of(resume)
        upstream = _upstream(self.options)
        session = _Session(self, prompt, on_message)
        guard = Guard(
            governor=governor,
            prompter=self.guard.prompter,
            synthesizer=self.guard.synthesizer or session.synthesize,
            signal=self.guard.signal,
        )
        async with guard.arun(prompt) as run:
            if saved is not None:
                governor.restore(saved)
            session.run = run
            self._session = session
            proxy = MessagesProxy(upstream, session.admit, session.answered)
            client: ClaudeSDKClient | None = None
            owned = False
            try:
                await self._listen(proxy)
                client, owned = self._client_for(proxy, upstream, session_id, run.time_left())
                if owned or not self._connected:
                    await client.connect()
                    self._connected = True
                await client.query(prompt)
                await session.consume(client)
                await session.admitted()
                if session.failure is not None:
                    raise session.failure
            finally:
                session.finished = True
                try:
                    if client is not None:
                        await session.close(client, owned)
                finally:
                    # Last, so that nothing the CLI still sends can get past it.
                    await proxy.close()
                    self._session = None
            await session.settle()
        self.messages = session.messages
        assert run.outcome is not None
        governed = Governed(run.outcome, session.synthesis_result or session.result)
        self._last = (governed, session.cli_session)
        return governed

    def _session_of(self, resume: Resume) -> str | None:
        """The CLI session a resumed run continues: the last run's, for True or its result."""
        last, cli_session = self._last
        if resume is True or (last is not None and resume is last):
            return cli_session
        if isinstance(resume, Governed) and isinstance(resume.result, ResultMessage):
            return resume.result.session_id
        return None

    async def _listen(self, proxy: MessagesProxy) -> None:
        """Start the run's Messages endpoint: for a client of the user's that is connected
        already, on the port its CLI was given."""
        try:
            await proxy.start(self._proxy_port)
        except OSError as error:
            raise ConfigurationError(
                f"haltwise cannot listen on 127.0.0.1:{self._proxy_port} again, where this "
                f"client's CLI sends its requests ({error}); govern a new client"
            ) from error
        if self.client is not None:
            self._proxy_port = proxy.port

    def _client_for(
        self,
        proxy: MessagesProxy,
        upstream: str,
        session_id: str | None,
        time_left: float | None,
    ) -> tuple[ClaudeSDKClient, bool]:
        """The client of this run, and whether the run owns it (made it, so closes it)."""
        env = {"ANTHROPIC_BASE_URL": proxy.base_url}
        if urllib.parse.urlsplit(upstream).hostname == ANTHROPIC_API_HOST:
            # The CLI takes a base URL of its own as a third party's (some features differ):
            # told that it is the first party's, it behaves as it would without haltwise.
            env["_CLAUDE_CODE_ASSUME_FIRST_PARTY_BASE_URL"] = "1"
        if time_left is not None:
            # The CLI's own per-request timeout: a hung request cannot outlive the run.
            env["API_TIMEOUT_MS"] = str(max(1, int(time_left * 1000)))
        changes: dict[str, Any] = {"env": env}
        if self.client is None:
            if session_id is not None:
                changes["resume"] = session_id
            return ClaudeSDKClient(self.governed_options(**changes)), True
        if not self._connected:
            if self.client._query is not None:  # the SDK has no public "connected" flag
                raise ConfigurationError(
                    "govern() a ClaudeSDKClient before connecting it: haltwise's hooks are "
                    "registered when the client connects"
                )
            if session_id is not None:
                changes["resume"] = session_id
            self.client.options = self.governed_options(**changes)
        elif session_id is not None:
            raise ConfigurationError(
                "a connected client continues its own session; session_id= is for options"
            )
        return self.client, False


#: A tool call: its id, the tool's name, its input.
Call = tuple[str, str, dict[str, Any]]


class _Response:
    """One model response as the SDK shows it (the main loop's as it streams in, a sub-agent's
    as a whole): where its calls wait to be reported. Its usage comes from the Messages
    endpoint."""

    def __init__(self, message_id: str) -> None:
        self.message_id = message_id
        self.text: list[str] = []
        #: The calls of its ``tool_use`` blocks, in order.
        self.calls: list[Call] = []
        #: The JSON pieces of each ``tool_use`` block's input, by block index.
        self.inputs: dict[int, list[str]] = {}
        #: Set once the response is reported; then once each of its calls has its verdict.
        self.done = asyncio.Event()
        self.decided = asyncio.Event()


class _Session:
    """One governed run: the guard's run and what the hooks and the message stream share."""

    def __init__(
        self, owner: GovernedClaude, prompt: str, on_message: Callable[[Message], object] | None
    ) -> None:
        self.owner = owner
        self.prompt = prompt
        self.on_message = on_message
        # Set as the guard's run starts (the guard needs this session's synthesizer first).
        self.run: AsyncRun = cast(AsyncRun, None)
        self.client: ClaudeSDKClient | None = None
        #: Every message of the run (stream events only when the options asked for them).
        self.messages: list[Message] = []
        #: The CLI's ``ResultMessage``, and the synthesis pass's when it wrote the answer.
        self.result: ResultMessage | None = None
        self.synthesis_result: ResultMessage | None = None
        #: The model of the main loop's requests: the options', else the CLI's.
        self.model = owner.options.model or ""
        #: The CLI session this run is in.
        self.cli_session: str | None = None
        #: The main loop's last text (what ``TurnEnded`` reports).
        self.last_text: str | None = None
        #: The main-loop response streaming in, and every response by message id.
        self.streaming: _Response | None = None
        self.responses: dict[str, _Response] = {}
        #: Which response each call belongs to, and the hooks waiting for it to be reported.
        self.call_owner: dict[str, _Response] = {}
        self.waiting: dict[str, asyncio.Future[_Response]] = {}
        #: Each reported call's verdict: None (admitted) or the refusal; the calls that met the
        #: stop; the admitted calls still running (a synthesis pass waits for them).
        self.verdicts: dict[str, str | None] = {}
        self.stopped_calls: set[str] = set()
        self.running: set[str] = set()
        self.calls_done = asyncio.Event()
        self.calls_done.set()
        #: The tasks that report each response's calls (so hooks never run a synthesis pass).
        self.admissions: list[asyncio.Task[None]] = []
        #: Results of calls that finished after the run stopped: evidence for the pass.
        self.late_results: list[tuple[str, Any, str]] = []
        #: Sub-agent tasks running; those in the background; and those that finished in the
        #: background, whose news the CLI owes the main loop in a turn of its own.
        self.tasks_in_flight: set[str] = set()
        self.background: set[str] = set()
        self.owed: set[str] = set()
        #: An error raised in a hook, raised again from ``run()`` once the CLI has ended.
        self.failure: Exception | None = None
        #: The CLI's run has ended (its result came); the governed run is over (its CLI is
        #: being closed); the interrupt sent to end the CLI's turn, if one was.
        self.ended = False
        self.finished = False
        self.interrupting: asyncio.Future[None] | None = None
        #: A main-loop turn is under way (the first, or one the CLI started after a result);
        #: the hooks being answered; whether the reader waits for the next message; the wait
        #: for a turn the CLI owes the main loop; set once the CLI's run is over.
        self.turn_active = True
        self.hooks_running = 0
        self.reading = False
        self.owed_timer: asyncio.TimerHandle | None = None
        self.over = asyncio.Event()

    @property
    def governor(self) -> Governor:
        return self.run.guard.governor

    @property
    def stopped(self) -> bool:
        return self.run.outcome is not None or self.governor.stopped is not None

    # Reporting

    async def send(self, event: Event) -> Decision | None:
        """Report ``event``; None when it stopped the run (the hook then ends the CLI's run)."""
        try:
            return await self.run.send(event)
        except (HaltError, HaltSignal):
            return None

    async def request(self, model: str, max_tokens: int | None) -> str | None:
        """Report a request about to be sent; its id, or None when the run stopped."""
        request_id = f"claude-{next(_request_ids)}"
        event = ModelRequest(
            model or self.model,
            max_tokens=max_tokens or self.owner.max_tokens,
            request_id=request_id,
            adjustable=False,  # the request is sent as the CLI wrote it
        )
        decision = await self.send(event)
        return None if decision is None or isinstance(decision, Stop) else request_id

    # The Messages endpoint: every request the CLI sends, asked about before it goes

    async def admit(self, exchange: Exchange) -> tuple[str, None] | tuple[None, str]:
        """A request of the main loop or of a sub-agent is about to go: its request id, or
        why not (the CLI gets that as a final API error, and is interrupted)."""
        request_id: str | None = None
        if not (self.stopped or self.finished or self.failure):
            try:
                request_id = await self.request(exchange.model, exchange.max_tokens)
            except Exception as error:
                self.failure = self.failure or error  # raised from run() once the CLI ended
        if request_id is not None:
            return request_id, None
        self._interrupt()
        reason = str(self.failure) if self.failure else self._stop_message()
        return None, f"haltwise: {reason}"

    async def answered(self, exchange: Exchange) -> None:
        """An admitted request's answer has arrived whole (before the CLI has all of it), or
        never will: what it spent. A sub-agent's text is not the run's partial output."""
        if self.finished:
            return  # the run is closing: what is in flight counts at what it reserved
        text = None if exchange.agent_id else ("".join(exchange.text) or None)
        await self.send(
            _model_response(
                exchange.model or self.model,
                exchange.usage,
                request_id=exchange.request_id,
                text=text,
                tool_calls=exchange.tool_calls,
                answered=exchange.complete,
            )
        )
        if self.stopped:
            self._interrupt()  # a usage limit passed: nothing more is sent

    # Hooks: each answers the CLI; a stop answers ``continue: false``

    async def _halt(self, **specific: Any) -> HookJSONOutput:
        """The answer that ends the loop a hook belongs to. Whatever else still runs (a
        background sub-agent) sends nothing more: the Messages endpoint refuses it."""
        output: dict[str, Any] = {"continue_": False, "stopReason": self._stop_message()}
        if specific:
            output["hookSpecificOutput"] = specific
        return cast(HookJSONOutput, output)

    def _stop_message(self) -> str:
        outcome = self.run.outcome or self.governor.outcome
        return outcome.message if outcome is not None else "haltwise stopped the run."

    def _context(self, event_name: str) -> HookJSONOutput:
        """Notes from soft limits, for the model's next request."""
        notes = self.run.notes()
        if not notes:
            return {}
        specific = {"hookEventName": event_name, "additionalContext": "\n".join(notes)}
        return cast(HookJSONOutput, {"hookSpecificOutput": specific})

    async def on_prompt(self, data: dict[str, Any]) -> HookJSONOutput:
        """``UserPromptSubmit``: the main loop's first request is about to be sent, or the
        first of a turn the CLI starts on its own to tell it a background sub-agent finished."""
        self._turn_begins()
        prompt = str(data.get("prompt", ""))
        if "<task-notification>" in prompt:
            self.owed.clear()
            if not self.stopped:
                await self.send(Injected(prompt))  # a message within the run: no count resets
        if self.stopped or await self.send(TurnStarting()) is None:
            return await self._halt()
        return self._context("UserPromptSubmit")

    async def on_tool_batch(self, data: dict[str, Any]) -> HookJSONOutput:
        """``PostToolBatch``: every call of a response has resolved; the next request of its
        loop is about to be sent."""
        for call in data.get("tool_calls") or ():
            call_id = str(call.get("tool_use_id", ""))
            self._finished(call_id)
        if self.stopped:
            return await self._halt()
        if data.get("agent_id"):
            return self._context("PostToolBatch")  # a sub-agent's: no turn of its own
        if await self.send(TurnEnded(self.last_text)) is None:
            return await self._halt()
        if await self.send(TurnStarting()) is None:
            return await self._halt()
        return self._context("PostToolBatch")

    async def on_sub_agent_stop(self, data: dict[str, Any]) -> HookJSONOutput:
        """``SubagentStop``: a sub-agent ends on its own. One in the background owes the main
        loop a turn with its news, which the run waits for: the stream may tell of it only
        after the main loop's result."""
        if self.stopped:
            return await self._halt()
        agent = str(data.get("agent_id", ""))
        if agent not in self.tasks_in_flight or agent in self.background:
            self.owed.add(agent)  # not known yet to be in the foreground
        return {}

    async def on_pre_tool_use(self, data: dict[str, Any]) -> HookJSONOutput:
        """``PreToolUse``: the call's verdict, given once all its response's calls are counted."""
        call_id = str(data.get("tool_use_id", ""))
        call = (call_id, str(data.get("tool_name", "")), data.get("tool_input") or {})
        if not self._judged(call_id):
            response = await self._response_of(call_id)
            if data.get("agent_id") is None and response is not None:
                await response.decided.wait()  # counted by its response's admission
            if not self._judged(call_id):
                # A sub-agent's call (the SDK streams no end of a sub-agent's response, so its
                # calls come one by one), or one in no response seen whole.
                await self._admit([call])
        if call_id in self.stopped_calls or call_id not in self.verdicts:
            return await self._halt(
                hookEventName="PreToolUse",
                permissionDecision="deny",
                permissionDecisionReason=f"Not run: {self._stop_message()}",
            )
        refusal = self.verdicts[call_id]
        if refusal is None:
            return {}  # admitted: the CLI's own permissions decide the rest
        specific = {
            "hookEventName": "PreToolUse",
            "permissionDecision": "deny",
            "permissionDecisionReason": refusal,
        }
        return cast(HookJSONOutput, {"hookSpecificOutput": specific})

    def _judged(self, call_id: str) -> bool:
        return call_id in self.verdicts or call_id in self.stopped_calls or self.stopped

    async def on_post_tool_use(self, data: dict[str, Any]) -> HookJSONOutput:
        call_id = str(data.get("tool_use_id", ""))
        name = str(data.get("tool_name", ""))
        content = _as_text(data.get("tool_response"))
        if self.stopped:
            self.late_results.append((name, data.get("tool_input"), content))
        else:
            await self.send(ToolResult(name, content, call_id))
        self._finished(call_id)
        return {}

    async def on_tool_failure(self, data: dict[str, Any]) -> HookJSONOutput:
        call_id = str(data.get("tool_use_id", ""))
        admitted = call_id in self.verdicts and self.verdicts[call_id] is None
        if admitted and not self.stopped:
            error = str(data.get("error", ""))
            await self.send(
                ToolResult(str(data.get("tool_name", "")), error, call_id, is_error=True)
            )
        self._finished(call_id)
        return {}

    # Tool calls

    async def _response_of(self, call_id: str) -> _Response | None:
        """The response ``call_id`` belongs to, once it is reported (the CLI announces a call
        while its response is still streaming); None if it does not come in time."""
        response = self.call_owner.get(call_id)
        if response is not None and response.done.is_set():
            return response
        future = self.waiting.get(call_id)
        if future is None:
            future = self.waiting[call_id] = asyncio.get_running_loop().create_future()
        try:
            return await asyncio.wait_for(asyncio.shield(future), RESPONSE_WAIT_SECONDS)
        except asyncio.TimeoutError:
            return None

    async def _admit_response(self, response: _Response) -> None:
        """Report every call of a main-loop response, before any of them may run."""
        try:
            await self._admit(response.calls)
        except Exception as error:
            self.failure = self.failure or error
        finally:
            response.decided.set()

    async def _admit(self, calls: list[Call]) -> None:
        for call_id, name, arguments in calls:
            if call_id in self.verdicts or call_id in self.stopped_calls:
                continue
            if self.stopped:
                self.stopped_calls.add(call_id)
                continue
            decision = await self.send(ToolCall(name, arguments, call_id))
            if decision is None or isinstance(decision, Stop):
                self.stopped_calls.add(call_id)
                continue
            refusal = decision.reason if isinstance(decision, Block) else None
            self.verdicts[call_id] = refusal
            if refusal is None:
                self.running.add(call_id)
                self.calls_done.clear()

    def _finished(self, call_id: str) -> None:
        self.running.discard(call_id)
        if not self.running:
            self.calls_done.set()

    # The message stream

    async def consume(self, client: ClaudeSDKClient) -> None:
        """Read the CLI's messages until its run is over (``_finished_turn``,
        ``_end_if_stopped``), or its stream ends."""
        self.client = client
        reader = asyncio.ensure_future(self._read(client))
        over = asyncio.ensure_future(self.over.wait())
        try:
            await asyncio.wait((reader, over), return_when=asyncio.FIRST_COMPLETED)
            if self.reading:
                reader.cancel()  # it waits for a message that need not come; else it is ending
            await asyncio.wait((reader,))
            if not reader.cancelled() and reader.exception() is not None:
                raise cast(BaseException, reader.exception())
        finally:
            over.cancel()
            if self.owed_timer is not None:
                self.owed_timer.cancel()
            if not reader.done():  # the run itself was cancelled (cancel(), a deadline)
                reader.cancel()
                await asyncio.wait((reader,))

    async def _read(self, client: ClaudeSDKClient) -> None:
        messages = cast("AsyncGenerator[Message, None]", client.receive_messages())
        async with contextlib.aclosing(messages):
            while not self.over.is_set():
                self.reading = True
                try:
                    message = await messages.__anext__()
                except StopAsyncIteration:
                    self._end()
                    return
                finally:
                    self.reading = False
                await self.handle(message)
                if isinstance(message, ResultMessage) and not self.stopped:
                    self._finished_turn()
                self._end_if_stopped()

    def _finished_turn(self) -> None:
        """A result: the CLI's run is over unless a background sub-agent runs, or finished and
        the CLI owes the main loop a turn with its news (then its result ends the run)."""
        if not (self.tasks_in_flight or self.owed):
            self._end()
        elif not self.tasks_in_flight:
            self.owed_timer = asyncio.get_running_loop().call_later(
                OWED_TURN_SECONDS, self._owed_turn_missed
            )

    def _end_if_stopped(self) -> None:
        """A stopped run is over once the CLI's result came, no main-loop turn has begun since
        and no hook is being answered. It does not wait for the sub-agents its stop killed: the
        CLI reports no result for them, and starts no turn with their news."""
        if self.over.is_set() or self.result is None or self.turn_active or self.hooks_running:
            return
        if self.stopped:
            self._end()

    def _owed_turn_missed(self) -> None:
        if not self.turn_active:
            self._end()

    def _end(self) -> None:
        self.ended = self.result is not None
        self.over.set()

    async def handle(self, message: Message) -> None:
        if isinstance(message, StreamEvent):
            if message.parent_tool_use_id is None:
                await self._main_loop_message()
                self._stream_event(message.event)
            if not self.owner.options.include_partial_messages:
                return
        elif isinstance(message, AssistantMessage):
            if message.parent_tool_use_id is None:
                await self._main_loop_message()
            else:
                self._sub_agent_response(message)
        elif isinstance(message, SystemMessage):
            self._system(message)
        elif isinstance(message, ResultMessage):
            self.result = message
            self.turn_active = False
        self.messages.append(message)
        if self.on_message is not None:
            self.on_message(message)

    async def _main_loop_message(self) -> None:
        """After a result, a main-loop message with no ``UserPromptSubmit`` before it begins a
        turn the CLI started on its own (after an interrupt) with a background sub-agent's
        news: counted here, once its request has gone (and been counted, at the endpoint)."""
        if self.turn_active:
            return
        self._turn_begins()
        if not self.stopped:
            await self.send(Injected("A background sub-agent finished."))
            if await self.send(TurnStarting()) is None:
                self._interrupt()

    def _turn_begins(self) -> None:
        if not self.turn_active:
            self.owed.clear()  # a turn the CLI starts on its own after a result: the news
        self.turn_active = True
        if self.owed_timer is not None:
            self.owed_timer.cancel()
            self.owed_timer = None

    def _stream_event(self, event: dict[str, Any]) -> None:
        """A main-loop response, event by event: its text, and its calls in content blocks."""
        kind = event.get("type")
        if kind == "message_start":
            message = event.get("message") or {}
            started = _Response(str(message.get("id", "")))
            self.streaming = self.responses[started.message_id] = started
            self.model = self.model or str(message.get("model") or "")
            return
        response = self.streaming
        if response is None:
            return
        if kind == "content_block_start":
            block = event.get("content_block") or {}
            if block.get("type") == "tool_use":
                call_id = str(block.get("id", ""))
                response.calls.append((call_id, str(block.get("name", "")), {}))
                response.inputs[int(event.get("index", 0))] = []
                self.call_owner[call_id] = response
        elif kind == "content_block_delta":
            delta = event.get("delta") or {}
            index = int(event.get("index", 0))
            if delta.get("type") == "text_delta":
                response.text.append(str(delta.get("text", "")))
            elif delta.get("type") == "input_json_delta" and index in response.inputs:
                response.inputs[index].append(str(delta.get("partial_json", "")))
        elif kind == "message_stop":
            self.streaming = None
            self._complete(response)

    def _complete(self, response: _Response) -> None:
        """A main-loop response has all arrived (and was counted at the Messages endpoint
        before the CLI had its end): its calls are reported, all before any of them runs."""
        arguments = [_parse_json("".join(parts)) for _, parts in sorted(response.inputs.items())]
        response.calls = [
            (call_id, name, parsed)
            for (call_id, name, _), parsed in zip(response.calls, arguments, strict=False)
        ]
        self.last_text = "".join(response.text) or self.last_text
        self._reported(response)
        if response.calls:
            # Its own task: a hook waits for its call's verdict, never for a synthesis pass
            # (which waits for the calls admitted before the stop to finish).
            self.admissions.append(asyncio.ensure_future(self._admit_response(response)))
        else:
            response.decided.set()

    def _reported(self, response: _Response) -> None:
        """A response has arrived: the hooks of its calls may go on."""
        response.done.set()
        for call_id, _, _ in response.calls:
            self.call_owner[call_id] = response
            future = self.waiting.pop(call_id, None)
            if future is not None and not future.done():
                future.set_result(response)

    def _sub_agent_response(self, message: AssistantMessage) -> None:
        """A sub-agent's response: the SDK gives it block by block, each with the same id."""
        message_id = message.message_id or ""
        response = self.responses.get(message_id)
        if response is None:
            response = self.responses[message_id] = _Response(message_id)
        response.calls = [
            (block.id, block.name, block.input)
            for block in message.content
            if isinstance(block, ToolUseBlock)
        ]
        self._reported(response)

    def _system(self, message: SystemMessage) -> None:
        data = message.data
        if message.subtype == "init":
            self.cli_session = str(data.get("session_id") or "") or None
            self.model = self.model or str(data.get("model") or "")
        elif message.subtype == "task_started":
            task = str(data.get("task_id", ""))
            self.tasks_in_flight.add(task)
            if data.get("is_backgrounded"):
                self.background.add(task)
        elif message.subtype in ("task_notification", "task_updated"):
            task = str(data.get("task_id", ""))
            status = data.get("status") or (data.get("patch") or {}).get("status")
            if status in ("completed", "failed", "stopped", "killed"):
                self.tasks_in_flight.discard(task)
                if message.subtype == "task_notification" and task in self.background:
                    self.owed.add(task)

    # Ending

    def _interrupt(self) -> None:
        """The run stopped: end the CLI's turn and kill its sub-agents (once)."""
        if self.interrupting is None and self.client is not None and not self.ended:
            self.interrupting = asyncio.ensure_future(_bounded(self.client.interrupt()))

    async def admitted(self) -> None:
        """Wait for the calls' admissions (a synthesis pass among them) to finish."""
        for admission in self.admissions:
            await admission

    async def close(self, client: ClaudeSDKClient, owned: bool) -> None:
        """End the CLI's turn if it has not ended (or a stop interrupted it), then, if the run
        owns the client, disconnect it: whatever happened before, nothing more is sent."""
        for admission in self.admissions:
            admission.cancel()
        try:
            if self.interrupting is not None:
                await asyncio.wait((self.interrupting,))
            elif not self.ended or self.tasks_in_flight:
                # A sub-agent still running in the background is ended with the run.
                await _bounded(client.interrupt())
        finally:
            if owned:
                await client.disconnect()

    async def settle(self) -> None:
        """The CLI's run ended: the outcome is its answer, or why it could not give one."""
        if self.run.outcome is not None:
            return
        result = self.result
        if result is None:
            await self.run.interrupt("the Claude Code CLI ended without a result")
        elif result.is_error:
            errors = "; ".join(result.errors or ()) or result.result or result.subtype
            await self.run.interrupt(
                f"the Claude Code run ended with an error ({result.subtype}): {errors}",
                partial_output=self.last_text,
            )
        else:
            await self.run.finish(result.result)

    # The synthesis pass

    async def synthesize(self, evidence: Evidence) -> str | None:
        """The final answer from what was gathered, with one tools-free model call through the
        SDK (``query()`` with no tools), once the calls admitted before the stop have run."""
        for response in self.responses.values():
            response.decided.set()  # the calls met by the stop are refused now
        with contextlib.suppress(asyncio.TimeoutError):
            await asyncio.wait_for(self.calls_done.wait(), SYNTHESIS_SECONDS)
        request_id = await self.request(self.model, self.owner.max_tokens)
        if request_id is None:
            return None  # the budget left cannot pay for the pass
        options = dataclasses.replace(
            self.owner.governed_options(),
            hooks=None,
            tools=[],
            allowed_tools=[],
            mcp_servers={},
            agents=None,
            can_use_tool=None,
            max_turns=1,
            include_partial_messages=False,
            resume=None,
            continue_conversation=False,
            session_id=None,
            fork_session=False,
        )
        prompt = self._synthesis_prompt(evidence)
        results: list[ResultMessage] = []

        async def answer() -> None:
            async for message in query(prompt=prompt, options=options):
                if isinstance(message, ResultMessage):
                    results.append(message)

        seconds = synthesis_seconds(self.run.time_left())
        # No answer in time, or the CLI ended in error: the SDK raises that error after the
        # CLI's error result (the model called a tool it does not have, and the one turn
        # allowed was used), whose usage is what the pass spent. Either way the stop stands.
        with contextlib.suppress(Exception):
            await asyncio.wait_for(answer(), seconds)
        if not results:
            # Sent, with no result to say what it spent: it counts at what it reserved.
            await self.send(ModelResponse(self.model, answered=False, request_id=request_id))
            return None
        result = results[-1]
        model = next(iter(result.model_usage or {}), self.model)
        await self.send(_model_response(model, result.usage or {}, request_id=request_id))
        if result.is_error or not answered(result.result):
            return None
        self.synthesis_result = result
        return result.result

    def _synthesis_prompt(self, evidence: Evidence) -> str:
        gathered = [
            f"- {name}({_as_text(arguments)}) -> {_clip(result)}"
            for name, arguments, result in (*evidence.tool_results, *self.late_results)
        ]
        if evidence.last_text:
            gathered.append(f"Your last words: {_clip(evidence.last_text)}")
        return SYNTHESIS_PROMPT.format(
            reason=evidence.stop_message,
            prompt=evidence.prompt,
            gathered="\n".join(gathered) or "(nothing)",
        )


# Helpers


async def _bounded(awaitable: Awaitable[None]) -> None:
    """Ask the CLI to end its turn; a CLI that cannot answer is left to ``disconnect()``."""
    with contextlib.suppress(Exception):
        await asyncio.wait_for(awaitable, INTERRUPT_SECONDS)


def _model_response(
    model: str,
    usage: Mapping[str, Any],
    *,
    request_id: str,
    text: str | None = None,
    tool_calls: int = 0,
    answered: bool = True,
) -> ModelResponse:
    """A response with the Messages API's usage: ``input_tokens`` there leave out the cache's."""
    cache_read = int(usage.get("cache_read_input_tokens") or 0)
    cache_write = int(usage.get("cache_creation_input_tokens") or 0)
    return ModelResponse(
        model,
        input_tokens=int(usage.get("input_tokens") or 0) + cache_read + cache_write,
        output_tokens=int(usage.get("output_tokens") or 0),
        cache_read_tokens=cache_read,
        cache_write_tokens=cache_write,
        text=text,
        tool_calls=tool_calls,
        request_id=request_id,
        answered=answered,
    )


def _upstream(options: ClaudeAgentOptions) -> str:
    """Where the CLI would send its requests without haltwise."""
    env = {**os.environ, **options.env}
    routed = [name for name in OTHER_BACKENDS if env.get(name, "").lower() in ("1", "true")]
    if routed:
        raise ConfigurationError(
            f"haltwise counts the Claude Code CLI's model requests at an endpoint of its own in "
            f"front of the Anthropic API; with {routed[0]} set the CLI sends them elsewhere, "
            f"unseen: unset it to govern this agent"
        )
    return env.get("ANTHROPIC_BASE_URL") or ANTHROPIC_API


def _max_tokens(options: ClaudeAgentOptions, given: int | None) -> int:
    if given is not None:
        if isinstance(given, bool) or not isinstance(given, int) or given < 1:
            raise InvalidValueError(
                "govern(max_tokens)", given, "a positive number of tokens, e.g. 8192, or None"
            )
        return given
    configured = options.env.get("CLAUDE_CODE_MAX_OUTPUT_TOKENS") or os.environ.get(
        "CLAUDE_CODE_MAX_OUTPUT_TOKENS"
    )
    try:
        return int(configured) if configured else DEFAULT_MAX_TOKENS
    except ValueError as error:
        raise ConfigurationError(
            f"CLAUDE_CODE_MAX_OUTPUT_TOKENS must be a number of tokens, got {configured!r}"
        ) from error


def _parse_json(text: str) -> dict[str, Any]:
    try:
        value = json.loads(text) if text else {}
    except ValueError:
        return {"_raw": text}
    return value if isinstance(value, dict) else {"_raw": text}


def _as_text(value: Any) -> str:
    """A tool's response as text: an MCP tool's text parts joined, anything else as JSON."""
    if isinstance(value, str):
        return value
    if isinstance(value, list) and all(isinstance(part, dict) for part in value):
        texts = [str(part.get("text", "")) for part in value if part.get("type") == "text"]
        if len(texts) == len(value):
            return "\n".join(texts)
    try:
        return json.dumps(value, ensure_ascii=False, sort_keys=True, default=str)
    except (TypeError, ValueError):
        return repr(value)


def _clip(text: str, limit: int = 4000) -> str:
    if len(text) <= limit:
        return text
    return f"{text[:limit]}... [{len(text) - limit} more characters]"
