"""What ``haltwise chat``, ``haltwise run`` and the demo share: their options, the settings and
limits they make, the model endpoint, the store.

Precedence, lowest first: built-in defaults, ``haltwise.toml`` (or ``--config``), ``HALTWISE_*``
environment variables, then flags. Every bad value raises ``InvalidValueError`` (the CLI prints
its one line and exits 2). Nothing heavy is imported here until a command runs.
"""

from __future__ import annotations

import argparse
import os
import shlex
from collections.abc import Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..engine.errors import ConfigurationError, InvalidValueError
from .store import default_store_path

if TYPE_CHECKING:
    from ..config import Settings
    from ..engine.ledger import Ledger
    from ..engine.limits import Limit
    from .loop import Agent
    from .store import RunRecord, Store

__all__ = [
    "Endpoint",
    "add_agent_arguments",
    "agent_limits",
    "endpoint_from",
    "settings_from",
    "store_path",
]

#: The soft threshold the agent uses when none is configured: a note for the model at 80%.
DEFAULT_WARN_AT = 0.8
#: The model used on OpenAI's own endpoint when none is named.
DEFAULT_OPENAI_MODEL = "gpt-4o-mini"

#: Flag -> (setting, the name of its parser in ``haltwise.config``).
_LIMIT_FLAGS: dict[str, tuple[str, str]] = {
    "max_turns": ("max_turns", "parse_count"),
    "max_tool_calls": ("max_tool_calls", "parse_count"),
    "max_model_calls": ("max_model_calls", "parse_count"),
    "max_tokens": ("max_tokens", "parse_count"),
    "max_cost": ("max_cost", "parse_cost"),
    "timeout": ("timeout", "parse_duration"),
    "warn_at": ("warn_at", "parse_fraction"),
    "on_limit": ("on_limit", "parse_policy"),
    "ledger": ("ledger", "check_ledger_url"),
    "sandbox": ("sandbox", "parse_sandbox"),
    "allow_network": ("allow_network", "parse_switch"),
    "on_ledger_error": ("on_ledger_error", "parse_on_ledger_error"),
}


def add_agent_arguments(parser: argparse.ArgumentParser) -> None:
    """The options every face of the agent takes. Values stay strings here; they are checked
    by the same parsers as the config file, so that a bad one gets one clear line."""
    model = parser.add_argument_group("model endpoint (any OpenAI-compatible server)")
    model.add_argument(
        "--base-url",
        metavar="URL",
        help="e.g. http://localhost:11434/v1 for Ollama (default: $OPENAI_BASE_URL, else OpenAI)",
    )
    model.add_argument("--model", metavar="NAME", help="the model (default: $HALTWISE_MODEL)")
    model.add_argument("--api-key", metavar="KEY", help="(default: $OPENAI_API_KEY)")
    model.add_argument(
        "--max-output-tokens",
        metavar="N",
        help="max_tokens of each request (lets a cost limit reserve the worst case first)",
    )
    limits = parser.add_argument_group(
        "limits (also from haltwise.toml and HALTWISE_* variables; flags win)"
    )
    limits.add_argument(
        "--max-turns", metavar="N", help="turns per prompt, or 'unlimited' (default 25)"
    )
    limits.add_argument("--max-tool-calls", metavar="N", help="tool calls per prompt")
    limits.add_argument("--max-model-calls", metavar="N", help="model calls per prompt")
    limits.add_argument("--max-tokens", metavar="N", help="tokens (input + output) per prompt")
    limits.add_argument("--max-cost", metavar="USD", help="dollars per prompt, e.g. 0.50")
    limits.add_argument("--timeout", metavar="DURATION", help="time per prompt: 90, 90s, 30m")
    limits.add_argument(
        "--warn-at", metavar="FRACTION", help="note for the model at this fraction (default 0.8)"
    )
    limits.add_argument(
        "--on-limit",
        metavar="POLICY",
        help="abort | ask | synthesize | best_effort (chat default: ask; run default: abort)",
    )
    limits.add_argument(
        "--config", metavar="PATH", help="a haltwise.toml (default: ./haltwise.toml)"
    )
    tools = parser.add_argument_group("tools")
    tools.add_argument(
        "--workspace", metavar="DIR", help="the folder the tools may use (default: .)"
    )
    tools.add_argument("--yes", "-y", action="store_true", help="run shell commands without asking")
    tools.add_argument(
        "--command-timeout",
        metavar="SECONDS",
        default="60",
        help="the longest a shell command may run (default 60)",
    )
    tools.add_argument(
        "--sandbox",
        metavar="MODE",
        help="confine shell commands with bubblewrap: auto (where installed), on (refuse "
        "without it) or off (default auto; also sandbox in haltwise.toml, $HALTWISE_SANDBOX)",
    )
    tools.add_argument(
        "--allow-network",
        action="store_true",
        default=None,
        help="let sandboxed commands use the network (also allow_network in haltwise.toml, "
        "$HALTWISE_ALLOW_NETWORK)",
    )
    parser.add_argument(
        "--store",
        metavar="PATH",
        help="the SQLite store (default: $HALTWISE_STORE, else the user data dir)",
    )
    add_ledger_argument(parser)
    parser.add_argument(
        "--on-ledger-error",
        metavar="closed|open",
        help="when the ledger cannot be reached: closed stops the run (default), open goes on "
        "under the local limits (also HALTWISE_ON_LEDGER_ERROR, on_ledger_error in the config)",
    )


