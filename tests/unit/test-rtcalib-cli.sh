#!/bin/sh
# rtcalib from the command line: usage errors (exit 2) and bad input (exit 1) with rtgen's message
# format, a non-CPU base (exit 3), unwritable outputs, a --quick run whose INI is complete (and
# accepted by rtgen when it is built), and SIGINT/SIGTERM leaving neither OUT.ini nor a temporary.
#   usage: test-rtcalib-cli.sh RTCALIB SOURCE_DIR [RTGEN]
set -u
rtcalib=$1
src=$2
rtgen=${3:-}
abs() { case $1 in /*) echo "$1" ;; *) echo "$PWD/$1" ;; esac; }
rtcalib=$(abs "$rtcalib")
src=$(abs "$src")
[ -n "$rtgen" ] && rtgen=$(abs "$rtgen")
t=$(mktemp -d)
trap 'rm -rf "$t"' EXIT
fails=0

fail() {
    echo "FAIL: $*"
    fails=$((fails + 1))
}

# expect CODE MESSAGE ARGS...: exit code and the whole of stderr.
expect() {
    want_code=$1
    want_msg=$2
    shift 2
    (cd "$t" && "$rtcalib" "$@") >"$t/stdout" 2>"$t/stderr"
    code=$?
    got=$(cat "$t/stderr")
    [ "$code" -eq "$want_code" ] || fail "rtcalib $*: exit $code, expected $want_code"
    [ "$got" = "$want_msg" ] || fail "rtcalib $*:
  got:      $got
  expected: $want_msg"
}

# Nothing but the listed files may be in $t (no OUT.ini, no temporary file).
only() {
    got=$(cd "$t" && ls -A | grep -v '^stdout$' | grep -v '^stderr$' | tr '\n' ' ' | sed 's/ $//')
    [ "$got" = "$*" ] || fail "files left in the output directory: '$got', expected '$*'"
}

# --- usage (exit 2) -----------------------------------------------------------------------------
"$rtcalib" --help >"$t/stdout" 2>&1 || fail "--help exits non-zero"
grep -q '^usage: rtcalib \[--device=BASE.ini\] \[-o OUT.ini\]' "$t/stdout" || fail "--help text"
[ "$("$rtcalib" --version)" = "rtcalib 0.1.0" ] || fail "--version"
expect 2 "rtcalib: error: unknown option '--frobnicate' (see rtcalib --help)" --frobnicate
expect 2 "rtcalib: error: unknown option '-x' (see rtcalib --help)" -x
expect 2 "rtcalib: error: unknown option '--quick' (see rtcalib --help)" --quick=3
expect 2 "rtcalib: error: option '-o' needs a value" -o
expect 2 "rtcalib: error: option '--repeat' needs a value" --repeat
expect 2 "rtcalib: error: --repeat: 1 is out of range [2, 256]" --repeat=1
expect 2 'rtcalib: error: --repeat: expected an integer, got "5x"' --repeat=5x
expect 2 'rtcalib: error: --repeat: expected an integer, got "07"' --repeat 07
expect 2 'rtcalib: error: --max-spread: expected a number, got "ten"' --max-spread=ten
expect 2 'rtcalib: error: --max-spread: -1 is out of range [0, 1000]' --max-spread=-1
expect 2 'rtcalib: error: --threads: 0 is out of range [1, 256]' --threads=0
expect 2 'rtcalib: error: unexpected argument "extra.ini" (see rtcalib --help)' extra.ini
expect 2 'rtcalib: error: -o given twice' -o a.ini -o b.ini
expect 2 'rtcalib: error: --device given twice' --device=a.ini --device=b.ini
only ""

# --- bad input (exit 1) and a base that is not a CPU (exit 3) -------------------------------------
expect 1 "no-such.ini: error: cannot open: No such file or directory" \
    --device=no-such.ini -o out.ini
printf '[device]\nname = x\nclass = cpu\nunits = 0\n' >"$t/bad.ini"
(cd "$t" && "$rtcalib" --device=bad.ini -o out.ini) >"$t/stdout" 2>"$t/stderr"
code=$?
[ "$code" -eq 1 ] || fail "malformed base: exit $code, expected 1"
grep -Eq '^bad.ini:[0-9]+:[0-9]+: error: .' "$t/stderr" ||
    fail "malformed base: message '$(cat "$t/stderr")' is not FILE:LINE:COL: error: ..."
[ "$(wc -l <"$t/stderr")" -eq 1 ] || fail "malformed base: more than one line on stderr"
rm -f "$t/bad.ini"
only ""
# A GPU base without its GPU (hal/calib-gpu.c): the probes compile for sm_75 (NVRTC lacks sm_70),
# their resources go to stdout, exit 3 with "no GPU", nothing written.
(cd "$t" && "$rtcalib" --device="$src/devices/v100.ini" --quick -o out.ini) \
    >"$t/stdout" 2>"$t/stderr"
code=$?
if grep -q "not built with" "$t/stderr"; then
    [ "$code" -eq 3 ] || fail "v100 without NVRTC: exit $code, expected 3"
elif grep -q "arch does not match" "$t/stderr"; then
    [ "$code" -eq 1 ] || fail "v100 on another GPU: exit $code, expected 1"
else
    [ "$code" -eq 3 ] || fail "v100 without a GPU: exit $code, expected 3"
    grep -Eq '^rtcalib: error: no GPU: .+; probes compiled for sm_75 but not run$' "$t/stderr" ||
        fail "v100 without a GPU: stderr '$(cat "$t/stderr")'"
    [ "$(wc -l <"$t/stderr")" -eq 1 ] || fail "v100 without a GPU: more than one line on stderr"
    grep -Eq '^rt_calib_fma_8x8 +sm_75 +[0-9]+ +- +0 +0$' "$t/stdout" ||
        fail "v100 without a GPU: no resource line for rt_calib_fma_8x8 in '$(cat "$t/stdout")'"
fi
only ""

# --- unwritable outputs: refused before any probe runs ------------------------------------------
expect 1 "nodir/out.ini: error: cannot write: No such file or directory" --quick -o nodir/out.ini
mkdir "$t/sub"
expect 1 "sub: error: cannot write: Is a directory" --quick -o sub
rmdir "$t/sub"
only ""

# --- a quick run ----------------------------------------------------------------------------------
(cd "$t" && "$rtcalib" --quick --max-spread=1000 -o host.ini) >"$t/stdout" 2>"$t/stderr"
code=$?
[ "$code" -eq 0 ] || fail "--quick run: exit $code: $(cat "$t/stderr")"
only "host.ini"
grep -q '^\[mem.dram\]$' "$t/host.ini" || grep -q '^\[mem\.' "$t/host.ini" || fail "no [mem.*]"
grep -Eq '^source = "?measured: rtcalib [0-9]{4}-[0-9]{2}-[0-9]{2} \(' "$t/host.ini" ||
    fail "no 'source = measured: rtcalib DATE' line"
grep -Eq '^f32_fma_gflops_per_teu = [0-9]' "$t/host.ini" || fail "no f32_fma_gflops_per_teu"
# A launch costs under a microsecond: on a loaded machine (ctest -j) its repeats may spread past
# even --max-spread=1000, and then refusing the value with a warning is the right outcome.
grep -Eq '^launch_overhead_us = [0-9]' "$t/host.ini" ||
    grep -q '^rtcalib: warning: empty JIT kernel launch.* not written: spread' "$t/stderr" ||
    fail "no launch_overhead_us, and no warning that it was refused"
grep -Eq '^bandwidth_curve_gbps = [0-9]+:[0-9.]+' "$t/host.ini" || fail "no DRAM curve"
grep -q '^rtcalib: \[1/[0-9]*\] ' "$t/stderr" || fail "no progress lines on a non-TTY stderr"
grep -q "^wrote host.ini$" "$t/stdout" || fail "no 'wrote host.ini' line"
if [ -n "$rtgen" ] && [ -x "$rtgen" ]; then
    "$rtgen" --dry-run -o "$t/rtgen-out" --device="$t/host.ini" "$src/examples/matmul.spec" \
        >/dev/null 2>"$t/rtgen.err" || fail "rtgen rejects the written file: $(cat "$t/rtgen.err")"
    rm -rf "$t/rtgen-out" "$t/rtgen.err"
fi
rm -f "$t/host.ini"

# To stdout, from a shipped base: the INI is the only thing on stdout.
(cd "$t" && "$rtcalib" --quick --repeat=2 --device="$src/devices/x86-avx512.ini") \
    >"$t/stdout" 2>"$t/stderr"
code=$?
[ "$code" -eq 0 ] || fail "--quick to stdout: exit $code: $(cat "$t/stderr")"
head -n 1 "$t/stdout" | grep -q '^; written by rtcalib 0.1.0 on ' || fail "stdout is not the INI"
grep -q '^\[device\]$' "$t/stdout" || fail "no [device] on stdout"
only ""

# --- signals: no OUT.ini, no temporary file ----------------------------------------------------
for sig in TERM INT; do
    (cd "$t" && exec "$rtcalib" --repeat=100 -o sig.ini) >/dev/null 2>"$t/stderr" &
    pid=$!
    # The temporary file exists from the start of the run; wait for it (at most 10 s).
    n=0
    while [ $n -lt 100 ] && ! ls -A "$t" | grep -q '^\.sig\.ini\.tmp-'; do
        sleep 0.1
        n=$((n + 1))
    done
    ls -A "$t" | grep -q '^\.sig\.ini\.tmp-' || fail "SIG$sig: no temporary file during the run"
    sleep 0.3
    kill -s "$sig" "$pid"
    { wait "$pid"; } 2>/dev/null
    code=$?
    want=143
    [ "$sig" = INT ] && want=130
    [ "$code" -eq "$want" ] || fail "SIG$sig: exit $code, expected $want"
    grep -q 'rtcalib: interrupted, nothing written' "$t/stderr" || fail "SIG$sig: no message"
    only ""
done

[ $fails -eq 0 ] && echo "ok: test-rtcalib-cli"
[ $fails -eq 0 ]
