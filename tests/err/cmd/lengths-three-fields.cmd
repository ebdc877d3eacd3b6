# expect: rtgen: error: --lengths len=lens-three-fields.hist:1: expected a length or 'length count', got 3 fields
--dry-run --lengths len=lens-three-fields.hist ../../../examples/qkt.spec
