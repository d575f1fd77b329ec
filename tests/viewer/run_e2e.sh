#!/usr/bin/env bash
# End-to-end test of the browser viewer: usage run_e2e.sh XPD_EXECUTABLE WORKDIR.
# Exits 77 (CTest SKIP_RETURN_CODE) with a message when Chromium, node or the viewer's
# node_modules are missing, so machines without the front-end toolchain still pass the suite.
set -euo pipefail
xpd="$1"
work="$2"
name=viewer_e2e
# shellcheck source=e2e_prelude.sh
source "$(dirname "${BASH_SOURCE[0]}")/e2e_prelude.sh"
command -v python3 >/dev/null 2>&1 || skip "python3 is not installed"
python3 "$here/make_run.py" "$work/run" --cells 8,4,4 --frames 8 --surface --obstacles
# A run from before scene.json existed: the viewer must work without it, and quietly.
python3 "$here/make_run.py" "$work/run-old" --cells 4,2,2 --frames 2 --no-scene
exec node "$here/e2e.mjs" "$xpd" "$work" "$chromium"
