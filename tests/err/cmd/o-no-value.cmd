# expect: rtgen: error: option '-o' needs a value
# exit: 2
../ok.spec -o
