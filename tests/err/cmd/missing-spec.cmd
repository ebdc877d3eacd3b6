# expect: no-such.spec: error: cannot open: No such file or directory
--dry-run no-such.spec
