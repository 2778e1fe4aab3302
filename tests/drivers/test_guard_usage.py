"""A model call whose usage is unknown is never free: the real ``openai`` client against the
scripted server, with streams that carry no usage, replies whose usage is not token counts, a
bare string, and ``run.model_response()`` with no counts.

Each such call counts at an estimate from characters (``CHARS_PER_TOKEN``), each figure at
least what its request reserved, and a ``RuntimeWarning`` naming the model says so once per
run. Counts given as keywords are counted exactly as given.
"""

from __future__ import annotations

import asyncio
import json
import re
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from decimal import Decimal
from typing import Any

import pytest

pytest.importorskip("openai")

import openai
from openai.types.chat import ChatCompletion, ChatCompletionMessageParam

import haltwise.agent.loop
from haltwise import Guard, InvalidValueError, Prices, Status, max_cost, max_turns
from haltwise.drivers import openai_usage
from haltwise.drivers.guard import AsyncRun
from haltwise.drivers.openai_usage import CHARS_PER_TOKEN, response_event
from haltwise.testing import ScriptedServer, raw, reply, tool_call

MODEL = "scripted-model"
PROMPT = "What is the answer?"
USER: list[ChatCompletionMessageParam] = [{"role": "user", "content": PROMPT}]
#: How the warning starts, for a call to ``MODEL``.
ESTIMATED = re.escape(f"a call to model {MODEL!r} reported ")


def tokens(characters: int) -> int:
    """Characters as the estimate counts them: rounded up, at least one token."""
    return max(1, -(-characters // CHARS_PER_TOKEN))


@contextmanager
def sync_client(server: ScriptedServer) -> Iterator[openai.OpenAI]:
    with openai.OpenAI(base_url=server.base_url, api_key="test", max_retries=0) as client:
        yield client


@contextmanager
def estimates() -> Iterator[list[str]]:
    """The texts of the RuntimeWarnings raised meanwhile (every one of them, said or not)."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        texts: list[str] = []
        yield texts
    texts.extend(str(w.message) for w in caught if issubclass(w.category, RuntimeWarning))


def streamed(client: openai.OpenAI, **sent: Any) -> Any:
    """A streamed reply's final completion, asked for without ``include_usage``: no usage."""
    with client.chat.completions.stream(model=MODEL, messages=USER, **sent) as stream:
        return stream.get_final_completion()


def completion_without_usage(text: str, **usage: Any) -> str:
    """A chat completion's JSON, with ``usage`` as given (none when empty)."""
    body: dict[str, Any] = {
        "id": "chatcmpl-1",
        "object": "chat.completion",
        "created": 0,
        "model": MODEL,
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": text},
                "finish_reason": "stop",
            }
        ],
    }
    if usage:
        body["usage"] = usage
    return json.dumps(body)


def test_a_stream_without_usage_counts_what_its_request_reserved_and_says_so_once() -> None:
    script = [reply("Still looking.", usage=(500, 9)), reply("It is 42.", usage=(600, 7))]
    guard = Guard(max_turns(5))
    with (
        ScriptedServer(script) as server,
        sync_client(server) as client,
        estimates() as said,
        guard.run(PROMPT) as run,
    ):
        for _ in range(2):
            run.turn()
            sent = run.model_request(MODEL, max_tokens=200, input_tokens=120)
            run.model_response(streamed(client, max_tokens=sent))
    assert run.outcome is not None and run.outcome.status is Status.COMPLETED
    usage = run.outcome.usage
    assert (usage.model_calls, usage.input_tokens, usage.output_tokens) == (2, 240, 400)
    assert len(said) == 1, said
    assert re.search(ESTIMATED + "no token usage", said[0])
    assert "never as free" in said[0] and "include_usage" in said[0]
    assert run.outcome.partial_output == "It is 42."


def test_each_run_says_it_once() -> None:
    script = [reply("One."), reply("Two.")]
    guard = Guard()
    with ScriptedServer(script) as server, sync_client(server) as client, estimates() as said:
        for _ in range(2):
            with guard.run(PROMPT) as run:
                run.model_request(MODEL, max_tokens=50)
                run.model_response(streamed(client, max_tokens=50))
    assert len(said) == 2


def test_with_nothing_reserved_the_reply_and_the_prompt_are_estimated() -> None:
    """No max_tokens and no prompt size: the first call of a run reserves nothing, and its
    tool call's name and arguments, and the run's prompt, are what the estimate reads."""
    arguments = {"q": "the answer to everything"}
    script = [reply(tool_calls=[tool_call("search", arguments)])]
    guard = Guard()
    with (
        ScriptedServer(script) as server,
        sync_client(server) as client,
        estimates() as said,
        guard.run(PROMPT) as run,
    ):
        run.model_request(MODEL)
        completion = streamed(client)
        run.model_response(completion)
    call = completion.choices[0].message.tool_calls[0]
    written = len(call.function.name) + len(call.function.arguments)
    usage = guard.governor.usage
    assert usage.input_tokens == tokens(len(PROMPT)) > 0
    assert usage.output_tokens == tokens(written) > 1
    assert len(said) == 1


