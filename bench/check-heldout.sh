#!/bin/sh
# Fails when a commit message of a change under perfmodel/ names a held-out op of bench-model
# (bench/specs/heldout/heldout.list) or one of its cite keys: the held-out set was frozen on
# 2026-11-27 and no model change may cite it (bench/specs/heldout/README.md).
# usage: check-heldout.sh BENCH_MODEL SOURCE_DIR          (ctest unit/bench-heldout-not-cited)
# Exit: 0 none cited, 1 cited (the commits are listed), 77 not a git checkout (skipped).
set -u
bench_model=$1
src=$2
if ! git -C "$src" rev-parse --git-dir >/dev/null 2>&1; then
    echo "check-heldout: $src is not a git checkout: skipped"
    exit 77
fi
words=$("$bench_model" --list-heldout | sed 's/[, ]/\n/g' | grep -v '^$') || {
    echo "check-heldout: error: bench-model --list-heldout failed" >&2
    exit 1
}
[ -n "$words" ] || { echo "check-heldout: error: no held-out ops listed" >&2; exit 1; }
fail=0
for word in $words; do
    hits=$(git -C "$src" log --format='%h %s%n%b' -- perfmodel/ | grep -iwF -- "$word")
    if [ -n "$hits" ]; then
        echo "check-heldout: a perfmodel/ commit message cites held-out '$word':" >&2
        git -C "$src" log --format='%h %s' -i --grep="$word" --fixed-strings -- perfmodel/ >&2
        fail=1
    fi
done
[ $fail -eq 0 ] && echo "check-heldout: no perfmodel/ commit message cites a held-out op ($(echo "$words" | wc -l) names and keys)"
exit $fail
