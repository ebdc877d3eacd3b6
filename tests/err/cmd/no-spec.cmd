# expect: rtgen: error: no op-spec file given (see rtgen --help)
# exit: 2
--dry-run
