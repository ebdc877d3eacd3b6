# expect: rtgen: error: --seed: expected an integer, got "7x"
# exit: 2
--dry-run --seed=7x ../ok.spec
