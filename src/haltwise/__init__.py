"""haltwise: make every LLM agent loop halt at the right moment, with nothing lost.

The flat public surface. The engine (``haltwise.engine``) decides; drivers
(``haltwise.drivers``) carry decisions out in hand-written loops; ``haltwise.testing`` holds
the scripted OpenAI-compatible server and fake clock for tests.
"""

from . import _compiled

# Before any compiled module is imported: the compiled build, or the pure one (_compiled.py).
_compiled.choose()


import typing as _typing

from .config import Settings, load_config, parse_turn_limit
from .engine.decisions import CONTINUE, Answer, Ask, Block, Choice, Continue, Decision, Stop, Warn
from .engine.detectors import (
    cycles,
    degenerate_text,
    monologue,
    no_effect,
    no_progress,
    oscillation,
    paging,
    recurring_errors,
    repeats,
    same_errors,
    scattered,
    stuck,
)
from .engine.errors import (
    ConfigurationError,
    CostLimitExceeded,
    HaltError,
    HaltSignal,
    HaltwiseError,
    InvalidValueError,
    LedgerBusy,
    LedgerError,
    LimitExceeded,
    ModelCallLimitExceeded,
    QuestionOpen,
    RunCancelled,
    RunDeclined,
    StuckError,
    TimeLimitExceeded,
    TokenLimitExceeded,
    ToolCallLimitExceeded,
    TurnLimitExceeded,
    UnpricedModelError,
)
from .engine.events import (
    Event,
    Injected,
    ModelRequest,
    ModelResponse,
    Progress,
    RunEnded,
    RunStarted,
    ToolCall,
    ToolResult,
    TurnEnded,
    TurnStarting,
)
from .engine.governor import Governor
from .engine.ledger import Ledger, MemoryLedger
from .engine.limits import (
    UNLIMITED,
    Limit,
    LimitStatus,
    all_of,
    any_of,
    max_cost,
    max_model_calls,
    max_tokens,
    max_tool_calls,
    max_turns,
    timeout,
)
from .engine.outcome import Outcome, Status, Usage
from .engine.policies import Evidence, Policy
from .pricing import ModelRate, Prices

if _typing.TYPE_CHECKING:
    from .drivers import AsyncRun, Guard, Run, console_prompter, response_event
    from .loops import LoopResult, cost_gate, max_plan_size, session_limits
    from .loops.attempts import attempts
    from .loops.convergence import convergence
    from .loops.refine import refine
    from .loops.simplify import simplify

unlimited = UNLIMITED

#: The names imported when first asked for, by the module that holds them: the drivers import
#: asyncio (some 20 ms), and a program that only decides (an audit, a governor of its own)
#: never needs them.
_LAZY = {
    **dict.fromkeys(("AsyncRun", "Guard", "Run", "console_prompter", "response_event"), ".drivers"),
    **dict.fromkeys(
        (
            "LoopResult",
            "attempts",
            "convergence",
            "cost_gate",
            "max_plan_size",
            "refine",
            "session_limits",
            "simplify",
        ),
        ".loops",
    ),
}


def __getattr__(name: str) -> _typing.Any:
    # ``__version__`` is read from the installed package's metadata when first asked for:
    # importing ``importlib.metadata`` and reading it costs an import of haltwise some 30 ms.
    if name == "__version__":
        from importlib import metadata

        try:
            version = metadata.version("haltwise")
        except metadata.PackageNotFoundError:  # a source tree that is not installed
            version = "0.0.0"
        globals()["__version__"] = version
        return version
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'haltwise' has no attribute {name!r}")
    import importlib

    value = getattr(importlib.import_module(module, __name__), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *_LAZY})


__all__ = [
    "CONTINUE",
    "UNLIMITED",
    "Answer",
    "Ask",
    "AsyncRun",
    "Block",
    "Choice",
    "ConfigurationError",
    "Continue",
    "CostLimitExceeded",
    "Decision",
    "Event",
    "Evidence",
    "Governor",
    "Guard",
    "HaltError",
    "HaltSignal",
    "HaltwiseError",
    "Injected",
    "InvalidValueError",
    "Ledger",
    "LedgerBusy",
    "LedgerError",
    "Limit",
    "LimitExceeded",
    "LimitStatus",
    "LoopResult",
    "MemoryLedger",
    "ModelCallLimitExceeded",
    "ModelRate",
    "ModelRequest",
    "ModelResponse",
    "Outcome",
    "Policy",
    "Prices",
    "Progress",
    "QuestionOpen",
    "Run",
    "RunCancelled",
    "RunDeclined",
    "RunEnded",
    "RunStarted",
    "Settings",
    "Status",
    "Stop",
    "StuckError",
    "TimeLimitExceeded",
    "TokenLimitExceeded",
    "ToolCall",
    "ToolCallLimitExceeded",
    "ToolResult",
    "TurnEnded",
    "TurnLimitExceeded",
    "TurnStarting",
    "UnpricedModelError",
    "Usage",
    "Warn",
    "all_of",
    "any_of",
    "attempts",
    "console_prompter",
    "convergence",
    "cost_gate",
    "cycles",
    "degenerate_text",
    "load_config",
    "max_cost",
    "max_model_calls",
    "max_plan_size",
    "max_tokens",
    "max_tool_calls",
    "max_turns",
    "monologue",
    "no_effect",
    "no_progress",
    "oscillation",
    "paging",
    "parse_turn_limit",
    "policies",
    "recurring_errors",
    "refine",
    "repeats",
    "response_event",
    "same_errors",
    "scattered",
    "session_limits",
    "simplify",
    "stuck",
    "timeout",
    "unlimited",
]

from .engine import policies  # the policy factories: policies.ask(timeout=30), ...
