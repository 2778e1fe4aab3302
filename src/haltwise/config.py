"""Settings from the places users put them: environment variables, a TOML policy, and the
``/turn-limit`` command typed in a chat.

Precedence, lowest first: built-in defaults, the TOML file (``haltwise.toml``, or
``[tool.haltwise]`` in ``pyproject.toml``), environment variables, then arguments in code.
Every bad value raises ``InvalidValueError`` naming its source, the value, and the valid forms.

``haltwise.toml``::

    max_turns = 25              # a non-negative integer, or "unlimited"
    max_model_calls = 100
    max_tool_calls = 50
    max_tokens = 500_000        # input and output together; also max_input_tokens, ...
    max_cost = "2.00"           # US dollars
    timeout = "30m"             # seconds, or "90s", "30m", "1h30m"
    warn_at = 0.8               # a note for the model at 80% of each limit
    on_limit = "ask"            # abort | ask | synthesize | best_effort
    ledger = "sqlite:///home/me/fleet.db"   # or redis://host:6379/0 (shared budgets, live runs)
    sandbox = "auto"            # the agent's shell commands: auto | on | off (bubblewrap)
    allow_network = false       # whether sandboxed commands may use the network
    on_ledger_error = "closed"  # an unreachable ledger stops the run; "open": go on locally

    [tool_calls]                # per-tool caps
    web_search = 5

    [prices."my-model"]         # USD per million tokens; overrides genai-prices
    input = "0.50"
    output = "1.50"
"""

from __future__ import annotations

import difflib
import os
import re
import sys
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from datetime import date, time
from decimal import Decimal, InvalidOperation
from pathlib import Path
from typing import Any

from .engine.errors import ConfigurationError, InvalidValueError
from .engine.limits import (
    UNLIMITED,
    Limit,
    Unlimited,
    any_of,
    as_limit,
    max_cost,
    max_model_calls,
    max_tokens,
    max_tool_calls,
    max_turns,
    timeout,
)
from .engine.policies import POLICY_NAMES
from .ledgers import check_ledger_url
from .pricing import ModelRate, check_countable, parse_price_table

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - Python 3.10
    import tomli as tomllib

__all__ = [
    "DEFAULT_MAX_TURNS",
    "ENVIRONMENT",
    "Settings",
    "load_config",
    "parse_positive_count",
    "parse_turn_limit",
    "settings_from_env",
    "settings_from_file",
]

DEFAULT_MAX_TURNS = 25
#: The largest count accepted (a guard against typos like 1e99 or a stray digit run).
_MAX_COUNT = 10**12

_COUNT_FORMS = "a non-negative integer or 'unlimited'"
_POSITIVE_FORMS = f"a whole number from 1 to {_MAX_COUNT:,}"
_COST_FORMS = "a non-negative amount of US dollars such as '2.00', or 'unlimited'"
_TIME_FORMS = "seconds (90) or a duration such as '90s', '30m', '1h30m', or 'unlimited'"
_WARN_FORMS = "a fraction between 0 and 1, such as 0.8"
_LEDGER_ERROR_FORMS = (
    "'closed' (an unreachable ledger stops the run) or 'open' (the run goes on under its local "
    "limits and settles with the ledger once it is back)"
)
_POLICY_FORMS = "one of " + ", ".join(repr(name) for name in POLICY_NAMES if name != "block")
#: The agent's shell sandbox modes (``haltwise.agent.sandbox`` carries them out).
SANDBOX_MODES = ("auto", "on", "off")
_SANDBOX_FORMS = "one of " + ", ".join(repr(mode) for mode in SANDBOX_MODES)
_SWITCH_FORMS = "true or false (also yes or no, 1 or 0)"
_SWITCHES = {"true": True, "yes": True, "1": True, "false": False, "no": False, "0": False}


