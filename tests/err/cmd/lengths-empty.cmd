# expect: rtgen: error: --lengths len=lens-empty.txt: lengths file has no entries
--dry-run --lengths len=lens-empty.txt ../../../examples/qkt.spec
