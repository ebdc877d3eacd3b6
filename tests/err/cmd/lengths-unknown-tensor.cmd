# expect: rtgen: error: --lengths lens=lens-short.txt: no length tensor 'lens' in ../../../examples/qkt.spec
# exit: 2
--dry-run --lengths lens=lens-short.txt ../../../examples/qkt.spec
