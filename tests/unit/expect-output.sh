#!/bin/sh
# Runs a command and checks both its exit code and its output, where ctest's
# PASS_REGULAR_EXPRESSION alone would ignore the exit code.
#   usage: expect-output.sh CODE REGEX COMMAND [ARGS...]
#   CODE   the exit code the command must return
#   REGEX  an extended regular expression some line of its stdout or stderr must match
set -u
want=$1
regex=$2
shift 2
out=$("$@" 2>&1)
code=$?
status=0
if [ "$code" -ne "$want" ]; then
    echo "FAIL: exit code $code, expected $want"
    status=1
fi
if ! printf '%s\n' "$out" | grep -Eq -- "$regex"; then
    echo "FAIL: no line of the output matches: $regex"
    status=1
fi
[ "$status" -eq 0 ] || printf '%s\n' "$out" | tail -n 40
[ "$status" -eq 0 ] && echo "ok"
exit $status
