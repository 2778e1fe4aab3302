"""The drivers, end to end: a real openai client against the scripted server."""

from __future__ import annotations

import asyncio
import re
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import pytest

import haltwise
from haltwise import (
    Answer,
    Ask,
    Choice,
    ConfigurationError,
    Evidence,
    Guard,
    HaltSignal,
    Status,
    TurnLimitExceeded,
    max_tool_calls,
    max_turns,
)
from haltwise.drivers.guard import EVIDENCE_CHARS, EVIDENCE_RESULTS, TOOL_EVENTS_KEPT
from haltwise.drivers.prompters import parse_answer
from haltwise.examples import tool_loop
from haltwise.testing import ScriptedServer, reply, tool_call

openai = pytest.importorskip("openai")

README = Path(__file__).resolve().parents[2] / "README.md"


def stuck_script(n: int = 20) -> list[Any]:
    return [reply(tool_calls=[tool_call("run_tests", {})], usage=(1000, 50)) for _ in range(n)]


def client_for(server: ScriptedServer) -> Any:
    return openai.OpenAI(base_url=server.base_url, api_key="test", max_retries=0)


def test_the_readme_loop_stops_a_stuck_model_at_the_turn_limit() -> None:
    guard = Guard(max_turns(4, warn_at=0.5) | haltwise.max_cost("0.50"))
    with ScriptedServer(stuck_script(), model="gpt-4o-mini") as server:
        outcome = tool_loop.solve(client_for(server), "gpt-4o-mini", "fix it", guard)
        requests = server.requests
    assert outcome.status is Status.ABANDONED
    assert outcome.reason == "turn_limit"
    assert outcome.usage.turns == 4
    assert outcome.usage.input_tokens == 4000
    assert outcome.cost is not None and outcome.cost > 0
    assert len(requests) == 4
    notes = [m["content"] for m in requests[-1]["messages"] if m["role"] == "user"]
    assert "Turn 2 of 4: 2 turns left; wrap up soon." in notes


def test_the_readme_loop_completes_when_the_model_answers() -> None:
    script = [reply(tool_calls=[tool_call("run_tests", {})], usage=(100, 5)), reply("All green.")]
    with ScriptedServer(script, model="gpt-4o-mini") as server:
        outcome = tool_loop.solve(client_for(server), "gpt-4o-mini", "fix it", Guard(max_turns(5)))
    assert outcome.status is Status.COMPLETED
    assert outcome.partial_output == "All green."
    assert outcome.usage.tool_calls == 1


def test_the_readme_shows_the_example_verbatim() -> None:
    if not README.is_file():
        pytest.skip("README.md is absent")
    source = Path(tool_loop.__file__).read_text()
    body = source[source.index("def solve") : source.index("\n\nif __name__")]
    assert body in README.read_text()


def test_a_prompter_continues_and_the_count_restarts() -> None:
    asked: list[str] = []

    def prompter(ask: Ask) -> Answer:
        asked.append(ask.question)
        return Answer(Choice.CONTINUE) if len(asked) == 1 else Answer(Choice.ABORT)

    guard = Guard(max_turns(2, on_limit="ask"), prompter=prompter)
    with guard.run("task") as run:
        for _ in range(10):
            run.turn()
    assert asked == ["You've used 2 turns. Continue?", "You've used 2 turns. Continue?"]
    assert run.outcome is not None and run.outcome.reason == "declined"
    assert guard.governor.usage.turns == 4


def test_no_prompter_means_the_silent_abort() -> None:
    guard = Guard(max_turns(1, on_limit="ask"))
    with guard.run() as run:
        run.turn()
        run.turn()
        pytest.fail("the second turn must stop the run")
    assert run.outcome is not None
    assert run.outcome.reason == "turn_limit"
    assert "No answer came" in run.outcome.message


def test_a_prompter_that_does_not_answer_in_time_aborts() -> None:
    release = threading.Event()

    def slow(ask: Ask) -> bool:
        release.wait(5)
        return True

    guard = Guard(max_turns(0, on_limit=haltwise.policies.ask(timeout=0.05)), prompter=slow)
    with guard.run() as run:
        run.turn()
    release.set()
    assert run.outcome is not None
    assert "No answer came within 0.05s" in run.outcome.message


def test_synthesize_writes_the_final_answer_from_the_evidence() -> None:
    seen: list[Evidence] = []

    def synthesizer(evidence: Evidence) -> str:
        seen.append(evidence)
        return f"From {len(evidence.tool_results)} results: probably 42."

    guard = Guard(max_tool_calls(2, on_limit="synthesize"), synthesizer=synthesizer)
    with guard.run("what is the answer?") as run:
        for index in range(5):
            assert run.tool_call("search", {"q": index}, f"c{index}") is None
            run.tool_result("search", f"result {index}", f"c{index}")
    assert run.outcome is not None
    assert run.outcome.status is Status.COMPLETED_WITH_WARNINGS
    assert run.output == "From 2 results: probably 42."
    assert seen[0].tool_results == (
        ("search", {"q": 0}, "result 0"),
        ("search", {"q": 1}, "result 1"),
    )


