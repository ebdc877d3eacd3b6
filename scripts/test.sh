#!/bin/sh
# Builds rtgen and runs the whole test suite:
#   1. strict build (-Werror) and every ctest label that needs no GPU (unit golden err num),
#   2. the same under AddressSanitizer + UndefinedBehaviorSanitizer (the per-device tests on one
#      device of each kind: tests labelled device-extra are left to the strict run),
#   3. the libFuzzer targets for the spec parser and the INI loader, each for a bounded time
#      (RTGEN_FUZZ_SECONDS, default 60), seeded from examples/ and devices/,
#   4. clang-format --dry-run --Werror over the sources.
# After each ctest run it lists the tests ctest skipped (exit 77: a device, backend or resource
# missing here), each with the last line it printed, its reason.
set -eu
cd "$(dirname "$0")/.."
jobs=$(nproc)
fuzz_seconds=${RTGEN_FUZZ_SECONDS:-60}

# skipped_tests DIR LOG: the tests LOG (ctest's output in build directory DIR) reports skipped.
skipped_tests() {
    names=$(sed -n 's/^.*Test *#[0-9]*: \([^ ]*\) .*\*\*\*Skipped.*$/\1/p' "$2")
    echo "== skipped tests in $1: $(printf '%s' "$names" | grep -c . || true)"
    for name in $names; do
        why=$(awk -v t="$name" '
            /^[0-9]+\/[0-9]+ Test: / { s = $0; sub(/^[0-9]+\/[0-9]+ Test: /, "", s); on = s == t; out = 0; next }
            on && /^Output:$/ { out = 1; getline; next }
            on && out && /^<end of output>$/ { print last; exit }
            on && out { last = $0 }' "$1/Testing/Temporary/LastTest.log")
        echo "  $name: $why"
    done
}

echo "== strict build and tests"
cmake -S . -B build -DRTGEN_WERROR=ON >/dev/null
cmake --build build -j"$jobs"
# The exit status crosses the pipe through a file: set -e holds inside the braces too, so the
# status is caught with || (a failed ctest would otherwise end the group before it is written),
# and a file left by an earlier run is removed first.
rm -f build/ctest.rc
{ rc=0; (cd build && ctest --output-on-failure -j"$jobs" -LE gpu) 2>&1 || rc=$?; echo $rc >build/ctest.rc; } |
    tee build/ctest.log
skipped_tests build build/ctest.log
[ "$(cat build/ctest.rc)" -eq 0 ] || exit 1

echo "== ASan + UBSan build and tests"
cmake -S . -B build-asan -DCMAKE_BUILD_TYPE=Debug -DRTGEN_WERROR=ON \
      -DRTGEN_SANITIZE=address,undefined >/dev/null
cmake --build build-asan -j"$jobs"
# use_sigaltstack=0: the LLVM inside hipRTC/comgr gives its compile threads an alternate signal
# stack of its own (malloc'd, MINSIGSTKSZ + 64 KiB) where ASan's is smaller, as on a Zen 4 host,
# and ASan then aborts at thread exit unmapping a stack it did not map ("unable to unmap").
#
# LeakSanitizer's stop-the-world tracer itself crashes now and then at process exit ("Tracer
# caught signal 11" in ScanRangeForPointers, then "LeakSanitizer has encountered a fatal error";
# no leak is reported), about 1 run in 30 of test-gpu-compile on a loaded 2-core host. A failed
# run is repeated once only when every failed test failed that way; any other failure stands.
# tests/lsan.supp names the third-party libraries (hipRTC's libamdhip64, oneDNN) whose load-time
# allocations LeakSanitizer would otherwise report at every exit.
asan_ctest() {
    (cd build-asan && ASAN_OPTIONS=detect_leaks=1:use_sigaltstack=0 \
        LSAN_OPTIONS=suppressions="$PWD/../tests/lsan.supp":print_suppressions=0 \
        ctest --output-on-failure -j"$jobs" "$@")
}
asan_log=build-asan/ctest-asan.log
asan_rc=0
asan_ctest -L 'unit|golden|err|num' -LE device-extra >"$asan_log" 2>&1 || asan_rc=$?
cat "$asan_log"
if [ "$asan_rc" -ne 0 ]; then
    failed=$(grep -c . build-asan/Testing/Temporary/LastTestsFailed.log || true)
    tracer=$(grep -c 'LeakSanitizer has encountered a fatal error' "$asan_log" || true)
    if [ "$failed" -eq 0 ] || [ "$tracer" -ne "$failed" ]; then
        echo "ASan tests: $failed failed"
        exit 1
    fi
    echo "== ASan: $failed test(s) failed only by LeakSanitizer's tracer crash; running them again"
    asan_ctest --rerun-failed
fi
skipped_tests build-asan "$asan_log"

if [ "$fuzz_seconds" -gt 0 ]; then
    echo "== fuzzing (${fuzz_seconds}s per target)"
    CC=clang-16 cmake -S . -B build-fuzz -DCMAKE_BUILD_TYPE=Debug -DRTGEN_FUZZ=ON >/dev/null
    cmake --build build-fuzz -j"$jobs" --target fuzz-spec fuzz-ini fuzz-lengths fuzz-gen
    for t in spec ini lengths gen; do
        case $t in ini) seeds=devices ;; lengths) seeds=bench/data ;; *) seeds=examples ;; esac
        corpus=build-fuzz/corpus-$t
        mkdir -p "$corpus"
        log=build-fuzz/fuzz-$t.log
        ./build-fuzz/tests/fuzz-$t -max_total_time="$fuzz_seconds" -timeout=10 -rss_limit_mb=2048 \
            -print_final_stats=1 -artifact_prefix=build-fuzz/ "$corpus" "$seeds" >"$log" 2>&1 || {
            tail -n 40 "$log"; echo "fuzz-$t: FAILED (crash input saved by libFuzzer above)"; exit 1; }
        echo "fuzz-$t: $(grep -E 'stat::number_of_executed_units' "$log" | awk '{print $2}') executions, no crash"
    done
fi

if command -v clang-format-16 >/dev/null 2>&1; then
    echo "== clang-format"
    find src hal perfmodel codegen tests bench -name '*.[ch]' -not -path 'tests/golden/*' | sort \
        | xargs clang-format-16 --dry-run --Werror \
        || { echo "clang-format: sources are not formatted (run clang-format-16 -i on them)"; exit 1; }
fi
echo "== all tests passed"
