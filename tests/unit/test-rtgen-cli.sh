#!/bin/sh
# rtgen's command line around profiling on this host: a profile in which every candidate is
# wrong (RTGEN_TEST_FAULT, a test-only variable) or times out exits 3 with one line per
# candidate and writes nothing (on the CPU and on the GPU path through PoCL), or with --keep-failed only OP.failed.*; a profile whose data
# cannot fit in memory is refused at once (exit 4) while --no-profile still emits it; a passing
# profile writes OP.EXT and OP.json. Exit 77 (skipped) on a host with 520 GB of free memory,
# where the 10^5-cubed GEMM would fit.
#   usage: test-rtgen-cli.sh RTGEN SOURCE_DIR
set -u
abs() { case $1 in /*) echo "$1" ;; *) echo "$PWD/$1" ;; esac; }
rtgen=$(abs "$1")
cd "$2" || exit 1
t=$(mktemp -d)
trap 'rm -rf "$t"' EXIT
fails=0
skipped=0

fail() {
    echo "FAIL: $*"
    fails=$((fails + 1))
}

# run CODE ARGS...: rtgen's exit code must be CODE; stdout and stderr land in $t.
run() {
    want=$1
    shift
    "$rtgen" "$@" >"$t/stdout" 2>"$t/stderr"
    code=$?
    [ "$code" -eq "$want" ] || fail "rtgen $*: exit $code, expected $want
$(cat "$t/stderr")"
}

# files DIR NAMES: exactly these files in DIR ("" : DIR does not exist).
files() {
    if [ -z "$2" ]; then
        [ ! -e "$1" ] || fail "$1 exists: $(ls -A "$1" | tr '\n' ' ')"
        return
    fi
    got=$(ls -A "$1" 2>/dev/null | tr '\n' ' ' | sed 's/ $//')
    [ "$got" = "$2" ] || fail "files in $1: '$got', expected '$2'"
}

# last_err TEXT: the last line of stderr.
last_err() {
    got=$(tail -n 1 "$t/stderr")
    [ "$got" = "$1" ] || fail "last line of stderr:
  got:      $got
  expected: $1"
}

small="--top-k=2 --set M=64 --set N=48 --set K=32 examples/matmul.spec"
cand_re='^rtgen: rank [12] rt_matmul_c[0-9]*: wrong: (interpreter check: C\[[0-9]*\] is .*, the reference .*|the same code as rank 1)$'

# Every candidate wrong: exit 3, one line per candidate, nothing written.
RTGEN_TEST_FAULT=corrupt run 3 -o "$t/o1" $small
[ "$(wc -l <"$t/stderr")" -eq 3 ] || fail "expected 3 lines on stderr: $(cat "$t/stderr")"
[ "$(head -n 2 "$t/stderr" | grep -Ec "$cand_re")" -eq 2 ] || fail "candidate lines: $(cat "$t/stderr")"
last_err "rtgen: error: no candidate of matmul passed its check (2 wrong); nothing was written (--keep-failed writes them as matmul.failed.*)"
files "$t/o1" ""
grep -q "kernel:" "$t/stdout" && fail "a failed profile names a kernel: $(cat "$t/stdout")"

# --keep-failed: the report and the sources, under names that say so.
RTGEN_TEST_FAULT=nan run 3 --keep-failed -o "$t/o2" $small
files "$t/o2" "matmul.failed.json matmul.failed.rank1.ll matmul.failed.rank2.ll"
grep -q '"profiled": true' "$t/o2/matmul.failed.json" || fail "failed report: profiled"
grep -q '"winner": null' "$t/o2/matmul.failed.json" || fail "failed report: winner"
grep -q '"reason": "interpreter check: C\[' "$t/o2/matmul.failed.json" || fail "failed report: reason"
last_err "rtgen: error: no candidate of matmul passed its check (2 wrong); their sources and report are in $t/o2 as matmul.failed.*"

# --json: the report on stdout all the same, exit 3, nothing written.
RTGEN_TEST_FAULT=clobber run 3 --json -o "$t/o3" $small
grep -q '"winner": null' "$t/stdout" || fail "--json report on a failed profile"
grep -q 'the kernel wrote into input A' "$t/stdout" || fail "--json report: clobbered input"
files "$t/o3" ""

# Every candidate timing out (as the ragged FFN of issue 18): exit 3 with where it struck.
RTGEN_TEST_FAULT=hang run 3 --top-k=1 -o "$t/o4" --set M=64 --set N=48 --set K=32 examples/matmul.spec
head -n 1 "$t/stderr" | grep -Eq '^rtgen: rank 1 rt_matmul_c0: timeout: killed after [0-9]+ ms in its first \(checked\) run$' ||
    fail "timeout line: $(cat "$t/stderr")"
last_err "rtgen: error: no candidate of matmul passed its check (1 timed out); nothing was written (--keep-failed writes them as matmul.failed.*)"
files "$t/o4" ""

# An unknown fault is a usage error.
RTGEN_TEST_FAULT=bogus run 2 -o "$t/o5" $small
last_err 'rtgen: error: RTGEN_TEST_FAULT: unknown fault "bogus" (expected corrupt, nan, unwritten, clobber, zero, blind, crash or hang)'
files "$t/o5" ""

# A passing profile: the winner as matmul.ll, the other as its rank, the report.
run 0 -o "$t/o6" $small
case $(ls -A "$t/o6" | tr '\n' ' ') in
"matmul.json matmul.ll matmul.rank1.ll " | "matmul.json matmul.ll matmul.rank2.ll ") ;;
*) fail "files of a passing profile: $(ls -A "$t/o6" | tr '\n' ' ')" ;;
esac
grep -Eq '"winner": [12],' "$t/o6/matmul.json" || fail "report: winner"
grep -q "^kernel: $t/o6/matmul.ll$" "$t/stdout" || fail "kernel line: $(cat "$t/stdout")"

# A profile that cannot fit: refused before construction, with what it needs.
avail_kb=$(sed -n 's/^MemAvailable: *\([0-9]*\) kB/\1/p' /proc/meminfo)
big="--set M=100000 --set N=100000 --set K=100000 examples/matmul.spec"
if [ "${avail_kb:-0}" -ge 507812500 ]; then
    echo "skipped: $avail_kb kB available, the 520 GB profile would fit"
    skipped=1
else
    # --explain prints the construction trace on stdout as soon as it ran: it must not have.
    start=$(date +%s)
    run 4 --explain -o "$t/o7" $big
    end=$(date +%s)
    [ ! -s "$t/stdout" ] || fail "the construction ran before the refusal: $(head -n 3 "$t/stdout")"
    grep -Eq '^rtgen: error: profiling matmul needs 520\.0 GB \(inputs, outputs and reference\) but [0-9]+\.[0-9] [GM]B are available; use --no-profile or shrink it with --set$' "$t/stderr" ||
        fail "memory refusal: $(cat "$t/stderr")"
    [ "$(wc -l <"$t/stderr")" -eq 1 ] || fail "memory refusal: more than one line"
    [ $((end - start)) -le 5 ] || fail "memory refusal took $((end - start)) s"
    files "$t/o7" ""
fi
# --no-profile still constructs and emits it.
run 0 --no-profile --top-k=1 -o "$t/o8" $big
files "$t/o8" "matmul.json matmul.ll"
grep -q '"profiled": false' "$t/o8/matmul.json" || fail "--no-profile report: profiled"

# Lengths that no --lengths file binds are generated (uniform over 0..16, seed 1), and the model
# prices those: the construction's axes have their extents and the note says where they came from
# (it priced uniform 1..512 while the profile ran these once, which made vgemm on the H200 read
# 0.34 GFLOP/s against a prediction for 3000x the FLOPs).
run 0 --no-profile --top-k=1 --json -o "$t/o12" examples/vgemm.spec
grep -q '"length_note": "Ml, Nl, Kl: generated, uniform over 0..16 (seed 1; --lengths binds real ones)"' "$t/stdout" ||
    fail "generated lengths: note: $(grep -o '"length_note": [^,]*' "$t/stdout")"
grep -A3 '"name": "k",' "$t/stdout" | grep -Eq '^ *"extent": 1[0-6],$' ||
    fail "generated lengths: k's extent: $(grep -A3 '"name": "k",' "$t/stdout")"
run 0 --no-profile --top-k=1 -o "$t/o13" examples/vgemm.spec
grep -qx 'lengths: Ml, Nl, Kl: generated, uniform over 0..16 (seed 1; --lengths binds real ones)' "$t/stdout" ||
    fail "generated lengths: text: $(head -n 4 "$t/stdout")"
printf '3\n5\n' >"$t/len2"
run 0 --no-profile --top-k=1 --json --set B=2 --lengths "Ml=$t/len2" -o "$t/o14" examples/vgemm.spec
grep -q '"length_note": "Nl, Kl: generated' "$t/stdout" ||
    fail "a bound and generated lengths: note: $(grep -o '"length_note": [^,]*' "$t/stdout")"

# The GPU-structured path (OpenCL on PoCL): every candidate wrong exits 3 the same way.
RTGEN_TEST_FAULT=corrupt "$rtgen" --device=devices/pocl-cpu.ini -o "$t/o9" $small >"$t/stdout" 2>"$t/stderr"
code=$?
if [ "$code" -eq 0 ] && grep -q '^not profiled: ' "$t/stdout"; then
    echo "skipped: no OpenCL device for the GPU path: $(grep '^not profiled: ' "$t/stdout")"
    skipped=1
else
    [ "$code" -eq 3 ] || fail "GPU path, every candidate wrong: exit $code, expected 3
$(cat "$t/stderr")"
    [ "$(grep -Ec "^rtgen: rank [12]: wrong: output 'C': max error " "$t/stderr")" -eq 2 ] ||
        fail "GPU candidate lines: $(cat "$t/stderr")"
    last_err "rtgen: error: no candidate of matmul passed its check (2 wrong); nothing was written (--keep-failed writes them as matmul.failed.*)"
    files "$t/o9" ""
    grep -q "kernel:" "$t/stdout" && fail "a failed GPU profile names a kernel: $(cat "$t/stdout")"
    # GFLOP/s of a ragged GPU kernel divide the useful FLOPs of the bound lengths (0, 1, 7, 13):
    # H * D * sum(len^2) points of a product, a scale and an accumulation, 2*64*219*3 = 84096
    # (not the model's expected lengths of the plan).
    printf '0\n1\n7\n13\n' >"$t/len4"
    "$rtgen" --device=devices/pocl-cpu.ini --top-k=1 --lengths "len=$t/len4" --set B=4 --set H=2 \
        --json -o "$t/o10" examples/qkt.spec >"$t/q.json" 2>"$t/stderr" || fail "qkt on PoCL: $(cat "$t/stderr")"
    grep -q '"flops": 84096\.0\?,' "$t/q.json" || fail "qkt on PoCL: useful FLOPs: $(grep -o '"flops": [^,]*' "$t/q.json")"
    grep -q '"gflops": ' "$t/q.json" || fail "qkt on PoCL: no gflops"
    "$rtgen" --device=devices/pocl-cpu.ini --top-k=1 --lengths "len=$t/len4" --set B=4 --set H=2 \
        -o "$t/o11" examples/qkt.spec >"$t/stdout" 2>"$t/stderr" || fail "qkt on PoCL: $(cat "$t/stderr")"
    grep -Eq '^winner: 8\.41e\+04 useful FLOPs of the bound data \(no padding\) in [0-9.]+ us: [0-9.]+ GFLOP/s$' "$t/stdout" ||
        fail "qkt on PoCL: winner line: $(grep '^winner' "$t/stdout")"
fi

# A compiled GPU kernel opens with the price the table prints: the one repriced with the
# compiler's registers (before, the comment kept the construction's; h100 softmax: 13.22 us
# against 29.20). Needs NVRTC (the status column says compiled).
"$rtgen" --device=devices/h100.ini --no-profile --top-k=1 -o "$t/h1" examples/softmax.spec \
    >"$t/stdout" 2>"$t/stderr" || fail "softmax on h100: $(cat "$t/stderr")"
if grep -q '^   1 compiled' "$t/stdout"; then
    table=$(awk '$1 == 1 && $3 == "/" {print $7; exit}' "$t/stdout")
    header=$(sed -n 's|^// candidate 1: predicted \([0-9.]*\) us.*|\1|p' "$t/h1/softmax.cu")
    [ -n "$table" ] && [ "$table" = "$header" ] ||
        fail "softmax on h100: the kernel's comment says $header us, the table $table us"
fi

if [ "$fails" -ne 0 ]; then
    echo "test-rtgen-cli: $fails failed"
    exit 1
fi
if [ "$skipped" -ne 0 ]; then
    exit 77
fi
echo "test-rtgen-cli: ok"
