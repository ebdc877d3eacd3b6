# expect: no-such-device.ini: error: cannot open: No such file or directory
--dry-run --device=no-such-device.ini ../ok.spec
