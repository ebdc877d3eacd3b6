#!/bin/sh
# rtgen on a layer (examples/layers/ffn.spec, three defs chained by name): the text report has
# one row per def (predicted, alone and in-layer times, error against the interpreter) and the
# totals, the prelude and the layer check; the JSON report holds the same; the files are each
# def's sources and <layer>.json. --interpret and --dry-run run and print every def in order; a
# def that no candidate passes fails the layer (exit 3, nothing written); on a GPU device the defs
# are compiled (and run where it is present); --keep-failed is refused (exit 2).
#   usage: test-layer-cli.sh RTGEN SOURCE_DIR
set -u
abs() { case $1 in /*) echo "$1" ;; *) echo "$PWD/$1" ;; esac; }
rtgen=$(abs "$1")
cd "$2" || exit 1
t=$(mktemp -d)
trap 'rm -rf "$t"' EXIT
fails=0

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

# has FILE ERE: some line of FILE matches.
has() {
    grep -Eq "$2" "$1" || fail "no line matching '$2' in $1:
$(cat "$1")"
}

spec=examples/layers/ffn.spec
lens="--lengths len=tests/data/lens-layer.txt"
num='[0-9]+\.[0-9]+'

run 0 --top-k=1 -o "$t/o" $lens $spec
has "$t/stdout" '^layer ffn: 3 ops, kernels in order on [0-9]+ threads$'
for d in "1 +ffn1 +rt_ffn1_c" "2 +bias_gelu +rt_bias_gelu_c" "3 +ffn2 +rt_ffn2_c"; do
    has "$t/stdout" "^$d[0-9]+ +$num +$num +$num +[0-9.e+-]+ ok\$"
done
has "$t/stdout" "^total: predicted $num us, measured $num us \\(median of [0-9]+ runs, min $num us\\)\$"
has "$t/stdout" "^prelude: 1 start arrays computed once for [0-9]+ kernel buffers in $num us \\($num% of the layer\\)\$"
has "$t/stdout" '^layer check against the interpreter: ok$'
got=$(LC_ALL=C ls -A "$t/o" | tr '\n' ' ')
want="bias_gelu.c bias_gelu.ll ffn.c ffn.h ffn.json ffn1.c ffn1.ll ffn2.c ffn2.ll "
[ "$got" = "$want" ] || fail "files: '$got', expected '$want'"
has "$t/stdout" "^entry point: $t/o/ffn.c, ffn.h \\(compile with the defs' C kernels <def>.c\\)\$"
# The entry point calls the winners' C kernels (written next to the .ll), in order.
has "$t/o/ffn.c" '^// rtgen [0-9.]+: layer ffn \(examples/layers/ffn.spec\), 3 defs run in order by rt_layer_ffn\(\):$'
has "$t/o/ffn.h" '^int rt_layer_ffn\(const int32_t \*len, const float \*X, const float \*W1, const float \*bias1, const float \*W2, float \*Y\);$'
for d in ffn1 bias_gelu ffn2; do
    k=$(sed -n "s/^void \(rt_${d}_c[0-9]*\)(void \*\*args) {\$/\1/p" "$t/o/$d.c")
    [ -n "$k" ] && grep -q "^        $k(args);\$" "$t/o/ffn.c" || fail "ffn.c does not call $d.c's kernel '$k'"
done
has "$t/o/ffn.json" '"prelude_arrays": 1,'
has "$t/o/ffn.json" '"correct": true'
[ "$(grep -c '"in_layer_median_ns"' "$t/o/ffn.json")" -eq 3 ] || fail "JSON: 3 ops expected"

# The encoder layers (11 defs each) at small sizes: run, checked against the interpreter, and the
# written entry point compiles with the defs' C kernels.
small="--set B=4 --set M=32 --set H=2 --set D=16 --set F=48 --lengths len=tests/data/lens-encoder.txt"
for e in cora_encoder cora_encoder_causal bert_encoder bert_encoder_causal; do
    run 0 --top-k=1 -o "$t/$e" $small examples/layers/$e.spec
    has "$t/stdout" "^layer $e: 11 ops, kernels in order on [0-9]+ threads\$"
    has "$t/stdout" '^layer check against the interpreter: ok$'
    run 0 --interpret $small examples/layers/$e.spec
    has "$t/stdout" '^Y float elems=736 '
done
if command -v "${CC:-cc}" >/dev/null 2>&1; then
    (cd "$t/bert_encoder_causal" && "${CC:-cc}" -O2 -fopenmp -c ./*.c) >"$t/cc.log" 2>&1 ||
        fail "the written bert_encoder_causal.c and kernels do not compile: $(cat "$t/cc.log")"
fi

# A def named like the layer: its <def>.c would be the entry point's <layer>.c; refused at once.
mkdir -p "$t/named"
sed 's/^def ffn2(/def ffn(/' $spec >"$t/named/ffn.spec"
run 1 --top-k=1 -o "$t/o5" $lens "$t/named/ffn.spec"
has "$t/stderr" "^$t/named/ffn.spec:[0-9]+:[0-9]+: error: def ffn has the layer's name: its kernel ffn.c would overwrite the layer's entry point ffn.c; rename the def or the file\$"
[ ! -e "$t/o5" ] || fail "a refused layer wrote $(ls -A "$t/o5")"

# --json, two candidates per def: the same report on stdout, the others' sources as rank files.
run 0 --json --top-k=2 -o "$t/oj" $lens $spec
has "$t/stdout" '"layer": "ffn",'
has "$t/stdout" '"measured_median_ns": '
has "$t/stdout" '"def": "bias_gelu",'
for d in ffn1 bias_gelu ffn2; do
    [ -e "$t/oj/$d.ll" ] && [ "$(ls "$t/oj" | grep -Ec "^$d\.rank[12]\.ll\$")" -eq 1 ] ||
        fail "--top-k=2: files of $d: $(ls "$t/oj")"
done

# --interpret: every def in order on one chain of data.
run 0 --interpret $lens $spec
[ "$(grep -c '^def ' "$t/stdout")" -eq 3 ] || fail "--interpret: $(cat "$t/stdout")"
has "$t/stdout" '^H float elems=11776 '
has "$t/stdout" '^G float elems=11776 ' 
has "$t/stdout" '^Y float elems=2944 '
run 0 --dry-run --ir-only $spec
has "$t/stdout" '^# layer ffn, def 3 of 3$'

# A def that no candidate passes: exit 3, nothing written.
RTGEN_TEST_FAULT=corrupt run 3 --top-k=1 -o "$t/o2" $lens $spec
has "$t/stderr" '^rtgen: error: no candidate of ffn1 passed its check \(1 wrong\); nothing was written$'
[ ! -e "$t/o2" ] || fail "a failed layer wrote $(ls -A "$t/o2")"

# A GPU device: every def emitted and compiled (NVRTC here); the layer runs where the device is
# present, else the report says why not. Its files: each def's .cu and the report, no <layer>.c.
run 0 --device=devices/v100.ini --top-k=1 -o "$t/o3" $spec
has "$t/stdout" '^(layer ffn not run: def ffn1 not profiled: no GPU: |layer ffn: 3 ops, kernels in order on )'
for f in ffn1.cu bias_gelu.cu ffn2.cu ffn.json; do
    [ -s "$t/o3/$f" ] || fail "the GPU layer did not write $f"
done
[ ! -e "$t/o3/ffn.c" ] || fail "the GPU layer wrote a host entry point ffn.c"
run 2 --keep-failed -o "$t/o4" $spec
has "$t/stderr" '^rtgen: error: --keep-failed: not supported for layer ffn'

[ $fails -eq 0 ] && echo "ok: test-layer-cli"
exit $((fails > 0))
