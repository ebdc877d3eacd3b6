# expect: rtgen: error: --lengths Q=lens-short.txt: no length tensor 'Q' in ../../../examples/qkt.spec
# exit: 2
--dry-run --lengths Q=lens-short.txt ../../../examples/qkt.spec
