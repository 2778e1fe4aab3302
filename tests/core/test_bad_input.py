"""Every bad input gets one clear error naming its source, the value and the valid forms."""

from __future__ import annotations

import math
import re
import threading
from collections.abc import Callable
from decimal import Decimal
from pathlib import Path

import pytest

from haltwise import (
    UNLIMITED,
    ConfigurationError,
    InvalidValueError,
    load_config,
    max_cost,
    max_tokens,
    max_tool_calls,
    max_turns,
    parse_turn_limit,
    timeout,
)
from haltwise.config import settings_from_env, settings_from_file
from haltwise.engine import policies

COUNT = "expected a non-negative integer or 'unlimited'"


@pytest.mark.parametrize("value", [-1, 1.5, 1e99, True, "abc", None])
def test_max_turns_rejects(value: object) -> None:
    expected = re.escape(f"max_turns={value!r} is not valid: {COUNT}")
    with pytest.raises(InvalidValueError, match=expected):
        max_turns(value)  # type: ignore[arg-type]


def test_factory_options_are_checked() -> None:
    with pytest.raises(
        InvalidValueError, match="max_turns\\(scope\\)='forever'.*'run' or 'session'"
    ):
        max_turns(3, scope="forever")  # type: ignore[arg-type]
    with pytest.raises(InvalidValueError, match="warn_at\\)=1.5.*between 0 and 1"):
        max_turns(3, warn_at=1.5)
    with pytest.raises(InvalidValueError, match="on_limit\\)='explode'.*'abort', 'ask'"):
        max_tool_calls(3, on_limit="explode")
    with pytest.raises(InvalidValueError, match="max_cost='-1'.*US dollars"):
        max_cost("-1")
    with pytest.raises(InvalidValueError, match="max_cost='NaN'"):
        max_cost("NaN")
    with pytest.raises(InvalidValueError, match="timeout\\(minutes\\)=-5"):
        timeout(minutes=-5)
    with pytest.raises(InvalidValueError, match="at least one of total"):
        max_tokens()
    with pytest.raises(InvalidValueError, match="ask\\(timeout\\)=0"):
        policies.ask(timeout=0)


@pytest.mark.parametrize(
    "make",
    [
        lambda: timeout(seconds=1e308, minutes=1e308),  # each finite, the sum not
        lambda: timeout(hours=1e300),
        lambda: timeout(seconds=threading.TIMEOUT_MAX + 1),
        lambda: policies.ask(timeout=math.inf),
    ],
)
def test_no_time_limit_or_wait_is_longer_than_a_wait_can_be(make: Callable[[], object]) -> None:
    # Its time left is a call's timeout, and a prompter's thread is waited for: past
    # threading.TIMEOUT_MAX, those waits raise OverflowError.
    with pytest.raises(InvalidValueError, match="threading.TIMEOUT_MAX"):
        make()
    longest = threading.TIMEOUT_MAX
    assert repr(timeout(seconds=longest)) == f"timeout({longest!r})"  # taken


@pytest.mark.parametrize(
    ("variable", "value", "message"),
    [
        ("HALTWISE_MAX_TURNS", "-3", f"HALTWISE_MAX_TURNS='-3' is not valid: {COUNT}"),
        ("HALTWISE_MAX_TURNS", "abc", f"HALTWISE_MAX_TURNS='abc' is not valid: {COUNT}"),
        ("HALTWISE_MAX_TURNS", "1e99", f"HALTWISE_MAX_TURNS='1e99' is not valid: {COUNT}"),
        ("HALTWISE_MAX_TURNS", "2.5", f"HALTWISE_MAX_TURNS='2.5' is not valid: {COUNT}"),
        (
            "HALTWISE_MAX_COST",
            "lots",
            "HALTWISE_MAX_COST='lots' is not valid: expected a non-negative",
        ),
        ("HALTWISE_TIMEOUT", "soon", "HALTWISE_TIMEOUT='soon' is not valid: expected seconds"),
        ("HALTWISE_WARN_AT", "80%", "HALTWISE_WARN_AT='80%' is not valid: expected a fraction"),
        ("HALTWISE_ON_LIMIT", "panic", "HALTWISE_ON_LIMIT='panic' is not valid: expected one of"),
    ],
)
def test_bad_environment_values(variable: str, value: str, message: str) -> None:
    with pytest.raises(InvalidValueError) as raised:
        settings_from_env({variable: value})
    assert str(raised.value).startswith(message)


def test_an_unknown_environment_variable_is_named_with_a_suggestion() -> None:
    with pytest.raises(
        ConfigurationError, match="'HALTWISE_MAX_TURN'; did you mean 'HALTWISE_MAX_TURNS'"
    ):
        settings_from_env({"HALTWISE_MAX_TURN": "5"})


