"""Run every benchmark: ``python benchmarks/run.py [NAME ...]``.

Each ``benchmarks/bench_*.py`` has ``main() -> None`` that prints its own table; comparisons
within one benchmark are measured side by side in the same run, since machines are noisy.
"""

from __future__ import annotations

import importlib.util
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent


def main(names: list[str]) -> int:
    found = sorted(HERE.glob("bench_*.py"))
    chosen = [path for path in found if not names or path.stem.removeprefix("bench_") in names]
    if not chosen:
        print(f"no benchmark matches {names}; have: {[p.stem for p in found]}", file=sys.stderr)
        return 2
    for path in chosen:
        spec = importlib.util.spec_from_file_location(path.stem, path)
        assert spec is not None
        assert spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        sys.modules[path.stem] = module  # dataclasses and pickling look modules up by name
        spec.loader.exec_module(module)
        print(f"\n== {path.stem} ==")
        started = time.perf_counter()
        module.main()
        print(f"({time.perf_counter() - started:.1f}s)")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
