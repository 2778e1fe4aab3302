"""Model prices: the genai-prices catalogue, overridden and extended by a table of your own.

This module holds ``Prices``, haltwise's implementation of the engine's ``Pricer`` protocol
(``haltwise.engine.pricing``), and ``ModelRate``, one model's price in a user table.

- A user table maps model names to USD per million tokens (``input``, ``output``, and optionally
  ``cache_read`` and ``cache_write``). It is checked when ``Prices`` is built: a bad entry raises
  ``InvalidValueError`` naming the entry, the key and the forms that would have been accepted.
- Everything else is priced by genai-prices. Names with provider prefixes
  (``openrouter/google/gemini-3-pro-preview``, ``azure/gpt-4o``) are resolved by stripping the
  prefixes one at a time, passing the nearest one to genai-prices as the provider when it names one.
- A model nobody prices costs ``None`` ("unknown"), never zero.

``cost()`` runs after every model response, so each model name is resolved once and cached.
Prices made of plain per-million-token rates, tiered or not, are then computed directly, with the
same arithmetic as genai-prices and so the very same ``Decimal``; before it is trusted, that
arithmetic is checked against ``genai_prices.calc_price`` on a few sample usages, and models whose
prices it cannot reproduce (per-request fees, time-of-day prices) keep calling ``calc_price``.
Money is ``Decimal`` USD throughout, never ``float``.

What a model name resolves to in genai-prices is also kept on disk, in ``prices.json`` under
``$HALTWISE_CACHE_DIR`` (by default ``$XDG_CACHE_HOME/haltwise``, or ``~/.cache/haltwise``), for
the genai-prices files installed and this module's own: a process that prices only models
resolved before never imports genai-prices, which takes some 0.15 s (``_DiskCache``). It holds
the latest 4,096 names, nothing a user gave, and a file that cannot be read or written is passed
over.
"""

from __future__ import annotations

import contextlib
import importlib.util
import json
import os
import sys
import tempfile
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime, timezone
from decimal import Decimal, InvalidOperation
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final, TypeAlias

from .engine.errors import InvalidValueError
from .engine.events import MAX_CALL_DOLLARS, MAX_COUNT
from .engine.pricing import dollars, units

if TYPE_CHECKING:
    from genai_prices.types import PriceCalculation

# genai-prices is imported where a model is first looked up in it, not with haltwise: building
# its catalogue's types takes some 0.2 s, which a program that prices nothing (or only from
# its own table) need not wait for.

__all__ = ["ModelRate", "Prices", "check_countable", "parse_price_table", "shared_prices"]

_RATE_KEYS: Final = ("input", "output", "cache_read", "cache_write")
_REQUIRED_KEYS: Final = ("input", "output")
_MILLION: Final = 1_000_000
#: The dearest rate a table may give, in USD per million tokens: at it, a call with the most
#: tokens an event may carry (``MAX_COUNT`` in the prompt and as many in the answer, each token
#: priced once) costs at most ``MAX_CALL_DOLLARS``, the most the governor counts for one call.
#: A dearer rate would let a call be sent and paid for, then refused as a cost no total can
#: hold, its tokens uncounted. Some $5.5 million per million tokens: far past any real price.
_MAX_RATE: Final = MAX_CALL_DOLLARS * _MILLION // (2 * MAX_COUNT)
_NUMBER_FORMS: Final = (
    'a finite, non-negative number of USD per million tokens: a string such as "0.50", '
    "an int, or a Decimal"
)
_FLOAT_HINT: Final = (
    "; floats are refused because they cannot hold most prices exactly "
    "(quote the number, or load TOML with parse_float=decimal.Decimal)"
)
_KEY_FORMS: Final = (
    "one of the keys input, output, cache_read, cache_write (USD per million tokens)"
)
_ENTRY_FORMS: Final = (
    'a table of USD per million tokens such as {"input": "0.50", "output": "1.50"}, '
    "optionally with cache_read and cache_write, or a ModelRate"
)
#: How many model names one ``Prices`` remembers before it forgets the oldest.
_CACHE_SIZE: Final = 4096

RateValue: TypeAlias = str | int | Decimal
"""A price as a user may write it: ``"0.50"``, ``2`` or ``Decimal("0.50")``; never a float."""


def _check_rate(source: str, value: object) -> Decimal:
    """``value`` as a finite, non-negative ``Decimal``, else an error naming ``source``."""
    number: Decimal | None = None
    if isinstance(value, Decimal):
        number = value
    elif isinstance(value, int) and not isinstance(value, bool):
        number = Decimal(value)
    elif isinstance(value, str):
        try:
            number = Decimal(value.strip())
        except InvalidOperation:
            number = None
    if number is None or not number.is_finite() or number < 0:
        valid = _NUMBER_FORMS + (_FLOAT_HINT if isinstance(value, float) else "")
        raise InvalidValueError(source, value, valid)
    return number


