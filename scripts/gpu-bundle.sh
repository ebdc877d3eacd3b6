#!/bin/sh
# gpu-bundle.sh: packs the built rtgen, rtcalib and gpu-peer-cublas (stripped) with the shared
# libraries they need that are not the C library's (iniparser, jansson, hwloc, zlib, zstd,
# tinfo, udev...) into one directory and a .tar.xz, for a machine that has a GPU and CUDA but
# none of this project's build dependencies (the GPU machine: no apt, no network). LLVM is
# linked statically into the two CLIs, so it travels inside them. Each program is started
# through a wrapper that puts the bundle's lib/ (and the CUDA toolkit's library folders, where
# NVRTC, cuBLAS and CUPTI live, when that machine has them) on LD_LIBRARY_PATH.
#
#   scripts/gpu-bundle.sh [--no-archive] [BUILD_DIR] [OUT_DIR]   (default: build gpubundle)
# writes OUT_DIR/{rtgen,rtcalib,gpu-peer-cublas,bin/,lib/} and, unless --no-archive,
# OUT_DIR.tar.xz (about 26 MiB; the directory is about 84 MiB). Unpack with
# `tar -xJf gpubundle.tar.xz`; run `gpubundle/rtgen --version`.
set -eu
archive=1
[ "${1:-}" = --no-archive ] && { archive=0; shift; }
build=${1:-build}
out=${2:-gpubundle}
for p in rtgen rtcalib bench/gpu-peer-cublas; do
    [ -x "$build/$p" ] || { echo "gpu-bundle: $build/$p is not built" >&2; exit 1; }
done
rm -rf "$out" "$out.tar.xz"
mkdir -p "$out/bin" "$out/lib"
for p in rtgen rtcalib bench/gpu-peer-cublas; do
    name=$(basename "$p")
    strip -o "$out/bin/$name" "$build/$p"
    # Every resolved library except the C library's own (present on any Linux it can run on).
    ldd "$build/$p" | awk '$2 == "=>" && $3 ~ /^\// { print $3 }' | while read -r lib; do
        case $(basename "$lib") in
        libc.so.* | libm.so.* | libdl.so.* | librt.so.* | libpthread.so.* | ld-linux*) ;;
        *) cp -L "$lib" "$out/lib/" ;;
        esac
    done
    cat >"$out/$name" <<EOF
#!/bin/sh
# Starts the bundled $name with the bundle's libraries (scripts/gpu-bundle.sh).
here=\$(cd "\$(dirname "\$0")" && pwd)
lp=\$here/lib
for d in /usr/local/cuda/lib64 /usr/local/cuda/targets/x86_64-linux/lib \\
         /usr/local/cuda/extras/CUPTI/lib64; do
    [ -d "\$d" ] && lp=\$lp:\$d
done
LD_LIBRARY_PATH=\$lp\${LD_LIBRARY_PATH:+:\$LD_LIBRARY_PATH} exec "\$here/bin/$name" "\$@"
EOF
    chmod +x "$out/$name"
done
echo "gpu-bundle: $out ($(du -sm "$out" | cut -f1) MiB)"
if [ $archive = 1 ]; then
    # xz -1: within a sixth of -6's size at a seventh of its time (minutes on 2 loaded cores).
    tar -C "$(dirname "$out")" -cf - "$(basename "$out")" | xz -1 -T0 >"$out.tar.xz"
    echo "gpu-bundle: $out.tar.xz ($(du -sm "$out.tar.xz" | cut -f1) MiB)"
fi
