"""How far a stop reaches, end to end: the real ``openai`` client against the scripted server.

A call cut off at the deadline (sync, with ``timeout=run.time_left()``; async, with no timeout at
all), a reply that comes back late, ``cancel()`` from another thread, phases, ``max_tokens``
lowered to what a token limit leaves, and the synthesis pass's own model call.

The deadline tests wait for real: the server really hangs, and only the real clock ends that.
The others use a ``FakeClock`` or need no clock at all.
"""

from __future__ import annotations

import asyncio
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from decimal import Decimal

import pytest

pytest.importorskip("openai")

import openai
from openai import NOT_GIVEN, NotGiven
from openai.types.chat import (
    ChatCompletion,
    ChatCompletionMessageFunctionToolCall,
    ChatCompletionMessageParam,
)

from haltwise import (
    AsyncRun,
    Evidence,
    Guard,
    HaltError,
    Outcome,
    Prices,
    Run,
    Status,
    max_cost,
    max_tokens,
    max_turns,
    timeout,
)
from haltwise.testing import FakeClock, Reply, ScriptedServer, reply, tool_call

MODEL = "scripted-model"
USER: list[ChatCompletionMessageParam] = [{"role": "user", "content": "What is the answer?"}]
#: What a hung reply waits before answering: far past every deadline below.
HUNG = 30.0
#: How soon after its deadline (or its cancel) a run must have ended.
PROMPTLY = 1.0


@contextmanager
def sync_client(server: ScriptedServer) -> Iterator[openai.OpenAI]:
    with openai.OpenAI(base_url=server.base_url, api_key="test", max_retries=0) as client:
        yield client


def async_client(server: ScriptedServer) -> openai.AsyncOpenAI:
    """A client that never times out by itself: only the run can interrupt its calls."""
    return openai.AsyncOpenAI(base_url=server.base_url, api_key="test", max_retries=0, timeout=None)


def call_model(
    client: openai.OpenAI,
    run: Run,
    *,
    max_tokens: int = 200,
    input_tokens: int | None = None,
    bounded: bool = True,
) -> ChatCompletion:
    """One model call as a hand-written loop makes it; ``bounded`` gives it the run's deadline."""
    sent = run.model_request(MODEL, max_tokens=max_tokens, input_tokens=input_tokens)
    limit: float | NotGiven | None = run.time_left() if bounded else NOT_GIVEN
    completion = client.chat.completions.create(
        model=MODEL, messages=USER, max_tokens=sent, timeout=limit
    )
    run.model_response(completion)
    return completion


async def acall_model(
    client: openai.AsyncOpenAI, run: AsyncRun, *, input_tokens: int | None = None
) -> ChatCompletion:
    """One async model call with no timeout: the run's own interruption is all that bounds it."""
    sent = await run.model_request(MODEL, max_tokens=200, input_tokens=input_tokens)
    completion = await client.chat.completions.create(model=MODEL, messages=USER, max_tokens=sent)
    await run.model_response(completion)
    return completion


def open_phases(guard: Guard) -> list[str]:
    return [phase.name for phase in guard.governor.phases]


def no_cancellation_left() -> bool:
    """The run took its own cancellation back: the task is not left cancelling."""
    task = asyncio.current_task()
    assert task is not None
    if sys.version_info >= (3, 11):
        return task.cancelling() == 0
    return True


# Deadlines: a call cut off, a reply that comes late, a finish that comes late.


def timed_out_promptly(outcome: Outcome | None, deadline: float | None, ended: float) -> Outcome:
    """``outcome`` ended the run ``timed_out`` (time limit), between its deadline and
    ``PROMPTLY`` after it."""
    assert deadline is not None
    assert deadline <= ended < deadline + PROMPTLY
    assert outcome is not None
    assert outcome.status is Status.TIMED_OUT
    assert outcome.reason == "time_limit"
    return outcome


def test_a_hung_reply_ends_the_run_timed_out_within_a_second_of_its_deadline() -> None:
    first = reply("A first draft.", usage=(40, 8))
    guard = Guard(timeout(seconds=1))
    with ScriptedServer([first, reply("Too late.", delay=HUNG)]) as server:
        with sync_client(server) as client, guard.run("task") as run:
            deadline = guard.governor.deadline()
            run.turn()
            call_model(client, run)
            run.turn()
            call_model(client, run, input_tokens=60)  # hangs until time_left() runs out
            pytest.fail("the hung call must end the run")
        ended = time.monotonic()
        requests = server.requests
    outcome = run.outcome
    outcome = timed_out_promptly(outcome, deadline, ended)
    assert outcome.checkpoint is not None
    assert "APITimeoutError" in outcome.message
    assert outcome.partial_output == "A first draft."
    assert len(requests) == 2
    # The hung request counts as a model call, at what it reserved: its prompt and max_tokens.
    usage = outcome.usage
    assert usage.model_calls == 2
    assert usage.input_tokens == 40 + 60
    assert usage.output_tokens == 8 + 200