@dataclass(frozen=True)
class ModelRate:
    """One model's price, in USD per million tokens.

    ``input`` is charged for prompt tokens not read from or written to a cache; ``cache_read``
    and ``cache_write`` for the cached ones, and each defaults to ``input`` when not given.
    ``output`` is charged for every completion token, reasoning tokens included.
    """

    input: Decimal
    output: Decimal
    cache_read: Decimal | None = None
    cache_write: Decimal | None = None

    def __post_init__(self) -> None:
        for key in _RATE_KEYS:
            value: object = getattr(self, key)
            if value is None and key not in _REQUIRED_KEYS:
                continue
            if not isinstance(value, Decimal):
                raise InvalidValueError(
                    f"ModelRate.{key}",
                    value,
                    "a Decimal (ModelRate.from_mapping also takes strings and ints)",
                )
            _check_rate(f"ModelRate.{key}", value)

    @classmethod
    def from_mapping(cls, entry: Mapping[str, object], *, model: str = "model") -> ModelRate:
        """Build a rate from a TOML-like table such as ``{"input": "0.50", "output": "1.50"}``.

        ``model`` only names the entry in error messages: ``prices['my-model'].input``.
        """
        where = f"prices[{model!r}]"
        for key, value in entry.items():
            if key not in _RATE_KEYS:
                raise InvalidValueError(f"{where}.{key}", value, _KEY_FORMS)
        for key in _REQUIRED_KEYS:
            if key not in entry:
                raise InvalidValueError(
                    f"{where}.{key}", None, _NUMBER_FORMS + " (input and output are required)"
                )
        read = entry.get("cache_read")
        write = entry.get("cache_write")
        return cls(
            input=_check_rate(f"{where}.input", entry["input"]),
            output=_check_rate(f"{where}.output", entry["output"]),
            cache_read=None if read is None else _check_rate(f"{where}.cache_read", read),
            cache_write=None if write is None else _check_rate(f"{where}.cache_write", write),
        )


def check_countable(rates: Mapping[str, ModelRate]) -> None:
    """Refuse a table with a rate past ``_MAX_RATE``, naming the model and the field: checked
    where a table is read from a file (which its caller names), before any call is sent at its
    price. (A ``Prices`` made in code may be dearer: the governor then refuses the call it
    cannot count, by name, with nothing counted.)"""
    for model, rate in rates.items():
        for key in _RATE_KEYS:
            value = getattr(rate, key)
            if value is not None and value > _MAX_RATE:
                raise InvalidValueError(
                    f"prices[{model!r}].{key}",
                    value,
                    f"at most {_MAX_RATE:,} USD per million tokens, the dearest rate at which "
                    "every call can still be counted",
                )


def parse_price_table(table: Mapping[str, object]) -> dict[str, ModelRate]:
    """Check a user price table (the ``[prices]`` table of ``haltwise.toml``, or a dict in code).

    Each value is a ``ModelRate`` or a table accepted by ``ModelRate.from_mapping``. Names are
    case-insensitive, so two names differing only in case are refused.
    """
    if not isinstance(table, Mapping):
        raise InvalidValueError(
            "prices", table, "a table mapping model names to USD per million tokens"
        )
    rates: dict[str, ModelRate] = {}
    seen: dict[str, str] = {}
    for model, entry in table.items():
        if not isinstance(model, str) or not model.strip():
            raise InvalidValueError("prices", model, "model names as non-empty strings")
        folded = model.strip().lower()
        if folded in seen:
            raise InvalidValueError(
                f"prices[{model!r}]",
                entry,
                f"one entry per model; names are case-insensitive and {seen[folded]!r} "
                "is already given",
            )
        seen[folded] = model
        if isinstance(entry, ModelRate):
            rates[model] = entry
        elif isinstance(entry, Mapping):
            rates[model] = ModelRate.from_mapping(entry, model=model)
        else:
            raise InvalidValueError(f"prices[{model!r}]", entry, _ENTRY_FORMS)
    return rates


# --- resolved models -------------------------------------------------------------------------
# Each model name resolves to one of these; all answer ``cost(input, output, cache_read,
# cache_write)`` in Decimal USD and ``units(...)`` in the engine's integer units, with ``input``
# counting cached tokens too, and ``worst(input, output)``, the most a request can cost; they
# carry ``expires`` (epoch seconds after which the resolution must be redone, or ``None``).

#: Per-token prices in engine units: (uncached input, output, cache read, cache write).
_UnitRates = tuple[int, int, int, int]


