"""Tests for haltwise.pricing: genai-prices behind a cache, plus the user's own price table."""

from __future__ import annotations

import contextlib
import json
import subprocess
import sys
import threading
from collections.abc import Callable
from dataclasses import FrozenInstanceError
from datetime import date, datetime, time, timezone
from decimal import Decimal
from pathlib import Path
from typing import Any

import genai_prices
import pytest
from genai_prices import Usage
from genai_prices.types import (
    ClauseEquals,
    ConditionalPrice,
    ModelInfo,
    ModelPrice,
    PriceCalculation,
    Provider,
    StartDateConstraint,
    TimeOfDateConstraint,
)

import haltwise.pricing as pricing
from haltwise import Governor, ModelRequest, ModelResponse, RunStarted, max_cost
from haltwise.engine.errors import ConfigurationError, InvalidValueError
from haltwise.engine.pricing import Pricer, dollars, in_units, units
from haltwise.pricing import ModelRate, Prices, parse_price_table

TRACES = Path(__file__).resolve().parents[1].parent / "shared" / "traces"
GEMINI_RUNS = TRACES / "mini-swe-agent-gemini3"

NUMBER_FORMS = (
    'a finite, non-negative number of USD per million tokens: a string such as "0.50", '
    "an int, or a Decimal"
)


#: genai-prices' own calc_price, which the ``calc_calls`` fixture counts calls to.
_CALC_PRICE = genai_prices.calc_price


def genai_total(model: str, i: int, o: int, cr: int = 0, cw: int = 0) -> Decimal:
    """What genai-prices itself says, called directly (never through haltwise's cache)."""
    usage = Usage(input_tokens=i, output_tokens=o, cache_read_tokens=cr, cache_write_tokens=cw)
    return _CALC_PRICE(usage, model_ref=model).total_price