def test_a_reply_after_the_deadline_is_counted_and_the_run_is_timed_out() -> None:
    late = reply("Done, but late.", usage=(120, 30), delay=2)
    assert late.usage is not None
    guard = Guard(timeout(seconds=1))
    with ScriptedServer([late]) as server, sync_client(server) as client, guard.run("task") as run:
        run.turn()
        call_model(client, run, bounded=False)  # no client timeout: it waits the 2 s
        run.finish("Done, but late.")
        pytest.fail("a response after the deadline must stop the run")
    outcome = run.outcome
    assert outcome is not None
    assert outcome.status is Status.TIMED_OUT
    assert outcome.reason == "time_limit"
    assert "passed while a model call was running" in outcome.message
    assert outcome.usage.model_calls == 1
    assert outcome.usage.input_tokens == late.usage.prompt_tokens
    assert outcome.usage.output_tokens == late.usage.completion_tokens
    assert outcome.partial_output == "Done, but late."


def test_finishing_after_the_deadline_is_timed_out_not_completed() -> None:
    clock = FakeClock()
    guard = Guard(timeout(seconds=1), clock=clock)
    server = ScriptedServer([reply("All done.", usage=(10, 3))])
    with server, sync_client(server) as client, guard.run("task") as run:
        run.turn()
        call_model(client, run)
        clock.advance(1.5)
        run.finish("All done.")
    assert run.outcome is not None
    assert run.outcome.status is Status.TIMED_OUT
    assert run.outcome.reason == "time_limit"
    assert run.outcome.usage.input_tokens == 10


# Async: the run cancels the task of its block, at the deadline or on cancel().


def test_an_async_call_without_timeout_is_interrupted_at_the_deadline() -> None:
    async def main() -> tuple[Outcome | None, float | None, float, bool]:
        guard = Guard(timeout(seconds=1))
        script = [reply("A first draft.", usage=(40, 8)), reply("Too late.", delay=HUNG)]
        with ScriptedServer(script) as server:
            async with async_client(server) as client:
                async with guard.arun("task") as run:
                    deadline = guard.governor.deadline()
                    await run.turn()
                    await acall_model(client, run)
                    await run.turn()
                    await acall_model(client, run, input_tokens=60)
                    pytest.fail("the hung call must end the run")
                ended = time.monotonic()
                settled = no_cancellation_left()
        return run.outcome, deadline, ended, settled

    outcome, deadline, ended, settled = asyncio.run(main())  # a CancelledError would raise here
    assert settled
    outcome = timed_out_promptly(outcome, deadline, ended)
    assert outcome.checkpoint is not None
    assert outcome.partial_output == "A first draft."
    assert outcome.usage.model_calls == 2
    assert outcome.usage.input_tokens == 40 + 60
    assert outcome.usage.output_tokens == 8 + 200


def test_cancel_from_another_thread_interrupts_a_hung_async_call() -> None:
    guard = Guard(max_turns(10))
    cancelled_at: list[float] = []

    def cancel() -> None:
        cancelled_at.append(time.monotonic())
        guard.governor.cancel()

    async def main() -> tuple[Outcome | None, float, bool]:
        timer = threading.Timer(0.3, cancel)
        with ScriptedServer([reply("Never sent.", delay=HUNG)]) as server:
            async with async_client(server) as client:
                try:
                    async with guard.arun("task") as run:
                        timer.start()
                        await run.turn()
                        await acall_model(client, run, input_tokens=25)
                        pytest.fail("cancel() must end the run")
                    ended = time.monotonic()
                    settled = no_cancellation_left()
                finally:
                    timer.cancel()
                    timer.join()
        return run.outcome, ended, settled

    outcome, ended, settled = asyncio.run(main())
    assert len(cancelled_at) == 1
    assert cancelled_at[0] <= ended < cancelled_at[0] + PROMPTLY
    assert settled
    assert outcome is not None
    assert outcome.status is Status.CANCELLED
    assert outcome.reason == "cancelled"
    assert outcome.checkpoint is not None
    assert outcome.usage.model_calls == 1
    assert outcome.usage.input_tokens == 25
    assert outcome.usage.output_tokens == 200


