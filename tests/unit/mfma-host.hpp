// mfma-host.hpp: a host stand-in for the HIP constructs of the MFMA GEMM (codegen/
// lower-gpu-mfma.c), so that its emitted .hip.cpp runs on the CPU in the test
// tests/unit/test-gpu-mfma-host.sh: one std::thread per HIP thread of a block, __syncthreads a
// std::barrier, __shared__ arrays function statics (blocks run one after another), _Float16 the
// host compiler's, bfloat16 an unsigned short as in the HIP dialect. The 64-bit operand reads
// and 128-bit copies keep HIP's alignment (the vector types are aligned to their size; the test
// builds with -fsanitize=alignment). Not a GPU: it checks the index math, tiling, guards,
// barriers and the lane layouts of the matrix instruction.
#include <barrier>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <thread>
#include <vector>

struct rt_host_idx {
    unsigned x, y, z;
};
static thread_local rt_host_idx threadIdx, blockIdx;
static std::barrier<> *rt_host_bar;
static std::vector<std::barrier<> *> rt_host_wave_bar; // one per wavefront of the block

#define __global__
#define __device__
#define __launch_bounds__(...)
#define __restrict__
#define __shared__ static
#define __syncthreads() rt_host_bar->arrive_and_wait()

struct alignas(16) uint4 {
    unsigned x, y, z, w;
};
static inline unsigned __float_as_uint(float f) {
    unsigned x;
    memcpy(&x, &f, 4);
    return x;
}
static inline float __uint_as_float(unsigned x) {
    float f;
    memcpy(&f, &x, 4);
    return f;
}

static void rt_host_require(bool ok, const char *what) {
    if (!ok) {
        fprintf(stderr, "mfma-host: %s\n", what);
        abort();
    }
}

// The vector types of the kernel's MFMA prelude (clang ext_vector_type there).
template <class T, int A> struct alignas(A) rt_host_v4 {
    T v[4];
    T &operator[](int i) { return v[i]; }
    const T &operator[](int i) const { return v[i]; }
};
typedef rt_host_v4<_Float16, 8> rt_v4h;
typedef rt_host_v4<short, 8> rt_v4s;
typedef rt_host_v4<float, 16> rt_v4f;
#define RT_MFMA_HOST 1

// v_mfma_f32_16x16x16f16 and v_mfma_f32_16x16x16bf16_1k, D = A B + C over a wavefront of 64
// lanes. Each lane posts its operands in its wave's exchange slots, the wave meets at a barrier,
// each lane takes its D elements, and the wave meets again before the slots are reused. The
// layouts, written here from the AMD CDNA 2 ISA's matrix-instruction operand tables (and AMD's
// matrix instruction calculator for v_mfma_f32_16x16x16f16), independently of
// perfmodel/gpu-mma.c's tables:
//   A (16 x 16, M x K): element A(i, k) is in lane i + 16 * (k / 4), vector element k % 4;
//   B (16 x 16, K x N): element B(k, j) is in lane j + 16 * (k / 4), vector element k % 4;
//   C and D (16 x 16 f32): element D(i, j) is in lane j + 16 * (i / 4), vector element i % 4.
struct rt_host_mfma_wave {
    float a[64][4], b[64][4];
};
static rt_host_mfma_wave rt_host_mfma_slots[16]; // per wavefront of the block (1024 threads)
static inline float rt_host_wide(_Float16 h) {
    return (float)h;
}
static inline float rt_host_wide(short h) {
    return __uint_as_float((unsigned)(unsigned short)h << 16);
}
template <class V> static inline rt_v4f rt_host_mfma(const V &a, const V &b, rt_v4f c) {
    int lane = threadIdx.x % 64, w = threadIdx.x / 64;
    rt_host_require(w < 16, "mfma: more than 16 wavefronts");
    rt_host_mfma_wave &s = rt_host_mfma_slots[w];
    for (int e = 0; e < 4; e++) {
        s.a[lane][e] = rt_host_wide(a[e]);
        s.b[lane][e] = rt_host_wide(b[e]);
    }
    rt_host_wave_bar[w]->arrive_and_wait();
    float A[16][16], B[16][16];
    for (int i = 0; i < 16; i++)
        for (int k = 0; k < 16; k++) {
            A[i][k] = s.a[i + 16 * (k / 4)][k % 4];
            B[k][i] = s.b[i + 16 * (k / 4)][k % 4];
        }
    rt_v4f d;
    for (int e = 0; e < 4; e++) {
        // this lane's element e is D(i, j): lane = j + 16 * (i / 4), e = i % 4
        int j = lane % 16, i = 4 * (lane / 16) + e;
        float acc = c[e];
        for (int k = 0; k < 16; k++)
            acc += A[i][k] * B[k][j];
        d[e] = acc;
    }
    rt_host_wave_bar[w]->arrive_and_wait();
    return d;
}
static inline rt_v4f rt_mfma_f16(rt_v4h a, rt_v4h b, rt_v4f c) {
    return rt_host_mfma(a, b, c);
}
static inline rt_v4f rt_mfma_bf16(rt_v4s a, rt_v4s b, rt_v4f c) {
    return rt_host_mfma(a, b, c);
}
