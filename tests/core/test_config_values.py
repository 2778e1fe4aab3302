"""Values a config file can hold that once got past the checks: a NaN, a pyproject.toml whose
``tool`` is no table, a price no call could be counted at, a number of thousands of digits. Each
is one ``ConfigurationError`` naming the file, the setting and the value as the file writes it."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from haltwise import ConfigurationError, InvalidValueError
from haltwise.config import (
    ENVIRONMENT,
    OTHER_VARIABLES,
    parse_count,
    parse_positive_count,
    settings_from_env,
    settings_from_file,
)

FRACTION = "is not valid: expected a fraction between 0 and 1, such as 0.8"


def config(tmp_path: Path, text: str, name: str = "haltwise.toml") -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


@pytest.mark.parametrize("written", ["nan", "-nan", "+nan", "inf", "-inf"])
def test_a_warn_at_that_is_no_number_is_refused_as_the_variable_is(
    tmp_path: Path, written: str
) -> None:
    # TOML floats are read as Decimals, and comparing a NaN Decimal raised InvalidOperation.
    with pytest.raises(InvalidValueError) as raised:
        settings_from_file(config(tmp_path, f"warn_at = {written}\n"))
    shown = written.removeprefix("+")
    assert str(raised.value) == f"{tmp_path}/haltwise.toml: warn_at={shown} {FRACTION}"
    with pytest.raises(InvalidValueError) as raised:
        settings_from_env({"HALTWISE_WARN_AT": written})
    assert str(raised.value) == f"HALTWISE_WARN_AT={written!r} {FRACTION}"


@pytest.mark.parametrize(
    ("line", "shown"),
    [
        ("max_turns = 5.5", "max_turns=5.5"),
        ("max_turns = 1e99", "max_turns=1E+99"),
        ("max_turns = false", "max_turns=false"),
        ("timeout = 1979-05-27", "timeout=1979-05-27"),
        ("timeout = 1979-05-27T07:32:00Z", "timeout=1979-05-27T07:32:00+00:00"),
        ("timeout = 07:32:00", "timeout=07:32:00"),
        ("max_cost = [1.5, 'x']", "max_cost=[1.5, 'x']"),
        ("max_cost = 'lots'", "max_cost='lots'"),
        ("[tool_calls]\nsearch = 2.5", "tool_calls.search=2.5"),
    ],
)
def test_a_bad_value_is_shown_as_the_file_writes_it(tmp_path: Path, line: str, shown: str) -> None:
    # Not as Python's repr: max_turns=Decimal('5.5'), timeout=datetime.date(1979, 5, 27).
    with pytest.raises(InvalidValueError) as raised:
        settings_from_file(config(tmp_path, line + "\n"))
    assert str(raised.value).startswith(f"{tmp_path}/haltwise.toml: {shown} is not valid: ")


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (
            'tool = "x"\n# see [tool.haltwise]\n',
            "pyproject.toml: tool='x' is not valid: expected a table of tools' settings "
            "(haltwise's: [tool.haltwise])",
        ),
        (
            "tool = [1.5]\n",
            "pyproject.toml: tool=[1.5] is not valid: expected a table of tools' settings",
        ),
        (
            "[tool]\nhaltwise = 3\n",
            "pyproject.toml: tool.haltwise=3 is not valid: expected a table of settings: "
            "[tool.haltwise]",
        ),
    ],
)
def test_a_pyproject_whose_tool_is_no_table_is_named(
    tmp_path: Path, text: str, message: str
) -> None:
    with pytest.raises(InvalidValueError, match=re.escape(message)):
        settings_from_file(config(tmp_path, text, "pyproject.toml"))


def test_a_pyproject_without_haltwise_settings_sets_nothing(tmp_path: Path) -> None:
    path = config(
        tmp_path, '[tool.ruff]\nline-length = 100\n[project]\nname = "x"\n', "pyproject.toml"
    )
    assert settings_from_file(path).max_turns == 25


@pytest.mark.parametrize(("field", "rate"), [("input", "1e30"), ("cache_read", "5551116")])
def test_a_price_no_call_could_be_counted_at_refuses_the_file(
    tmp_path: Path, field: str, rate: str
) -> None:
    """Such a table once loaded; the first call was sent and paid for, then the run ended with
    a message naming neither the file nor the table, the call's tokens uncounted."""
    rates = {"input": "0.15", "output": "0.60", field: rate}
    text = '[prices."gpt-4o-mini"]\n' + "".join(f"{k} = {v}\n" for k, v in rates.items())
    with pytest.raises(InvalidValueError) as raised:
        settings_from_file(config(tmp_path, text))
    shown = "1E+30" if rate == "1e30" else rate
    assert str(raised.value) == (
        f"{tmp_path}/haltwise.toml: prices['gpt-4o-mini'].{field}={shown} is not valid: "
        "expected at most 5,551,115 USD per million tokens, the dearest rate at which every "
        "call can still be counted"
    )


def test_the_dearest_price_accepted_is_taken(tmp_path: Path) -> None:
    text = '[prices."m"]\ninput = 5551115\noutput = "5551115.0"\n'
    assert str(settings_from_file(config(tmp_path, text)).prices["m"].output) == "5551115.0"


def test_an_unknown_variable_lists_every_variable_haltwise_reads() -> None:
    with pytest.raises(ConfigurationError) as raised:
        settings_from_env({"HALTWISE_STOR": "/tmp/s.db"})
    message = str(raised.value)
    assert message.startswith(
        "unknown environment variable: 'HALTWISE_STOR'; did you mean 'HALTWISE_STORE'? Known: "
    )
    known = message.split("Known: ", 1)[1].rstrip(".").split(", ")
    assert sorted(known) == sorted([*ENVIRONMENT, *OTHER_VARIABLES])
    assert {"HALTWISE_STORE", "HALTWISE_MODEL", "HALTWISE_CACHE_DIR"} <= set(known)


@pytest.mark.parametrize("digits", [30, 5000])
def test_a_count_of_many_digits_is_refused_not_converted(digits: int) -> None:
    # int() of more than 4,300 digits raises ValueError, which was no InvalidValueError.
    with pytest.raises(InvalidValueError, match="expected a non-negative integer"):
        parse_count("HALTWISE_MAX_TURNS", "9" * digits)
    assert parse_count("HALTWISE_MAX_TURNS", "0" * 40 + "7") == 7


@pytest.mark.parametrize(
    "value", ["0", "-1", "unlimited", "2.5", "x", "1_000_000_000_001", "9223372036854775807"]
)
def test_a_positive_count_is_from_1_to_the_cap_of_every_count(value: str) -> None:
    with pytest.raises(InvalidValueError) as raised:
        parse_positive_count("--extend", value)
    assert str(raised.value) == (
        f"--extend={value!r} is not valid: expected a whole number from 1 to 1,000,000,000,000"
    )


def test_a_positive_count_takes_what_a_count_takes() -> None:
    assert parse_positive_count("--limit", " 1_000 ") == 1000
    assert parse_positive_count("--limit", "1000000000000") == 10**12
