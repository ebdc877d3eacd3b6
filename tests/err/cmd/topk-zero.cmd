# expect: rtgen: error: --top-k: 0 is out of range [1, 1000]
# exit: 2
--top-k=0 ../ok.spec
