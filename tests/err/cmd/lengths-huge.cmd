# expect: rtgen: error: --lengths len=lens-huge.txt:1: length 99999999999 is too large (expected at most 2147483647)
--dry-run --lengths len=lens-huge.txt ../../../examples/qkt.spec
