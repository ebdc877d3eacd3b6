// wmma-host-main.cpp: runs an emitted matrix-instruction GEMM kernel (included as RT_KERNEL_FILE,
// kernel RT_KERNEL, RT_THREADS threads x RT_BLOCKS blocks) on the host stand-in wmma-host.hpp over
// random 16-bit A (M x K) and B (K x N) of type RT_T16, and compares C with a double reference:
// exits 1 on the first element off by more than 1e-4 * (1 + sum |a b|). Poisoned C (NaN) catches
// unwritten elements. Part of tests/unit/test-gpu-mma-host.sh.
#include "wmma-host.hpp"
#include RT_KERNEL_FILE

typedef RT_T16 rt_t16;
static rt_t16 rt_conv(float f) {
    return RT_CONV(f);
}
static float rt_wide(rt_t16 h) {
    return rt_host_f(h);
}
#define RT_HOST_SEED       7
#define RT_HOST_GROUP      32u
#define RT_HOST_GROUP_BARS rt_host_warp_bar
#include "gemm16-host-main.hpp"
