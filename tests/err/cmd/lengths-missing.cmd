# expect: rtgen: error: --lengths len=no-such.txt: cannot open: No such file or directory
--dry-run --lengths len=no-such.txt ../../../examples/qkt.spec