@dataclass(frozen=True)
class Settings:
    """Every setting, validated. ``None`` means unlimited (or unset)."""

    max_turns: int | None = DEFAULT_MAX_TURNS
    max_model_calls: int | None = None
    max_tool_calls: int | None = None
    max_tokens: int | None = None
    max_input_tokens: int | None = None
    max_output_tokens: int | None = None
    max_cost: Decimal | None = None
    #: Seconds.
    timeout: float | None = None
    warn_at: float | None = None
    on_limit: str = "abort"
    #: Per-tool caps: tool name -> calls per run.
    tool_calls: Mapping[str, int] = field(default_factory=dict)
    #: Prices that override and extend genai-prices.
    prices: Mapping[str, ModelRate] = field(default_factory=dict)
    #: The ledger's URL (shared budgets, live runs); None: the agent's own store.
    ledger: str | None = None
    #: The agent's shell sandbox: ``auto``, ``on`` or ``off``.
    sandbox: str = "auto"
    #: Whether the agent's sandboxed shell commands may use the network.
    allow_network: bool = False
    #: What an unreachable ledger does to a run with shared limits: ``closed`` or ``open``.
    on_ledger_error: str = "closed"
    #: Where each setting came from, for messages: setting name -> source.
    sources: Mapping[str, str] = field(default_factory=dict, compare=False)

    def limits(self) -> Limit:
        """The limit expression these settings describe."""
        options: dict[str, Any] = {"warn_at": self.warn_at, "on_limit": self.on_limit}
        parts: list[Limit] = [
            max_turns(UNLIMITED if self.max_turns is None else self.max_turns, **options)
        ]
        if self.max_model_calls is not None:
            parts.append(max_model_calls(self.max_model_calls, **options))
        if self.max_tool_calls is not None:
            parts.append(max_tool_calls(self.max_tool_calls, **options))
        tokens = {
            "total": self.max_tokens,
            "input": self.max_input_tokens,
            "output": self.max_output_tokens,
        }
        if any(value is not None for value in tokens.values()):
            parts.append(
                max_tokens(
                    tokens["total"], input=tokens["input"], output=tokens["output"], **options
                )
            )
        if self.max_cost is not None:
            parts.append(max_cost(self.max_cost, **options))
        if self.timeout is not None:
            parts.append(timeout(self.timeout, **options))
        for tool, cap in self.tool_calls.items():
            parts.append(max_tool_calls(cap, tool=tool, warn_at=self.warn_at))
        return any_of(*parts) if parts else as_limit(None)


# --------------------------------------------------------------------------------------------
# Values


def parse_count(source: str, value: object) -> int | None:
    """A count: a non-negative integer, or ``unlimited`` (None)."""
    if isinstance(value, str):
        text = value.strip()
        if text.lower() == "unlimited":
            return None
        if re.fullmatch(r"[0-9][0-9_]*", text):
            digits = text.replace("_", "")
            # Past the cap either way; int() of thousands of digits would raise.
            if len(digits.lstrip("0")) <= len(str(_MAX_COUNT)):
                value = int(digits)
    if isinstance(value, int) and not isinstance(value, bool) and 0 <= value <= _MAX_COUNT:
        return value
    raise InvalidValueError(source, value, _COUNT_FORMS)


def parse_positive_count(source: str, value: object) -> int:
    """A count of at least 1, never unlimited: how many turns ``haltwise approve --extend``
    adds, how many runs ``haltwise runs --limit`` lists. Capped as every count is, so that no
    stray digit run reaches a limit or the ledger."""
    try:
        count = parse_count(source, value)
    except InvalidValueError:
        count = None
    if count is None or count == 0:
        raise InvalidValueError(source, value, _POSITIVE_FORMS)
    return count


def parse_cost(source: str, value: object) -> Decimal | None:
    if isinstance(value, str) and value.strip().lower() == "unlimited":
        return None
    try:
        if isinstance(value, bool) or not isinstance(value, str | int | Decimal):
            raise TypeError
        amount = Decimal(value.strip().removeprefix("$") if isinstance(value, str) else value)
    except (TypeError, InvalidOperation):
        raise InvalidValueError(source, value, _COST_FORMS) from None
    if not amount.is_finite() or amount < 0 or amount > _MAX_COUNT:
        raise InvalidValueError(source, value, _COST_FORMS)
    return amount


