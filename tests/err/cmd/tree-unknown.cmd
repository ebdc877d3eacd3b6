# expect: rtgen: error: --tree Q=tree-dup.tree: no tree parameter 'Q' in ../../../examples/treernn.spec
# exit: 2
--dry-run --tree Q=tree-dup.tree ../../../examples/treernn.spec
