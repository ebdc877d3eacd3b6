# expect: rtgen: error: unknown option '--frobnicate' (see rtgen --help)
# exit: 2
--frobnicate ../ok.spec