_DURATION = re.compile(r"(?:(\d+(?:\.\d+)?)h)?(?:(\d+(?:\.\d+)?)m)?(?:(\d+(?:\.\d+)?)s)?")


def parse_duration(source: str, value: object) -> float | None:
    """Seconds, from a number of seconds or a text such as ``90s``, ``30m``, ``1h30m``."""
    seconds: float | None = None
    if isinstance(value, int | float | Decimal) and not isinstance(value, bool):
        seconds = float(value)
    elif isinstance(value, str):
        text = value.strip().lower().replace(" ", "")
        if text == "unlimited":
            return None
        if re.fullmatch(r"\d+(\.\d+)?", text):
            seconds = float(text)
        else:
            match = _DURATION.fullmatch(text)
            if match and text:
                hours, minutes, secs = (float(part) if part else 0.0 for part in match.groups())
                seconds = hours * 3600 + minutes * 60 + secs
    if seconds is None or not 0 < seconds < 10**9:
        raise InvalidValueError(source, value, _TIME_FORMS)
    return seconds


def parse_fraction(source: str, value: object) -> float | None:
    number: Decimal | None = None
    try:
        if isinstance(value, str):
            number = Decimal(value.strip())
        elif isinstance(value, int | float | Decimal) and not isinstance(value, bool):
            number = Decimal(value)
    except InvalidOperation:
        number = None
    # A NaN (``nan`` in TOML, read as a Decimal) is refused before any comparison, which it
    # would make raise.
    if number is not None and number.is_finite() and 0 < number < 1:
        return float(number)
    raise InvalidValueError(source, value, _WARN_FORMS)


def parse_policy(source: str, value: object) -> str:
    if isinstance(value, str):
        name = value.strip().lower().replace("-", "_")
        if name in POLICY_NAMES and name != "block":
            return name
    raise InvalidValueError(source, value, _POLICY_FORMS)


def parse_sandbox(source: str, value: object) -> str:
    if isinstance(value, str) and value.strip().lower() in SANDBOX_MODES:
        return value.strip().lower()
    raise InvalidValueError(source, value, _SANDBOX_FORMS)


def parse_switch(source: str, value: object) -> bool:
    """A yes-or-no setting: a TOML boolean, or true/false, yes/no, 1/0 in a variable."""
    if isinstance(value, bool):
        return value
    if isinstance(value, str) and value.strip().lower() in _SWITCHES:
        return _SWITCHES[value.strip().lower()]
    raise InvalidValueError(source, value, _SWITCH_FORMS)


def parse_on_ledger_error(source: str, value: object) -> str:
    if isinstance(value, str) and value.strip().lower() in ("closed", "open"):
        return value.strip().lower()
    raise InvalidValueError(source, value, _LEDGER_ERROR_FORMS)


def parse_turn_limit(text: str) -> int | Unlimited:
    """The argument of the runtime command ``/turn-limit N|unlimited``.

    Accepts the whole command line or just its argument.
    """
    argument = text.strip()
    if argument.startswith("/turn-limit"):
        argument = argument.removeprefix("/turn-limit").strip()
    if not argument:
        raise InvalidValueError("/turn-limit", "", _COUNT_FORMS + ", e.g. /turn-limit 25")
    count = parse_count("/turn-limit", argument)
    return UNLIMITED if count is None else count


_PARSERS: dict[str, Any] = {
    "max_turns": parse_count,
    "max_model_calls": parse_count,
    "max_tool_calls": parse_count,
    "max_tokens": parse_count,
    "max_input_tokens": parse_count,
    "max_output_tokens": parse_count,
    "max_cost": parse_cost,
    "timeout": parse_duration,
    "warn_at": parse_fraction,
    "on_limit": parse_policy,
    "ledger": check_ledger_url,
    "sandbox": parse_sandbox,
    "allow_network": parse_switch,
    "on_ledger_error": parse_on_ledger_error,
}