def add_ledger_argument(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--ledger",
        metavar="URL",
        help="where shared budgets and live runs are: sqlite:///PATH or redis://HOST:PORT/DB "
        "(default: $HALTWISE_LEDGER, the config's ledger, else the store)",
    )


def settings_from(args: argparse.Namespace, environ: Mapping[str, str] | None = None) -> Settings:
    """The config file and environment, then the flags."""
    from .. import config

    settings = config.load_config(getattr(args, "config", None), environ=environ)
    changes: dict[str, Any] = {}
    sources = dict(settings.sources)
    for flag, (name, parser) in _LIMIT_FLAGS.items():
        raw = getattr(args, flag, None)
        if raw is None:
            continue
        source = "--" + flag.replace("_", "-")
        changes[name] = getattr(config, parser)(source, raw)
        sources[name] = source
    return replace(settings, **changes, sources=sources)


def agent_limits(settings: Settings, *, interactive: bool) -> Limit:
    """The agent's limits: the settings' with a note for the model at 80% unless configured,
    every limit asking the human in a chat unless a policy is configured, and stuck detection
    when the engine has it."""
    if "warn_at" not in settings.sources:
        settings = replace(settings, warn_at=DEFAULT_WARN_AT)
    if interactive and "on_limit" not in settings.sources:
        settings = replace(settings, on_limit="ask")
    return settings.limits() | _stuck_detector(settings.on_limit)


def _stuck_detector(on_limit: str) -> Limit:
    from ..engine.detectors import stuck

    return stuck(on_limit=on_limit)


def positive_number(source: str, raw: object) -> float:
    try:
        value = float(str(raw))
    except ValueError:
        value = -1.0
    if not 0 < value < 10**7:
        raise InvalidValueError(source, raw, "a positive number of seconds, e.g. 60")
    return value


def optional_count(source: str, raw: object) -> int | None:
    """A count of at least 1 (``--max-output-tokens``), or None when not given. Never
    'unlimited': with no ``max_tokens`` a request is already as long as the server lets it
    be, so the word would only say what leaving the option out says."""
    from ..config import parse_positive_count

    if raw is None:
        return None
    return parse_positive_count(source, raw)


@dataclass(frozen=True)
class Endpoint:
    """Where the model is: base URL (None: OpenAI's), key, model name."""

    base_url: str | None
    api_key: str
    model: str | None

    @property
    def shown(self) -> str:
        return self.base_url or "https://api.openai.com/v1"

    def client(self, *, max_retries: int = 2, timeout: float = 600.0) -> Any:
        from openai import OpenAI

        return OpenAI(
            base_url=self.base_url, api_key=self.api_key, max_retries=max_retries, timeout=timeout
        )


def endpoint_from(args: argparse.Namespace, environ: Mapping[str, str] | None = None) -> Endpoint:
    """The endpoint from the flags and ``OPENAI_BASE_URL``, ``OPENAI_API_KEY``,
    ``HALTWISE_MODEL``; a clear error when there is none to talk to."""
    environ = os.environ if environ is None else environ
    base_url = args.base_url or environ.get("OPENAI_BASE_URL") or None
    api_key = args.api_key or environ.get("OPENAI_API_KEY") or None
    model = args.model or environ.get("HALTWISE_MODEL") or None
    if base_url is None and api_key is None:
        raise ConfigurationError(
            "no model endpoint: set OPENAI_API_KEY to use OpenAI, or --base-url URL (or "
            "OPENAI_BASE_URL) for an OpenAI-compatible server, e.g. --base-url "
            "http://localhost:11434/v1 --model qwen2.5-coder for Ollama. "
            "`haltwise demo` needs neither"
        )
    if base_url is None and model is None:
        model = DEFAULT_OPENAI_MODEL
    # Local servers accept any key; the client insists on one.
    return Endpoint(base_url, api_key or "not-needed", model)


