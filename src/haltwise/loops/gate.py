"""``cost_gate``: an estimate before work starts decides whether it starts (AUREUS's "SPK").

- an estimate below ``proceed_below`` proceeds;
- above ``reject_above`` it is rejected;
- in between (or when the estimate is unknown: unknown is never $0) a human decides.

A rejection may offer cheaper alternatives the caller proposes (reduce scope, split into
phases, a simpler approach): at most ``max_alternatives`` (3) are tried, and only those cheaper
than the original and within ``reject_above`` are offered. Rejecting them all abandons with next
steps (``no_acceptable_alternative``); a rejection with nothing to offer abandons with
``cost_rejected``. Every quote and decision is kept in the history.

::

    gate = cost_gate(proceed_below="1.00", reject_above="10.00")
    result = gate.run(spec, estimate, alternatives=[reduce_scope, split_into_phases],
                      decide=ask_the_user)
    if result.ok:
        build(result.value)      # the original or the alternative that was approved
"""

from __future__ import annotations

import math
from collections.abc import Callable, Generator, Sequence
from dataclasses import dataclass
from decimal import Decimal, InvalidOperation
from typing import Any, Generic, TypeVar

from ..drivers.prompters import Prompter
from ..engine.errors import InvalidValueError
from ..engine.governor import Governor
from ..engine.ledger import Ledger
from ..engine.outcome import Status
from ._flow import BoundedLoop, Logic, _Call, _Finish, _Reply, _Run, adrive, describe_error, drive
from .records import Iteration, LoopResult, summarize

__all__ = ["CostGate", "Quote", "cost_gate"]

T = TypeVar("T")
W = TypeVar("W")

#: What to try when the gate rejects the work: AUREUS's next steps.
NEXT_STEPS = (
    "Rephrase the request more specifically",
    "Raise the budget (cost_gate(reject_above=...))",
    "Split the work into several sessions",
    "Try breaking it into smaller tasks",
)


@dataclass(frozen=True, slots=True)
class Quote(Generic[W]):
    """A piece of work with its estimate (``None``: it could not be estimated)."""

    #: ``original``, or the alternative's name (``reduce scope``).
    label: str
    work: W
    estimate: Decimal | None

    def __repr__(self) -> str:
        return f"Quote({self.label!r}, {_dollars(self.estimate)})"


