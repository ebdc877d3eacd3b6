# expect: rtgen: error: --tree T=tree-cycle.tree:3: child 1 of node 2 closes a cycle
--dry-run --tree T=tree-cycle.tree ../../../examples/treernn.spec
