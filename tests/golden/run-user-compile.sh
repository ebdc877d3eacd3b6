#!/bin/sh
# The emitted GPU sources compile as a user compiles them, outside rtgen: every example goes
# through `rtgen --no-profile --top-k=K` on one device, and every kernel file it writes is
# compiled by the vendor's offline compiler: a `.cu` with `nvcc -cubin -arch=ARCH`, a `.hip.cpp`
# with `hipcc --genco --offload-arch=ARCH` (rtgen itself compiles them with NVRTC and hipRTC, which
# provide the kernel language without headers). Each compile must succeed, and its output must
# hold every kernel the source defines. Exit 77 (skip) when the compiler is not installed.
#   run-user-compile.sh RTGEN ROOT DEVICE.ini cuda|hip ARCH TOPK OUTDIR
set -u
rtgen=$1
root=$2
dev=$3
target=$4
arch=$5
topk=$6
out=$7
case $target in
cuda)
    cc=$(command -v nvcc || true)
    [ -n "$cc" ] || [ ! -x /usr/local/cuda/bin/nvcc ] || cc=/usr/local/cuda/bin/nvcc
    ext=cu
    ;;
hip)
    cc=$(command -v hipcc || true)
    ext=hip.cpp
    ;;
*)
    echo "run-user-compile.sh: unknown target '$target'"
    exit 2
    ;;
esac
if [ -z "$cc" ]; then
    echo "SKIP: no $([ $target = cuda ] && echo nvcc || echo hipcc) installed"
    exit 77
fi
rm -rf "$out"
mkdir -p "$out"
cd "$root" || exit 1
fail=0
files=0
for spec in examples/*.spec; do
    name=$(basename "$spec" .spec)
    dir="$out/$name"
    "$rtgen" --device="$dev" --emit=$target --top-k="$topk" --no-profile -o "$dir" "$spec" \
        >"$out/$name.log" 2>&1
    rc=$?
    case $rc in
    0) ;;
    4) continue ;; # no candidate fits the device: nothing emitted
    *)
        echo "FAIL: rtgen --device=$dev --emit=$target $spec: exit $rc"
        tail -5 "$out/$name.log"
        fail=1
        continue
        ;;
    esac
    n=0
    for src in "$dir"/*.$ext; do
        [ -f "$src" ] || continue
        n=$((n + 1))
        obj="${src%.$ext}.o"
        if [ $target = cuda ]; then
            "$cc" -cubin -arch="$arch" -o "$obj" "$src" >"$obj.log" 2>&1
        else
            "$cc" --genco --offload-arch="$arch" -o "$obj" "$src" >"$obj.log" 2>&1
        fi
        rc=$?
        if [ $rc != 0 ] || [ ! -s "$obj" ]; then
            echo "FAIL: $(basename "$cc") $src: exit $rc"
            grep -m 5 'error' "$obj.log"
            fail=1
            continue
        fi
        # every kernel of the source is in the code object (the symbol's name in its ELF)
        kernels=$(sed -n 's/^\(rt_[A-Za-z0-9_]*\)(.*/\1/p' "$src")
        if [ -z "$kernels" ]; then
            echo "FAIL: $src: no kernel definition found"
            fail=1
        fi
        for k in $kernels; do
            if ! grep -aqF "$k" "$obj"; then
                echo "FAIL: $(basename "$cc") $src: kernel $k not in $obj"
                fail=1
            fi
        done
    done
    if [ $n = 0 ]; then
        echo "FAIL: rtgen --device=$dev --emit=$target $spec: exit 0 and no .$ext file"
        fail=1
    fi
    files=$((files + n))
done
if [ $files = 0 ]; then
    echo "FAIL: no .$ext file was compiled"
    fail=1
fi
echo "$files .$ext files from $dev compiled with $(basename "$cc") for $arch"
exit $fail
