# expect: rtgen: error: one op-spec file expected, got 2 ("../ok.spec" and "../ok.spec")
# exit: 2
--dry-run ../ok.spec ../ok.spec
