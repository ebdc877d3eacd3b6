// test-gpu-emit-bench.c: the benchmark operators (examples/bench/*.spec, Roller's C/D/E/M/P/R
// sets and BERT-large layers, at full size) through the GPU code generator on v100, a100, h100
// and mi50: the top-1 of each is emitted and compiled in-process, must compile and, on CUDA,
// must not spill; the table of registers, spills, shared memory, occupancy and predicted time
// is printed (gpu-emit-run.h). Exit 77 when neither NVRTC nor hipRTC is built in.
#include "gpu-emit-run.h"

int main(void) {
    static const char *const devs[] = {"devices/v100.ini", "devices/a100.ini", "devices/h100.ini",
                                       "devices/mi50.ini"};
    compile_table(devs, 4, true, 1); // a backend not built in: skipped, exit 77
    return rt_test_finish("test-gpu-emit-bench");
}
