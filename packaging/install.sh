#!/bin/sh
# Install Dynadesk for the current user under ~/.local (no root, no network).
#   ./install.sh             install (or upgrade)
#   ./install.sh --uninstall remove it again (your data folder is kept)
set -eu
HERE=$(cd "$(dirname "$0")" && pwd)
PREFIX=${PREFIX:-"$HOME/.local"}
APPDIR="$PREFIX/share/dynadesk"
BIN="$PREFIX/bin"
APPS="$PREFIX/share/applications"
ICONS="$PREFIX/share/icons/hicolor/scalable/apps"

if [ "${1:-}" = "--uninstall" ]; then
    rm -rf "$APPDIR"
    rm -f "$BIN/dynadesk" "$APPS/dynadesk.desktop" "$ICONS/dynadesk.svg"
    echo "Dynadesk removed (your data folder is untouched)."
    exit 0
fi

[ -x "$HERE/dynadesk/dynadesk" ] || { echo "install.sh: no bundle next to this script ($HERE/dynadesk)" >&2; exit 1; }
mkdir -p "$APPDIR" "$BIN" "$APPS" "$ICONS"
rm -rf "$APPDIR/dynadesk.new"
cp -a "$HERE/dynadesk" "$APPDIR/dynadesk.new"
rm -rf "$APPDIR/dynadesk"
mv "$APPDIR/dynadesk.new" "$APPDIR/dynadesk"
ln -sfn "$APPDIR/dynadesk/dynadesk" "$BIN/dynadesk"
install -m 644 "$HERE/dynadesk.svg" "$ICONS/dynadesk.svg"
sed "s|^Exec=dynadesk|Exec=$BIN/dynadesk|; s|^TryExec=dynadesk|TryExec=$BIN/dynadesk|" \
    "$HERE/dynadesk.desktop" > "$APPS/dynadesk.desktop"
chmod 644 "$APPS/dynadesk.desktop"
command -v update-desktop-database >/dev/null 2>&1 && update-desktop-database -q "$APPS" || true
command -v gtk-update-icon-cache >/dev/null 2>&1 && gtk-update-icon-cache -q -t "$PREFIX/share/icons/hicolor" || true
echo "Dynadesk installed: $APPDIR/dynadesk (launcher $BIN/dynadesk)."
case ":$PATH:" in *":$BIN:"*) ;; *) echo "Add $BIN to your PATH to run 'dynadesk' from a terminal.";; esac
