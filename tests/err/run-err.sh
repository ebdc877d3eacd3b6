#!/bin/sh
# Runs one error case and checks the one-line message, the exit code (1 for bad input, 2 for
# usage), that nothing crashed, and that no output file was left behind.
#   .spec  first line "# expect: L:C: error: MSG"      -> rtgen --dry-run CASE
#   .ini   first line "; expect: L:C: error: MSG"      -> rtgen --dry-run --device=CASE ok.spec
#   .cmd   line 1 "# expect: FULL LINE", line 2 "# exit: N" (optional), then one line of arguments;
#          $D in the arguments is the directory of the case
set -u
rtgen=$1
case_file=$2
dir=$(dirname "$case_file")
base=$(basename "$case_file")
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT

want_code=1
expect=$(sed -n '1s/^[#;] expect: //p' "$case_file")
[ -n "$expect" ] || { echo "FAIL: $case_file has no expect line"; exit 1; }
code_line=$(sed -n '2s/^# exit: //p' "$case_file")
[ -n "$code_line" ] && want_code=$code_line

case "$base" in
*.spec)
    want="$base:$expect"
    (cd "$dir" && "$rtgen" --dry-run -o "$out/o" "$base") >"$out/stdout" 2>"$out/stderr"
    code=$? ;;
*.ini)
    want="$base:$expect"
    (cd "$dir" && "$rtgen" --dry-run -o "$out/o" --device="$base" ../ok.spec) >"$out/stdout" 2>"$out/stderr"
    code=$? ;;
*.cmd)
    want="$expect"
    args=$(grep -v '^#' "$case_file" | head -n 1)
    (cd "$dir" && eval "set -- $args" && "$rtgen" -o "$out/o" "$@") >"$out/stdout" 2>"$out/stderr"
    code=$? ;;
*) echo "FAIL: unknown case type $base"; exit 1 ;;
esac

got=$(cat "$out/stderr")
status=0
if [ "$code" -ne "$want_code" ]; then
    echo "FAIL: exit code $code, expected $want_code"; status=1
fi
if [ "$got" != "$want" ]; then
    printf 'FAIL: message\n  got:      %s\n  expected: %s\n' "$got" "$want"; status=1
fi
if [ -e "$out/o" ] && [ -n "$(ls -A "$out/o")" ]; then
    echo "FAIL: output files left behind: $(ls "$out/o")"; status=1
fi
[ $status -eq 0 ] && echo "ok: $base"
exit $status