def test_a_long_run_keeps_only_its_latest_evidence() -> None:
    seen: list[Evidence] = []

    def synthesizer(evidence: Evidence) -> str:
        seen.append(evidence)
        return "done"

    calls = EVIDENCE_RESULTS + 50
    guard = Guard(max_tool_calls(calls, on_limit="synthesize"), synthesizer=synthesizer)
    with guard.run("go") as run:
        for index in range(calls + 1):
            if run.tool_call("read", {"n": index}, f"c{index}") is None:
                run.tool_result("read", f"result {index}", f"c{index}")
    results = seen[0].tool_results
    assert len(results) == EVIDENCE_RESULTS
    assert results[0] == ("read", {"n": 50}, "result 50")
    assert results[-1] == ("read", {"n": calls - 1}, f"result {calls - 1}")


def test_evidence_is_bounded_in_characters_and_always_holds_the_last_result() -> None:
    seen: list[Evidence] = []
    big = "x" * (EVIDENCE_CHARS // 3 + 1)
    guard = Guard(max_tool_calls(4, on_limit="synthesize"), synthesizer=lambda e: seen.append(e))
    with guard.run("go") as run:
        for index in range(4):
            run.tool_call("read", {"n": index}, f"c{index}")
            run.tool_result("read", big + str(index), f"c{index}")
        run.tool_call("read", {"n": 9}, "c9")
    kept = [result[-1] for _, _, result in seen[0].tool_results]
    assert kept == ["2", "3"]
    huge = Guard(max_tool_calls(1, on_limit="synthesize"), synthesizer=lambda e: seen.append(e))
    with huge.run("go") as run:
        run.tool_call("read", {}, "c0")
        run.tool_result("read", "y" * (EVIDENCE_CHARS + 1), "c0")
        run.tool_call("read", {}, "c1")
    assert len(seen[1].tool_results) == 1


def test_each_tool_event_admitted_is_kept_once_however_it_was_admitted() -> None:
    """The governor keeps the tool events it answers CONTINUE; the run keeps those admitted
    after a note or the human's answer (the call past the limit is asked about, then handled
    again, and answered CONTINUE on the way), each once. A call refused is not kept."""
    asked: list[Ask] = []

    def prompter(ask: Ask) -> Answer:
        asked.append(ask)
        return Answer(Choice.CONTINUE)

    limits = max_tool_calls(2, on_limit="ask") | max_tool_calls(10, warn_at=0.1)
    guard = Guard(limits, prompter=prompter)
    with guard.run("go") as run:
        for index in range(4):
            run.tool_call("read", {"n": index}, f"c{index}")
            run.tool_result("read", f"result {index}", f"c{index}")
        kept = list(run._tools)
        notes = run.notes()
    assert len(asked) == 1
    assert len(notes) == 1
    assert [type(event).__name__ for event in kept] == ["ToolCall", "ToolResult"] * 4
    assert len({id(event) for event in kept}) == 8
    assert [getattr(event, "call_id", None) for event in kept] == [f"c{i // 2}" for i in range(8)]
    blocked = Guard(max_tool_calls(1, on_limit="block"))
    with blocked.run("go") as run:
        run.tool_call("read", {}, "c0")
        run.tool_call("read", {}, "c1")
        assert [getattr(event, "call_id", None) for event in run._tools] == ["c0"]


def test_calls_whose_results_never_come_are_forgotten_oldest_first() -> None:
    seen: list[Evidence] = []
    calls = TOOL_EVENTS_KEPT + 10
    guard = Guard(max_tool_calls(calls, on_limit="synthesize"), synthesizer=seen.append)
    with guard.run("go") as run:
        for index in range(calls):
            run.tool_call("read", {"n": index}, f"c{index}")
        run.tool_result("read", "late", "c0")  # its call was forgotten: no arguments
        run.tool_result("read", "last", f"c{calls - 1}")
        run.tool_call("read", {}, "over")
    assert seen[0].tool_results == (
        ("read", None, "late"),
        ("read", {"n": calls - 1}, "last"),
    )


def test_blocked_calls_return_the_refusal() -> None:
    guard = Guard(max_tool_calls(1, tool="web_search"))
    with guard.run() as run:
        assert run.tool_call("web_search", {"q": "a"}) is None
        refusal = run.tool_call("web_search", {"q": "b"})
        run.finish("done")
    assert refusal is not None and "Budget for web_search spent" in refusal


def test_suppress_false_raises_the_typed_error() -> None:
    guard = Guard(max_turns(0))
    with pytest.raises(TurnLimitExceeded) as raised, guard.run(suppress=False) as run:
        run.turn()
    assert raised.value.outcome.reason == "turn_limit"
    assert raised.value.provider_called is False


def test_the_signal_escapes_a_broad_except() -> None:
    guard = Guard(max_turns(0), signal=True)
    with guard.run() as run:
        try:
            run.turn()
        except Exception:  # an agent's catch-all
            pytest.fail("a HaltSignal must not be caught by except Exception")
    assert run.outcome is not None and run.outcome.reason == "turn_limit"
    assert issubclass(HaltSignal, BaseException) and not issubclass(HaltSignal, Exception)


def test_a_crash_in_the_loop_is_recorded_and_reraised() -> None:
    guard = Guard(max_turns(5))
    with pytest.raises(RuntimeError, match="tool exploded"), guard.run() as run:
        run.turn()
        raise RuntimeError("tool exploded")
    assert run.outcome is not None
    assert run.outcome.reason == "error"
    assert run.outcome.checkpoint is not None
    assert run.outcome.usage.turns == 1


def test_a_sync_run_refuses_an_async_prompter() -> None:
    async def prompter(ask: Ask) -> bool:
        return True

    guard = Guard(max_turns(0, on_limit="ask"), prompter=prompter)
    with pytest.raises(ConfigurationError, match="async: use guard.arun"), guard.run() as run:
        run.turn()


def test_async_run_with_an_async_prompter_and_client() -> None:
    async def prompter(ask: Ask) -> Answer:
        await asyncio.sleep(0)
        return Answer(Choice.EXTEND, 2)

    async def main() -> haltwise.Outcome | None:
        guard = Guard(max_turns(1, on_limit="ask") | max_tool_calls(3), prompter=prompter)
        with ScriptedServer(stuck_script(), model="gpt-4o-mini") as server:
            client = openai.AsyncOpenAI(base_url=server.base_url, api_key="t", max_retries=0)
            async with guard.arun("task") as run:
                while True:
                    await run.turn()
                    await run.model_request("gpt-4o-mini", max_tokens=100)
                    completion = await client.chat.completions.create(
                        model="gpt-4o-mini", messages=[{"role": "user", "content": "x"}]
                    )
                    await run.model_response(completion)
                    for call in completion.choices[0].message.tool_calls or ():
                        await run.tool_call(call.function.name, call.function.arguments, call.id)
                        await run.tool_result(call.function.name, "FAILED", call.id)
            await client.close()
        return run.outcome

    outcome = asyncio.run(main())
    assert outcome is not None
    assert outcome.reason == "tool_call_limit"
    assert outcome.usage.turns == 4  # 1, then extended by 2 twice
    assert outcome.usage.model_calls == 4


@pytest.mark.parametrize(
    ("typed", "expected"),
    [
        ("y", Answer(Choice.CONTINUE)),
        ("No", Answer(Choice.ABORT)),
        ("wrap up", Answer(Choice.WRAP_UP)),
        ("extend 10", Answer(Choice.EXTEND, 10)),
        ("+2.5", Answer(Choice.EXTEND, 2.5)),
        ("extend -1", None),
        ("maybe", None),
    ],
)
def test_console_answers(typed: str, expected: Answer | None) -> None:
    assert parse_answer(typed) == expected


def test_the_public_surface_is_flat_sorted_and_complete() -> None:
    names = haltwise.__all__
    assert names == sorted(
        names, key=lambda name: (not name.isupper(), not name[0].isupper(), name)
    )
    for name in names:
        assert hasattr(haltwise, name), name
    public = {name for name in dir(haltwise) if not name.startswith("_")}
    modules = {"agent", "audit", "cli", "config", "drivers", "engine", "eventlog", "examples"}
    modules |= {"adapters", "dashboard", "ledgers", "loops", "pricing", "testing"}
    assert public - set(names) - modules == set()
    assert re.fullmatch(r"\d+\.\d+\.\d+", haltwise.__version__)


def test_importing_haltwise_leaves_the_drivers_and_loops_until_one_is_asked_for() -> None:
    # The drivers import asyncio: a program that only decides (an audit) never needs them.
    code = (
        "import sys\n"
        "import haltwise\n"
        "print(sorted(m for m in ('asyncio', 'haltwise.drivers', 'haltwise.loops') "
        "if m in sys.modules))\n"
        "print('Guard' in dir(haltwise), haltwise.Guard.__module__)\n"
        "from haltwise import attempts\n"
        "print(attempts is haltwise.loops.attempts, 'asyncio' in sys.modules)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60
    )
    assert done.stdout.splitlines() == ["[]", "True haltwise.drivers.guard", "True True"]
