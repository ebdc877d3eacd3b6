# expect: rtgen: error: --set: expected NAME=VALUE, got "M"
# exit: 2
--dry-run --set M ../ok.spec
