"""Many threads or tasks, one guarded run: one question to the human, one synthesized answer.

The thread whose event raises a question asks it; the others meet ``QuestionOpen`` from the
governor and wait for the answer, then report their events again under the limits it left. The
thread whose event stops the run with ``synthesize`` writes the answer, with the one model call
the governor admits after the stop; the others meet the stop, wait, and end with that outcome.

Each test lets the human answer (or the synthesizer go on) only once every other thread has met
what it must wait for, counted by ``meetings``: no test sleeps to let threads get somewhere.
Each runs on a daemon thread of its own (``finished``), so that a thread or task stuck for good
fails the test instead of hanging the suite.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable
from typing import Any

import pytest
from finishing import WAITING, finished

from haltwise import (
    Answer,
    Ask,
    AsyncRun,
    Choice,
    Decision,
    Evidence,
    Guard,
    HaltError,
    InvalidValueError,
    Outcome,
    Run,
    Status,
    Stop,
    max_model_calls,
    max_tool_calls,
)
from haltwise.engine.errors import QuestionOpen
from haltwise.engine.events import Event

#: The threads (or tasks) that report events besides the one that asks, or writes the answer.
OTHERS = 3


def meetings(run: Run | AsyncRun, met: Callable[[], None]) -> None:
    """Call ``met`` whenever one of ``run``'s events meets what it must wait for: a question
    another thread is asking (``QuestionOpen``), or the run's stop."""
    handle = run._handle

    def handle_and_tell(event: Event) -> Decision:
        try:
            decision = handle(event)
        except QuestionOpen:
            met()
            raise
        if isinstance(decision, Stop):
            met()
        return decision

    run._handle = handle_and_tell


