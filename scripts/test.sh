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
.venv/bin/python -m pip install -q -e '.[dev]'
export CI_REQUIRE_REDIS=1
export CI_REQUIRE_SANDBOX=1
export CI_REQUIRE_BROWSER=1
exec .venv/bin/python -m pytest "$@"
