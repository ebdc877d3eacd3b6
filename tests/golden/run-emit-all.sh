#!/bin/sh
# Every example under examples/ goes through `rtgen --no-profile` on one device (a shipped
# device file, or "host" for the detected host), and for a CPU device also with --emit=c: rtgen
# must exit 0 (kernels written) or 4 (no candidate fits), never on a signal. Exit 3 is accepted
# only where README.md documents the backend limitation (an example named in $limits below, with
# the "is not supported by the ... backend" message at its location). A CPU device whose code
# does not run here (another isa) must say "not profiled: not this host".
#   run-emit-all.sh RTGEN ROOT DEVICE|host OUTDIR
set -u
rtgen=$1
root=$2
dev=$3
out=$4
# No example needs a documented backend limitation today (treernn is lowered level by level).
limits=""
if [ "$dev" = host ]; then opt=""; else opt="--device=$dev"; fi
cls=cpu
if [ -n "$opt" ] && ! grep -Eq '^class[[:space:]]*=[[:space:]]*cpu' "$dev"; then cls=gpu; fi
other=opencl
if grep -Eq '^class[[:space:]]*=[[:space:]]*opencl' "$dev" 2>/dev/null; then other=cuda; fi
foreign=0
if [ -n "$opt" ] && grep -Eq '^isa[[:space:]]*=' "$dev" &&
   ! grep -Eq "^isa[[:space:]]*=[[:space:]]*$(uname -m)" "$dev"; then foreign=1; fi
fail=0
n=0
mkdir -p "$out"
cd "$root" || exit 1
for spec in examples/*.spec; do
    name=$(basename "$spec" .spec)
    # CPU: every candidate lowered, emitted as LLVM IR and C, the top-1 compiled. GPU: the top-1
    # compiled by the device's own compiler (NVRTC, hipRTC, PoCL: seconds per kernel), and
    # every candidate lowered and emitted in another dialect (not compiled).
    if [ $cls = cpu ]; then runs="- --emit=c"; else runs="--top-k=1 --emit=$other"; fi
    for run in $runs; do
        [ "$run" = - ] && run=""
        n=$((n + 1))
        log="$out/$name${run#--}.log"
        "$rtgen" $opt $run --no-profile -o "$out/$name" "$spec" >"$log" 2>&1
        rc=$?
        what="rtgen $opt $run --no-profile $spec"
        case $rc in
        0)
            if [ $foreign = 1 ] && ! grep -q "^not profiled: not this host" "$log"; then
                echo "FAIL: $what: no 'not profiled: not this host' line"; fail=1
            fi
            ;;
        4) ;;
        3)
            case " $limits " in
            *" $name "*)
                grep -q "^$spec:[0-9]*:[0-9]*: error: .* is not supported by the .* backend" "$log" ||
                    { echo "FAIL: $what: exit 3 without the backend limitation's message"; fail=1; } ;;
            *) echo "FAIL: $what: exit 3 (backend failure)"; fail=1 ;;
            esac
            ;;
        *)
            if [ $rc -ge 128 ]; then echo "FAIL: $what: killed by signal $((rc - 128))"
            else echo "FAIL: $what: exit $rc"; fi
            fail=1
            ;;
        esac
        [ $rc = 0 ] || [ $fail = 0 ] || { tail -5 "$log"; }
    done
done
echo "$n example runs on $dev"
exit $fail
