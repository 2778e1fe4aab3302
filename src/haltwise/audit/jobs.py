"""The audit's unit of work, one file read and replayed, done here or in worker processes.

A ``Plan`` is what to replay the runs through, as plain text (limit expressions, a policy file,
a model name), so that each worker process builds its own limits, prices and ``Reader`` from it
once, whether it was forked or spawned. ``Auditor.audit`` reads one file, replays each run and
drops its events, keeping a ``FileAudit``: per run only the results the report needs, the
file's read errors and the reader's notes. ``audit_files`` yields those in the order of the
files however many processes do the work, so that the report is the same byte for byte.

What does not live here: the readers (``readers``), the replay (``replay``), the report.
"""

from __future__ import annotations

import signal
from collections import deque
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from ..engine.limits import Limit, as_limit
from ..pricing import Prices
from .expr import parse_limits
from .readers import Reader, ReadNotes
from .replay import RunResult, replay
from .runs import ReadError

if TYPE_CHECKING:
    from concurrent.futures import Future

__all__ = ["Auditor", "FileAudit", "Plan", "WorkerDied", "audit_files"]


@dataclass(frozen=True, slots=True)
class Plan:
    """What each run is replayed through, as text a worker process can rebuild it from."""

    #: The limit expression (``""``: only the policy's limits).
    text: str
    #: The expressions of a threshold sweep, replayed instead of ``text`` when not empty.
    sweep: tuple[str, ...] = ()
    #: A ``haltwise.toml`` policy whose limits are combined with each expression.
    config: str | None = None
    #: Whether ``stuck()`` at each scale of its thresholds is replayed beside the rest.
    calibrate: bool = False
    #: The model of runs whose files do not name it.
    model: str | None = None
    #: Whether each result keeps its per-step series (for the plots of ``--html`` and the fits
    #: of ``--suggest``); without them a run's result does not grow with its steps.
    series: bool = True

    def policy(self) -> Limit | None:
        if self.config is None:
            return None
        from ..config import load_config

        return load_config(self.config, environ={}, search=None).limits()

    def limits(self) -> tuple[Limit, list[Limit]]:
        """The chosen limits, and every set of limits a run is replayed through, in order: the
        sweep's (or the chosen ones alone), then the calibration's."""
        from .suggest import stuck_candidates

        policy = self.policy()
        chosen = _combine(parse_limits(self.text) if self.text else None, policy)
        limits = [chosen]
        if self.sweep:
            limits = [_combine(parse_limits(item), policy) for item in self.sweep]
        if self.calibrate:
            limits += stuck_candidates()
        return chosen, limits


def _combine(first: Limit | None, second: Limit | None) -> Limit:
    if first is None:
        return as_limit(second)
    if second is None:
        return first
    return first | second


@dataclass(slots=True)
class FileAudit:
    """What one file gave the report: small, and picklable, to cross from a worker process."""

    #: The file, and its corpus.
    path: Path
    corpus: str
    #: Per run, its result under each set of the plan's limits, in the plan's order.
    runs: list[list[RunResult]]
    errors: list[ReadError]
    #: What the reader noted on the file: warnings, and which runs called a tool.
    notes: ReadNotes


class Auditor:
    """Reads and replays files one at a time, through the limits of one ``Plan``."""

    def __init__(self, plan: Plan) -> None:
        # Recorded runs carry no request times: a price that changed over time is unknown here.
        self.pricer = Prices(undated=True)
        self.reader = Reader(model=plan.model, known_model=self.pricer.knows)
        self.limits = plan.limits()[1]
        self.series = plan.series

    def audit(self, path: Path, corpus: str) -> FileAudit:
        runs: list[list[RunResult]] = []
        errors: list[ReadError] = []
        try:
            for item in self.reader.read(path, corpus):
                if isinstance(item, ReadError):
                    errors.append(item)
                    continue
                outcomes = replay(item, self.limits, pricer=self.pricer)
                if not self.series:
                    for outcome in outcomes:
                        outcome.tokens_by_step = []
                        outcome.cost_by_step = []
                runs.append(outcomes)
        except Exception as error:  # one file's bug must not hide the rest of the corpus
            errors.append(
                ReadError(
                    str(path),
                    "",
                    f"could not be audited: internal error ({type(error).__name__}: {error}); "
                    "this is a bug in haltwise, please report it",
                )
            )
        return FileAudit(path, corpus, runs, errors, self.reader.take_notes())


class WorkerDied(Exception):
    """A worker process ended while auditing a file (killed, or out of memory)."""

    def __init__(self, path: Path) -> None:
        super().__init__(f"a worker process died while auditing {path}")
        self.path = path


_auditor: Auditor | None = None


def _start_worker(plan: Plan) -> None:
    global _auditor
    # Ctrl-C reaches the whole process group: the parent alone answers it, by cancelling.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    _auditor = Auditor(plan)


def _audit_in_worker(path: Path, corpus: str) -> FileAudit:
    assert _auditor is not None, "the worker's initializer builds the auditor"
    return _auditor.audit(path, corpus)


def audit_files(files: Sequence[tuple[Path, str]], plan: Plan, *, jobs: int) -> Iterator[FileAudit]:
    """Each file audited, in the order of ``files``: here when ``jobs`` is 1, else in ``jobs``
    worker processes, with a few files at most in flight per worker so that memory stays flat."""
    if jobs == 1 or len(files) < 2:
        auditor = Auditor(plan)
        for path, corpus in files:
            yield auditor.audit(path, corpus)
        return
    # Imported here: an audit in one process needs no pool (multiprocessing takes some 10 ms).
    from concurrent.futures import ProcessPoolExecutor
    from concurrent.futures.process import BrokenProcessPool

    # No more workers than files: each one builds its limits and prices before its first file.
    workers = min(jobs, len(files))
    pool = ProcessPoolExecutor(max_workers=workers, initializer=_start_worker, initargs=(plan,))
    pending: deque[tuple[Path, Future[FileAudit]]] = deque()
    queued = iter(files)
    unsent: list[Path] = []  # the file a broken pool refused, if any

    def submit() -> None:
        if unsent:
            return
        for path, corpus in queued:
            try:
                pending.append((path, pool.submit(_audit_in_worker, path, corpus)))
            except BrokenProcessPool:
                # A worker died: the file it was auditing, among those in flight, is named when
                # its turn comes; if none was (it died between two), this one is.
                unsent.append(path)
            return

    try:
        for _ in range(4 * workers):
            submit()
        while pending:
            path, future = pending.popleft()
            try:
                done = future.result()
            except BrokenProcessPool:
                raise WorkerDied(path) from None
            submit()
            yield done
        if unsent:
            raise WorkerDied(unsent[0])
    finally:
        pool.shutdown(wait=True, cancel_futures=True)