# Phases: limits of their own, counted from their start, checked with the run's.


def test_a_phase_turn_limit_stops_its_third_turn_and_names_the_phase() -> None:
    script = [reply(f"Step {n}.", usage=(10, 2)) for n in range(1, 5)]
    guard = Guard(max_turns(10))
    with ScriptedServer(script) as server, sync_client(server) as client:
        with guard.run("task") as run:
            run.turn()  # before the phase: not one of its turns
            call_model(client, run)
            with run.phase("explore", max_turns(2)) as phase:
                assert guard.governor.phases == (phase,)
                for _ in range(3):
                    run.turn()
                    call_model(client, run)
            pytest.fail("the phase's third turn must stop the run")
        requests = server.requests
    outcome = run.outcome
    assert outcome is not None
    assert outcome.status is Status.ABANDONED
    assert outcome.reason == "turn_limit"
    assert outcome.phase == "explore"
    assert outcome.message.startswith("In phase 'explore':")
    assert outcome.usage.turns == 3
    assert outcome.partial_output == "Step 3."
    assert len(requests) == 3
    assert open_phases(guard) == []


def test_phases_nest_and_the_outer_one_counts_the_inner_ones_turns() -> None:
    guard = Guard(max_turns(10))
    with guard.run("task") as run, run.phase("fix", max_turns(2)):
        with run.phase("reproduce", max_turns(1)):
            assert open_phases(guard) == ["fix", "reproduce"]
            run.turn()
        assert open_phases(guard) == ["fix"]  # the innermost ended first
        run.turn()
        run.turn()  # the outer phase's third, counting the inner one's
        pytest.fail("the outer phase's third turn must stop the run")
    assert run.outcome is not None
    assert run.outcome.phase == "fix"
    assert run.outcome.message.startswith("In phase 'fix':")
    assert run.outcome.usage.turns == 2


def test_the_innermost_phase_that_trips_is_the_one_named() -> None:
    guard = Guard(max_turns(10))
    with (
        guard.run("task") as run,
        run.phase("fix", max_turns(5)),
        run.phase("reproduce", max_turns(1)),
    ):
        run.turn()
        run.turn()
        pytest.fail("the inner phase's second turn must stop the run")
    assert run.outcome is not None
    assert run.outcome.phase == "reproduce"
    assert run.outcome.message.startswith("In phase 'reproduce':")
    assert open_phases(guard) == []


def test_a_phase_timeout_shorter_than_the_runs_bounds_time_left() -> None:
    clock = FakeClock()
    guard = Guard(timeout(seconds=60), clock=clock)
    with guard.run("task") as run:
        clock.advance(10)
        assert run.time_left() == 50
        with run.phase("plan", timeout(seconds=5)):
            assert run.time_left() == 5  # counted from the phase's start, not the run's
            clock.advance(2)
            assert run.time_left() == 3
            with run.phase("draft", timeout(seconds=30)):
                assert run.time_left() == 3  # a longer inner phase cannot extend the outer
        assert run.time_left() == 48
        run.finish("done")
    assert run.outcome is not None
    assert run.outcome.status is Status.COMPLETED


def test_a_hung_call_in_a_phase_times_out_at_the_phase_deadline() -> None:
    guard = Guard(timeout(seconds=20))
    with ScriptedServer([reply("Too late.", delay=HUNG)]) as server, sync_client(server) as client:
        with guard.run("task") as run:
            with run.phase("search", timeout(seconds=0.5)):
                deadline = guard.governor.deadline()
                run.turn()
                call_model(client, run, input_tokens=30)
            pytest.fail("the hung call must end the run")
        ended = time.monotonic()
    outcome = run.outcome
    outcome = timed_out_promptly(outcome, deadline, ended)
    assert outcome.phase == "search"
    assert outcome.message.startswith("In phase 'search':")
    assert "APITimeoutError" in outcome.message
    assert outcome.usage.model_calls == 1


