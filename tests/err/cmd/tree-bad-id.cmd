# expect: rtgen: error: --tree T=tree-bad-id.tree:1: expected a child id or '-', got "x"
--dry-run --tree T=tree-bad-id.tree ../../../examples/treernn.spec
