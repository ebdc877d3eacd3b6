#!/bin/sh
# The GPU plan made once: for every example on one GPU device file, each candidate's plan in the
# JSON report (construction.candidates[].gpu_plan, one line per phase) equals the "plan" lines
# of that candidate's kernel header comment (.cu, .hip.cpp, .cl), and the candidates' plans
# differ from one another (equal plans are merged during construction). --no-profile, except on
# an opencl device (PoCL runs here), where the profile runs too. Exit 77 without jq.
#   run-gpu-plan.sh RTGEN ROOT DEVICE OUTDIR
set -u
rtgen=$1
root=$2
dev=$3
out=$4
command -v jq >/dev/null 2>&1 || { echo "jq not found"; exit 77; }
opt="--no-profile"
grep -Eq '^class[[:space:]]*=[[:space:]]*opencl' "$dev" && opt=""
fail=0
n=0
rm -rf "$out"
mkdir -p "$out"
cd "$root" || exit 1
for spec in examples/*.spec; do
    name=$(basename "$spec" .spec)
    "$rtgen" --device="$dev" $opt --top-k=3 -o "$out/$name" "$spec" >"$out/$name.log" 2>&1
    rc=$?
    [ $rc = 4 ] && continue # no candidate fits
    if [ $rc != 0 ]; then echo "FAIL: $name: rtgen exit $rc"; tail -3 "$out/$name.log"; fail=1; continue; fi
    json="$out/$name/$name.json"
    ranks=$(jq -r '.construction.candidates[] | select(.gpu_plan) | .rank' "$json")
    [ -n "$ranks" ] || { echo "FAIL: $name: no gpu_plan in $json"; fail=1; continue; }
    for r in $ranks; do
        # rtgen writes the winner (without a profile: the model's choice, model_top1, which on a
        # GPU is made after compilation) as NAME.EXT, every other candidate as NAME.rankN.EXT,
        # N its construction rank
        win=$(jq -r '.kernels[]? | select(.winner == true) | .rank' "$json")
        [ -n "$win" ] || win=$(jq -r '.model_top1 // 1' "$json")
        if [ "$r" = "$win" ]; then pat="$name"; else pat="$name.rank$r"; fi
        kern=""
        for ext in cu hip.cpp cl; do [ -f "$out/$name/$pat.$ext" ] && kern="$out/$name/$pat.$ext"; done
        [ -n "$kern" ] || continue # not emitted (failed its check when profiled)
        jq -r --argjson r "$r" '.construction.candidates[] | select(.rank == $r) | .gpu_plan[]' \
            "$json" >"$out/$name.r$r.json-plan"
        sed -n 's#^// plan ##p' "$kern" >"$out/$name.r$r.kernel-plan"
        n=$((n + 1))
        if [ ! -s "$out/$name.r$r.kernel-plan" ] ||
           ! cmp -s "$out/$name.r$r.json-plan" "$out/$name.r$r.kernel-plan"; then
            echo "FAIL: $name rank $r: the plan in $json differs from $kern's header"
            diff "$out/$name.r$r.json-plan" "$out/$name.r$r.kernel-plan" | head -6
            fail=1
        fi
    done
    dups=$(jq -r '.construction.candidates[] | .gpu_plan | join("|")' "$json" | sort | uniq -d)
    [ -z "$dups" ] || { echo "FAIL: $name: candidates with equal plans: $dups"; fail=1; }
done
echo "$n kernels' plans checked on $dev"
[ $n -gt 0 ] || fail=1
exit $fail
