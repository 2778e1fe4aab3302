"""Builds haltwise's compiled modules: Cython turns each module listed in
``src/haltwise/_compiled.py`` into C from its own ``.py`` source, and the machine's C compiler
builds it as an extension beside that source. Everything else is in ``pyproject.toml``.

Without a C compiler (or without Cython) nothing is compiled and haltwise installs as pure
Python, saying so; it runs the same, more slowly.
"""

from __future__ import annotations

import importlib.util
import os
import sys
from pathlib import Path
from typing import Any

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext

ROOT = Path(__file__).resolve().parent
PACKAGE = ROOT / "src" / "haltwise"


def _compiled_module() -> Any:
    """``haltwise/_compiled.py`` on its own: importing haltwise would need its dependencies."""
    spec = importlib.util.spec_from_file_location("_haltwise_compiled", PACKAGE / "_compiled.py")
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


COMPILED = _compiled_module()


def _extensions() -> list[Extension]:
    try:
        from Cython.Build import cythonize
    except ImportError:
        print("haltwise: Cython is not installed: installing pure Python", file=sys.stderr)
        return []
    # No debug information: it would make each extension five times its size.
    flags = [] if sys.platform == "win32" else ["-g0"]
    extensions = [
        Extension(
            name,
            [str(Path("src", *name.split(".")).with_suffix(".py"))],
            extra_compile_args=flags,
        )
        for name in COMPILED.MODULES
    ]
    return cythonize(
        extensions,
        # Each module is translated, then compiled, on a core of its own.
        nthreads=os.cpu_count() or 1,
        compiler_directives={
            "language_level": 3,
            # Compiled as written: an annotation (``str``, ``int``) is documentation, not a C
            # type, so a compiled module accepts exactly what its interpreted source does.
            "annotation_typing": False,
        },
        include_path=["src"],
        quiet=True,
    )


class BuildExt(build_ext):
    """Builds the extensions, or none (pure Python) when the C compiler fails; then records the
    digest of the sources they were built from (``haltwise/_compiled.py``)."""

    def finalize_options(self) -> None:
        super().finalize_options()
        if self.parallel is None:
            self.parallel = os.cpu_count() or 1  # one compiler per core

    def run(self) -> None:
        if not self.extensions:
            return
        try:
            super().run()
        except Exception as error:  # no compiler, no Python headers: any failure means pure
            print(f"haltwise: not compiled ({error}): installing pure Python", file=sys.stderr)
            for extension in self.extensions:
                Path(self.get_ext_fullpath(extension.name)).unlink(missing_ok=True)
            return
        built = Path(self.get_ext_fullpath(self.extensions[0].name))
        package = built.parents[len(self.extensions[0].name.split(".")) - 2]
        (package / COMPILED.DIGEST_FILE).write_text(COMPILED.source_digest(PACKAGE) + "\n")


setup(ext_modules=_extensions(), cmdclass={"build_ext": BuildExt})
