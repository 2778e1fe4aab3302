"""Framework adapters: haltwise's limits, asks and stops inside the agent frameworks people use.

One module per framework, each behind its own extra and imported only when used:

- ``haltwise.adapters.openai_agents`` (``haltwise[openai-agents]``): the OpenAI Agents SDK;
- ``haltwise.adapters.pydantic_ai`` (``haltwise[pydantic-ai]``): pydantic-ai;
- ``haltwise.adapters.langchain`` (``haltwise[langchain]``): LangChain v1 ``create_agent`` and
  LangGraph;
- ``haltwise.adapters.claude_agent_sdk`` (``haltwise[claude-agent-sdk]``): the Claude Agent SDK.

Each has the same shape: ``govern(agent, guard)`` gives the framework's agent (or runner) back
governed, and its ``run`` returns a ``Governed``: the uniform ``Outcome`` and the framework's
own result. Every adapter gives the limits ONE meaning: ``max_model_calls(3)`` lets exactly three
model requests be sent, ``max_turns(3)`` three model round trips with their tool calls,
``max_tool_calls(3)`` three tool executions (parallel calls counted one by one before any runs),
and work done by sub-agents counts against the parent's limits.
"""

from __future__ import annotations

from ._common import Governed

__all__ = ["Governed"]
