"""The real trace corpus (``../shared/traces``), sampled: every reader on files we did not write.

The full pass over the corpus, beside the anchors, is ``benchmarks/bench_detectors.py``.
"""

from __future__ import annotations

from pathlib import Path

from haltwise.audit.readers import find_files, read_paths
from haltwise.audit.replay import replay
from haltwise.audit.runs import ReadError, Run
from haltwise.engine.detectors import stuck
from haltwise.pricing import Prices


def _sample(traces_dir: Path, every: int) -> list[Path]:
    files = [path for path, _ in find_files([traces_dir])]
    return files[::every]


def test_a_sample_of_every_corpus_reads_without_error(traces_dir: Path) -> None:
    pricer = Prices()
    formats: set[str] = set()
    count = 0
    for item in read_paths(_sample(traces_dir, 40), known_model=pricer.knows):
        assert not isinstance(item, ReadError), str(item)
        formats.add(item.meta.format)
        count += 1
        assert item.events, item.meta.run_id
    assert {"swe-agent", "mini-swe-agent"} <= formats
    assert count >= 30


def test_the_long_identical_loop_is_stopped_early(traces_dir: Path) -> None:
    path = traces_dir / "swe-agent-java" / "deepseek-coder-v2" / "fasterxml__jackson-core-1182.traj"
    (run,) = [item for item in read_paths([path]) if isinstance(item, Run)]
    (result,) = replay(run, [stuck()], pricer=Prices())
    # find_file failing for one name after another, then for the same name 40 times.
    assert result.stop_reason in ("stuck.repeat", "stuck.same_error")
    assert result.stop_step is not None
    assert result.stop_step <= 12
    assert result.saved_steps >= 40


def test_scrolling_through_a_file_is_not_a_loop(traces_dir: Path) -> None:
    folder = traces_dir / "swe-agent-gpt4-lite"
    paths = sorted(folder.glob("run*/sympy__sympy-17139.traj"))
    assert paths
    for item in read_paths(paths, model="gpt-4-0125-preview"):
        assert isinstance(item, Run)
        (result,) = replay(item, [stuck()], pricer=Prices())
        assert result.stop_step is None, result.stop_message


def test_tau_bench_results_read_with_their_labels(traces_dir: Path) -> None:
    path = traces_dir / "tau-bench-airline" / "gpt-4o-airline.json"
    runs = [item for item in read_paths([path]) if isinstance(item, Run)]
    assert len(runs) == 200
    assert sum(1 for run in runs if run.meta.resolved) == 84
