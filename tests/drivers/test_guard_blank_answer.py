"""A synthesizer that writes only blanks has given no answer: the stop stands, as in the
adapters (``adapters._common.synthesis_outcome``), with the pass's model call counted."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable

import pytest

pytest.importorskip("openai")

import openai

from haltwise import Evidence, Guard, HaltError, Status, max_tool_calls, max_turns
from haltwise.drivers.guard import AsyncRun, Run, answered
from haltwise.testing import ScriptedServer, reply, tool_call

MODEL = "scripted-model"
BLANKS = ["", " ", "\n\t  \n"]


def tool_loop(run: Run) -> None:
    for index in range(5):
        assert run.tool_call("search", {"q": index}, f"c{index}") is None
        run.tool_result("search", f"result {index}", f"c{index}")
    pytest.fail("the third tool call must stop the run")


@pytest.mark.parametrize("blank", BLANKS)
def test_blanks_from_the_synthesizer_leave_the_stop_standing(blank: str) -> None:
    guard = Guard(max_tool_calls(2, on_limit="synthesize"), synthesizer=lambda _: blank)
    with guard.run("what is the answer?") as run:
        run.turn_ended("Searching.")
        tool_loop(run)
    outcome = run.outcome
    assert outcome is not None
    assert outcome.status is Status.ABANDONED
    assert outcome.reason == "tool_call_limit"
    assert outcome.partial_output == "Searching."  # not the blanks
    assert guard.governor.outcome == outcome


def test_text_around_blanks_is_an_answer() -> None:
    guard = Guard(max_tool_calls(2, on_limit="synthesize"), synthesizer=lambda _: "  42\n")
    with guard.run("what is the answer?") as run:
        tool_loop(run)
    assert run.outcome is not None
    assert run.outcome.status is Status.COMPLETED_WITH_WARNINGS
    assert run.output == "  42\n"


def test_the_rule_is_the_adapters() -> None:
    for text in [None, *BLANKS]:
        assert not answered(text)
    assert answered(" x ")


def test_a_pass_answered_with_blanks_counts_its_call_and_the_stop_stands() -> None:
    searching = reply(
        "Looking it up.", tool_calls=[tool_call("search", {"q": "a"})], usage=(100, 20)
    )
    blank = reply("   \n", usage=(150, 3))
    runs: list[Run] = []

    def synthesizer(evidence: Evidence) -> str | None:
        sent = runs[0].model_request(MODEL, max_tokens=300, input_tokens=150)
        completion = client.chat.completions.create(
            model=MODEL, messages=[{"role": "user", "content": "answer"}], max_tokens=sent
        )
        runs[0].model_response(completion)
        return completion.choices[0].message.content

    guard = Guard(max_turns(1, on_limit="synthesize"), synthesizer=synthesizer)
    with ScriptedServer([searching, blank]) as server:
        client = openai.OpenAI(base_url=server.base_url, api_key="test", max_retries=0)
        with client, guard.run("What is the answer?", suppress=False) as run:
            runs.append(run)
            with pytest.raises(HaltError):
                for _ in range(3):
                    run.turn()
                    sent = run.model_request(MODEL, max_tokens=200, input_tokens=100)
                    run.model_response(
                        client.chat.completions.create(
                            model=MODEL,
                            messages=[{"role": "user", "content": "go"}],
                            max_tokens=sent,
                        )
                    )
    outcome = run.outcome
    assert outcome is not None
    assert outcome.status is Status.ABANDONED
    assert outcome.partial_output == "Looking it up."
    usage = outcome.usage
    assert (usage.model_calls, usage.input_tokens, usage.output_tokens) == (2, 250, 23)
    assert outcome.checkpoint is not None
    saved = guard.governor.ledger.load_checkpoint(outcome.checkpoint)["run"]
    assert saved["model_calls"] == 2


@pytest.mark.parametrize("blank", BLANKS)
def test_an_async_synthesizers_blanks_are_no_answer_either(blank: str) -> None:
    async def synthesize(evidence: Evidence) -> str:
        await asyncio.sleep(0)
        return blank

    synthesizer: Callable[[Evidence], Awaitable[str]] = synthesize

    async def main() -> AsyncRun:
        guard = Guard(max_tool_calls(1, on_limit="synthesize"), synthesizer=synthesizer)
        async with guard.arun("what is the answer?") as run:
            for index in range(3):
                await run.tool_call("search", {"q": index}, f"c{index}")
                await run.tool_result("search", f"result {index}", f"c{index}")
        return run

    run = asyncio.run(main())
    assert run.outcome is not None
    assert run.outcome.status is Status.ABANDONED
    assert run.outcome.reason == "tool_call_limit"
    assert run.output is None
