"""What the packaging configuration puts in the sdist and the wheel, checked without building
either (a build compiles every module with Cython: minutes): each compiled module's ``.py`` (the
pure fallback) and ``.pxd`` go in, Cython's ``.c`` does not, and the build requires Cython to
make it again; the extras that ``haltwise.cli._errors.EXTRAS`` names are those of
``pyproject.toml``.

To see a wheel for real: ``pip wheel --no-deps -w /tmp/whl .`` from a clean copy of the tree.
"""

from __future__ import annotations

import re
import sys
from importlib.metadata import packages_distributions
from pathlib import Path
from typing import Any

import pytest

from haltwise import _compiled
from haltwise.cli._errors import EXTRAS

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - Python 3.10
    import tomli as tomllib

ROOT = Path(__file__).resolve().parents[1]


def pyproject() -> dict[str, Any]:
    document: dict[str, Any] = tomllib.loads((ROOT / "pyproject.toml").read_text())
    return document


def distribution_name(requirement: str) -> str:
    """The normalized distribution a requirement names: ``Google_RE2>=1.1`` -> ``google-re2``."""
    found = re.match(r"[A-Za-z0-9._-]+", requirement)
    assert found is not None, requirement
    return re.sub(r"[-_.]+", "-", found.group()).lower()


def test_the_manifest_keeps_cythons_c_output_out_and_the_sources_in() -> None:
    # setuptools' own reading of MANIFEST.in, over the files a build has beside each compiled
    # module. The wheel's data files are the manifest's files inside the package, so what it
    # leaves out is in neither the sdist nor the wheel (the wheel's .so files come from the
    # build, not from here).
    file_list = pytest.importorskip("setuptools.command.egg_info").FileList
    beside = [str(Path("src", *name.split("."))) for name in _compiled.MODULES]
    built = [f"{stem}{suffix}" for stem in beside for suffix in (".py", ".pxd", ".c")]
    manifest = file_list()
    manifest.files = [*built, "src/haltwise/py.typed"]
    for line in (ROOT / "MANIFEST.in").read_text().splitlines():
        if line.strip() and not line.startswith("#"):
            manifest.process_template_line(line)
    assert "src/haltwise/audit/readers.c" in built  # the audit's modules are compiled too
    assert sorted(manifest.files) == sorted(
        [*(path for path in built if not path.endswith(".c")), "src/haltwise/py.typed"]
    )


def test_the_build_requires_cython_to_make_the_c_again() -> None:
    requires = [distribution_name(each) for each in pyproject()["build-system"]["requires"]]
    assert "cython" in requires


@pytest.mark.parametrize("extra", EXTRAS)
def test_the_modules_named_for_an_extra_are_those_its_packages_install(extra: str) -> None:
    wanted = {
        distribution_name(each) for each in pyproject()["project"]["optional-dependencies"][extra]
    }
    installed = packages_distributions()
    if not all(module in installed for module in EXTRAS[extra]):
        pytest.skip(f"haltwise[{extra}] is not installed")
    provided = {
        distribution_name(distribution)
        for module in EXTRAS[extra]
        for distribution in installed[module]
    }
    assert provided == wanted