def choose_model(endpoint: Endpoint, client: Any) -> str:
    """The model to use: the named one, else the server's only one; else a clear error
    listing what the server offers."""
    if endpoint.model:
        return endpoint.model
    from .loop import AgentError

    try:
        names = sorted(str(model.id) for model in client.models.list())
    except Exception as error:
        raise AgentError(
            f"no model named, and the server at {endpoint.shown} did not list its models "
            f"({type(error).__name__}: {error}); name one with --model or HALTWISE_MODEL"
        ) from None
    if len(names) == 1:
        return names[0]
    listed = ", ".join(names[:20]) or "none"
    raise ConfigurationError(
        f"no model named: choose one with --model or HALTWISE_MODEL (the server at "
        f"{endpoint.shown} offers: {listed})"
    )


def store_path(args: argparse.Namespace, environ: Mapping[str, str] | None = None) -> Path:
    if getattr(args, "store", None):
        return Path(args.store).expanduser()
    return default_store_path(environ)


def workspace_path(args: argparse.Namespace, fallback: str | None = None) -> Path:
    folder = Path(args.workspace or fallback or ".").expanduser()
    if not folder.is_dir():
        raise InvalidValueError("--workspace", str(folder), "an existing folder")
    return folder.resolve()


@dataclass
class Setup:
    """An agent made from the options, with its store and endpoint."""

    agent: Agent
    store: Store
    endpoint: Endpoint
    settings: Settings
    #: The stored run being taken up again, if ``--resume`` was given.
    resumed: RunRecord | None = None


def build_agent(
    args: argparse.Namespace,
    *,
    interactive: bool,
    listener: Any = None,
    prompter: Any = None,
    approver: Any = None,
    resume: str | None = None,
    environ: Mapping[str, str] | None = None,
) -> Setup:
    """Settings, endpoint, store, tools and agent, from the options (``resume``: a run id, or
    ``"last"``). Raises ``ConfigurationError`` for bad values, ``AgentError`` for an endpoint
    that cannot be used."""
    from ..engine.errors import UnpricedModelError
    from ..engine.governor import Governor
    from ..ledgers import open_ledger
    from ..pricing import Prices
    from .loop import Agent
    from .sandbox import choose_sandbox
    from .store import Store
    from .tools import Toolbox

    settings = settings_from(args, environ)
    limits = agent_limits(settings, interactive=interactive)
    command_timeout = positive_number("--command-timeout", getattr(args, "command_timeout", "60"))
    max_output = optional_count("--max-output-tokens", getattr(args, "max_output_tokens", None))
    store = Store(store_path(args, environ))
    # The fleet's ledger, if one is named; else the store is the ledger of this machine.
    ledger: Ledger = store
    if settings.ledger is not None:
        ledger = open_ledger(settings.ledger, source=settings.sources.get("ledger", "ledger"))
    record = None
    if resume is not None:
        run_id = store.latest_run() if resume == "last" else resume
        if run_id is None:
            raise ConfigurationError(f"there is no run to resume in the store {store.path}")
        from ..engine.errors import LedgerError

        try:
            record = store.load_run(run_id)
        except LedgerError as error:
            # The store is a ledger: its runs are the ones that can be resumed.
            url = shlex.quote(f"sqlite://{Path(store.path).resolve()}")
            listing = f"haltwise runs --all --ledger {url}"
            raise ConfigurationError(f"{error}; list its runs with `{listing}`") from None
        fallback = argparse.Namespace(**vars(args))
        fallback.base_url = (
            args.base_url
            or (environ or os.environ).get("OPENAI_BASE_URL")
            or (record.base_url or None)
        )
        fallback.model = (
            args.model or (environ or os.environ).get("HALTWISE_MODEL") or (record.model or None)
        )
        args = fallback
    endpoint = endpoint_from(args, environ)
    client = endpoint.client()
    model = choose_model(endpoint, client)
    prices = Prices(settings.prices) if settings.prices else None
    if settings.max_cost is not None:
        # Before any spending: a cost limit on a model with no known price cannot be kept.
        known = prices or Prices()
        if not known.knows(model):
            raise UnpricedModelError(model, known.describe_missing(model))
    workspace = workspace_path(args, record.workspace if record is not None else None)
    sandbox = choose_sandbox(
        settings.sandbox,
        workspace,
        allow_network=settings.allow_network,
        source=settings.sources.get("sandbox", "--sandbox"),
    )
    toolbox = Toolbox(
        workspace,
        approver=(lambda command: True) if getattr(args, "yes", False) else approver,
        command_timeout=command_timeout,
        sandbox=sandbox,
    )
    governor = Governor(
        limits, pricer=prices, ledger=ledger, on_ledger_error=settings.on_ledger_error
    )
    agent = Agent(
        client,
        model,
        toolbox,
        governor=governor,
        store=store,
        listener=listener,
        prompter=prompter,
        max_output_tokens=max_output,
        base_url=endpoint.shown,
    )
    if record is not None:
        agent.resume(record)
    return Setup(agent, store, endpoint, settings, record)