class CostGate(BoundedLoop):
    """Decides whether work starts, from its estimate. Build it with ``cost_gate()``."""

    kind = "cost_gate"
    keeps_best_effort = False

    def __init__(
        self,
        proceed_below: Decimal,
        reject_above: Decimal,
        *,
        max_alternatives: int,
        ledger: Ledger | None,
        args: str,
    ) -> None:
        super().__init__(ledger=ledger, dump=None, load=None, step_limits=None, args=args)
        #: Estimates below this proceed without asking.
        self.proceed_below = proceed_below
        #: Estimates above this are rejected without asking.
        self.reject_above = reject_above
        #: The most alternatives tried after a rejection.
        self.max_alternatives = max_alternatives

    def band(self, estimate: Decimal | None) -> str:
        """``proceed``, ``decide`` or ``reject``: what the thresholds say about ``estimate``."""
        if estimate is None:
            return "decide"
        if estimate < self.proceed_below:
            return "proceed"
        if estimate > self.reject_above:
            return "reject"
        return "decide"

    def run(
        self,
        work: T,
        estimate: Callable[[T], Any],
        *,
        alternatives: Sequence[Callable[[T], T]] = (),
        decide: Callable[[tuple[Quote[T], ...]], Any] | None = None,
        governor: Governor | None = None,
        clock: Callable[[], float] | None = None,
        prompter: Prompter | None = None,
    ) -> LoopResult[T]:
        """Gate ``work``: its value is the work approved (the original or an alternative).

        ``estimate(work)`` returns dollars (a ``Decimal``, number or string). Each alternative
        ``alt(work)`` returns cheaper work. ``decide(quotes)`` is the human: it returns the
        index or the ``Quote`` chosen, ``True`` for the only one, or ``None``/``False`` to reject
        them all; without it, work that needs a human is not approved, but an alternative below
        ``proceed_below`` proceeds by itself.
        """
        flow = self._start(
            (work, estimate, tuple(alternatives), decide), governor, clock, prompter, None
        )
        return drive(flow)

    async def arun(
        self,
        work: T,
        estimate: Callable[[T], Any],
        *,
        alternatives: Sequence[Callable[[T], Any]] = (),
        decide: Callable[[tuple[Quote[T], ...]], Any] | None = None,
        governor: Governor | None = None,
        clock: Callable[[], float] | None = None,
        prompter: Prompter | None = None,
    ) -> LoopResult[T]:
        """``run``, awaiting the callbacks that are async."""
        flow = self._start(
            (work, estimate, tuple(alternatives), decide), governor, clock, prompter, None
        )
        return await adrive(flow)

    def resume(
        self,
        checkpoint: str,
        work: T,
        estimate: Callable[[T], Any],
        *,
        alternatives: Sequence[Callable[[T], T]] = (),
        decide: Callable[[tuple[Quote[T], ...]], Any] | None = None,
        governor: Governor | None = None,
        clock: Callable[[], float] | None = None,
        prompter: Prompter | None = None,
    ) -> LoopResult[T]:
        """Gate the work again (with new thresholds, say), keeping the earlier quotes and
        decisions in the history and, for a fresh governor, the session's counts."""
        callbacks = (work, estimate, tuple(alternatives), decide)
        return drive(self._start(callbacks, governor, clock, prompter, checkpoint))

    async def aresume(
        self,
        checkpoint: str,
        work: T,
        estimate: Callable[[T], Any],
        *,
        alternatives: Sequence[Callable[[T], Any]] = (),
        decide: Callable[[tuple[Quote[T], ...]], Any] | None = None,
        governor: Governor | None = None,
        clock: Callable[[], float] | None = None,
        prompter: Prompter | None = None,
    ) -> LoopResult[T]:
        callbacks = (work, estimate, tuple(alternatives), decide)
        return await adrive(self._start(callbacks, governor, clock, prompter, checkpoint))

    def _logic(self, run: _Run, callbacks: tuple[Any, ...]) -> Logic:
        work, estimate, alternatives, decide = callbacks
        yield from run.turn()
        original = yield from self._quote(run, "original", work, estimate)
        band = self.band(original.estimate)
        if band == "proceed":
            return _Finish(
                Status.COMPLETED,
                "completed",
                f"Approved: the estimate of {_dollars(original.estimate)} is below "
                f"{_dollars(self.proceed_below)}.",
                work,
            )
        if band == "decide" and decide is not None:
            chosen = yield from self._decide(run, decide, (original,))
            if chosen is not None:
                return _Finish(
                    Status.COMPLETED,
                    "completed",
                    f"Approved by a human at an estimate of {_dollars(original.estimate)}.",
                    work,
                )
        why = self._why(original, band, decide is not None)

        considered = alternatives[: self.max_alternatives]
        skipped = len(alternatives) - len(considered)
        offers: list[Quote[Any]] = []
        for alternative in considered:
            label = _label(alternative)
            yield from run.turn()
            reply = yield from run.call(alternative, work)
            if reply.error is not None:
                error = describe_error(reply.error)
                run.record(Iteration(run.number + 1, "alternative", summary=label, error=error))
                continue
            run.unjudged(run.number + 1, "quote", f"{label}: {summarize(reply.value)}", run.now())
            quote = yield from self._quote(run, label, reply.value, estimate)
            if (
                quote.estimate is not None
                and quote.estimate <= self.reject_above
                and (original.estimate is None or quote.estimate < original.estimate)
            ):
                offers.append(quote)
        note = (
            f" ({skipped} more were not tried: at most {self.max_alternatives})" if skipped else ""
        )
        if not offers:
            tried = (
                f"none of the {len(considered)} alternatives is"
                if considered
                else "there is no alternative"
            )
            return _Finish(
                Status.ABANDONED,
                "cost_rejected",
                f"{why}, and {tried} cheaper and within {_dollars(self.reject_above)}{note}.",
                None,
                NEXT_STEPS,
                partial=summarize(work),
            )
        if decide is None:
            cheap = [quote for quote in offers if self.band(quote.estimate) == "proceed"]
            if cheap:
                best = min(cheap, key=lambda quote: quote.estimate or Decimal(0))
                return _Finish(
                    Status.COMPLETED,
                    "completed",
                    f"{why}; the alternative {best.label!r} proceeds: its estimate of "
                    f"{_dollars(best.estimate)} is below {_dollars(self.proceed_below)}.",
                    best.work,
                )
            return _Finish(
                Status.ABANDONED,
                "no_acceptable_alternative",
                f"{why}; {len(offers)} cheaper alternatives need a human's approval, and no one "
                f"was asked (no decide=){note}: {_offered(offers)}.",
                None,
                NEXT_STEPS,
                partial=summarize(work),
            )
        chosen = yield from self._decide(run, decide, tuple(offers))
        if chosen is None:
            return _Finish(
                Status.ABANDONED,
                "no_acceptable_alternative",
                f"{why}; the human rejected all {len(offers)} alternatives offered{note}: "
                f"{_offered(offers)}.",
                None,
                NEXT_STEPS,
                partial=summarize(work),
            )
        return _Finish(
            Status.COMPLETED,
            "completed",
            f"{why}; a human approved the alternative {chosen.label!r} at an estimate of "
            f"{_dollars(chosen.estimate)}.",
            chosen.work,
        )

    def _quote(
        self, run: _Run, label: str, work: Any, estimate: Callable[[Any], Any]
    ) -> Generator[_Call, _Reply, Quote[Any]]:
        reply = yield from run.call(estimate, work)
        error = None
        amount = None
        if reply.error is not None:
            error = f"estimate raised {describe_error(reply.error)}"
        else:
            amount = _amount(reply.value)
            if amount is None:
                error = f"estimate returned {summarize(reply.value, 60)}, not an amount"
        quote = Quote(label, work, amount)
        run.record(
            Iteration(
                run.number + 1,
                "quote",
                summary=f"{label}: {summarize(work)}",
                estimate=amount,
                error=error,
                accepted=self.band(amount) == "proceed",
            )
        )
        return quote

    def _decide(
        self,
        run: _Run,
        decide: Callable[[tuple[Quote[Any], ...]], Any],
        quotes: tuple[Quote[Any], ...],
    ) -> Generator[_Call, _Reply, Quote[Any] | None]:
        yield from run.turn()
        reply = yield from run.call(decide, quotes)
        chosen: Quote[Any] | None = None
        error = None
        if reply.error is not None:
            error = f"decide raised {describe_error(reply.error)}"
        else:
            chosen = _chosen(reply.value, quotes)
        summary = "rejected " + _offered(quotes) if chosen is None else f"chose {chosen.label!r}"
        run.record(
            Iteration(
                run.number + 1,
                "decision",
                summary=summary,
                error=error,
                accepted=chosen is not None,
            )
        )
        return chosen

    def _why(self, original: Quote[Any], band: str, asked: bool) -> str:
        if band == "reject":
            return (
                f"Rejected: the estimate of {_dollars(original.estimate)} is above "
                f"{_dollars(self.reject_above)}"
            )
        if original.estimate is None:
            what = "the work could not be estimated"
        else:
            what = f"the estimate of {_dollars(original.estimate)} needs a human's approval"
        return f"Not approved: {what}" + (
            ", and the human declined" if asked else ", and no one was asked"
        )

    def _halt_note(self, run: _Run) -> str:
        return f"The cost gate stopped after {run.number} quotes and decisions; none is lost."