@pytest.fixture
def calc_calls(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Counts the calls haltwise.pricing makes to genai_prices.calc_price (by model_ref)."""
    calls: list[str] = []
    real: Callable[..., PriceCalculation] = _CALC_PRICE

    def counting(usage: object, model_ref: str, **kwargs: Any) -> PriceCalculation:
        calls.append(model_ref)
        return real(usage, model_ref, **kwargs)

    # haltwise.pricing imports it where it looks a model up: the module's own name is patched.
    monkeypatch.setattr(genai_prices, "calc_price", counting)
    return calls


def test_governors_given_no_pricer_share_one_and_look_a_model_up_once(
    calc_calls: list[str],
) -> None:
    # A governor made for each run used to look its model up in genai-prices again at its
    # first call, some 0.9 ms each.
    def one_call(governor: Governor) -> None:
        governor.handle(RunStarted(prompt="go"))
        governor.handle(ModelRequest(model="gpt-4o", max_tokens=100))
        governor.handle(ModelResponse(model="gpt-4o", input_tokens=1_000, output_tokens=50))
        assert governor.usage.cost == Decimal("0.003")

    first, second = Governor(max_cost("1.00")), Governor(max_cost("1.00"))
    one_call(first)
    calc_calls.clear()
    one_call(second)
    assert calc_calls == []
    assert pricing.shared_prices().knows("gpt-4o")
    mine = Prices({"gpt-4o": {"input": "1", "output": "1"}})
    own = Governor(max_cost("1.00"), pricer=mine)
    own.handle(RunStarted(prompt="go"))
    own.handle(ModelResponse(model="gpt-4o", input_tokens=1_000_000, output_tokens=0))
    assert own.usage.cost == Decimal("1")  # a pricer given is the governor's own


def test_importing_haltwise_leaves_genai_prices_until_a_model_is_looked_up() -> None:
    # Its catalogue's types take some 0.2 s to build: a program that prices nothing skips it.
    code = (
        "import sys\n"
        "import haltwise\n"
        "governor = haltwise.Governor(haltwise.max_cost('1.00') | haltwise.stuck())\n"
        "governor.handle(haltwise.RunStarted(prompt='go'))\n"
        "print('genai_prices' in sys.modules)\n"
        "print(haltwise.Prices().cost('gpt-4o', input_tokens=10**6, output_tokens=0))\n"
        "print('genai_prices' in sys.modules)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60
    )
    assert done.stdout.split() == ["False", "2.50", "True"]


# --- the protocol and its types ---------------------------------------------------------------


def test_prices_is_a_pricer() -> None:
    pricer: Pricer = Prices()
    assert isinstance(pricer.cost("gpt-4o", input_tokens=1, output_tokens=1), Decimal)


def test_costs_are_decimal_usd() -> None:
    prices = Prices({"mine": {"input": "1", "output": "2"}})
    for model in ("gpt-4o", "gemini-3-pro-preview", "mine"):
        cost = prices.cost(model, input_tokens=1000, output_tokens=100, cache_read_tokens=10)
        assert type(cost) is Decimal
    assert prices.cost("gpt-4o", input_tokens=0, output_tokens=0) == 0


def test_input_tokens_include_cache_reads() -> None:
    # gpt-4o: $2.50 per million input tokens, $1.25 cached, $10 output. Of 1000 prompt
    # tokens, 400 came from the cache: 600 are charged at 2.50 and 400 at 1.25.
    cost = Prices().cost("gpt-4o", input_tokens=1000, output_tokens=100, cache_read_tokens=400)
    assert cost == (600 * Decimal("2.5") + 400 * Decimal("1.25") + 100 * 10) / 1_000_000
    # ...which is genai-prices' own reading of its Usage: input_tokens includes cache reads.
    assert cost == genai_total("gpt-4o", 1000, 100, cr=400)


def test_inconsistent_token_counts_are_refused() -> None:
    prices = Prices()
    with pytest.raises(ValueError, match="input_tokens must include the cached tokens"):
        prices.cost("gpt-4o", input_tokens=10, output_tokens=1, cache_read_tokens=11)
    with pytest.raises(ValueError, match="non-negative"):
        prices.cost("gpt-4o", input_tokens=-1, output_tokens=1)


# --- the fast path gives genai-prices' very Decimal ----------------------------------------------

FAST_MODELS = [
    "gpt-4o",  # flat, prices web searches too (zero terms)
    "gpt-4o-mini",
    "gpt-4-0125-preview",  # flat, no cache price: cached tokens cost full input price
    "claude-sonnet-4-20250514",  # flat, prices cache writes
    "claude-sonnet-4-5",  # tiered above 200k input tokens
    "gemini-3-pro-preview",  # tiered, dated conditional prices
    "gemini-2.5-pro",
]
USAGES = [
    (0, 0, 0, 0),
    (1, 1, 0, 0),
    (1662, 106, 0, 0),
    (6131, 27, 4058, 0),
    (12_345, 678, 1_000, 2_000),
    (199_999, 5_000, 150_000, 0),
    (200_000, 5_000, 150_000, 10_000),
    (200_001, 5_000, 150_000, 10_000),
    (1_500_000, 64_000, 0, 1_500_000),
]


@pytest.mark.parametrize("model", FAST_MODELS)
def test_fast_path_matches_calc_price_exactly(model: str, calc_calls: list[str]) -> None:
    prices = Prices()
    prices.cost(model, input_tokens=0, output_tokens=0)  # resolve once
    calc_calls.clear()
    for i, o, cr, cw in USAGES:
        got = prices.cost(
            model, input_tokens=i, output_tokens=o, cache_read_tokens=cr, cache_write_tokens=cw
        )
        expected = genai_total(model, i, o, cr, cw)
        assert got == expected, (model, i, o, cr, cw)
        assert str(got) == str(expected), (model, i, o, cr, cw)  # same digits, same exponent
    assert calc_calls == []  # all of it computed from the cached rates


@pytest.mark.parametrize("model", [*FAST_MODELS, "mine", "openrouter/acme/mine"])
def test_integer_units_are_the_decimal_cost_exactly(model: str, calc_calls: list[str]) -> None:
    # What the governor counts (units of 1e-18 USD, int arithmetic) is calc_price's figure.
    prices = Prices({"mine": {"input": "0.0375", "output": "1.2", "cache_read": "0.003"}})
    prices.units(model, 0, 0, 0, 0)
    calc_calls.clear()
    for i, o, cr, cw in USAGES:
        cost = prices.cost(
            model, input_tokens=i, output_tokens=o, cache_read_tokens=cr, cache_write_tokens=cw
        )
        assert cost is not None
        assert prices.units(model, i, o, cr, cw) == units(cost), (model, i, o, cr, cw)
        assert dollars(units(cost)) == cost
        worst = prices.worst_units(model, i, o)
        assert worst is not None
        assert dollars(worst) == prices.worst_case(model, i, o)
        written = prices.units(model, i, o, 0, i)
        assert written is not None
        assert worst >= written, "a cache write can cost more"
    assert calc_calls == []


def test_units_refuse_what_cost_refuses() -> None:
    prices = Prices()
    with pytest.raises(ValueError, match="input_tokens must include the cached tokens"):
        prices.units("gpt-4o", 10, 0, 11, 0)
    with pytest.raises(ValueError, match="non-negative"):
        prices.worst_units("gpt-4o", -1, 10)
    assert prices.units("no-such-model-anywhere", 1, 1, 0, 0) is None
    assert prices.worst_units("no-such-model-anywhere", 1, 1) is None


def test_a_pricer_without_units_is_converted() -> None:
    class Plain:
        def cost(self, model: str, **counts: int) -> Decimal | None:
            return Decimal("0.001") * counts["input_tokens"] if model == "p" else None

        def describe_missing(self, model: str) -> str:
            return "price it"

    converted = in_units(Plain())
    assert converted.units("p", 3, 0, 0, 0) == units(Decimal("0.003"))
    assert converted.worst_units("p", 3, 10) == units(Decimal("0.003"))
    assert converted.units("q", 3, 0, 0, 0) is None
    prices = Prices()
    assert in_units(prices) is prices


def test_tiers_follow_total_input_tokens() -> None:
    # gemini-3-pro-preview: $2 per million input tokens up to 200k, $4 above.
    prices = Prices()
    at = prices.cost("gemini-3-pro-preview", input_tokens=200_000, output_tokens=0)
    above = prices.cost("gemini-3-pro-preview", input_tokens=200_001, output_tokens=0)
    assert at == Decimal("0.4")
    assert above == Decimal("0.800004")


def test_time_of_day_prices_keep_calling_genai_prices(calc_calls: list[str]) -> None:
    # deepseek-chat has off-peak prices that change within a day: no cached rates for it.
    prices = Prices()
    prices.cost("deepseek-chat", input_tokens=1, output_tokens=1)
    calc_calls.clear()
    cost = prices.cost("deepseek-chat", input_tokens=1000, output_tokens=500, cache_read_tokens=10)
    assert calc_calls == ["deepseek-chat"]
    assert cost == genai_total("deepseek-chat", 1000, 500, cr=10)


# --- the cache --------------------------------------------------------------------------------


def test_second_lookup_does_not_call_calc_price(calc_calls: list[str]) -> None:
    prices = Prices()
    first = prices.cost("openrouter/google/gemini-3-pro-preview", input_tokens=5, output_tokens=5)
    assert calc_calls  # resolving asked genai-prices (and checked the rates against it)
    calc_calls.clear()
    second = prices.cost("openrouter/google/gemini-3-pro-preview", input_tokens=5, output_tokens=5)
    assert calc_calls == []
    assert first == second


def test_unknown_models_are_cached_too(calc_calls: list[str]) -> None:
    prices = Prices()
    assert prices.cost("deepseek-coder-v2", input_tokens=1, output_tokens=1) is None
    assert calc_calls
    calc_calls.clear()
    assert prices.cost("deepseek-coder-v2", input_tokens=1, output_tokens=1) is None
    assert calc_calls == []


def test_clear_cache_resolves_again(calc_calls: list[str]) -> None:
    prices = Prices()
    prices.cost("gpt-4o", input_tokens=1, output_tokens=1)
    prices.clear_cache()
    calc_calls.clear()
    prices.cost("gpt-4o", input_tokens=1, output_tokens=1)
    assert calc_calls


def test_cache_is_bounded(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(pricing, "_CACHE_SIZE", 3)
    prices = Prices()
    names = ["gpt-4o", "gpt-4o-mini", "openai/gpt-4o", "azure/gpt-4o", "no-such-model"]
    for name in names:
        prices.cost(name, input_tokens=1, output_tokens=1)
    assert list(prices._cache) == names[-3:]
    assert list(prices.flat_units) == ["openai/gpt-4o", "azure/gpt-4o"]


def test_flat_units_are_the_units_of_models_with_one_price() -> None:
    prices = Prices({"mine": {"input": "3", "output": "15", "cache_write": "3.75"}})
    for model in ("mine", "gpt-4o", "gemini-3-pro-preview", "deepseek-chat", "no-such-model"):
        prices.units(model, 10, 1, 0, 0)
    # Tiered (gemini), time-of-day (deepseek) and unknown prices have no flat rates.
    assert list(prices.flat_units) == ["mine", "gpt-4o"]
    for model, (plain, output, read, write, dearest) in prices.flat_units.items():
        for i, o, cr, cw in [(1000, 200, 300, 100), (7, 0, 0, 7), (0, 5, 0, 0)]:
            assert prices.units(model, i, o, cr, cw) == (
                (i - cr - cw) * plain + o * output + cr * read + cw * write
            )
            assert prices.worst_units(model, i, o) == i * dearest + o * output
    prices.clear_cache()
    assert prices.flat_units == {}


def test_dated_prices_are_cached_until_the_next_start_date() -> None:
    price = ModelPrice(input_mtok=Decimal("1"), output_mtok=Decimal("2"))
    later = ModelPrice(input_mtok=Decimal("3"), output_mtok=Decimal("4"))
    model = ModelInfo(
        id="m",
        match=ClauseEquals(equals="m"),
        prices=[
            ConditionalPrice(prices=price),
            ConditionalPrice(
                constraint=StartDateConstraint(start_date=date(2030, 6, 1)), prices=later
            ),
        ],
    )
    calc = PriceCalculation(
        input_price=Decimal(0),
        output_price=Decimal(0),
        total_price=Decimal(0),
        model=model,
        provider=Provider(id="p", name="P", api_pattern=""),
        model_price=price,
        auto_update_timestamp=None,
    )
    plan = pricing._plan_for(calc, datetime(2030, 5, 31, 23, 59, tzinfo=timezone.utc))
    assert plan is not None
    assert plan.expires == datetime(2030, 6, 1, tzinfo=timezone.utc).timestamp()
    assert plan.cost(1_000_000, 1_000_000, 0, 0) == 3

    model.prices = [
        ConditionalPrice(prices=price),
        ConditionalPrice(
            constraint=TimeOfDateConstraint(start_time=time(16, 30), end_time=time(0, 30)),
            prices=later,
        ),
    ]
    assert pricing._plan_for(calc, datetime(2030, 5, 1, tzinfo=timezone.utc)) is None


# --- the cache on disk ------------------------------------------------------------------------

#: Names of every kind of resolution: flat, tiered, priced by calc_price (time of day), unknown.
_KINDS = ["gpt-4o", "openrouter/google/gemini-3-pro-preview", "deepseek-chat", "no-such-model"]
_USAGES = [(0, 0, 0, 0), (1_000, 200, 300, 100), (250_000, 9_000, 10_000, 0), (7, 0, 0, 7)]


def _kept(folder: Path) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((folder / "prices.json").read_text())
    return data


def _cache(monkeypatch: pytest.MonkeyPatch, folder: Path) -> Path:
    monkeypatch.setenv("HALTWISE_CACHE_DIR", str(folder))
    return folder


def test_what_a_name_resolved_to_is_kept_on_disk_and_prices_the_same(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, calc_calls: list[str]
) -> None:
    folder = _cache(monkeypatch, tmp_path)
    first = Prices()
    costs = {
        m: [
            first.cost(
                m, input_tokens=i, output_tokens=o, cache_read_tokens=r, cache_write_tokens=w
            )
            for i, o, r, w in _USAGES
        ]
        for m in _KINDS
    }
    kinds = {name: entry["kind"] for name, entry in _kept(folder)["entries"].items()}
    assert kinds == {
        "gpt-4o": "plan",
        "openrouter/google/gemini-3-pro-preview": "plan",
        "deepseek-chat": "calc",
        "no-such-model": "unknown",
    }
    calc_calls.clear()
    second = Prices()
    for model in _KINDS:
        again = [
            second.cost(
                model, input_tokens=i, output_tokens=o, cache_read_tokens=r, cache_write_tokens=w
            )
            for i, o, r, w in _USAGES
        ]
        # The very Decimals: the same digits, not only the same values.
        assert [str(cost) for cost in again] == [str(cost) for cost in costs[model]]
        assert second.price_source(model) == first.price_source(model)
        assert second.worst_units(model, 300_000, 8_000) == first.worst_units(model, 300_000, 8_000)
    assert second.flat_units == first.flat_units
    # Only the price genai-prices computes at each call asked it again.
    assert set(calc_calls) == {"deepseek-chat"}


def test_a_process_that_prices_only_models_kept_never_imports_genai_prices(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    _cache(monkeypatch, tmp_path)
    script = (
        "import sys\n"
        "from haltwise.pricing import Prices\n"
        "prices = Prices()\n"
        "cost = prices.cost('gpt-4o', input_tokens=1_000, output_tokens=50)\n"
        "print(cost, prices.knows('no-such-model'), 'genai_prices' in sys.modules)\n"
    )
    runs = [
        subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True)
        for _ in range(2)
    ]
    assert [run.stdout.split() for run in runs] == [
        ["0.0030", "False", "True"],
        ["0.0030", "False", "False"],
    ]


def test_a_file_of_other_genai_prices_files_is_not_read(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, calc_calls: list[str]
) -> None:
    folder = _cache(monkeypatch, tmp_path)
    Prices().cost("gpt-4o", input_tokens=1, output_tokens=1)
    data = _kept(folder)
    data["source"][2] += 1  # the data's size, as another release of genai-prices would have it
    data["entries"]["gpt-4o"]["flat"] = [[0, "1000"], [1, "1000"]]
    (folder / "prices.json").write_text(json.dumps(data))
    calc_calls.clear()
    assert Prices().cost("gpt-4o", input_tokens=1_000, output_tokens=50) == Decimal("0.003")
    assert calc_calls  # looked up again
    assert _kept(folder)["source"] == pricing._DiskCache.open().source  # type: ignore[union-attr]


@pytest.mark.parametrize(
    "damage",
    [
        b"not json at all",
        b"[1, 2, 3]",
        b'{"source": 7, "entries": 7}',
        "{entry: 7}",
        '{entry: {"kind": "plan", "flat": [[9, "1"]], "tiered": [], "zero": "0", '
        '"sub_read": false, "sub_write": false, "expires": null, "origin": "x"}}',
        '{entry: {"kind": "plan", "flat": [[0, "-1"]], "tiered": [], "zero": "0", '
        '"sub_read": false, "sub_write": false, "expires": null, "origin": "x"}}',
        '{entry: {"kind": "plan", "flat": [[0, "NaN"]], "tiered": [], "zero": "0", '
        '"sub_read": false, "sub_write": false, "expires": "soon", "origin": "x"}}',
        '{entry: {"kind": "plan", "flat": [[0, 1.5]]}}',
        '{entry: {"kind": "calc", "ref": 3, "provider_id": null, "origin": "x"}}',
        '{entry: {"kind": "free"}}',
    ],
)
def test_a_damaged_file_is_passed_over(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, damage: bytes | str
) -> None:
    folder = _cache(monkeypatch, tmp_path)
    expected = Prices().cost("gpt-4o", input_tokens=1_000, output_tokens=50)
    if isinstance(damage, str):
        data = _kept(folder)
        text = damage.replace("entry", '"gpt-4o"')
        data["entries"] = json.loads(text)
        damage = json.dumps(data).encode()
    (folder / "prices.json").write_bytes(damage)
    prices = Prices()
    assert prices.cost("gpt-4o", input_tokens=1_000, output_tokens=50) == expected
    assert prices.price_source("gpt-4o") == "genai-prices: provider 'openai', model 'gpt-4o'"
    assert _kept(folder)["entries"]["gpt-4o"]["kind"] == "plan"  # written anew


def test_a_cache_folder_that_cannot_be_made_is_passed_over(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    (tmp_path / "a-file").write_text("")
    _cache(monkeypatch, tmp_path / "a-file" / "cache")
    prices = Prices()
    assert prices.cost("gpt-4o", input_tokens=1_000, output_tokens=50) == Decimal("0.003")
    assert prices.knows("gpt-4o")
    assert list(tmp_path.iterdir()) == [tmp_path / "a-file"]


def test_with_no_folder_given_and_no_home_nothing_is_kept(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    def no_home() -> Path:
        raise RuntimeError("Could not determine home directory.")

    monkeypatch.delenv("HALTWISE_CACHE_DIR")
    monkeypatch.delenv("XDG_CACHE_HOME", raising=False)
    monkeypatch.setattr(Path, "home", staticmethod(no_home))
    prices = Prices()
    assert prices.cost("gpt-4o", input_tokens=1_000, output_tokens=50) == Decimal("0.003")
    assert prices._disk is None


def test_the_file_keeps_the_latest_names_only(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    folder = _cache(monkeypatch, tmp_path)
    monkeypatch.setattr(pricing, "_CACHE_SIZE", 3)
    prices = Prices()
    for name in ("gpt-4o", "gpt-4o-mini", "o3", "o4-mini"):
        prices.knows(name)
    assert list(_kept(folder)["entries"]) == ["gpt-4o-mini", "o3", "o4-mini"]
    Prices().knows("gpt-4o-mini")  # kept: not written again
    Prices().knows("gpt-4.1")
    assert list(_kept(folder)["entries"]) == ["o3", "o4-mini", "gpt-4.1"]


def test_a_plan_kept_past_its_date_is_resolved_again(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, calc_calls: list[str]
) -> None:
    folder = _cache(monkeypatch, tmp_path)
    Prices().cost("gpt-4o", input_tokens=1, output_tokens=1)
    data = _kept(folder)
    data["entries"]["gpt-4o"]["expires"] = 1.0  # 1970
    data["entries"]["gpt-4o"]["flat"] = [[0, "1000"], [1, "1000"]]
    (folder / "prices.json").write_text(json.dumps(data))
    calc_calls.clear()
    assert Prices().cost("gpt-4o", input_tokens=1_000, output_tokens=50) == Decimal("0.003")
    assert calc_calls
    assert _kept(folder)["entries"]["gpt-4o"]["expires"] is None


def test_prices_updated_in_the_process_are_neither_read_nor_kept(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, calc_calls: list[str]
) -> None:
    from genai_prices import data_snapshot

    folder = _cache(monkeypatch, tmp_path)
    Prices().cost("gpt-4o", input_tokens=1, output_tokens=1)
    bundled = data_snapshot.get_snapshot()
    updated = data_snapshot.DataSnapshot(providers=bundled.providers, from_auto_update=True)
    monkeypatch.setattr(data_snapshot, "_custom_snapshot", updated)
    calc_calls.clear()
    prices = Prices()
    prices.cost("gpt-4o", input_tokens=1, output_tokens=1)
    prices.cost("gpt-4o-mini", input_tokens=1, output_tokens=1)
    assert "gpt-4o" in calc_calls  # from the updated data, not from the file
    assert set(_kept(folder)["entries"]) == {"gpt-4o"}


def test_a_name_looked_up_while_the_prices_were_updated_is_not_kept(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    from genai_prices import data_snapshot

    folder = _cache(monkeypatch, tmp_path)
    Prices().knows("gpt-4o")
    lookup = Prices._genai_lookup

    def updated_meanwhile(prices: Prices, name: str) -> Any:
        bundled = data_snapshot.get_snapshot()
        updated = data_snapshot.DataSnapshot(providers=bundled.providers, from_auto_update=True)
        monkeypatch.setattr(data_snapshot, "_custom_snapshot", updated)
        return lookup(prices, name)

    monkeypatch.setattr(Prices, "_genai_lookup", updated_meanwhile)
    assert Prices().knows("gpt-4o-mini")
    assert set(_kept(folder)["entries"]) == {"gpt-4o"}


def test_clear_cache_leaves_the_file_aside(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, calc_calls: list[str]
) -> None:
    _cache(monkeypatch, tmp_path)
    Prices().cost("gpt-4o", input_tokens=1, output_tokens=1)
    prices = Prices()
    prices.cost("gpt-4o", input_tokens=1, output_tokens=1)
    calc_calls.clear()
    prices.clear_cache()  # as after genai_prices.UpdatePrices
    prices.cost("gpt-4o", input_tokens=1, output_tokens=1)
    assert calc_calls


def test_a_users_own_prices_are_never_written(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    folder = _cache(monkeypatch, tmp_path)
    prices = Prices(
        {"gpt-4o": {"input": "1", "output": "1"}, "mine": {"input": "2", "output": "2"}}
    )
    for model in ("gpt-4o", "mine", "azure/mine", "gpt-4o-mini"):
        prices.cost(model, input_tokens=1, output_tokens=1)
    assert set(_kept(folder)["entries"]) == {"gpt-4o-mini"}
    assert Prices().cost("gpt-4o", input_tokens=1_000, output_tokens=50) == Decimal("0.003")


def test_undated_resolutions_are_kept_apart(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    folder = _cache(monkeypatch, tmp_path)
    assert Prices().knows("deepseek-chat")
    assert not Prices(undated=True).knows("deepseek-chat")
    assert Prices().knows("deepseek-chat")
    entries = _kept(folder)["entries"]
    assert entries["deepseek-chat"]["kind"] == "calc"
    assert entries["undated:deepseek-chat"]["kind"] == "unknown"


def test_what_another_process_wrote_meanwhile_is_kept(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    folder = _cache(monkeypatch, tmp_path)
    mine = Prices()
    mine.knows("gpt-4o")  # opens the file, and writes gpt-4o
    script = "from haltwise.pricing import Prices; Prices().knows('gpt-4o-mini')"
    subprocess.run([sys.executable, "-c", script], check=True)
    assert set(_kept(folder)["entries"]) == {"gpt-4o", "gpt-4o-mini"}
    mine.knows("o3")  # writes o3, with what the other process wrote since
    assert set(_kept(folder)["entries"]) == {"gpt-4o", "gpt-4o-mini", "o3"}


def test_the_threads_sharing_a_prices_share_its_file(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    _cache(monkeypatch, tmp_path)
    opened: list[str] = []
    real = pricing._DiskCache.open
    both = threading.Barrier(2, timeout=0.5)  # met only if two threads open it at once

    def slow_open() -> pricing._DiskCache | None:
        opened.append(threading.current_thread().name)
        with contextlib.suppress(threading.BrokenBarrierError):
            both.wait()
        return real()

    monkeypatch.setattr(pricing._DiskCache, "open", staticmethod(slow_open))
    prices = Prices()
    threads = [threading.Thread(target=prices.knows, args=(name,)) for name in ("o3", "gpt-4o")]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(opened) == 1


def test_threads_that_resolve_at_once_write_a_whole_file(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    folder = _cache(monkeypatch, tmp_path)
    names = ["openai/gpt-4o", "azure/gpt-4o", "gpt-4o-mini", "gpt-4.1", "o3", "o4-mini"]
    prices = Prices()
    threads = [threading.Thread(target=prices.knows, args=(name,)) for name in names * 3]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert set(_kept(folder)["entries"]) == set(names)


# --- names ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("model", "plain"),
    [
        ("openrouter/google/gemini-3-pro-preview", "gemini-3-pro-preview"),
        ("google/gemini-3-pro-preview", "gemini-3-pro-preview"),
        ("openai/gpt-4o", "gpt-4o"),
        ("azure/gpt-4o", "gpt-4o"),
        ("GPT-4o", "gpt-4o"),
        ("some-gateway/openai/gpt-4o-mini", "gpt-4o-mini"),
    ],
)
def test_provider_prefixes_resolve(model: str, plain: str) -> None:
    prices = Prices()
    cost = prices.cost(model, input_tokens=12_345, output_tokens=678, cache_read_tokens=1_000)
    assert cost is not None
    assert cost == genai_total(plain, 12_345, 678, cr=1_000)


def test_price_source_names_where_a_price_came_from() -> None:
    prices = Prices({"Acme-1": {"input": "1", "output": "1"}})
    assert prices.price_source("openrouter/google/gemini-3-pro-preview") == (
        "genai-prices: provider 'google', model 'gemini-3-pro-preview'"
    )
    assert prices.price_source("azure/gpt-4o") == "genai-prices: provider 'azure', model 'gpt-4o'"
    assert prices.price_source("vendor/acme-1") == "price table: 'Acme-1'"
    assert prices.price_source("deepseek-coder-v2") is None


@pytest.mark.parametrize(
    "model", ["deepseek-coder-v2", "no-such-model", "openrouter/nobody/nothing", "", "/"]
)
def test_unknown_model_costs_none_not_zero(model: str) -> None:
    prices = Prices()
    assert prices.cost(model, input_tokens=1000, output_tokens=1000) is None
    assert prices.worst_case(model, 1000, 1000) is None
    assert not prices.knows(model)


# --- the user table ---------------------------------------------------------------------------


def test_user_table_overrides_genai_prices() -> None:
    prices = Prices({"gpt-4o": {"input": "1", "output": "2"}})
    for name in ("gpt-4o", "GPT-4O", "openai/gpt-4o", "openrouter/openai/gpt-4o"):
        assert prices.cost(name, input_tokens=1_000_000, output_tokens=1_000_000) == 3
    # a model the table does not name still comes from genai-prices
    assert prices.cost("gpt-4o-mini", input_tokens=1, output_tokens=1) == genai_total(
        "gpt-4o-mini", 1, 1
    )


def test_user_table_adds_a_model() -> None:
    prices = Prices(
        {
            "my-model": {"input": "0.50", "output": 2, "cache_read": Decimal("0.05")},
            "other": ModelRate(
                input=Decimal("1"), output=Decimal("1"), cache_write=Decimal("1.25")
            ),
        }
    )
    assert prices.knows("my-model")
    # 1000 prompt tokens, 600 of them read from the cache; cache writes default to input
    cost = prices.cost(
        "my-model",
        input_tokens=1000,
        output_tokens=10,
        cache_read_tokens=600,
        cache_write_tokens=100,
    )
    assert cost == (300 * Decimal("0.50") + 600 * Decimal("0.05") + 100 * Decimal("0.50") + 20) / (
        1_000_000
    )
    # cache reads default to the input price
    assert prices.cost(
        "other", input_tokens=1000, output_tokens=0, cache_read_tokens=500, cache_write_tokens=500
    ) == Decimal("0.001125")


def test_rates_and_repr() -> None:
    prices = Prices({"Mine": {"input": "0.5", "output": "1"}})
    assert prices.rates == {"Mine": ModelRate(input=Decimal("0.5"), output=Decimal("1"))}
    assert "Mine" in repr(prices)
    assert repr(Prices()) == "Prices()"


def test_parse_price_table_and_from_mapping() -> None:
    table = parse_price_table({"a": {"input": " 0.25 ", "output": 3, "cache_write": "3.75"}})
    assert table == {
        "a": ModelRate(input=Decimal("0.25"), output=Decimal(3), cache_write=Decimal("3.75"))
    }
    rate = ModelRate.from_mapping({"input": "0", "output": "0"})
    assert rate == ModelRate(input=Decimal(0), output=Decimal(0))


def test_model_rate_is_frozen_and_checked() -> None:
    rate = ModelRate(input=Decimal("1"), output=Decimal("2"))
    with pytest.raises(FrozenInstanceError):
        rate.input = Decimal("3")  # type: ignore[misc]
    with pytest.raises(InvalidValueError) as info:
        ModelRate(input="1", output=Decimal("2"))  # type: ignore[arg-type]
    assert str(info.value) == (
        "ModelRate.input='1' is not valid: expected a Decimal "
        "(ModelRate.from_mapping also takes strings and ints)"
    )
    with pytest.raises(InvalidValueError, match=r"ModelRate\.cache_read=Decimal\('-1'\)"):
        ModelRate(input=Decimal("1"), output=Decimal("2"), cache_read=Decimal("-1"))


@pytest.mark.parametrize(
    ("table", "message"),
    [
        (
            {"m": {"input": "-1", "output": "1"}},
            f"prices['m'].input='-1' is not valid: expected {NUMBER_FORMS}",
        ),
        (
            {"m": {"input": "1", "output": "NaN"}},
            f"prices['m'].output='NaN' is not valid: expected {NUMBER_FORMS}",
        ),
        (
            {"m": {"input": "1", "output": "1", "cache_read": "Infinity"}},
            f"prices['m'].cache_read='Infinity' is not valid: expected {NUMBER_FORMS}",
        ),
        (
            {"m": {"input": "$1", "output": "1"}},
            f"prices['m'].input='$1' is not valid: expected {NUMBER_FORMS}",
        ),
        (
            {"m": {"input": True, "output": "1"}},
            f"prices['m'].input=True is not valid: expected {NUMBER_FORMS}",
        ),
        (
            {"m": {"input": "1", "output": "1", "cache_write": Decimal("-0.1")}},
            f"prices['m'].cache_write=Decimal('-0.1') is not valid: expected {NUMBER_FORMS}",
        ),
        (
            {"m": {"input": 0.5, "output": "1"}},
            f"prices['m'].input=0.5 is not valid: expected {NUMBER_FORMS}; floats are refused "
            "because they cannot hold most prices exactly (quote the number, or load TOML with "
            "parse_float=decimal.Decimal)",
        ),
        (
            {"m": {"input": "1", "output": "1", "inptu": "2"}},
            "prices['m'].inptu='2' is not valid: expected one of the keys input, output, "
            "cache_read, cache_write (USD per million tokens)",
        ),
        (
            {"m": {"input": "1"}},
            f"prices['m'].output=None is not valid: expected {NUMBER_FORMS} "
            "(input and output are required)",
        ),
        (
            {"m": "1.50"},
            "prices['m']='1.50' is not valid: expected a table of USD per million tokens such as "
            '{"input": "0.50", "output": "1.50"}, optionally with cache_read and cache_write, '
            "or a ModelRate",
        ),
        (
            {"M": {"input": "1", "output": "1"}, "m": {"input": "2", "output": "2"}},
            "prices['m']={'input': '2', 'output': '2'} is not valid: expected one entry per "
            "model; names are case-insensitive and 'M' is already given",
        ),
        (
            {" ": {"input": "1", "output": "1"}},
            "prices=' ' is not valid: expected model names as non-empty strings",
        ),
    ],
)
def test_bad_tables_name_the_entry_and_the_valid_forms(table: dict[str, Any], message: str) -> None:
    with pytest.raises(InvalidValueError) as info:
        Prices(table)
    assert str(info.value) == message
    assert isinstance(info.value, ConfigurationError)
    assert info.value.source.startswith("prices")


def test_bad_value_error_carries_source_value_and_valid_forms() -> None:
    with pytest.raises(InvalidValueError) as info:
        Prices({"my-model": {"input": "cheap", "output": "1"}})
    assert info.value.source == "prices['my-model'].input"
    assert info.value.value == "cheap"
    assert info.value.valid == NUMBER_FORMS


def test_table_must_be_a_mapping() -> None:
    with pytest.raises(InvalidValueError, match="expected a table mapping model names"):
        Prices(["gpt-4o"])  # type: ignore[arg-type]


# --- the rest of the API ----------------------------------------------------------------------


def test_describe_missing_says_how_to_fix_it() -> None:
    assert Prices().describe_missing("my-model") == (
        'Give it a price: Prices({"my-model": {"input": "0.50", "output": "1.50"}}) in code, '
        'or a [prices."my-model"] table with input and output in USD per million tokens '
        "in haltwise.toml."
    )


def test_worst_case_uses_all_output_and_the_dearest_input() -> None:
    prices = Prices()
    assert prices.worst_case("gpt-4o", 1000, 500) == prices.cost(
        "gpt-4o", input_tokens=1000, output_tokens=500
    )
    # Anthropic charges more for cache writes than for plain input: the worst case assumes them.
    claude = "claude-sonnet-4-20250514"
    assert prices.worst_case(claude, 1000, 500) == prices.cost(
        claude, input_tokens=1000, output_tokens=500, cache_write_tokens=1000
    )
    assert prices.worst_case(claude, 1000, 500) == Decimal("0.01125")


# --- the oracle: dollars actually billed -------------------------------------------------------


def test_repricing_real_gemini_runs_reproduces_the_billed_cost() -> None:
    """mini-swe-agent runs of google/gemini-3-pro-preview through OpenRouter, billed per step.

    ``prompt_tokens`` includes the cached tokens (``prompt_tokens_details.cached_tokens``) and
    ``completion_tokens`` includes the reasoning tokens, which is exactly the Pricer's reading.
    """
    if not GEMINI_RUNS.is_dir():
        pytest.skip(f"the real-run corpus is absent: no {GEMINI_RUNS} (a sibling of the checkout)")
    files = sorted(GEMINI_RUNS.glob("*.traj.json"))[:20]
    assert len(files) == 20
    prices = Prices()
    billed = repriced = Decimal(0)
    steps = cached_steps = reasoning_steps = 0
    for path in files:
        run = json.loads(path.read_text(encoding="utf-8"), parse_float=Decimal)
        for message in run["messages"]:
            if message.get("role") != "assistant":
                continue
            response = message["extra"]["response"]
            usage = response["usage"]
            if "cost" not in usage:  # a few steps were not billed through OpenRouter
                continue
            cached = (usage.get("prompt_tokens_details") or {}).get("cached_tokens") or 0
            reasoning = (usage.get("completion_tokens_details") or {}).get("reasoning_tokens") or 0
            cost = prices.cost(
                response["model"],
                input_tokens=usage["prompt_tokens"],
                output_tokens=usage["completion_tokens"],
                cache_read_tokens=cached,
            )
            assert cost == usage["cost"], (path.name, usage)
            billed += usage["cost"]
            repriced += cost
            steps += 1
            cached_steps += cached > 0
            reasoning_steps += reasoning > 0
    assert repriced == billed  # exactly, not just to the cent
    assert steps == 718
    assert billed == Decimal("10.0693976")
    assert cached_steps > 100  # the cache-read mapping was exercised...
    assert reasoning_steps > 10  # ...and so was the reasoning one


def test_undated_prices_leave_prices_that_changed_over_time_unknown() -> None:
    # A recorded run has no request times: today's rate must not be applied to the past.
    live, recorded = Prices(), Prices(undated=True)
    assert live.cost("deepseek-chat-v2", input_tokens=1000, output_tokens=0) is not None
    assert recorded.cost("deepseek-chat-v2", input_tokens=1000, output_tokens=0) is None
    same = {"input_tokens": 1000, "output_tokens": 10}
    assert recorded.cost("gpt-4o-2024-05-13", **same) == live.cost("gpt-4o-2024-05-13", **same)
    assert repr(recorded) == "Prices(undated=True)"
