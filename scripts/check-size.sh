#!/bin/sh
# check-size.sh: no source file above 1500 lines, no function above 150 lines (issue 19).
#   scripts/check-size.sh [ROOT [ALLOW]]
# Scans every .c and .h under src hal perfmodel codegen tests bench (not tests/golden, whose C
# files are emitted output). A function counts from the first line of its signature (at
# column 0; a signature may continue on indented lines) to its closing brace at column 0.
# ALLOW (default tests/size-allow.txt) lists known offenders, one per line:
#   PATH FUNCTION OWNER      (FUNCTION '-' for the file's own length)
# An offender not listed fails the check; a listed entry that no longer offends is reported.
set -eu
root=${1:-$(dirname "$0")/..}
cd "$root"
allow=${2:-tests/size-allow.txt}
max_file=1500
max_fn=150
offenders=$(mktemp)
trap 'rm -f "$offenders"' EXIT

dirs=""
for d in src hal perfmodel codegen tests bench; do [ -d "$d" ] && dirs="$dirs $d"; done
# shellcheck disable=SC2086 # the directory list splits on purpose
find $dirs -name '*.[ch]' -not -path 'tests/golden/*' | sort |
while read -r f; do
    n=$(wc -l <"$f")
    [ "$n" -le $max_file ] || echo "$f - $n"
    awk -v file="$f" -v max=$max_fn '
        function reset() { state = 0; sig = "" }
        BEGIN { reset() }
        state == 2 {
            if ($0 ~ /^}/) {
                len = NR - start + 1
                if (len > max) print file, name, len
                reset()
            }
            next
        }
        state == 1 && !/^[ \t]/ { reset() }
        state == 0 && /^[A-Za-z_]/ { state = 1; start = NR; sig = "" }
        state == 1 {
            sig = sig " " $0
            if ($0 ~ /;[ \t]*(\/\/.*)?$/) { reset(); next }
            if ($0 ~ /\{[ \t]*$/) {
                if (sig ~ /\)[^()=]*\{[ \t]*$/ && sig !~ /=[ \t]*\{[ \t]*$/) {
                    name = sig
                    sub(/\(.*/, "", name)
                    sub(/.*[^A-Za-z0-9_]/, "", name)
                    state = 2
                } else
                    reset()
            }
        }' "$f"
done >"$offenders"

status=0
while read -r f fn n; do
    if [ "$fn" = - ]; then what="$f: $n lines (at most $max_file)"; else
        what="$f: function $fn is $n lines (at most $max_fn)"; fi
    if [ -f "$allow" ] && grep -v '^#' "$allow" | awk -v f="$f" -v fn="$fn" '
            $1 == f && $2 == fn { found = 1 } END { exit !found }'; then
        echo "allowed: $what ($(grep -v '^#' "$allow" | awk -v f="$f" -v fn="$fn" '$1 == f && $2 == fn { print "owner " $3 }'))"
    else
        echo "check-size: error: $what"
        status=1
    fi
done <"$offenders"
if [ -f "$allow" ]; then
    grep -v '^#' "$allow" | while read -r f fn owner; do
        [ -n "$f" ] || continue
        awk -v f="$f" -v fn="$fn" '$1 == f && $2 == fn { found = 1 } END { exit !found }' \
            "$offenders" || echo "check-size: note: $f $fn (owner $owner) is within limits now; drop it from $allow"
    done
fi
[ $status -eq 0 ] && echo "check-size: ok"
exit $status