def test_a_reply_with_no_usage_is_priced_and_a_cost_limit_bites() -> None:
    """Counted as free, the first call would leave the whole budget for the second."""
    prices = Prices({MODEL: {"input": "1000", "output": "2000"}})  # USD per million tokens
    script = [raw(completion_without_usage("Working on it.")) for _ in range(3)]
    guard = Guard(max_cost("0.50"), pricer=prices)
    with ScriptedServer(script) as server, sync_client(server) as client, estimates() as said:
        with guard.run(PROMPT) as run:
            for _ in range(3):
                sent = run.model_request(MODEL, max_tokens=100, input_tokens=100)
                completion = client.chat.completions.create(
                    model=MODEL, messages=USER, max_tokens=sent
                )
                assert completion.usage is None
                run.model_response(completion)
        assert len(server.requests) == 1
    outcome = run.outcome
    assert outcome is not None
    assert outcome.reason == "cost_limit"
    # 100 prompt tokens at $1,000 and 100 output tokens at $2,000 a million: $0.30 a call, and
    # a second one would pass $0.50.
    assert outcome.usage.cost == Decimal("0.3")
    assert outcome.usage.model_calls == 1
    assert len(said) == 1


@pytest.mark.parametrize(
    ("usage", "shown"),
    [
        ({"prompt_tokens": -5, "completion_tokens": 3}, "usage.prompt_tokens=-5"),
        ({"prompt_tokens": "12", "completion_tokens": 3}, "usage.prompt_tokens='12'"),
        ({"prompt_tokens": 12, "completion_tokens": 1.5}, "usage.completion_tokens=1.5"),
        ({"prompt_tokens": 12, "completion_tokens": 2**60}, "usage.completion_tokens=1152921"),
        (
            {
                "prompt_tokens": 12,
                "completion_tokens": 3,
                "prompt_tokens_details": {"cached_tokens": -1},
            },
            "usage.prompt_tokens_details.cached_tokens=-1",
        ),
    ],
)
def test_usage_that_is_not_token_counts_counts_at_the_estimate(
    usage: dict[str, Any], shown: str
) -> None:
    guard = Guard()
    with (
        ScriptedServer([raw(completion_without_usage("Forty-two.", **usage))]) as server,
        sync_client(server) as client,
        estimates() as said,
        guard.run(PROMPT) as run,
    ):
        run.model_request(MODEL, max_tokens=80, input_tokens=300)
        run.model_response(client.chat.completions.create(model=MODEL, messages=USER))
    assert run.outcome is not None and run.outcome.status is Status.COMPLETED
    counted = run.outcome.usage
    assert (counted.input_tokens, counted.output_tokens, counted.cache_read_tokens) == (300, 80, 0)
    assert len(said) == 1
    assert re.search(ESTIMATED + re.escape(shown), said[0])
    assert "which is not a token count" in said[0]


def test_a_string_is_the_replys_text_with_no_usage() -> None:
    guard = Guard()
    with estimates() as said, guard.run(PROMPT) as run:
        run.model_request(MODEL)
        run.model_response("The answer is forty-two.")
    assert run.outcome is not None
    assert run.outcome.partial_output == "The answer is forty-two."
    usage = run.outcome.usage
    assert usage.input_tokens == tokens(len(PROMPT))
    assert usage.output_tokens == tokens(len("The answer is forty-two."))
    assert len(said) == 1 and "'(no model name)'" in said[0]


def test_no_completion_and_no_counts_is_usage_unknown_estimated_from_its_text() -> None:
    guard = Guard()
    with estimates() as said, guard.run(PROMPT) as run:
        run.model_request(MODEL, max_tokens=3, input_tokens=2)
        run.model_response(model=MODEL, text="A reply of forty characters, give or ta.")
    usage = guard.governor.usage
    assert (usage.input_tokens, usage.output_tokens) == (tokens(len(PROMPT)), 10)
    assert len(said) == 1
    assert "was given neither a completion nor input_tokens=" in said[0]
    with estimates() as said, guard.run(PROMPT) as run:
        run.model_request(MODEL, max_tokens=30, input_tokens=200)
        run.model_response()
    usage = guard.governor.usage
    assert (usage.input_tokens, usage.output_tokens) == (200, 30)
    assert len(said) == 1


