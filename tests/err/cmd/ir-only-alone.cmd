# expect: rtgen: error: --ir-only needs --dry-run
# exit: 2
--ir-only ../ok.spec
