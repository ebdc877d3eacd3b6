# expect: rtgen: error: --lengths: expected NAME=VALUE, got "len"
# exit: 2
--dry-run --lengths len ../../../examples/qkt.spec