class _Rates:
    """Per-token prices in engine units, by the prompt's size: integer arithmetic only.

    ``tiers`` are (start, rates) pairs, highest start first: a call whose prompt has more than
    ``start`` tokens pays those rates (genai-prices' tiered prices)."""

    __slots__ = ("rates", "tiers")

    def __init__(self, rates: _UnitRates, tiers: tuple[tuple[int, _UnitRates], ...] = ()) -> None:
        self.rates = rates
        self.tiers = tiers

    def units(self, i: int, o: int, cr: int, cw: int) -> int:
        rates = self.rates
        for start, tier in self.tiers:
            if i > start:
                rates = tier
                break
        return (i - cr - cw) * rates[0] + o * rates[1] + cr * rates[2] + cw * rates[3]

    def worst(self, i: int, o: int) -> int:
        """Every output token used, and every input token at its dearest: plain, or written
        to a cache where that costs more (Anthropic)."""
        rates = self.rates
        for start, tier in self.tiers:
            if i > start:
                rates = tier
                break
        return i * max(rates[0], rates[3]) + o * rates[1]


def _per_token(rate: Decimal) -> int:
    """A price in USD per million tokens as engine units per token."""
    return units(rate / _MILLION)


class _Unknown:
    """A model nobody prices."""

    __slots__ = ()
    expires: float | None = None
    origin: str | None = None

    def cost(self, i: int, o: int, cr: int, cw: int) -> Decimal | None:
        return None

    def units(self, i: int, o: int, cr: int, cw: int) -> int | None:
        return None

    def worst(self, i: int, o: int) -> int | None:
        return None


_UNKNOWN: Final = _Unknown()


class _UserRate(_Rates):
    """A price from the user's table."""

    __slots__ = ("cache_read", "cache_write", "input", "origin", "output")
    expires: float | None = None

    def __init__(self, rate: ModelRate, name: str) -> None:
        self.origin: str | None = f"price table: {name!r}"
        self.input = rate.input
        self.output = rate.output
        self.cache_read = rate.input if rate.cache_read is None else rate.cache_read
        self.cache_write = rate.input if rate.cache_write is None else rate.cache_write
        super().__init__(
            (
                _per_token(self.input),
                _per_token(self.output),
                _per_token(self.cache_read),
                _per_token(self.cache_write),
            )
        )

    def cost(self, i: int, o: int, cr: int, cw: int) -> Decimal | None:
        return (
            self.input * (i - cr - cw)
            + self.cache_read * cr
            + self.cache_write * cw
            + self.output * o
        ) / _MILLION


# Which of our counts a genai-prices token price applies to, by its price key.
_UNCACHED_INPUT, _OUTPUT, _CACHE_READ, _CACHE_WRITE, _NONE = range(5)
_SLOT_BY_KEY: Final = {
    "input_mtok": _UNCACHED_INPUT,
    "output_mtok": _OUTPUT,
    "cache_read_mtok": _CACHE_READ,
    "cache_write_mtok": _CACHE_WRITE,
}
_Tiers = tuple[tuple[int, Decimal], ...]


class _Plan(_Rates):
    """A genai-prices price reduced to per-million-token rates, computed as ``calc_price`` does
    (and, for ``units``, to per-token rates in engine units).

    genai-prices prices each unit as ``price * count / per`` and adds the results; the uncached
    input count is ``input_tokens`` less the cache counts it prices separately; a tiered price
    uses the tier of the highest ``start`` that ``input_tokens`` exceeds. Prices of units we
    never report (audio tokens, web searches...) count zero but still take part in the sum,
    which can set the result's exponent, so they are kept as zero terms.
    """

    __slots__ = ("expires", "flat", "origin", "sub_read", "sub_write", "tiered", "zero")

    def __init__(
        self,
        flat: tuple[tuple[int, Decimal], ...],
        tiered: tuple[tuple[int, Decimal, _Tiers], ...],
        zero: Decimal,
        sub_read: bool,
        sub_write: bool,
        expires: float | None,
        origin: str,
    ) -> None:
        self.origin: str | None = origin
        self.flat = flat
        self.tiered = tiered
        self.zero = zero
        self.sub_read = sub_read
        self.sub_write = sub_write
        self.expires = expires
        starts = sorted({start for _, _, tiers in tiered for start, _ in tiers}, reverse=True)
        super().__init__(
            self._unit_rates(None), tuple((start, self._unit_rates(start + 1)) for start in starts)
        )

    def _unit_rates(self, prompt: int | None) -> _UnitRates:
        """The per-token rates for a prompt of ``prompt`` tokens (None: below every tier)."""
        prices: list[Decimal | None] = [None, None, None, None, None]
        for slot, price in self.flat:
            prices[slot] = price
        for slot, base, tiers in self.tiered:
            prices[slot] = base
            for start, tier_price in tiers:
                if prompt is not None and prompt > start:
                    prices[slot] = tier_price
                    break
        plain = prices[_UNCACHED_INPUT] or Decimal(0)
        # A cache count genai-prices does not price separately stays in the plain input.
        read = prices[_CACHE_READ] if self.sub_read else plain
        write = prices[_CACHE_WRITE] if self.sub_write else plain
        return (
            _per_token(plain),
            _per_token(prices[_OUTPUT] or Decimal(0)),
            _per_token(read or Decimal(0)),
            _per_token(write or Decimal(0)),
        )

    def cost(self, i: int, o: int, cr: int, cw: int) -> Decimal | None:
        uncached = i
        if self.sub_read:
            uncached -= cr
        if self.sub_write:
            uncached -= cw
        counts = (uncached, o, cr, cw, 0)
        total = self.zero
        for slot, price in self.flat:
            total += price * counts[slot] / _MILLION
        for slot, base, tiers in self.tiered:
            price = base
            for start, tier_price in tiers:
                if i > start:
                    price = tier_price
                    break
            total += price * counts[slot] / _MILLION
        return total