def _chosen(value: Any, quotes: tuple[Quote[Any], ...]) -> Quote[Any] | None:
    if value is True and len(quotes) == 1:
        return quotes[0]
    if isinstance(value, Quote):
        return value if any(value is quote for quote in quotes) else None
    if isinstance(value, int) and not isinstance(value, bool) and 0 <= value < len(quotes):
        return quotes[value]
    return None


def _label(alternative: Callable[..., Any]) -> str:
    name = getattr(alternative, "__name__", None) or repr(alternative)
    return name.replace("_", " ").strip() or "alternative"


def _offered(quotes: Sequence[Quote[Any]]) -> str:
    return ", ".join(f"{quote.label} at {_dollars(quote.estimate)}" for quote in quotes)


def _amount(value: Any) -> Decimal | None:
    """Dollars from a Decimal, int, float or string; None when it is not a finite amount >= 0."""
    if isinstance(value, bool):
        return None
    try:
        if isinstance(value, float):
            if not math.isfinite(value):
                return None
            value = repr(value)
        amount = Decimal(value) if isinstance(value, Decimal | int | str) else None
    except (InvalidOperation, ValueError):
        return None
    if amount is None or not amount.is_finite() or amount < 0:
        return None
    return amount


def _dollars(amount: Decimal | None) -> str:
    if amount is None:
        return "an unknown amount"
    return f"${amount:.2f}" if amount >= Decimal("0.01") or amount == 0 else f"${amount:.4f}"


def cost_gate(
    proceed_below: Decimal | int | float | str,
    reject_above: Decimal | int | float | str,
    *,
    max_alternatives: int = 3,
    ledger: Ledger | None = None,
) -> CostGate:
    """A gate before work starts: below ``proceed_below`` it proceeds, above ``reject_above`` it
    is rejected (and at most ``max_alternatives`` cheaper alternatives may be offered), in
    between a human decides. Amounts are US dollars, e.g. ``cost_gate("1.00", "10.00")``."""
    low = _amount(proceed_below)
    high = _amount(reject_above)
    if low is None:
        raise InvalidValueError(
            "cost_gate(proceed_below)", proceed_below, "an amount >= 0, e.g. '1.00'"
        )
    if high is None or high < low:
        raise InvalidValueError(
            "cost_gate(reject_above)", reject_above, f"an amount >= proceed_below ({low})"
        )
    if (
        isinstance(max_alternatives, bool)
        or not isinstance(max_alternatives, int)
        or max_alternatives < 0
    ):
        raise InvalidValueError(
            "cost_gate(max_alternatives)", max_alternatives, "a non-negative integer, e.g. 3"
        )
    args = f"{str(low)!r}, {str(high)!r}"
    if max_alternatives != 3:
        args += f", max_alternatives={max_alternatives!r}"
    return CostGate(low, high, max_alternatives=max_alternatives, ledger=ledger, args=args)
