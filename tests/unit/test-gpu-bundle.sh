#!/bin/sh
# scripts/gpu-bundle.sh: the bundle runs with nothing from the environment (env -i) but its own
# library path: rtgen, rtcalib and the cuBLAS peer start, rtgen emits and NVRTC-compiles a CUDA
# kernel, and every library the programs need resolves inside the bundle or to the C library.
#   test-gpu-bundle.sh ROOT BUILD
set -u
root=$1
build=$2
out=$(mktemp -d "${TMPDIR:-/tmp}/test-gpu-bundle.XXXXXX")
trap 'rm -rf "$out"' EXIT
fail() {
    echo "FAIL: $*"
    exit 1
}
sh "$root/scripts/gpu-bundle.sh" --no-archive "$build" "$out/b" >"$out/log" 2>&1 ||
    { cat "$out/log"; fail "gpu-bundle.sh: exit $?"; }
b=$out/b
env -i "$b/rtgen" --version | grep -q '^rtgen ' || fail "rtgen --version under env -i"
env -i "$b/rtcalib" --version | grep -q '^rtcalib ' || fail "rtcalib --version under env -i"
env -i "$b/gpu-peer-cublas" 64 64 64 >"$out/peer" 2>&1
rc=$?
[ $rc = 3 ] || [ $rc = 0 ] || fail "gpu-peer-cublas under env -i: exit $rc: $(cat "$out/peer")"
env -i "$b/rtgen" --device="$root/devices/h100.ini" --no-profile --top-k=1 -o "$out/k" \
    "$root/examples/relu.spec" >"$out/emit" 2>&1 || fail "rtgen under env -i: $(cat "$out/emit")"
[ -s "$out/k/relu.cu" ] || fail "no relu.cu"
grep -Eq '^ +1 +compiled' "$out/emit" || fail "the top-1 was not NVRTC-compiled: $(cat "$out/emit")"
for p in rtgen rtcalib gpu-peer-cublas; do
    env -i LD_LIBRARY_PATH="$b/lib" ldd "$b/bin/$p" | awk '$2 == "=>" { print $1, $3 }' |
        while read -r name path; do
            case $path in
            "$b"/lib/*) ;;
            /*) case $name in libc.so.* | libm.so.* | libdl.so.* | librt.so.* | libpthread.so.*) ;;
                *) echo "$p: $name from $path" ;; esac ;;
            *) echo "$p: $name not found" ;;
            esac
        done
done >"$out/ldd"
[ ! -s "$out/ldd" ] || fail "libraries outside the bundle: $(cat "$out/ldd")"
echo "ok: bundle of $(du -sm "$b" | cut -f1) MiB runs under env -i"