#: Environment variable -> setting.
ENVIRONMENT: dict[str, str] = {f"HALTWISE_{name.upper()}": name for name in _PARSERS}
#: Variables other parts of haltwise read themselves, not settings: the agent's store and model,
#: the pure build (``_compiled``), the dashboard's token, the folder of cached prices.
OTHER_VARIABLES = frozenset(
    {
        "HALTWISE_STORE",
        "HALTWISE_MODEL",
        "HALTWISE_PURE",
        "HALTWISE_DASHBOARD_TOKEN",
        "HALTWISE_CACHE_DIR",
    }
)


# --------------------------------------------------------------------------------------------
# Sources


def settings_from_env(
    environ: Mapping[str, str] | None = None, base: Settings | None = None
) -> Settings:
    """``base`` with what ``HALTWISE_*`` environment variables set; an unknown one is an error
    (it is most likely a typo, and a limit silently not set is the failure we exist to stop)."""
    environ = os.environ if environ is None else environ
    changes: dict[str, Any] = {}
    sources: dict[str, str] = dict(base.sources) if base else {}
    for variable, raw in environ.items():
        if not variable.startswith("HALTWISE_") or variable in OTHER_VARIABLES:
            continue
        name = ENVIRONMENT.get(variable)
        if name is None:
            known = [*ENVIRONMENT, *sorted(OTHER_VARIABLES)]
            raise ConfigurationError(_unknown(variable, known, "environment variable"))
        changes[name] = _PARSERS[name](variable, raw)
        sources[name] = variable
    return replace(base or Settings(), **changes, sources=sources)


def settings_from_file(path: str | Path, base: Settings | None = None) -> Settings:
    """``base`` with what a ``haltwise.toml`` (or a ``pyproject.toml``'s ``[tool.haltwise]``)
    sets."""
    path = Path(path)
    text = _read_config(path)
    try:
        document = tomllib.loads(text, parse_float=Decimal)
    except tomllib.TOMLDecodeError as error:
        raise ConfigurationError(
            f"config file {path}: not valid TOML: {error}; fix that line (the syntax: "
            "https://toml.io)"
        ) from None
    table: Any = document
    where = str(path)
    if path.name == "pyproject.toml":
        # Other tools own the rest of the file: only the tables on the way to ours are checked.
        tool = document.get("tool", {})
        if not isinstance(tool, dict):
            raise InvalidValueError(
                f"{path}: tool",
                _as_written(tool),
                "a table of tools' settings (haltwise's: [tool.haltwise])",
            )
        table = tool.get("haltwise", {})
        if not isinstance(table, dict):
            raise InvalidValueError(
                f"{path}: tool.haltwise", _as_written(table), "a table of settings: [tool.haltwise]"
            )
        where = f"{path} [tool.haltwise]"
    return _apply_table(table, where, base or Settings())


def _read_config(path: Path) -> str:
    """The text of a config file, or a ``ConfigurationError`` that names it, says what is
    wrong and how to fix it."""
    fix = "name another with --config"
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        raise ConfigurationError(f"config file {path} does not exist; {fix}") from None
    except IsADirectoryError:
        raise ConfigurationError(
            f"config file {path} is a folder; name the file in it, e.g. --config "
            f"{path / 'haltwise.toml'}"
        ) from None
    except PermissionError:
        raise ConfigurationError(
            f"config file {path} cannot be read (permission denied); make it readable "
            f"(chmod u+r {path}) or {fix}"
        ) from None
    except OSError as error:
        raise ConfigurationError(
            f"config file {path} cannot be read ({error.strerror or error}); {fix}"
        ) from None
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as error:
        line = data[: error.start].count(b"\n") + 1
        raise ConfigurationError(
            f"config file {path} is not UTF-8 text (byte {data[error.start]:#04x} on line "
            f"{line}); save it as UTF-8"
        ) from None