class _Calc:
    """A genai-prices price the plan cannot reproduce: ``calc_price`` is called every time."""

    __slots__ = ("origin", "provider_id", "ref")
    expires: float | None = None

    def __init__(self, ref: str, provider_id: str | None, origin: str) -> None:
        self.origin: str | None = origin
        self.ref = ref
        self.provider_id = provider_id

    def cost(self, i: int, o: int, cr: int, cw: int) -> Decimal | None:
        from genai_prices import Usage, calc_price

        usage = Usage(input_tokens=i, output_tokens=o, cache_read_tokens=cr, cache_write_tokens=cw)
        return calc_price(usage, model_ref=self.ref, provider_id=self.provider_id).total_price

    def units(self, i: int, o: int, cr: int, cw: int) -> int | None:
        cost = self.cost(i, o, cr, cw)
        return None if cost is None else units(cost)

    def worst(self, i: int, o: int) -> int | None:
        plain = self.units(i, o, 0, 0)
        written = self.units(i, o, 0, i)
        return None if plain is None or written is None else max(plain, written)


#: What a name resolves to in genai-prices (what ``_DiskCache`` keeps), and in all.
_FromGenai: TypeAlias = _Unknown | _Plan | _Calc
_Resolved: TypeAlias = _FromGenai | _UserRate


def _plan_for(calc: PriceCalculation, now: datetime) -> _Plan | None:
    """The plan for the price ``calc`` used, or ``None`` when it has parts a plan cannot hold."""
    from genai_prices.types import ModelPrice, StartDateConstraint, TieredPrices

    expires: float | None = None
    prices = calc.model.prices
    if not isinstance(prices, ModelPrice):
        # Dated prices: the plan holds until the next start date (UTC midnight, as in
        # genai-prices). Time-of-day prices change within the day, so they get no plan.
        for conditional in prices:
            constraint = conditional.constraint
            if constraint is None:
                continue
            if not isinstance(constraint, StartDateConstraint):
                return None
            if constraint.start_date > now.date():
                starts = datetime.combine(
                    constraint.start_date, datetime.min.time(), tzinfo=timezone.utc
                ).timestamp()
                expires = starts if expires is None else min(expires, starts)

    flat: list[tuple[int, Decimal]] = []
    tiered: list[tuple[int, Decimal, _Tiers]] = []
    zero = Decimal(0)
    for key, price in calc.model_price.__dict__.items():
        if key.startswith("_") or price is None:
            continue
        if key == "requests_kcount":  # a fee per request: not a token price
            return None
        slot = _SLOT_BY_KEY.get(key, _NONE)
        if isinstance(price, TieredPrices):
            tiers = tuple((tier.start, tier.price) for tier in reversed(price.tiers))
            tiered.append((slot, price.base, tiers))
        elif not isinstance(price, Decimal):
            return None
        elif slot == _NONE:
            zero += price * 0
        else:
            flat.append((slot, price))
    priced = {slot for slot, _ in flat} | {slot for slot, _, _ in tiered}
    return _Plan(
        tuple(flat),
        tuple(tiered),
        zero,
        sub_read=_CACHE_READ in priced,
        sub_write=_CACHE_WRITE in priced,
        expires=expires,
        origin=_genai_origin(calc),
    )


def _genai_origin(calc: PriceCalculation) -> str:
    return f"genai-prices: provider {calc.provider.id!r}, model {calc.model.id!r}"