def test_an_async_phase_cancels_a_call_without_timeout_at_its_deadline() -> None:
    async def main() -> tuple[Outcome | None, float | None, float, bool, float | None]:
        guard = Guard(timeout(seconds=20))
        with ScriptedServer([reply("Too late.", delay=HUNG)]) as server:
            async with async_client(server) as client:
                async with guard.arun("task") as run:
                    async with run.phase("search", timeout(seconds=0.5)):
                        deadline = guard.governor.deadline()
                        await run.turn()
                        await acall_model(client, run, input_tokens=30)
                    pytest.fail("the hung call must end the run")
                ended = time.monotonic()
                settled = no_cancellation_left()
                left = run.time_left()
        return run.outcome, deadline, ended, settled, left

    outcome, deadline, ended, settled, left = asyncio.run(main())
    assert settled
    assert left is not None and left > 15  # only the run's own 20 s remain
    outcome = timed_out_promptly(outcome, deadline, ended)
    assert outcome.phase == "search"
    assert outcome.message.startswith("In phase 'search':")
    assert outcome.usage.model_calls == 1


# Token limits lower the max_tokens that is sent.


def test_a_token_limit_lowers_the_max_tokens_the_server_receives() -> None:
    script = [reply("First.", usage=(50, 30)), reply("Second.", usage=(60, 20))]
    guard = Guard(max_tokens(output=100))
    with ScriptedServer(script) as server, sync_client(server) as client:
        with guard.run("task") as run:
            run.turn()
            assert run.model_request(MODEL, max_tokens=500) == 100
            completion = client.chat.completions.create(model=MODEL, messages=USER, max_tokens=100)
            run.model_response(completion)
            run.turn()
            call_model(client, run, max_tokens=500)  # 30 of 100 written: 70 left
            run.finish()
        requests = server.requests
    assert [request["max_tokens"] for request in requests] == [100, 70]
    assert run.outcome is not None
    assert run.outcome.status is Status.COMPLETED
    assert run.outcome.usage.output_tokens == 50


def test_a_request_that_fits_keeps_its_max_tokens() -> None:
    guard = Guard(max_tokens(output=1000))
    with ScriptedServer([reply("Fine.", usage=(5, 5))]) as server, sync_client(server) as client:
        with guard.run("task") as run:
            run.turn()
            call_model(client, run, max_tokens=500)
            run.finish()
        requests = server.requests
    assert requests[0]["max_tokens"] == 500


# The synthesis pass: a real model call, reported like any other, budgeted before it is sent.


def test_the_synthesis_pass_is_a_model_call_and_its_usage_is_in_the_outcome() -> None:
    searching = reply(
        "Looking it up.", tool_calls=[tool_call("search", {"q": "answer"})], usage=(100, 20)
    )
    final = reply("Final: 42.", usage=(150, 30))
    runs: list[Run] = []
    seen: list[Evidence] = []

    def synthesizer(evidence: Evidence) -> str | None:
        seen.append(evidence)
        run = runs[0]
        results = "; ".join(result for _, _, result in evidence.tool_results)
        sent = run.model_request(MODEL, max_tokens=300, input_tokens=150)
        completion = client.chat.completions.create(
            model=MODEL,
            messages=[{"role": "user", "content": f"{evidence.prompt} Evidence: {results}"}],
            max_tokens=sent,
        )
        run.model_response(completion)
        return completion.choices[0].message.content

    guard = Guard(max_turns(1, on_limit="synthesize"), synthesizer=synthesizer)
    with ScriptedServer([searching, final]) as server, sync_client(server) as client:
        with guard.run("What is the answer?") as run:
            runs.append(run)
            for _ in range(3):
                run.turn()
                completion = call_model(client, run, input_tokens=100)
                for call in completion.choices[0].message.tool_calls or ():
                    assert isinstance(call, ChatCompletionMessageFunctionToolCall)
                    run.tool_call(call.function.name, call.function.arguments, call.id)
                    run.tool_result(call.function.name, "42", call.id)
            pytest.fail("the second turn must stop the run")
        requests = server.requests
    assert searching.usage is not None and final.usage is not None
    outcome = run.outcome
    assert outcome is not None
    assert outcome.status is Status.COMPLETED_WITH_WARNINGS
    assert outcome.reason == "turn_limit"
    assert outcome.partial_output == "Final: 42."
    assert len(seen) == 1 and seen[0].tool_results == (("search", '{"q": "answer"}', "42"),)
    assert len(requests) == 2
    assert requests[1]["max_tokens"] == 300
    usage = outcome.usage
    assert usage.model_calls == 2
    assert usage.turns == 1
    assert usage.input_tokens == searching.usage.prompt_tokens + final.usage.prompt_tokens
    assert usage.output_tokens == searching.usage.completion_tokens + final.usage.completion_tokens


