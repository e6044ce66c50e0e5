#!/bin/sh
# `make package-check`: install the tarball into a clean temporary HOME and drive the bundled app
# (offscreen, fresh data folder, no .venv and no Python on PATH/PYTHONPATH): the window appears,
# the default model predicts a typed text, an example is submitted, a screenshot is written; then
# again on the same data folder, where the same text meets the near-duplicate warning.
set -eu
ROOT=$(cd "$(dirname "$0")/.." && pwd)
TARBALL=${1:-$(ls -t "$ROOT"/dist/dynadesk-*-linux-x86_64.tar.gz 2>/dev/null | head -n 1)}
[ -f "$TARBALL" ] || { echo "package-check: no tarball; run 'make package' first" >&2; exit 1; }
WORK=$(mktemp -d "${TMPDIR:-/tmp}/dynadesk-check.XXXXXX")
KEEP=${KEEP:-0}
cleanup() { [ "$KEEP" = 1 ] || rm -rf "$WORK"; }
trap cleanup EXIT
mkdir -p "$WORK/home" "$WORK/unpacked"
tar -xzf "$TARBALL" -C "$WORK/unpacked"
PKG=$(ls -d "$WORK"/unpacked/dynadesk-*)
HOME="$WORK/home" PREFIX="$WORK/home/.local" "$PKG/install.sh"
APP="$WORK/home/.local/bin/dynadesk"
for f in "$WORK/home/.local/share/applications/dynadesk.desktop" \
         "$WORK/home/.local/share/icons/hicolor/scalable/apps/dynadesk.svg"; do
    [ -f "$f" ] || { echo "package-check: $f was not installed" >&2; exit 1; }
done

clean_env() {
    env -i HOME="$WORK/home" PATH=/usr/bin:/bin LANG=C.UTF-8 QT_QPA_PLATFORM=offscreen \
        DYNADESK_DATA_DIR="$WORK/data" "$@"
}
elapsed() { awk -v s="$1" -v e="$(date +%s.%N)" 'BEGIN { printf "%.1f", e - s }'; }

echo "== dynadesk --version"
clean_env "$APP" --version
echo "== smoke test (first start: the default model is prepared)"
start=$(date +%s.%N)
clean_env "$APP" smoke-test --screenshot "$WORK/first-start.png" --timeout "${SMOKE_TIMEOUT:-600}" > "$WORK/first.json"
first=$(elapsed "$start")
cat "$WORK/first.json"
# The second run types the same text on the same data folder: it must meet the near-duplicate
# warning and store the example through "Submit anyway" (the smoke fails if the warning is missing).
expect() {
    grep -Eq "\"$2\": $3,?\$" "$1" || { echo "package-check: $(basename "$1") lacks \"$2\": $3" >&2; exit 1; }
}
expect "$WORK/first.json" near_duplicate_warning false
echo "== smoke test again (model cached; the same text meets the near-duplicate warning)"
start=$(date +%s.%N)
clean_env "$APP" smoke-test --screenshot "$WORK/second-start.png" --timeout 120 > "$WORK/second.json"
second=$(elapsed "$start")
cat "$WORK/second.json"
expect "$WORK/second.json" near_duplicate_warning true
expect "$WORK/second.json" examples_with_this_text 2
mkdir -p "$ROOT/build/package-check"
cp "$WORK"/*.png "$WORK"/*.json "$ROOT/build/package-check/"
echo "package-check passed: first start ${first} s, second start ${second} s (process wall time);"
echo "screenshots and summaries in build/package-check/"
