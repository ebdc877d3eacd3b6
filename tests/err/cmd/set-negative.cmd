# expect: rtgen: error: --set: -3 is out of range [1, 2305843009213693951]
# exit: 2
--dry-run --set M=-3 ../ok.spec
