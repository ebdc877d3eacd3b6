#!/bin/sh
# Compares `rtgen --dry-run --ir-only examples/NAME.spec` with tests/golden/ir/NAME.txt.
# RTGEN_UPDATE_GOLDEN=1 rewrites the golden file instead.
set -u
rtgen=$1
root=$2
golden=$3
name=$(basename "$golden" .txt)
cd "$root" || exit 1
got=$("$rtgen" --dry-run --ir-only "examples/$name.spec") || exit 1
if [ "${RTGEN_UPDATE_GOLDEN:-0}" = 1 ]; then
    printf '%s\n' "$got" >"$golden"; echo "updated $golden"; exit 0
fi
if [ "$got" != "$(cat "$golden")" ]; then
    printf '%s\n' "$got" | diff -u "$golden" - ; exit 1
fi
echo "ok: $name"
