"""The pricing interface the engine depends on; the genai-prices implementation lives in
``haltwise.pricing`` so that the engine imports no third-party package.

Money is ``Decimal`` USD at the edges (prices, ``Usage.cost``, checkpoints). Inside the engine it
is a whole number of units of 10^-18 USD, so that counting a call's dollars is int arithmetic:
every price in USD per million tokens with up to 12 decimals is a whole number of units per
token. A price the pricer does not know is ``None`` ("unknown"), never zero.
"""

from __future__ import annotations

from decimal import ROUND_HALF_EVEN, Context, Decimal
from typing import Protocol

from .errors import InvalidValueError

__all__ = ["UNITS_PER_USD", "Pricer", "UnitPricer", "dollars", "in_units", "units"]

#: The engine's money unit is 1/UNITS_PER_USD of a dollar.
UNITS_PER_USD = 10**18
_SCALE = Decimal(UNITS_PER_USD)
_ONE = Decimal(1)
#: The arithmetic between dollars and units, exact for any amount of up to 100 digits (a total
#: has at most 39): the default context's 28 would round a total past $10^10 to the 10^-18.
_EXACT = Context(prec=100)


def units(usd: Decimal) -> int:
    """``usd`` in the engine's units, exact for up to 18 decimals, else rounded half-even."""
    if not usd.is_finite():
        raise InvalidValueError("a cost in dollars", usd, "a finite Decimal, such as 0.0042")
    scaled = usd.scaleb(18, _EXACT)
    whole = int(scaled)
    if whole == scaled:
        return whole
    return int(scaled.quantize(_ONE, rounding=ROUND_HALF_EVEN, context=_EXACT))


def dollars(amount: int) -> Decimal:
    """``amount`` units as ``Decimal`` USD, without trailing zeros after the decimal point."""
    return _EXACT.divide(Decimal(amount), _SCALE)


class Pricer(Protocol):
    """Turns a model's token counts into dollars."""

    def cost(
        self,
        model: str,
        *,
        input_tokens: int,
        output_tokens: int,
        cache_read_tokens: int = 0,
        cache_write_tokens: int = 0,
    ) -> Decimal | None:
        """The cost in USD of one model call, or ``None`` when the model has no known price.

        ``input_tokens`` counts every prompt token, cached ones included (the OpenAI
        convention: ``prompt_tokens`` includes ``prompt_tokens_details.cached_tokens``);
        ``cache_read_tokens`` says how many of them were read from the cache, and
        ``cache_write_tokens`` how many were written to it. ``output_tokens`` includes
        reasoning tokens.
        """
        ...

    def describe_missing(self, model: str) -> str:
        """How a user gives this model a price (the text of a configuration error)."""
        ...


class UnitPricer(Pricer, Protocol):
    """A pricer that also gives costs in the engine's units, without ``Decimal`` work.

    The governor uses these when a pricer has them (``haltwise.pricing.Prices`` does); any other
    ``Pricer`` is asked for ``Decimal`` costs and converted (``in_units``). A pricer may also keep
    ``flat_units``, a mapping from the models whose price is the same for every call to their
    per-token units (as ``Prices.flat_units``): the governor's hot path then prices those
    itself, with the same integer arithmetic.
    """

    def units(
        self, model: str, input_tokens: int, output_tokens: int, cache_read: int, cache_write: int
    ) -> int | None:
        """The cost of one model call in units of 10^-18 USD, or None when it has no price."""
        ...

    def worst_units(self, model: str, input_tokens: int, max_output_tokens: int) -> int | None:
        """The most a request can cost, in units: every output token used, and every prompt
        token at its dearest (plain input, or written to a cache where that costs more)."""
        ...


class _Converted:
    """A ``Pricer`` that only gives ``Decimal`` costs, seen as a ``UnitPricer``."""

    __slots__ = ("pricer",)

    def __init__(self, pricer: Pricer) -> None:
        self.pricer = pricer

    def cost(
        self,
        model: str,
        *,
        input_tokens: int,
        output_tokens: int,
        cache_read_tokens: int = 0,
        cache_write_tokens: int = 0,
    ) -> Decimal | None:
        return self.pricer.cost(
            model,
            input_tokens=input_tokens,
            output_tokens=output_tokens,
            cache_read_tokens=cache_read_tokens,
            cache_write_tokens=cache_write_tokens,
        )

    def describe_missing(self, model: str) -> str:
        return self.pricer.describe_missing(model)

    def units(
        self, model: str, input_tokens: int, output_tokens: int, cache_read: int, cache_write: int
    ) -> int | None:
        cost = self.cost(
            model,
            input_tokens=input_tokens,
            output_tokens=output_tokens,
            cache_read_tokens=cache_read,
            cache_write_tokens=cache_write,
        )
        return None if cost is None else units(cost)

    def worst_units(self, model: str, input_tokens: int, max_output_tokens: int) -> int | None:
        plain = self.units(model, input_tokens, max_output_tokens, 0, 0)
        written = self.units(model, input_tokens, max_output_tokens, 0, input_tokens)
        return None if plain is None or written is None else max(plain, written)


def in_units(pricer: Pricer) -> UnitPricer:
    """``pricer`` itself when it gives costs in units, else a view of it that converts."""
    if callable(getattr(pricer, "units", None)) and callable(getattr(pricer, "worst_units", None)):
        return pricer  # type: ignore[return-value]
    return _Converted(pricer)
