# expect: rtgen: error: --tree T=tree-wide.tree:1: too many children for node 0 (expected at most 2)
--dry-run --tree T=tree-wide.tree ../../../examples/treernn.spec
