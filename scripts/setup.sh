#!/bin/sh
# Sets up a fresh Debian 12 machine for rtgen, builds it, and runs the main job: rtgen on an
# example spec for the host CPU. Idempotent; safe to re-run.
#   scripts/setup.sh            install, build, run examples/matmul.spec on the host
#   RTGEN_SETUP_NO_RUN=1 ...    install and build only
set -eu
cd "$(dirname "$0")/.."

SUDO=
[ "$(id -u)" -eq 0 ] || SUDO=sudo

# Every dependency, from Debian main (CUDA is preinstalled at /usr/local/cuda). libzstd-dev:
# the static LLVM archives that rtgen links need -lzstd, which llvm-16-dev does not pull in.
PACKAGES="cmake make gcc pkg-config
  libiniparser-dev libjansson-dev libhwloc-dev
  llvm-16-dev libzstd-dev clang-16 libclang-rt-16-dev clang-format-16
  libamdhip64-dev hipcc rocm-device-libs libamd-comgr-dev
  pocl-opencl-icd ocl-icd-opencl-dev opencl-headers clinfo python3 xz-utils
  libdnnl-dev libopenblas-dev libopenblas0-pthread libblis-dev libxsmm-dev"

missing=
for p in $PACKAGES; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing="$missing $p"
done
if [ -n "$missing" ]; then
    echo "setup: installing$missing"
    $SUDO apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends $missing
fi

cmake -S . -B build -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build build -j"$(nproc)"

if [ "${RTGEN_SETUP_NO_RUN:-0}" != 1 ]; then
    echo "setup: running ./build/rtgen examples/matmul.spec (host CPU)"
    ./build/rtgen examples/matmul.spec
fi
