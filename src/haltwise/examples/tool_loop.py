"""A hand-written OpenAI tool loop, governed by haltwise (the lines marked ``# haltwise``)."""

import json
from typing import Any

import haltwise

TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "run_tests",
            "description": "Run the test suite and return its output.",
            "parameters": {"type": "object", "properties": {}},
        },
    }
]


def run_tests() -> str:
    return "FAILED test_parser.py::test_roundtrip - AssertionError"


def solve(client: Any, model: str, task: str, guard: haltwise.Guard) -> Any:
    messages = [{"role": "user", "content": task}]
    with guard.run(task) as run:  # haltwise
        while True:
            run.turn()  # haltwise: asks, or stops, at the turn limit
            max_tokens = run.model_request(model, max_tokens=1024)  # haltwise: worst case first
            completion = client.chat.completions.create(
                model=model,
                messages=messages,
                tools=TOOLS,
                max_tokens=max_tokens,  # haltwise: lowered when a token limit has less left
                timeout=run.time_left(),  # haltwise: a hung call cannot outlive the run's time
            )
            run.model_response(completion)  # haltwise: tokens and dollars
            message = completion.choices[0].message
            messages.append(message.model_dump(exclude_none=True))
            if not message.tool_calls:
                run.finish(message.content)  # haltwise
                break
            for call in message.tool_calls:
                refusal = run.tool_call(call.function.name, call.function.arguments, call.id)
                output = refusal or run_tests()
                run.tool_result(call.function.name, output, call.id)  # haltwise
                messages.append({"role": "tool", "tool_call_id": call.id, "content": output})
            for note in run.notes():  # haltwise: "2 turns left; wrap up soon."
                messages.append({"role": "user", "content": note})
    return run.outcome  # haltwise: completed, or why it stopped, with usage and checkpoint


if __name__ == "__main__":
    from openai import OpenAI

    guard = haltwise.Guard(haltwise.max_turns(5, warn_at=0.6) | haltwise.max_cost("0.50"))
    outcome = solve(OpenAI(), "gpt-4o-mini", "Make the parser tests pass.", guard)
    print(json.dumps({"status": str(outcome.status), "message": outcome.message}))
