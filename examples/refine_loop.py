"""A build, test and review loop around an agent, bounded by haltwise.

Runs as is, with no network and no keys, against haltwise's scripted OpenAI-compatible server:

    python examples/refine_loop.py
"""

from __future__ import annotations

import json
from typing import Any

import openai

import haltwise
from haltwise.loops import Issue, LoopResult, Step, refine, session_limits
from haltwise.testing import ScriptedServer, reply

MODEL = "scripted-model"

# What the scripted model answers, in order: a buggy first draft, a fix, then a review.
SCRIPT = [
    reply("def add(a, b):\n    return a - b\n", usage=(40, 12)),
    reply("def add(a, b):\n    return a + b\n", usage=(90, 12)),
    reply(
        json.dumps({"issues": [{"text": "add has no docstring", "severity": "minor"}]}),
        usage=(70, 20),
    ),
]


def ask(client: Any, step: Step, prompt: str) -> str:
    """One agent run inside a pass. It reports to ``step.governor``, a child of the session's
    governor: its model calls, tokens and dollars count against the session's limits."""
    guard = haltwise.Guard(governor=step.governor)
    with guard.run(prompt, suppress=False) as run:  # a stop raises; the loop records it
        run.turn()
        run.model_request(MODEL, max_tokens=512)
        completion = client.chat.completions.create(
            model=MODEL, messages=[{"role": "user", "content": prompt}], max_tokens=512
        )
        run.model_response(completion)
        text: str = completion.choices[0].message.content or ""
        run.finish(text)
    return text


def main() -> LoopResult[str]:
    # The session's circuit breakers: 30 minutes, 50 model calls, 500k tokens, for every loop
    # and every agent inside them.
    session = haltwise.Governor(session_limits(minutes=30, model_calls=50, tokens=500_000))

    with ScriptedServer(SCRIPT) as server:
        client = openai.OpenAI(base_url=server.base_url, api_key="test")

        def build(step: Step) -> str:
            return ask(client, step, "Write a Python function add(a, b).")

        def test(code: str, step: Step) -> list[str]:
            # A real loop runs the project's test suite; here it is one assertion.
            namespace: dict[str, Any] = {}
            exec(code, namespace)
            return [] if namespace["add"](2, 3) == 5 else ["add(2, 3) should be 5"]

        def review(code: str, step: Step) -> list[Issue]:
            # The critic is told how strict to be: everything, then significant, then critical.
            answer = ask(client, step, f"Review at strictness {step.strictness!r}:\n{code}")
            return [Issue(i["text"], i["severity"]) for i in json.loads(answer)["issues"]]

        def fix(code: str, issues: tuple[Issue, ...], step: Step) -> str:
            problems = "\n".join(f"- {issue}" for issue in issues)
            return ask(client, step, f"Fix these problems:\n{problems}\n\n{code}")

        result = refine(3).run(build, review, fix, test=test, governor=session)

    print(f"{result.outcome.status}: {result.outcome.message}")
    for line in result.tried:
        print("  ", line)
    usage = result.outcome.usage
    print(f"model calls: {usage.model_calls}, tokens: {usage.total_tokens}")
    print(result.value)
    return result


if __name__ == "__main__":
    main()
