#!/bin/sh
# Every example under examples/ must pass a dry run on every shipped device and on the host.
set -u
rtgen=$1
root=$2
fail=0
n=0
for spec in "$root"/examples/*.spec; do
    for dev in "" "$root"/devices/*.ini; do
        if [ -n "$dev" ]; then opt="--device=$dev"; else opt=""; fi
        n=$((n + 1))
        if ! "$rtgen" --dry-run $opt "$spec" >/dev/null 2>"${TMPDIR:-/tmp}/rtgen-dry.err"; then
            echo "FAIL: rtgen --dry-run $opt $spec"; cat "${TMPDIR:-/tmp}/rtgen-dry.err"; fail=1
        fi
        if ! "$rtgen" --dry-run --json $opt "$spec" >/dev/null 2>"${TMPDIR:-/tmp}/rtgen-dry.err"; then
            echo "FAIL: rtgen --dry-run --json $opt $spec"; cat "${TMPDIR:-/tmp}/rtgen-dry.err"; fail=1
        fi
    done
done
echo "$n example x device dry runs"
exit $fail
