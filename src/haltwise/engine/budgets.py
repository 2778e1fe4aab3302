"""A governor's dealings with the shared budgets in its ledger (limits with ``key=``).

Before an event spends, each shared limit that counts it asks the ledger, in one atomic step,
for what the event needs: a turn or a tool call is charged at once; a model request's worst
case (tokens, dollars) is reserved and committed when its answer arrives. If any limit is
refused, what the others were granted for the same event is given back, so an event that does
not happen spends nothing. A spend the ledger could not take (it was unreachable) waits in
``unsettled``, in order, and is retried before the next call to the ledger, and kept in
checkpoints: never lost, never counted twice (each carries an id the ledger remembers). When
the run ends (the governor's stop, and ``Governor.settle_waiting`` from drivers), what still
waits is tried once more, whether or not the ledger was given its rest (``settle_waiting``): a
run that ends soon after the ledger is back loses nothing.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from typing import Any

from .errors import LedgerError
from .ledger import Budget, Ledger, new_id
from .state import Hold, budget_from_list, budget_to_list

__all__ = ["Refused", "SharedBudgets"]

#: After the ledger failed, how long it is left alone before it is tried again.
_RETRY_SECONDS = 2.0

#: A shared check: the limit (a Leaf), its slot and the context it reads.
_Check = tuple[Any, Any, Any]


class Refused:
    """A shared limit the ledger refused: which, and the message that trips it."""

    __slots__ = ("check", "message")

    def __init__(self, check: _Check, message: str) -> None:
        self.check = check
        self.message = message


class SharedBudgets:
    """Charges, reserves and commits a governor's shared limits in its ledger."""

    def __init__(
        self,
        ledger: Ledger,
        *,
        clock: Callable[[], float],
        wall_clock: Callable[[], float],
        fail_open: bool,
        lease: float,
    ) -> None:
        self.ledger = ledger
        self.wall_clock = wall_clock
        #: Go on under the local limits while the ledger is unreachable (else stop the run).
        self.fail_open = fail_open
        self.lease = lease
        #: Spends not yet taken by the ledger: (budget, op id, amount), oldest first.
        self.unsettled: list[tuple[Budget, str, int]] = []
        self.monotonic = clock
        #: Failing open, the ledger is not asked again until then (monotonic seconds).
        self.down_until = 0.0

    def take(
        self, checks: tuple[_Check, ...], event: Any, holder: str
    ) -> tuple[tuple[Hold, ...], int | None, Refused | LedgerError | None]:
        """Ask the ledger for what ``event`` needs of each shared budget.

        Returns what was granted (reservations, to commit when the request is answered, and
        charges, with no grant id, to give back only if the event does not happen), the lowest
        ``max_tokens`` a token budget left the request (None: as asked), and what went wrong:
        a refusal, or the ledger's error when it is unreachable and the run fails closed.
        """
        holds: list[tuple[Budget, str, int, _Check]] = []
        lowered: int | None = None
        at = self.wall_clock()
        for check in checks:
            leaf, slot, ctx = check
            metric = leaf.ledger_metric(event)
            cap = leaf.cap()
            if metric is None or cap is None:
                continue
            budget = leaf.share.budget(metric, at)
            limit = leaf.ledger_units(slot.baseline + cap + slot.extra)
            amount, minimum = leaf.ledger_amount(event, slot, ctx)
            if self.fail_open and self.monotonic() < self.down_until:
                # The local limits alone decide until the ledger is back; what is spent
                # meanwhile is settled with it then.
                if leaf.reserves:
                    holds.append((budget, new_id(), 0, check))
                else:
                    self.settle(budget, new_id(), amount)
                continue
            try:
                self.flush()
                if leaf.reserves:
                    grant = self.ledger.reserve(
                        budget, amount, limit, holder=holder, minimum=minimum, lease=self.lease
                    )
                else:
                    grant = self.ledger.charge(budget, amount, limit)
            except LedgerError as error:
                self.down_until = self.monotonic() + _RETRY_SECONDS
                if self.fail_open:
                    if leaf.reserves:
                        holds.append((budget, new_id(), 0, check))
                    else:
                        self.settle(budget, new_id(), amount)
                    continue
                self.undo(holds)
                return (), None, error
            slot.state = grant.used + grant.amount
            if not grant.granted:
                self.undo(holds)
                message = leaf.ledger_refusal(grant.used, amount, limit, budget.window)
                return (), None, Refused(check, message)
            holds.append((budget, grant.id, grant.amount, check))
            if grant.amount < amount and event.max_tokens is not None:
                allowed = event.max_tokens - (amount - grant.amount)
                lowered = allowed if lowered is None else min(lowered, allowed)
        return tuple(holds), lowered, None

    def undo(self, holds: list[tuple[Budget, str, int, _Check]] | tuple[Hold, ...]) -> None:
        """Give back what an event that will not happen was granted."""
        for budget, grant_id, amount, _ in holds:
            if grant_id:
                with contextlib.suppress(LedgerError):  # else the hold lapses with its lease
                    self.ledger.release(budget, grant_id)
            else:
                self.settle(budget, new_id(), -amount)

    def commit(
        self, holds: tuple[Hold, ...], actual: Callable[[Any], int] | None
    ) -> list[tuple[_Check, int, int, str]]:
        """Spend what a request really cost (``actual(leaf)``; None: what it held, for a
        request never answered) in place of its holds; the shared limits it took past their
        limit: (check, used, limit, window)."""
        over = []
        for budget, grant_id, amount, check in holds:
            spent = amount if actual is None or check is None else actual(check[0])
            used = self.settle(budget, grant_id, spent)
            if actual is None or check is None or used is None:
                continue
            leaf, slot, _ = check
            slot.state = used
            limit = leaf.ledger_units(slot.baseline + leaf.cap() + slot.extra)
            if used > limit:
                over.append((check, used, limit, budget.window))
        return over

    def settle(self, budget: Budget, op_id: str, amount: int) -> int | None:
        """Spend ``amount`` under ``op_id`` now, or later if the ledger is unreachable; what
        the budget has used after, when known."""
        self.unsettled.append((budget, op_id, amount))
        if self.monotonic() < self.down_until:
            return None
        try:
            return self.flush()
        except LedgerError:
            self.down_until = self.monotonic() + _RETRY_SECONDS
            return None

    def settle_waiting(self) -> LedgerError | None:
        """At the run's end: hand the ledger every spend still waiting, now, though it failed
        a moment ago (no later call would). The ledger's error if some are still waiting."""
        if not self.unsettled:
            return None
        try:
            self.flush()
        except LedgerError as error:
            self.down_until = self.monotonic() + _RETRY_SECONDS
            return error
        self.down_until = 0.0
        return None

    def flush(self) -> int | None:
        """Hand the ledger every spend it has not taken yet, oldest first."""
        used = None
        while self.unsettled:
            budget, op_id, amount = self.unsettled[0]
            used = self.ledger.commit(budget, op_id, amount)
            self.unsettled.pop(0)
        return used

    def to_list(self) -> list[list[Any]]:
        return [[*budget_to_list(budget), op, amount] for budget, op, amount in self.unsettled]

    def load(self, data: list[list[Any]]) -> None:
        self.unsettled = [(budget_from_list(item[:4]), str(item[4]), int(item[5])) for item in data]
