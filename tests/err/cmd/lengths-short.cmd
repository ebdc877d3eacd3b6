# expect: rtgen: error: --lengths len=lens-short.txt: expected 32 lengths for 'len', got 3
--dry-run --set B=32 --lengths len=lens-short.txt ../../../examples/qkt.spec
