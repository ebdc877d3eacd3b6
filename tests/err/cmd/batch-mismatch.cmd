# expect: rtgen: error: --batch=8 does not match the 32 entries of 'len'
# exit: 2
--dry-run --set B=32 --batch=8 --lengths len=../../../tests/data/cola.hist ../../../examples/qkt.spec
