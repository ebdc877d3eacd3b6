# expect: rtgen: error: --top-k: expected an integer, got "abc"
# exit: 2
--top-k=abc ../ok.spec
