# expect: rtgen: error: --emit: unknown target "ptx" (expected cuda, hip, opencl, c or llvm)
# exit: 2
--emit=ptx ../ok.spec
