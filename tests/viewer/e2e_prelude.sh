# Sourced by the browser tests (run_e2e.sh, run_live_e2e.sh) with $name (the CTest name), $xpd and
# $work set: finds Chromium and the repository, exits 77 (CTest SKIP_RETURN_CODE) with a message
# when Chromium, node or the viewer's node_modules or bundle are missing, so machines without the
# front-end toolchain still pass the suite, then empties $work.
here="$(cd "$(dirname "${BASH_SOURCE[1]}")" && pwd)"
root="$(cd "$here/../.." && pwd)"
chromium="${XPD_CHROMIUM:-/usr/bin/chromium}"

skip() { echo "SKIP $name: $*" >&2; exit 77; }
[ -x "$chromium" ] || skip "no Chromium at $chromium (run scripts/setup)"
command -v node >/dev/null 2>&1 || skip "node is not installed (run scripts/setup)"
[ -d "$root/viewer/node_modules/playwright-core" ] || skip "viewer/node_modules is missing (run scripts/setup-viewer)"
[ -f "${XPD_VIEWER_DIST:-/nonexistent}/viewer.js" ] || [ -f "$(dirname "$xpd")/../viewer/dist/viewer.js" ] ||
  skip "the viewer bundle was not built (configure again after scripts/setup-viewer)"

rm -rf "$work"
mkdir -p "$work"