def test_a_synthesis_pass_with_no_answer_counts_in_the_outcome_and_its_checkpoint() -> None:
    """The model answers the tools-free pass with a tool call, so the synthesizer has no
    answer to give: the stop stands, and the run's outcome, the governor's and the checkpoint
    saved at the stop all count the pass's model call."""
    searching = reply(
        "Looking it up.", tool_calls=[tool_call("search", {"q": "answer"})], usage=(100, 20)
    )
    again = reply(tool_calls=[tool_call("search", {"q": "again"})], usage=(150, 30))
    runs: list[Run] = []

    def synthesizer(evidence: Evidence) -> str | None:
        run = runs[0]
        sent = run.model_request(MODEL, max_tokens=300, input_tokens=150)
        completion = client.chat.completions.create(model=MODEL, messages=USER, max_tokens=sent)
        run.model_response(completion)
        return completion.choices[0].message.content  # None: it called a tool instead

    guard = Guard(max_turns(1, on_limit="synthesize"), synthesizer=synthesizer)
    with ScriptedServer([searching, again]) as server, sync_client(server) as client:
        with guard.run("What is the answer?") as run:
            runs.append(run)
            for _ in range(3):
                run.turn()
                call_model(client, run, input_tokens=100)
                run.tool_call("search", {"q": "answer"}, "c1")
                run.tool_result("search", "42", "c1")
            pytest.fail("the second turn must stop the run")
        assert len(server.requests) == 2
    outcome = run.outcome
    assert outcome is not None
    assert outcome.status is Status.ABANDONED
    assert outcome.reason == "turn_limit"
    assert outcome.partial_output == "Looking it up."
    usage = outcome.usage
    assert (usage.model_calls, usage.input_tokens, usage.output_tokens) == (2, 250, 50)
    assert guard.governor.outcome == outcome
    assert outcome.checkpoint is not None
    saved = guard.governor.ledger.load_checkpoint(outcome.checkpoint)["run"]
    assert (saved["model_calls"], saved["input_tokens"], saved["output_tokens"]) == (2, 250, 50)


def test_no_budget_for_the_synthesis_pass_keeps_the_partial_output() -> None:
    model = "tiny-model"
    # $1 in and $10 out per million tokens: the first call costs $0.0003 of the $0.001 limit,
    # and the synthesis pass's worst case (200 in, 500 out) is $0.0052.
    prices = Prices({model: {"input": "1", "output": "10"}})
    first = reply(
        "Partial: maybe 41.", tool_calls=[tool_call("search", {"q": "answer"})], usage=(100, 20)
    )
    runs: list[Run] = []
    refused: list[HaltError] = []

    def synthesizer(evidence: Evidence) -> str | None:
        try:
            sent = runs[0].model_request(model, max_tokens=500, input_tokens=200)
        except HaltError as error:
            refused.append(error)
            raise
        completion = client.chat.completions.create(model=model, messages=USER, max_tokens=sent)
        runs[0].model_response(completion)
        return completion.choices[0].message.content

    guard = Guard(
        max_turns(1, on_limit="synthesize") | max_cost("0.001"),
        synthesizer=synthesizer,
        pricer=prices,
    )
    script: list[Reply] = [first, reply("Never sent.")]
    with ScriptedServer(script, model=model) as server, sync_client(server) as client:
        with guard.run("What is the answer?") as run:
            runs.append(run)
            for _ in range(3):
                run.turn()
                sent = run.model_request(model, max_tokens=50, input_tokens=100)
                completion = client.chat.completions.create(
                    model=model, messages=USER, max_tokens=sent
                )
                run.model_response(completion)
                run.tool_call("search", {"q": "answer"}, "c1")
                run.tool_result("search", "41 or 42", "c1")
            pytest.fail("the second turn must stop the run")
        requests = server.requests
    outcome = run.outcome
    assert len(refused) == 1
    assert len(requests) == 1  # the synthesis pass was never sent
    assert outcome is not None
    assert outcome.status is Status.ABANDONED
    assert outcome.reason == "turn_limit"
    assert outcome.partial_output == "Partial: maybe 41."
    assert "No final answer was written" in outcome.message
    assert outcome.usage.model_calls == 1
    assert outcome.usage.cost == Decimal("0.0003")