def in_threads(*calls: Callable[[], Any]) -> list[BaseException | None]:
    """Run each call on a thread of its own; what each raised (None: nothing)."""
    raised: list[BaseException | None] = [None] * len(calls)

    def call(index: int) -> None:
        try:
            calls[index]()
        except BaseException as error:  # the test looks at it
            raised[index] = error

    threads = [threading.Thread(target=call, args=(index,)) for index in range(len(calls))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(WAITING)
    return raised


# One question


def asked_with_others_waiting(answer: Answer) -> tuple[Guard, Run, list[str], list[Any]]:
    """Tool calls on ``1 + OTHERS`` threads past a budget that asks: the first asks, and the
    human gives ``answer`` once the others wait. What each call returned or raised."""
    asked: list[str] = []
    waiting = threading.Semaphore(0)
    asking = threading.Event()

    def prompter(ask: Ask) -> Answer:
        asked.append(ask.question)
        asking.set()
        for _ in range(OTHERS):
            assert waiting.acquire(timeout=WAITING)
        return answer

    guard = Guard(max_tool_calls(2, on_limit="ask"), prompter=prompter)
    ended: list[Any] = [None] * (1 + OTHERS)
    with guard.run("go") as run:
        run.tool_call("search", {"q": "a"}, "a")
        run.tool_call("search", {"q": "b"}, "b")  # the budget is spent
        meetings(run, waiting.release)

        def call(number: int) -> None:
            try:
                ended[number] = run.tool_call("search", {"q": number}, f"c{number}")
            except HaltError as error:
                ended[number] = error.outcome

        asker = threading.Thread(target=call, args=(0,))
        asker.start()
        assert asking.wait(WAITING)
        raised = in_threads(*(lambda number=number: call(number) for number in range(1, 4)))
        asker.join(WAITING)
        assert raised == [None] * OTHERS
    return guard, run, asked, ended


def test_threads_wait_for_the_one_question_and_go_on_under_its_answer() -> None:
    guard, run, asked, ended = finished(
        lambda: asked_with_others_waiting(Answer(Choice.EXTEND, 10))
    )
    assert asked == ["max_tool_calls(2, on_limit='ask') was reached. Continue?"]
    assert ended == [None] * (1 + OTHERS)  # every call ran: none refused, none raised
    assert guard.governor.usage.tool_calls == 2 + 1 + OTHERS
    assert run.outcome is not None and run.outcome.status is Status.COMPLETED


def test_threads_waiting_for_a_question_the_human_declines_all_get_the_stop() -> None:
    _, run, asked, ended = finished(lambda: asked_with_others_waiting(Answer(Choice.ABORT)))
    assert len(asked) == 1
    assert run.outcome is not None and run.outcome.reason == "declined"
    assert all(outcome is run.outcome for outcome in ended)


def test_tasks_wait_for_the_one_question_and_the_loop_goes_on_meanwhile() -> None:
    """The tasks share the loop's thread: a task waiting for the answer must not block it on
    the lock the asking task holds (the asking task could then never answer)."""
    asked: list[str] = []

    async def main() -> tuple[Guard, list[str | None]]:
        others_wait = asyncio.Event()
        met = [0]

        def one_more() -> None:
            met[0] += 1
            if met[0] == OTHERS:
                others_wait.set()

        async def prompter(ask: Ask) -> Answer:
            asked.append(ask.question)
            await others_wait.wait()
            return Answer(Choice.EXTEND, 10)

        guard = Guard(max_tool_calls(2, on_limit="ask"), prompter=prompter)
        async with guard.arun("go") as run:
            await run.tool_call("search", {"q": "a"}, "a")
            await run.tool_call("search", {"q": "b"}, "b")
            meetings(run, one_more)
            asker = asyncio.create_task(run.tool_call("search", {"q": 0}, "c0"))
            while not asked:
                await asyncio.sleep(0)
            others = [run.tool_call("search", {"q": n}, f"c{n}") for n in range(1, 4)]
            refusals = await asyncio.gather(asker, *others)
        return guard, refusals

    guard, refusals = finished(lambda: asyncio.run(main()))
    assert len(asked) == 1
    assert refusals == [None] * (1 + OTHERS)
    assert guard.governor.usage.tool_calls == 2 + 1 + OTHERS


def test_a_bad_answer_stops_the_run_rather_than_leave_its_question_open() -> None:
    """Threads waiting for an answer that never counts would wait for ever."""

    def prompter(ask: Ask) -> Any:
        return "maybe"

    guard = Guard(max_tool_calls(1, on_limit="ask"), prompter=prompter)
    with pytest.raises(InvalidValueError, match="answer='maybe'"), guard.run("go") as run:
        run.tool_call("search", {}, "a")
        run.tool_call("search", {}, "b")
    assert guard.governor.pending is None
    assert run.outcome is not None and run.outcome.reason == "tool_call_limit"


# One synthesized answer


def test_threads_that_meet_a_synthesize_stop_share_one_answer_and_its_one_pass() -> None:
    """Four threads make model calls past a limit that synthesizes. The thread that trips it
    writes the answer, with a model call of its own, once the others have met the stop: their
    requests after the stop are refused (none of them is the pass), and they end the run with
    the synthesized outcome."""
    writers: list[str] = []
    others_met = threading.Semaphore(0)
    runs: list[Run] = []

    def synthesizer(evidence: Evidence) -> str:
        writers.append(threading.current_thread().name)
        for _ in range(1 + OTHERS):  # its own thread's stop, then the others'
            assert others_met.acquire(timeout=WAITING)
        run = runs[0]
        run.model_request(max_tokens=100, input_tokens=10)  # the pass: admitted
        run.model_response(input_tokens=10, output_tokens=70)
        return "The answer, from what was found."

    def run_them() -> tuple[Guard, Run, list[Outcome | None]]:
        guard = Guard(max_model_calls(4, on_limit="synthesize"), synthesizer=synthesizer)
        ended: list[Outcome | None] = [None] * (1 + OTHERS)
        with guard.run("go") as run:
            runs.append(run)
            meetings(run, others_met.release)

            def calls(number: int) -> None:
                try:
                    for _ in range(10):
                        run.model_request(max_tokens=50, input_tokens=10)
                        run.model_response(input_tokens=10, output_tokens=5)
                except HaltError as error:
                    ended[number] = error.outcome

            raised = in_threads(*(lambda number=number: calls(number) for number in range(4)))
            assert raised == [None] * (1 + OTHERS)
        return guard, run, ended

    guard, run, ended = finished(run_them)
    assert len(writers) == 1
    outcome = run.outcome
    assert outcome is not None
    assert outcome.status is Status.COMPLETED_WITH_WARNINGS
    assert outcome.partial_output == "The answer, from what was found."
    assert all(each is outcome for each in ended)
    assert outcome.usage.model_calls == 4 + 1
    assert outcome.usage.output_tokens == 4 * 5 + 70
    assert guard.governor.usage.model_calls == 4 + 1