def _apply_table(table: dict[str, Any], where: str, base: Settings) -> Settings:
    try:
        return _settings_of_table(table, where, base)
    except InvalidValueError as error:
        raise InvalidValueError(error.source, _as_written(error.value), error.valid) from None


def _settings_of_table(table: dict[str, Any], where: str, base: Settings) -> Settings:
    changes: dict[str, Any] = {}
    sources = dict(base.sources)
    known = [*_PARSERS, "tool_calls", "prices"]
    for key, value in table.items():
        source = f"{where}: {key}"
        if key in _PARSERS:
            changes[key] = _PARSERS[key](source, value)
        elif key == "tool_calls":
            if not isinstance(value, dict):
                raise InvalidValueError(source, value, "a table of tool name = calls per run")
            changes[key] = {
                str(tool): _required(parse_count(f"{source}.{tool}", cap), f"{source}.{tool}")
                for tool, cap in value.items()
            }
        elif key == "prices":
            if not isinstance(value, dict):
                raise InvalidValueError(source, value, "a table of model = {input, output}")
            try:
                changes[key] = parse_price_table(value)
                check_countable(changes[key])
            except InvalidValueError as error:  # it names the entry; the file is named here
                raise InvalidValueError(
                    f"{where}: {error.source}", error.value, error.valid
                ) from None
        else:
            raise ConfigurationError(_unknown(key, known, f"setting in {where}"))
        sources[key] = source
    return replace(base, **changes, sources=sources)


class _Written(str):
    """A value of a TOML file as TOML writes it, for messages: ``5.5``, ``nan``,
    ``1979-05-27``, ``true``, where Python's repr says ``Decimal('5.5')`` and
    ``datetime.date(1979, 5, 27)``, which the user never wrote."""

    def __repr__(self) -> str:
        return str(self)


def _as_written(value: object) -> object:
    """``value``, read from a TOML file, in TOML's words (a string keeps its quotes)."""
    if isinstance(value, bool):
        return _Written(str(value).lower())
    if isinstance(value, Decimal):  # every TOML float: the file is read with parse_float=Decimal
        sign = "-" if value.is_signed() else ""
        if value.is_nan():
            return _Written(f"{sign}nan")
        if value.is_infinite():
            return _Written(f"{sign}inf")
        return _Written(str(value))
    if isinstance(value, date | time):  # datetime is a date
        return _Written(value.isoformat())
    if isinstance(value, list):
        return _Written(f"[{', '.join(repr(_as_written(item)) for item in value)}]")
    return value


def _required(count: int | None, source: str) -> int:
    if count is None:
        raise InvalidValueError(
            source, "unlimited", "a non-negative integer (omit the tool for no cap)"
        )
    return count


def find_config(start: str | Path = ".") -> Path | None:
    """``haltwise.toml`` in ``start``, else a ``pyproject.toml`` there with ``[tool.haltwise]``."""
    folder = Path(start)
    candidate = folder / "haltwise.toml"
    if candidate.is_file():
        return candidate
    pyproject = folder / "pyproject.toml"
    if pyproject.is_file() and "[tool.haltwise" in pyproject.read_text(errors="replace"):
        return pyproject
    return None


def load_config(
    path: str | Path | None = None,
    *,
    environ: Mapping[str, str] | None = None,
    search: str | Path | None = ".",
) -> Settings:
    """Defaults, then the config file (``path``, or one found in ``search``), then the
    environment."""
    settings = Settings()
    found = (
        Path(path) if path is not None else (find_config(search) if search is not None else None)
    )
    if found is not None:
        settings = settings_from_file(found, settings)
    return settings_from_env(environ, settings)


def _unknown(name: str, known: list[str], what: str) -> str:
    close = difflib.get_close_matches(name, known, n=1)
    hint = f"; did you mean {close[0]!r}?" if close else ""
    return f"unknown {what}: {name!r}{hint} Known: {', '.join(known)}."
