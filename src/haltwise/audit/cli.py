"""``haltwise audit PATH... [--limits EXPR] [--config FILE] [--json] [--html FILE] [--suggest]
[--jobs N]``

Replays every recorded run under the paths through a set of limits (``stuck()`` by default) and
reports, per run, where it would have stopped and why, and per corpus and per model the runs
stopped, the spend saved on runs that did not solve their task, and the solved runs that would
have been cut. Exit status: 0, or 1 when some file could not be read (the rest is reported).
The files are read and replayed in ``jobs`` (here, or in worker processes).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from typing import IO, Any, Protocol

HELP = "Replay recorded agent runs through limits: where each would have stopped, what it saves."

DEFAULT_LIMITS = "stuck()"
#: The threshold factors of the trade-off curve in ``--html``.
SWEEP = (0.5, 0.75, 1.0, 1.5, 2.0, 3.0)


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "paths", nargs="+", metavar="PATH", help="run files, or folders to search for them"
    )
    parser.add_argument(
        "--limits",
        metavar="EXPR",
        help=f'a limit expression, e.g. "max_turns(30) | stuck()" (default: {DEFAULT_LIMITS})',
    )
    parser.add_argument(
        "--config", metavar="FILE", help="a haltwise.toml policy whose limits are audited too"
    )
    parser.add_argument("--json", action="store_true", help="print one JSON document")
    parser.add_argument("--html", metavar="FILE", help="write a self-contained page with plots")
    parser.add_argument(
        "--suggest",
        action="store_true",
        help="propose limits from the runs themselves (within which 95%% of solved runs "
        "ended) and stuck() thresholds fitted to them (at most 1%% of solved runs cut)",
    )
    parser.add_argument(
        "--write-profile",
        metavar="FILE",
        help="with --suggest: write the fitted stuck() thresholds to FILE (JSON), for "
        "stuck(profile=FILE)",
    )
    parser.add_argument(
        "--model", metavar="NAME", help="the model of runs whose files do not name it"
    )
    parser.add_argument(
        "--jobs",
        metavar="N",
        default="1",
        help="replay the files in N worker processes (0 or auto: one per CPU); the report is "
        "the same as with one (default: 1)",
    )
    parser.add_argument(
        "--no-progress", action="store_true", help="no progress bar on standard error"
    )


class _Ticker(Protocol):
    def __call__(self, description: str) -> None: ...


@contextmanager
def _progress(total: int, enabled: bool, stream: IO[str]) -> Iterator[_Ticker]:
    """A progress bar (rich's, when installed) or a plain counter, on a terminal only."""
    if not enabled:
        yield lambda description: None
        return
    try:
        from rich.console import Console
        from rich.progress import (
            BarColumn,
            MofNCompleteColumn,
            Progress,
            TextColumn,
            TimeRemainingColumn,
        )
    except ImportError:
        done = 0

        def tick(description: str) -> None:
            nonlocal done
            done += 1
            if done == total or done % 25 == 0:
                stream.write(f"\r  {done}/{total} files")
                stream.flush()

        yield tick
        stream.write("\n")
        return
    bar = Progress(
        TextColumn("[progress.description]{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeRemainingColumn(),
        console=Console(file=stream),
        transient=True,
    )
    with bar:
        task = bar.add_task("audit", total=total)

        def advance(description: str) -> None:
            bar.update(task, advance=1, description=description[:40])

        yield advance


def run(args: argparse.Namespace) -> int:
    import json
    from pathlib import Path

    from ..cli._errors import check_output_path
    from .expr import scaled
    from .jobs import Plan, WorkerDied, audit_files
    from .readers import Reader, find_files
    from .replay import RunResult
    from .report import Totals, format_table, run_record, totals_record
    from .runs import ReadError
    from .suggest import (
        format_stuck_suggestion,
        format_suggestions,
        profile_document,
        suggest,
        suggest_stuck,
    )

    jobs = _jobs(args.jobs)
    if jobs is None:
        print(
            f"haltwise audit: --jobs {args.jobs!r} is not a number of processes: give a whole "
            "number from 1, or 0 or auto for one per CPU",
            file=sys.stderr,
        )
        return 2
    text = args.limits if args.limits is not None else DEFAULT_LIMITS
    if args.config is not None and args.limits is None:
        text = ""
    sweep_texts: tuple[str, ...] = ()
    if args.html and text:
        sweep_texts = tuple(scaled(text, factor) for factor in SWEEP)
    plan = Plan(
        text,
        sweep_texts,
        args.config,
        calibrate=args.suggest,
        model=args.model,
        series=bool(args.html or args.suggest),
    )
    chosen, limits = plan.limits()
    # With --suggest, stuck() at each scale of its thresholds is replayed after the rest.
    replayed = len(sweep_texts) or 1
    calibrating = len(limits) - replayed
    chosen_index = SWEEP.index(1.0) if sweep_texts else 0
    if args.write_profile and not args.suggest:
        print("haltwise audit: --write-profile needs --suggest", file=sys.stderr)
        return 2

    missing = [path for path in args.paths if not Path(path).exists()]
    if missing:
        print(f"haltwise audit: no such file or folder: {', '.join(missing)}", file=sys.stderr)
        return 2
    # Before the replay, which may take minutes: not after it, with nothing written.
    if args.html:
        check_output_path("--html", args.html)
    if args.write_profile:
        check_output_path("--write-profile", args.write_profile)
    # The notes of every file's reader, gathered here for the warnings.
    reader = Reader()
    files = list(find_files(args.paths))
    results: list[RunResult] = []
    swept: list[list[RunResult]] = [[] for _ in range(replayed)]
    calibrated: list[list[RunResult]] = [[] for _ in range(calibrating)]
    errors: list[ReadError] = []
    show = not args.no_progress and sys.stderr.isatty() and len(files) > 1
    with _progress(len(files), show, sys.stderr) as tick:
        try:
            for done in audit_files(files, plan, jobs=jobs):
                errors.extend(done.errors)
                reader.add_notes(done.notes)
                for outcomes in done.runs:
                    for index, outcome in enumerate(outcomes[replayed:]):
                        calibrated[index].append(outcome)
                    for index, outcome in enumerate(outcomes[:replayed]):
                        swept[index].append(outcome)
                    results.append(outcomes[chosen_index])
                tick(f"{done.corpus}/{done.path.name}")
        except WorkerDied as died:
            print(f"haltwise audit: {died}", file=sys.stderr)
            return 1

    groups = _groups(results, Totals)
    if args.html:
        from .html import SweepPoint, render_page

        points = []
        if sweep_texts:
            for factor, expression, outcomes in zip(SWEEP, sweep_texts, swept, strict=True):
                totals = Totals()
                for outcome in outcomes:
                    totals.add(outcome)
                points.append(SweepPoint(factor, expression, totals))
        page = render_page(
            limits=repr(chosen),
            results=results,
            groups=[(f"corpus {name}", totals) for name, totals in groups["corpora"].items()]
            + [(f"model {name}", totals) for name, totals in groups["models"].items()]
            + [("all", groups["total"]["all"])],
            sweep=points,
            errors=[str(error) for error in errors],
        )
        Path(args.html).write_text(page, encoding="utf-8")

    suggestions = suggest(results) if args.suggest else []
    fitted = suggest_stuck(calibrated) if args.suggest else None
    if args.write_profile:
        if fitted is None:
            print(
                "haltwise audit: no profile written: too few solved runs to fit stuck()",
                file=sys.stderr,
            )
        else:
            profile = profile_document(fitted, suggestions)
            Path(args.write_profile).write_text(json.dumps(profile, indent=2) + "\n")
    if args.json:
        document: dict[str, Any] = {
            "limits": repr(chosen),
            "runs": [run_record(result) for result in results],
            "corpora": totals_record(groups["corpora"]),
            "models": totals_record(groups["models"]),
            "total": groups["total"]["all"].record(),
            "errors": [
                {"source": error.source, "position": error.position, "message": error.message}
                for error in errors
            ],
        }
        if args.suggest:
            document["suggestions"] = [item.record() for item in suggestions]
            document["stuck_suggestion"] = None if fitted is None else fitted.record()
        if args.html:
            document["html"] = args.html
        # Encoded whole, then written once: ``json.dump`` writes each of its many pieces.
        sys.stdout.write(json.dumps(document, indent=2) + "\n")
    else:
        out = sys.stdout
        out.write(f"haltwise audit: {len(results)} runs replayed through {chosen!r}\n")
        stopped = [result for result in results if result.stopped]
        if stopped:
            out.write("\nWhere runs would have stopped:\n")
            for result in stopped:
                label = {True: "solved", False: "not solved", None: "no label"}[
                    result.meta.resolved
                ]
                out.write(
                    f"  {result.meta.corpus}/{result.meta.run_id} ({label}): step "
                    f"{result.stop_step} of {result.steps}, {result.stop_reason}: "
                    f"{result.stop_message}\n"
                )
        failed = [result for result in results if result.error]
        if failed:
            out.write("\nRuns that could not be replayed with these limits:\n")
            for result in failed:
                out.write(f"  {result.meta.corpus}/{result.meta.run_id}: {result.error}\n")
        out.write("\n" + format_table(groups["corpora"].items(), title="By corpus") + "\n")
        out.write("\n" + format_table(groups["models"].items(), title="By model") + "\n")
        out.write("\n" + format_table(groups["total"].items(), title="In all") + "\n")
        if args.suggest:
            out.write("\nSuggested limits, from the solved runs:\n")
            out.write(format_suggestions(suggestions) + "\n")
            out.write("stuck() fitted to these runs:\n" + format_stuck_suggestion(fitted) + "\n")
            if args.write_profile and fitted is not None:
                out.write(f"Wrote {args.write_profile}: stuck(profile={args.write_profile!r})\n")
        if args.html:
            out.write(f"\nWrote {args.html}\n")
    for warning in reader.warnings():
        print(f"haltwise audit: warning: {warning}", file=sys.stderr)
    for error in errors:
        print(f"haltwise audit: {error}", file=sys.stderr)
    if not results and not errors:
        print("haltwise audit: no recorded runs found", file=sys.stderr)
        return 1
    return 1 if errors else 0


def _jobs(given: str) -> int | None:
    """The number of worker processes ``--jobs`` asks for, or None when it is not one."""
    import os

    if given.strip().lower() in ("0", "auto"):
        return os.cpu_count() or 1
    try:
        jobs = int(given)
    except ValueError:
        return None
    return jobs if jobs >= 1 else None


def _groups(results: list[Any], totals: Any) -> dict[str, dict[str, Any]]:
    groups: dict[str, dict[str, Any]] = {"corpora": {}, "models": {}, "total": {"all": totals()}}
    for result in results:
        meta = result.meta
        for kind, name in (("corpora", meta.corpus), ("models", meta.model or "unknown model")):
            if name not in groups[kind]:
                groups[kind][name] = totals()
            groups[kind][name].add(result)
        groups["total"]["all"].add(result)
    for kind in ("corpora", "models"):
        groups[kind] = dict(sorted(groups[kind].items()))
    return groups