def _probes(plan: _Plan) -> list[tuple[int, int, int, int]]:
    """Usages (input, output, cache_read, cache_write) on which a plan must match calc_price."""
    probes = [(0, 0, 0, 0), (1, 1, 0, 0), (987_659, 123_457, 345_679, 12_347)]
    for _, _, tiers in plan.tiered:
        for start, _ in tiers:
            for i in (start, start + 1):
                probes.append((i, 10_007, i // 3, i // 7))
    return probes


def _plan_agrees(plan: _Plan, ref: str, provider_id: str | None) -> bool:
    """Whether ``plan`` gives calc_price's very Decimal (value and digits) on every probe."""
    from genai_prices import Usage, calc_price

    for i, o, cr, cw in _probes(plan):
        usage = Usage(input_tokens=i, output_tokens=o, cache_read_tokens=cr, cache_write_tokens=cw)
        try:
            expected = calc_price(usage, model_ref=ref, provider_id=provider_id).total_price
        except (LookupError, ValueError):
            return False
        got = plan.cost(i, o, cr, cw)
        if got != expected or str(got) != str(expected):
            return False
        if units(expected) != plan.units(i, o, cr, cw):
            return False  # a price with more decimals than the engine's units hold
    return True


def _suffixes(name: str) -> list[str]:
    """``a/b/c`` -> ``["a/b/c", "b/c", "c"]``: the name with its prefixes stripped one by one."""
    parts = name.split("/")
    out: list[str] = []
    for index in range(len(parts)):
        suffix = "/".join(parts[index:])
        if suffix and parts[index] and suffix not in out:
            out.append(suffix)
    return out


def _genai_candidates(name: str) -> list[tuple[str, str | None]]:
    """(model_ref, provider_id) pairs to try in genai-prices, the most specific first.

    ``openrouter/google/gemini-3-pro-preview`` gives ``("google/gemini-3-pro-preview",
    "openrouter")``, ``("gemini-3-pro-preview", "google")``, then each suffix with no provider.
    """
    parts = name.split("/")
    candidates: list[tuple[str, str | None]] = []
    for index in range(1, len(parts)):
        provider = parts[index - 1]
        ref = "/".join(parts[index:])
        if provider and parts[index]:
            candidates.append((ref, provider))
    candidates.extend((suffix, None) for suffix in _suffixes(name))
    return candidates


class Prices:
    """Prices model calls from a user table, then from genai-prices; implements ``Pricer``.

    ``table`` maps model names to a ``ModelRate`` or a table such as
    ``{"input": "0.50", "output": "1.50", "cache_read": "0.05"}`` (USD per million tokens). It
    is checked now; a bad entry raises ``InvalidValueError``. A name in the table wins over
    genai-prices, and is also matched when the model is asked for with provider prefixes:
    ``{"my-model": ...}`` prices ``openrouter/acme/my-model``. Names are case-insensitive.

    Resolutions are cached per model name, so a later genai-prices data update
    (``genai_prices.UpdatePrices``) reaches a ``Prices`` only after ``clear_cache()``.
    """

    def __init__(
        self,
        table: Mapping[str, ModelRate | Mapping[str, RateValue]] | None = None,
        *,
        undated: bool = False,
    ) -> None:
        rates = parse_price_table(table) if table is not None else {}
        #: Price calls made at an unknown time (a recorded run with no timestamps): a
        #: genai-prices price that has changed over time, or varies by time of day, is then
        #: unknown rather than today's rate applied to the past.
        self.undated = undated
        self._rates: Mapping[str, ModelRate] = rates
        self._by_name: dict[str, ModelRate] = {
            name.strip().lower(): rate for name, rate in rates.items()
        }
        self._names: dict[str, str] = {name.strip().lower(): name for name in rates}
        self._cache: dict[str, _Resolved] = {}
        #: genai-prices' resolutions on disk: opened at the first lookup, dropped (None) by
        #: ``clear_cache()``, after which every name is looked up in genai-prices itself.
        self._disk: _DiskCache | None = None
        self._disk_opened = False
        #: The per-token prices in engine units (uncached input, output, cache read, cache
        #: write, and the dearer of input and cache write) of the models resolved so far whose
        #: price is the same for every call: no tiers by prompt size, no start date, no time of
        #: day. ``units()`` of such a model is exactly ``(i - cr - cw) * input + o * output +
        #: cr * read + cw * write`` and ``worst_units()`` ``i * dearest + o * output``; the
        #: governor's hot path prices with these. Read it, never write it; ``clear_cache()``
        #: empties it.
        self.flat_units: dict[str, tuple[int, int, int, int, int]] = {}

    @property
    def rates(self) -> Mapping[str, ModelRate]:
        """The user table, as checked, under the names it was given with."""
        return dict(self._rates)

    def __repr__(self) -> str:
        args = [repr(dict(self._rates))] if self._rates else []
        if self.undated:
            args.append("undated=True")
        return f"Prices({', '.join(args)})"

    def cost(
        self,
        model: str,
        *,
        input_tokens: int,
        output_tokens: int,
        cache_read_tokens: int = 0,
        cache_write_tokens: int = 0,
    ) -> Decimal | None:
        """The cost in USD of one model call, or ``None`` when no price is known for ``model``.

        ``input_tokens`` counts every prompt token, cached ones included; ``cache_read_tokens``
        and ``cache_write_tokens`` say how many of them were read from or written to a cache.
        ``output_tokens`` includes reasoning tokens. Raises ``ValueError`` when a count is
        negative or the cache counts exceed ``input_tokens``.
        """
        if (
            input_tokens < 0
            or output_tokens < 0
            or cache_read_tokens < 0
            or cache_write_tokens < 0
            or cache_read_tokens + cache_write_tokens > input_tokens
        ):
            raise ValueError(
                "token counts must be non-negative, and input_tokens must include the cached "
                f"tokens: got input_tokens={input_tokens}, output_tokens={output_tokens}, "
                f"cache_read_tokens={cache_read_tokens}, cache_write_tokens={cache_write_tokens}"
            )
        resolved = self._resolved(model)
        return resolved.cost(input_tokens, output_tokens, cache_read_tokens, cache_write_tokens)

    def units(
        self, model: str, input_tokens: int, output_tokens: int, cache_read: int, cache_write: int
    ) -> int | None:
        """``cost()`` in the engine's units (10^-18 USD), with integer arithmetic only: what
        the governor calls for every response. Raises ``ValueError`` as ``cost()`` does."""
        if (input_tokens | output_tokens | cache_read | cache_write) < 0 or (
            cache_read + cache_write > input_tokens
        ):
            self.cost(
                model,
                input_tokens=input_tokens,
                output_tokens=output_tokens,
                cache_read_tokens=cache_read,
                cache_write_tokens=cache_write,
            )  # raises, naming the counts
        resolved = self._cache.get(model)
        if resolved is None or (resolved.expires is not None and time.time() >= resolved.expires):
            resolved = self._resolve(model)
        return resolved.units(input_tokens, output_tokens, cache_read, cache_write)

    def worst_units(self, model: str, input_tokens: int, max_output_tokens: int) -> int | None:
        """``worst_case()`` in the engine's units: what a request reserves under a cost limit."""
        if (input_tokens | max_output_tokens) < 0:
            raise ValueError(
                "token counts must be non-negative: got "
                f"input_tokens={input_tokens}, max_output_tokens={max_output_tokens}"
            )
        resolved = self._cache.get(model)
        if resolved is None or (resolved.expires is not None and time.time() >= resolved.expires):
            resolved = self._resolve(model)
        return resolved.worst(input_tokens, max_output_tokens)

    def worst_case(self, model: str, input_tokens: int, max_output_tokens: int) -> Decimal | None:
        """The most a call can cost: every output token used, and no input read from a cache.

        Where writing to a cache costs more than plain input (Anthropic), every input token is
        also assumed written to it, so a reservation made from this is never too small.
        """
        worst = self.worst_units(model, input_tokens, max_output_tokens)
        return None if worst is None else dollars(worst)

    def knows(self, model: str) -> bool:
        """Whether ``model`` has a price (from the user table or from genai-prices)."""
        return self.cost(model, input_tokens=0, output_tokens=0) is not None

    def price_source(self, model: str) -> str | None:
        """Where ``model``'s price comes from, for messages and audits; ``None`` when unknown.

        ``"price table: 'my-model'"`` or
        ``"genai-prices: provider 'google', model 'gemini-3-pro-preview'"``.
        """
        return self._resolved(model).origin

    def describe_missing(self, model: str) -> str:
        """How to give ``model`` a price, in code or in ``haltwise.toml``."""
        name = json.dumps(model)
        return (
            f'Give it a price: Prices({{{name}: {{"input": "0.50", "output": "1.50"}}}}) in code, '
            f"or a [prices.{name}] table with input and output in USD per million tokens "
            "in haltwise.toml."
        )

    def clear_cache(self) -> None:
        """Forget every resolved model, so that the next ``cost()`` looks each up again, in
        genai-prices itself (not in what is kept on disk)."""
        self._cache.clear()
        self.flat_units.clear()
        self._disk = None
        self._disk_opened = True

    def _resolved(self, model: str) -> _Resolved:
        resolved = self._cache.get(model)
        if resolved is None or (resolved.expires is not None and time.time() >= resolved.expires):
            resolved = self._resolve(model)
        return resolved

    def _resolve(self, model: str) -> _Resolved:
        resolved = self._lookup(model)
        cache = self._cache
        if model not in cache and len(cache) >= _CACHE_SIZE:
            # Governors in other threads may share this cache (``shared_prices``): one that
            # changes it between the two steps leaves the oldest name for the next time.
            with contextlib.suppress(RuntimeError, StopIteration):
                oldest = next(iter(cache))
                cache.pop(oldest, None)
                self.flat_units.pop(oldest, None)
        cache[model] = resolved
        if (
            isinstance(resolved, _UserRate | _Plan)
            and resolved.expires is None
            and not resolved.tiers
        ):
            plain, output, read, write = resolved.rates
            self.flat_units[model] = (plain, output, read, write, max(plain, write))
        else:
            self.flat_units.pop(model, None)
        return resolved

    def _lookup(self, model: str) -> _Resolved:
        name = model.strip().lower()
        for suffix in _suffixes(name):
            rate = self._by_name.get(suffix)
            if rate is not None:
                return _UserRate(rate, self._names[suffix])
        if not self._disk_opened:
            with _OPENING:  # one file for all the threads sharing this Prices
                if not self._disk_opened:
                    self._disk = _DiskCache.open()
                    self._disk_opened = True
        disk = self._disk
        if disk is None or not _bundled_data():
            return self._genai_lookup(name)
        kept = disk.get(name, self.undated)
        if kept is not None:
            return kept
        resolved = self._genai_lookup(name)
        if _bundled_data():  # not updated while it was looked up
            disk.put(name, self.undated, resolved)
        return resolved

    def _genai_lookup(self, name: str) -> _FromGenai:
        from genai_prices import Usage, calc_price
        from genai_prices.types import ModelPrice

        for ref, provider_id in _genai_candidates(name):
            try:
                calc = calc_price(
                    Usage(input_tokens=0, output_tokens=0), model_ref=ref, provider_id=provider_id
                )
            except LookupError:
                continue
            if self.undated and not isinstance(calc.model.prices, ModelPrice):
                return _UNKNOWN
            plan = _plan_for(calc, datetime.now(timezone.utc))
            if plan is not None and _plan_agrees(plan, ref, provider_id):
                return plan
            return _Calc(ref, provider_id, _genai_origin(calc))
        return _UNKNOWN


# --- genai-prices' resolutions on disk -------------------------------------------------------
# The file names what its entries were resolved from (``_DiskCache.source``): the genai-prices
# files installed and this module, by path, size and time of change. Any other source makes it
# empty; an entry is a resolved name's plan (its Decimals as strings, which keep their digits),
# its calc_price reference, or "unknown". A plan past its ``expires`` is resolved again.

_DISK_FORMAT: Final = 1


def _bundled_data() -> bool:
    """Whether genai-prices prices from the data it was installed with: not from data that
    ``UpdatePrices`` (or ``set_custom_snapshot``) put in its place, which the file does not
    describe."""
    snapshots = sys.modules.get("genai_prices.data_snapshot")
    return snapshots is None or getattr(snapshots, "_custom_snapshot", None) is None


def _cache_dir() -> Path:
    chosen = os.environ.get("HALTWISE_CACHE_DIR")
    if chosen:
        return Path(chosen)
    base = os.environ.get("XDG_CACHE_HOME")
    return (Path(base) if base else Path.home() / ".cache") / "haltwise"


def _encode(resolved: _FromGenai) -> dict[str, Any]:
    if isinstance(resolved, _Plan):
        return {
            "kind": "plan",
            "flat": [[slot, str(price)] for slot, price in resolved.flat],
            "tiered": [
                [slot, str(base), [[start, str(price)] for start, price in tiers]]
                for slot, base, tiers in resolved.tiered
            ],
            "zero": str(resolved.zero),
            "sub_read": resolved.sub_read,
            "sub_write": resolved.sub_write,
            "expires": resolved.expires,
            "origin": resolved.origin,
        }
    if isinstance(resolved, _Calc):
        return {
            "kind": "calc",
            "ref": resolved.ref,
            "provider_id": resolved.provider_id,
            "origin": resolved.origin,
        }
    return {"kind": "unknown"}


def _decode(entry: Any) -> _FromGenai:
    """The resolution an entry holds; ``ValueError``, ``TypeError``, ``KeyError`` or
    ``InvalidOperation`` for one this module did not write."""
    kind = entry["kind"]
    if kind == "unknown":
        return _UNKNOWN
    if kind == "calc":
        provider_id = entry["provider_id"]
        ref, origin = entry["ref"], entry["origin"]
        if not (isinstance(ref, str) and isinstance(origin, str)) or not (
            provider_id is None or isinstance(provider_id, str)
        ):
            raise TypeError("a calc entry's reference, provider and origin are strs")
        return _Calc(ref, provider_id, origin)
    if kind != "plan":
        raise ValueError(f"no entry of kind {kind!r}")
    expires = entry["expires"]
    if expires is not None and not isinstance(expires, int | float):
        raise TypeError("a plan's expiry is a number or null")
    if not isinstance(entry["origin"], str):
        raise TypeError("a plan's origin is a str")
    flat = tuple((_slot(slot), _decimal(price)) for slot, price in entry["flat"])
    tiered = tuple(
        (
            _slot(slot),
            _decimal(base),
            tuple((_start(start), _decimal(price)) for start, price in tiers),
        )
        for slot, base, tiers in entry["tiered"]
    )
    return _Plan(
        flat,
        tiered,
        _decimal(entry["zero"]),
        sub_read=entry["sub_read"] is True,
        sub_write=entry["sub_write"] is True,
        expires=expires,
        origin=entry["origin"],
    )


def _slot(value: Any) -> int:
    if type(value) is not int or not _UNCACHED_INPUT <= value <= _NONE:
        raise ValueError(f"no price slot {value!r}")
    return value


def _start(value: Any) -> int:
    if type(value) is not int or value < 0:
        raise ValueError(f"no tier start {value!r}")
    return value


def _decimal(value: Any) -> Decimal:
    if not isinstance(value, str):
        raise TypeError("a price is written as a str")
    number = Decimal(value)
    if not number.is_finite() or number < 0:
        raise ValueError(f"no price {value!r}")
    return number


class _DiskCache:
    """genai-prices' resolutions of model names, kept in a JSON file from one process to the
    next. Reading and writing it never raises: a file that is missing, unreadable, of another
    source or damaged counts as empty, and one that cannot be written is left as it is."""

    def __init__(self, path: Path, source: list[Any]) -> None:
        self.path = path
        self.source = source
        self.entries = self._read()
        #: Held while an entry is added and the file written (governors in several threads
        #: may share one ``Prices``).
        self._lock = threading.Lock()

    def _read(self) -> dict[str, Any]:
        with contextlib.suppress(OSError, ValueError):
            data = json.loads(self.path.read_bytes())
            if isinstance(data, dict) and data.get("source") == self.source:
                entries = data.get("entries")
                if isinstance(entries, dict):
                    return entries
        return {}

    @classmethod
    def open(cls) -> _DiskCache | None:
        """The cache for the genai-prices installed; None where it is not installed, or where
        no folder is given and there is no home to put one in (``Path.home`` raises
        ``RuntimeError``)."""
        with contextlib.suppress(OSError, ValueError, ImportError, RuntimeError):
            spec = importlib.util.find_spec("genai_prices")
            if spec is None or not spec.submodule_search_locations:
                return None
            package = Path(next(iter(spec.submodule_search_locations)))
            source: list[Any] = [_DISK_FORMAT]
            for path in (package / "data.py", package / "types.py", Path(__file__)):
                found = path.stat()
                source += [str(path), found.st_size, found.st_mtime_ns]
            return cls(_cache_dir() / "prices.json", source)
        return None

    def get(self, name: str, undated: bool) -> _FromGenai | None:
        entry = self.entries.get(_disk_key(name, undated))
        if entry is None:
            return None
        try:
            resolved = _decode(entry)
        except (LookupError, TypeError, ValueError, InvalidOperation):
            return None
        if resolved.expires is not None and time.time() >= resolved.expires:
            return None
        return resolved

    def put(self, name: str, undated: bool, resolved: _FromGenai) -> None:
        entry = _encode(resolved)
        with self._lock:
            # With what other processes have written since it was read; the newest last, and
            # no more than ``_CACHE_SIZE`` names.
            entries = {**self._read(), **self.entries}
            entries.pop(_disk_key(name, undated), None)
            entries[_disk_key(name, undated)] = entry
            self.entries = dict(list(entries.items())[-_CACHE_SIZE:])
            self._write(json.dumps({"source": self.source, "entries": self.entries}))

    def _write(self, data: str) -> None:
        with contextlib.suppress(OSError):
            self.path.parent.mkdir(parents=True, exist_ok=True)
            # Written beside it, then put in its place: a reader sees the old file or the new.
            fd, temporary = tempfile.mkstemp(prefix=".prices-", dir=self.path.parent)
            try:
                with os.fdopen(fd, "w", encoding="utf-8") as out:
                    out.write(data)
                os.replace(temporary, self.path)
            except OSError:
                Path(temporary).unlink(missing_ok=True)
                raise


#: Held while a ``Prices`` opens its ``_DiskCache``.
_OPENING: Final = threading.Lock()


def _disk_key(name: str, undated: bool) -> str:
    return f"undated:{name}" if undated else name


_shared: Prices | None = None


def shared_prices() -> Prices:
    """The ``Prices`` that every governor given no pricer uses, made at the first call: a
    model is looked up in genai-prices once a process, not once a governor. (A governor made
    for each run, each with its own, looked its model up again at its first call: some 0.9 ms
    with a cost limit, against some 10 µs for the rest of the run's start and that call.)"""
    global _shared
    if _shared is None:
        _shared = Prices()
    return _shared
