#!/bin/sh
# Top-K means K different kernels: for every bench op (bench/specs/*.spec) on one CPU device
# (a device file, or "host"), `rtgen --top-k=10 --no-profile` writes as many kernels as the
# report has candidates, and no two of them have the same text (their opening comments and the
# kernel names, which carry the rank, left out). Where the op admits fewer than ten distinct
# plans, the report says so ("candidates_note").
#   run-topk-distinct.sh RTGEN ROOT DEVICE|host OUTDIR
set -u
rtgen=$1
root=$2
dev=$3
out=$4
if [ "$dev" = host ]; then opt=""; else opt="--device=$dev"; fi
fail=0
mkdir -p "$out"
cd "$root" || exit 1
for spec in bench/specs/*.spec; do
    name=$(basename "$spec" .spec)
    dir="$out/$name"
    rm -rf "$dir"
    if ! "$rtgen" $opt --top-k=10 --no-profile -o "$dir" "$spec" >"$dir.log" 2>&1; then
        echo "FAIL: rtgen $opt --top-k=10 --no-profile $spec"; tail -3 "$dir.log"; fail=1
        continue
    fi
    k=$(grep -c '"plan": *"' "$dir/$name.json")
    files=$(ls "$dir"/*.ll | wc -l)
    distinct=$(for f in "$dir"/*.ll; do
        grep -v '^;' "$f" | sed -E 's/rt_[A-Za-z0-9_]+_c[0-9]+/KERNEL/g' | cksum
    done | sort -u | wc -l)
    if [ "$files" != "$k" ] || [ "$distinct" != "$k" ]; then
        echo "FAIL: $spec on $dev: $k candidates, $files kernels, $distinct distinct texts"
        fail=1
    fi
    if [ "$k" -lt 10 ] && ! grep -q '"candidates_note": *"the construction found' "$dir/$name.json"; then
        echo "FAIL: $spec on $dev: $k < 10 candidates and no candidates_note"; fail=1
    fi
    echo "$name: $k different kernels"
done
exit $fail
