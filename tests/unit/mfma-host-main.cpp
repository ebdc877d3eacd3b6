// mfma-host-main.cpp: runs an emitted MFMA GEMM kernel (included as RT_KERNEL_FILE, kernel
// RT_KERNEL, RT_THREADS threads x RT_BLOCKS blocks) on the host stand-in mfma-host.hpp over
// random 16-bit A (M x K) and B (K x N) (RT_BF16: bfloat16 as unsigned short, rounded to nearest
// even; else _Float16), and compares C with a double reference: exits 1 when an element is off
// by more than 1e-4 * (1 + sum |a b|). Poisoned C (NaN) catches unwritten elements. Part of
// tests/unit/test-gpu-mfma-host.sh.
#include "mfma-host.hpp"
#include RT_KERNEL_FILE

#ifdef RT_BF16
typedef unsigned short rt_t16;
static rt_t16 rt_conv(float f) {
    unsigned x = __float_as_uint(f);
    return (rt_t16)((x + 0x7fffu + ((x >> 16) & 1u)) >> 16);
}
static float rt_wide(rt_t16 h) {
    return __uint_as_float((unsigned)h << 16);
}
#else
typedef _Float16 rt_t16;
static rt_t16 rt_conv(float f) {
    return (rt_t16)f;
}
static float rt_wide(rt_t16 h) {
    return (float)h;
}
#endif

#define RT_HOST_SEED       11
#define RT_HOST_GROUP      64u
#define RT_HOST_GROUP_BARS rt_host_wave_bar
#include "gemm16-host-main.hpp"