@pytest.mark.parametrize(
    "variable",
    [
        "HALTWISE_STORE",
        "HALTWISE_MODEL",
        "HALTWISE_PURE",
        "HALTWISE_DASHBOARD_TOKEN",
        "HALTWISE_CACHE_DIR",
    ],
)
def test_variables_other_parts_of_haltwise_read_are_no_settings_and_no_error(
    variable: str,
) -> None:
    # HALTWISE_PURE=1 once made ``haltwise run`` refuse to start.
    assert settings_from_env({variable: "1", "HALTWISE_MAX_TURNS": "7"}).max_turns == 7


def test_environment_defaults_and_good_values() -> None:
    settings = settings_from_env({})
    assert settings.max_turns == 25
    settings = settings_from_env(
        {
            "HALTWISE_MAX_TURNS": "unlimited",
            "HALTWISE_MAX_COST": "$2.50",
            "HALTWISE_TIMEOUT": "1h30m",
            "HALTWISE_ON_LIMIT": "ask",
        }
    )
    assert settings.max_turns is None
    assert settings.max_cost == Decimal("2.50")
    assert settings.timeout == 5400
    assert repr(settings.limits()) == (
        "max_turns(unlimited, on_limit='ask') | max_cost('2.50', on_limit='ask') | "
        "timeout(5400.0, on_limit='ask')"
    )


def write(tmp_path: Path, name: str, text: str) -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


def test_toml_policy_file(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        "haltwise.toml",
        'max_turns = 40\nmax_cost = 1.5\ntimeout = "30m"\nwarn_at = 0.8\n'
        '[tool_calls]\nweb_search = 5\n[prices."my-model"]\ninput = "0.5"\noutput = "1.5"\n',
    )
    settings = settings_from_file(path)
    assert settings.max_turns == 40
    assert settings.max_cost == Decimal("1.5")
    assert settings.tool_calls == {"web_search": 5}
    assert "my-model" in settings.prices
    assert "max_tool_calls(5, tool='web_search', warn_at=0.8)" in repr(settings.limits())


def test_pyproject_table_and_discovery(tmp_path: Path) -> None:
    write(tmp_path, "pyproject.toml", '[project]\nname = "x"\n[tool.haltwise]\nmax_turns = 7\n')
    assert load_config(search=tmp_path, environ={}).max_turns == 7
    assert load_config(search=tmp_path, environ={"HALTWISE_MAX_TURNS": "9"}).max_turns == 9


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("max_turns = -1\n", "haltwise.toml: max_turns=-1 is not valid"),
        ("max_turns = 'abc'\n", "haltwise.toml: max_turns='abc' is not valid"),
        # Shown in TOML's words, not Python's (True, Decimal('1E+99')).
        ("max_turns = true\n", "haltwise.toml: max_turns=true is not valid"),
        ("max_turns = 1e99\n", re.escape("haltwise.toml: max_turns=1E+99 is not valid")),
        (
            "max_trns = 5\n",
            "unknown setting in .*haltwise.toml: 'max_trns'; did you mean 'max_turns'",
        ),
        ("tool_calls = 5\n", "haltwise.toml: tool_calls=5 is not valid"),
        ("[tool_calls]\nsearch = -2\n", "haltwise.toml: tool_calls.search=-2 is not valid"),
        ("max_turns = [\n", "haltwise.toml: not valid TOML"),
    ],
)
def test_bad_config_files(tmp_path: Path, text: str, message: str) -> None:
    path = write(tmp_path, "haltwise.toml", text)
    with pytest.raises(ConfigurationError, match=message):
        settings_from_file(path)


def test_a_missing_config_file_is_named(tmp_path: Path) -> None:
    with pytest.raises(ConfigurationError, match="does not exist"):
        load_config(tmp_path / "nope.toml", environ={})


@pytest.mark.parametrize(
    ("command", "expected"),
    [("/turn-limit 10", 10), ("/turn-limit unlimited", UNLIMITED), ("0", 0), (" 25 ", 25)],
)
def test_turn_limit_command(command: str, expected: object) -> None:
    assert parse_turn_limit(command) == expected


@pytest.mark.parametrize(
    "command", ["/turn-limit abc", "/turn-limit -1", "/turn-limit", "/turn-limit 1e99"]
)
def test_turn_limit_command_rejects(command: str) -> None:
    with pytest.raises(
        InvalidValueError, match="/turn-limit=.* is not valid: expected a non-negative"
    ):
        parse_turn_limit(command)
