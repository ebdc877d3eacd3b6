# expect: rtgen: error: --lengths len=lens-bad-int.txt:7: expected a non-negative integer, got "12a"
--dry-run --lengths len=lens-bad-int.txt ../../../examples/qkt.spec
