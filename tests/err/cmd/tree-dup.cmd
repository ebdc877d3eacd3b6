# expect: rtgen: error: --tree T=tree-dup.tree:4: duplicate node id 2 (first at line 3)
--dry-run --tree T=tree-dup.tree ../../../examples/treernn.spec
