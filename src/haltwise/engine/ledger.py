"""The ledger: where state outlives one governor (checkpoints today; shared budgets, live runs,
approvals and kill flags as the fleet features land).

The engine only talks to the ``Ledger`` interface; ``MemoryLedger`` is the in-process backend.
Other backends (SQLite, Redis) live outside the engine and pass the same contract tests.
"""

from __future__ import annotations

import copy
import threading
from abc import ABC, abstractmethod
from typing import Any

from .errors import LedgerError

__all__ = ["Ledger", "MemoryLedger"]


class Ledger(ABC):
    """Storage for what must survive a governor: checkpoints of runs' counts."""

    @abstractmethod
    def save_checkpoint(self, run_id: str, data: dict[str, Any]) -> str:
        """Store a run's checkpoint (JSON-compatible data) and return a reference to it."""

    @abstractmethod
    def load_checkpoint(self, ref: str) -> dict[str, Any]:
        """The checkpoint behind ``ref``; ``LedgerError`` when there is none."""


class MemoryLedger(Ledger):
    """A ledger in this process's memory: for tests and single-process use."""

    def __init__(self) -> None:
        self._checkpoints: dict[str, dict[str, Any]] = {}
        self._lock = threading.Lock()

    def save_checkpoint(self, run_id: str, data: dict[str, Any]) -> str:
        ref = f"memory:{run_id}"
        with self._lock:
            self._checkpoints[ref] = copy.deepcopy(data)
        return ref

    def load_checkpoint(self, ref: str) -> dict[str, Any]:
        with self._lock:
            data = self._checkpoints.get(ref)
        if data is None:
            raise LedgerError(f"no checkpoint {ref!r} in this process's memory ledger")
        return copy.deepcopy(data)
