# expect: rtgen: error: --lengths len=lens-zero-count.hist:2: count must be positive, got 0
--dry-run --lengths len=lens-zero-count.hist ../../../examples/qkt.spec
