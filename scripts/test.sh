#!/usr/bin/env bash
# The whole test suite on a fresh machine: system packages, a virtualenv, the dev extras, pytest.
set -euo pipefail
cd "$(dirname "$0")/.."

# System packages the end-to-end tests drive: a real terminal for the chat, a real Redis for
# the fleet ledger (the tests start and stop their own server; none is left running),
# bubblewrap for the agent's shell sandbox, and Debian's Chromium with a font for the dashboard
# (Playwright drives it; no browser download).
need=()
command -v tmux >/dev/null 2>&1 || need+=(tmux)
command -v redis-server >/dev/null 2>&1 || need+=(redis-server)
command -v bwrap >/dev/null 2>&1 || need+=(bubblewrap)
command -v chromium >/dev/null 2>&1 || need+=(chromium fonts-dejavu-core)
if [ ${#need[@]} -gt 0 ]; then
    if [ "$(id -u)" = 0 ]; then sudo=""; else sudo="sudo"; fi
    $sudo apt-get update -qq && $sudo apt-get install -y -qq "${need[@]}" >/dev/null
fi

python3 -m venv .venv
.venv/bin/python -m pip install -q --upgrade pip
# Compiles haltwise/_compiled.py's modules with Cython and the C compiler (setup.py).
.venv/bin/python -m pip install -q -e '.[dev]'
export CI_REQUIRE_REDIS=1
export CI_REQUIRE_SANDBOX=1
export CI_REQUIRE_BROWSER=1

# With a C compiler here, the compiled build must be the one in force: else the suite below
# would test the pure build twice.
build=$(.venv/bin/haltwise --version)
echo "$build"
if command -v cc >/dev/null 2>&1 && [[ "$build" != *"(compiled"* ]]; then
    echo "scripts/test.sh: a C compiler is here, yet haltwise is not compiled" >&2
    exit 1
fi

# The whole suite on the build installed, then the tests of every compiled module (the engine,
# the detectors, the audit's readers and replay) again on the pure build.
.venv/bin/python -m pytest "$@"
HALTWISE_PURE=1 .venv/bin/python -m pytest "$@" tests/core tests/detectors tests/test_eventlog.py \
    tests/test_pricing.py tests/adapters tests/audit
