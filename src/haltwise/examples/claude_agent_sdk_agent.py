"""A Claude Agent SDK agent under haltwise, against the scripted server (no network, no key).

The agent greps three files at once. The tool-call budget allows two, and then asks for an
answer from what was gathered (``on_limit="synthesize"``): the third call never runs, one more
request with no tools writes the answer, and it is the run's ``ResultMessage.result``.
"""

import asyncio
import tempfile
from typing import Any

from claude_agent_sdk import ClaudeAgentOptions, ToolAnnotations, create_sdk_mcp_server, tool

import haltwise
from haltwise.adapters.claude_agent_sdk import govern
from haltwise.testing import AnthropicServer, reply, tool_call

FILES = ("parser.py", "lexer.py", "cli.py")
SCRIPT = [  # what the scripted model answers, request by request
    reply(
        "Let me grep them.",
        tool_calls=[tool_call("mcp__repo__grep", {"path": path}) for path in FILES],
        usage=(900, 60),
    ),
    reply("parser.py reads tokens[0] unchecked; cli.py was not searched.", usage=(1200, 40)),
]


@tool("grep", "Search a file for tokens[0].", {"path": str}, ToolAnnotations(readOnlyHint=True))
async def grep(arguments: dict[str, Any]) -> dict[str, Any]:
    found = {"parser.py": "12: first = tokens[0]"}.get(arguments["path"], "no match")
    return {"content": [{"type": "text", "text": found}]}


async def solve() -> Any:
    with AnthropicServer(SCRIPT) as server, tempfile.TemporaryDirectory() as home:
        options = ClaudeAgentOptions(
            model="claude-sonnet-4-5",
            env=server.claude_code_env(home),  # the CLI calls the scripted server, nothing else
            cwd=home,
            setting_sources=[],
            tools=[],  # no built-in tools: only the one below
            mcp_servers={"repo": create_sdk_mcp_server("repo", tools=[grep])},
            allowed_tools=["mcp__repo__grep"],
        )
        guard = haltwise.Guard(
            haltwise.max_tool_calls(2, on_limit="synthesize") | haltwise.max_cost("0.10")
        )
        governed = await govern(options, guard, max_tokens=1024).run(
            "Why does parsing crash on empty input?"
        )
        sent = [bool(request["tools"]) for request in server.requests]

    usage = governed.usage
    print(f"status:  {governed.outcome.status} ({governed.outcome.reason})")
    print(f"answer:  {governed.output}")
    print(f"usage:   {usage.model_calls} model calls, {usage.tool_calls} tool calls, ${usage.cost}")
    print(f"sent:    {len(sent)} requests, the last {'with' if sent[-1] else 'without'} tools")
    return governed


def main() -> Any:
    return asyncio.run(solve())


if __name__ == "__main__":
    main()
