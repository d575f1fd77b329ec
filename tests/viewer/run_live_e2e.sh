#!/usr/bin/env bash
# End-to-end test of the live viewer (`xpd view --live`): usage run_live_e2e.sh XPD_EXECUTABLE WORKDIR.
# Exits 77 (CTest SKIP_RETURN_CODE) with a message when Chromium, node or the viewer's
# node_modules are missing, so machines without the front-end toolchain still pass the suite.
set -euo pipefail
xpd="$1"
work="$2"
name=viewer_live_e2e
# shellcheck source=e2e_prelude.sh
source "$(dirname "${BASH_SOURCE[0]}")/e2e_prelude.sh"
exec node "$here/live_e2e.mjs" "$xpd" "$work" "$chromium" "$here/live_slab.json"
