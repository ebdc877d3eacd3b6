# expect: rtgen: error: --batch needs a --lengths histogram
# exit: 2
--dry-run --batch=8 ../../../examples/qkt.spec
