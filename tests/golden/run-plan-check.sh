#!/bin/sh
# The plan the model priced is the plan the kernel was built from: for every example under
# examples/ on one CPU device (a device file, or "host"), `rtgen --no-profile` (LLVM IR, and
# --emit=c) writes the JSON report and every candidate's kernel; candidate i's "plan" in the
# report must equal the "plan:" line of kernel i's opening comment (the CPU backend prints the
# plan it executed there), and every candidate must have one.
#   run-plan-check.sh RTGEN ROOT DEVICE|host OUTDIR
set -u
rtgen=$1
root=$2
dev=$3
out=$4
if [ "$dev" = host ]; then opt=""; else opt="--device=$dev"; fi
fail=0
n=0
mkdir -p "$out"
cd "$root" || exit 1
for spec in examples/*.spec; do
    name=$(basename "$spec" .spec)
    for emit in ll c; do
        if [ $emit = c ]; then run="--emit=c"; else run=""; fi
        dir="$out/$name.$emit"
        rm -rf "$dir"
        "$rtgen" $opt $run --no-profile -o "$dir" "$spec" >"$dir.log" 2>&1
        rc=$?
        [ $rc = 4 ] && continue # no candidate fits this device
        if [ $rc != 0 ]; then
            echo "FAIL: rtgen $opt $run --no-profile $spec: exit $rc"; tail -3 "$dir.log"; fail=1
            continue
        fi
        grep -o '"plan": *"[^"]*"' "$dir/$name.json" | sed 's/^"plan": *"//; s/"$//' \
            >"$dir.json-plans"
        k=$(wc -l <"$dir.json-plans")
        if [ "$k" -lt 1 ]; then echo "FAIL: $spec on $dev: no plan in the JSON report"; fail=1; fi
        i=1
        while [ $i -le "$k" ]; do
            if [ $i = 1 ]; then f="$dir/$name.$emit"; else f="$dir/$name.rank$i.$emit"; fi
            want=$(sed -n "${i}p" "$dir.json-plans")
            got=$(sed -n 's#^\(;\|//\) plan: ##p' "$f" 2>/dev/null | head -1)
            n=$((n + 1))
            if [ "$want" != "$got" ]; then
                echo "FAIL: $spec on $dev ($emit), candidate $i:"
                echo "  JSON plan:   $want"
                echo "  kernel plan: $got"
                fail=1
            fi
            i=$((i + 1))
        done
        # No kernel beyond the report's candidates.
        if [ -e "$dir/$name.rank$((k + 1)).$emit" ]; then
            echo "FAIL: $spec on $dev ($emit): more kernels than candidates"; fail=1
        fi
    done
done
echo "$n kernels checked on $dev"
exit $fail
