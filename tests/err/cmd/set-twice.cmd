# expect: rtgen: error: --set M given twice
# exit: 2
--dry-run --set M=4 --set M=8 ../ok.spec