def test_counts_given_as_keywords_are_exact() -> None:
    """Zero is a count like any other; ``answered=False`` is the governor's own rule (the
    reservation); neither is an estimate, nor warned about (warnings are errors here)."""
    guard = Guard()
    with guard.run(PROMPT) as run:
        run.model_request(MODEL, max_tokens=500, input_tokens=400)
        run.model_response(model=MODEL, input_tokens=0, output_tokens=0, text="Cached.")
        run.model_request(MODEL, max_tokens=50, input_tokens=40)
        run.model_response(model=MODEL, output_tokens=7)
        run.model_request(MODEL, max_tokens=30, input_tokens=20)
        run.model_response(model=MODEL, answered=False)
    usage = guard.governor.usage
    assert (usage.model_calls, usage.input_tokens, usage.output_tokens) == (3, 20, 37)


def test_a_response_pairs_with_its_request_by_id() -> None:
    guard = Guard()
    with estimates() as said, guard.run(PROMPT) as run:
        run.model_request(MODEL, max_tokens=100, input_tokens=10, request_id="r1")
        run.model_request(MODEL, max_tokens=500, input_tokens=50, request_id="r2")
        run.model_response("Second.", request_id="r2")
        assert (guard.governor.usage.input_tokens, guard.governor.usage.output_tokens) == (50, 500)
        run.model_response("First.", request_id="r1")
    assert (run.usage.input_tokens, run.usage.output_tokens) == (60, 600)
    assert len(said) == 1


def test_the_count_is_in_before_a_warning_turned_error_is_raised() -> None:
    guard = Guard()
    with pytest.raises(RuntimeWarning, match="never as free"), guard.run(PROMPT) as run:
        run.model_request(MODEL, max_tokens=200, input_tokens=100)
        run.model_response()
    usage = guard.governor.usage
    assert (usage.model_calls, usage.input_tokens, usage.output_tokens) == (1, 100, 200)


def test_unknown_keywords_are_refused_at_the_call_and_nothing_is_counted() -> None:
    guard = Guard()
    with guard.run(PROMPT, suppress=False) as run:
        run.model_request(MODEL, max_tokens=20, input_tokens=10)
        with pytest.raises(
            InvalidValueError, match=r"run\.model_response\(tokens\)=5 .*output_tokens"
        ):
            run.model_response(tokens=5)
        completion = ChatCompletion.model_validate_json(completion_without_usage("Hi."))
        with pytest.raises(
            InvalidValueError, match=r"run\.model_response\(cost\)='0\.01'.*model= or request_id="
        ):
            run.model_response(completion, cost="0.01")
        assert guard.governor.usage.input_tokens == 0  # the request is still in flight
        run.model_response(model=MODEL, input_tokens=10, output_tokens=2)
    assert (run.usage.input_tokens, run.usage.output_tokens) == (10, 2)


def test_response_event_estimates_at_least_what_it_is_told_was_reserved() -> None:
    completion = {"model": MODEL, "choices": [{"message": {"content": "Twelve chars"}}]}
    event = response_event(completion, reserved=(100, 2), prompt_chars=20)
    assert (event.model, event.input_tokens, event.output_tokens) == (MODEL, 100, 3)
    assert event.text == "Twelve chars"
    counted = response_event({**completion, "usage": {"prompt_tokens": 9, "completion_tokens": 4}})
    assert (counted.input_tokens, counted.output_tokens) == (9, 4)


def test_the_agent_and_the_driver_share_one_rule() -> None:
    assert haltwise.agent.loop.CHARS_PER_TOKEN == openai_usage.CHARS_PER_TOKEN
    assert "CHARS_PER_TOKEN" in haltwise.agent.loop.__all__
    assert not hasattr(haltwise.agent.loop, "_estimated_tokens")
    assert not hasattr(haltwise.agent.loop, "_token_counts")


def test_an_async_run_counts_a_stream_without_usage_the_same() -> None:
    script = [reply("Still looking.", usage=(500, 9)), reply("It is 42.", usage=(600, 7))]

    async def main(server: ScriptedServer) -> AsyncRun:
        guard = Guard(max_turns(5))
        client = openai.AsyncOpenAI(base_url=server.base_url, api_key="test", max_retries=0)
        async with client, guard.arun(PROMPT) as run:
            for _ in range(2):
                await run.turn()
                sent = await run.model_request(MODEL, max_tokens=200, input_tokens=120)
                async with client.chat.completions.stream(
                    model=MODEL, messages=USER, max_tokens=sent
                ) as stream:
                    completion = await stream.get_final_completion()
                await run.model_response(completion)
            await run.model_response()  # no request in flight: the estimate alone
        return run

    with ScriptedServer(script) as server, estimates() as said:
        run = asyncio.run(main(server))
    assert run.outcome is not None and run.outcome.status is Status.COMPLETED
    usage = run.outcome.usage
    assert (usage.input_tokens, usage.output_tokens) == (240 + tokens(len(PROMPT)), 401)
    assert len(said) == 1 and re.search(ESTIMATED + "no token usage", said[0])
