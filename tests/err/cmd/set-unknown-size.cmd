# expect: rtgen: error: --set Q=5: no size 'Q' in ../ok.spec
# exit: 2
--dry-run --set Q=5 ../ok.spec
