"""Run every benchmark: ``python benchmarks/run.py [NAME ...]`` (``--help`` lists the names).

Each ``benchmarks/bench_*.py`` has ``main() -> None`` that prints its own table; comparisons
within one benchmark are measured side by side in the same run, since machines are noisy. A
benchmark whose peer (pydantic-ai, LangChain, Redis...) is not installed is skipped, with a line
saying how to install it, and the others run.
"""

from __future__ import annotations

import argparse
import importlib.util
import sys
import time
from collections.abc import Sequence
from pathlib import Path

HERE = Path(__file__).resolve().parent
#: Installs every peer the benchmarks compare haltwise with, at the versions they were run with.
INSTALL_PEERS = "pip install -e '.[dev]'"


def benchmarks() -> dict[str, Path]:
    """Each benchmark's name (``governor`` for ``bench_governor.py``) and its file."""
    return {path.stem.removeprefix("bench_"): path for path in sorted(HERE.glob("bench_*.py"))}


def parse(argv: Sequence[str], found: dict[str, Path]) -> list[str]:
    """The benchmarks named on the command line, in the order found; all of them for none."""
    parser = argparse.ArgumentParser(
        prog="benchmarks/run.py",
        description="Run haltwise's benchmarks (all of them, or those named) and print their "
        "tables.",
        epilog=f"benchmarks: {', '.join(found)}",
    )
    parser.add_argument("names", nargs="*", metavar="NAME", help="a benchmark to run")
    names: list[str] = parser.parse_args(argv).names
    unknown = [name for name in names if name not in found]
    if unknown:
        parser.error(f"no benchmark named {', '.join(unknown)}; choose from {', '.join(found)}")
    return [name for name in found if not names or name in names]


def missing_peer(error: ModuleNotFoundError) -> str | None:
    """The package a benchmark imports that is not installed; None for a module of haltwise's
    or of the benchmarks' own, whose absence is a bug rather than a peer to install."""
    top = (error.name or "").partition(".")[0]
    if not top or top == "haltwise" or (HERE / f"{top}.py").exists():
        return None
    return top


def main(argv: Sequence[str]) -> int:
    found = benchmarks()
    for name in parse(argv, found):
        path = found[name]
        print(f"\n== {path.stem} ==")
        started = time.perf_counter()
        try:
            spec = importlib.util.spec_from_file_location(path.stem, path)
            assert spec is not None
            assert spec.loader is not None
            module = importlib.util.module_from_spec(spec)
            sys.modules[path.stem] = module  # dataclasses and pickling look modules up by name
            spec.loader.exec_module(module)
            module.main()
        except ModuleNotFoundError as error:
            peer = missing_peer(error)
            if peer is None:
                raise
            # Half made: a benchmark that imports this one imports it afresh, and is skipped too.
            sys.modules.pop(path.stem, None)
            print(f"skipped: {name} needs {peer}, which is not installed ({INSTALL_PEERS})")
            continue
        print(f"({time.perf_counter() - started:.1f}s)")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
