// wmma-host.hpp: a host stand-in for the CUDA constructs the matrix-instruction GEMM uses
// (codegen/lower-gpu-mma.c), so that its emitted .cu runs on the CPU in the test
// tests/unit/test-gpu-mma-host.sh: one std::thread per CUDA thread of a block, __syncthreads a
// std::barrier (__syncwarp one per warp), __shared__ arrays function statics (blocks run one after another), __half and
// __nv_bfloat16 16-bit storage with round-to-nearest-even conversions, and nvcuda::wmma where
// every lane holds the whole 16x16 fragment (a warp-wide operation done by each lane gives the
// same values; the stores write identical values). The constraints CUDA documents are checked:
// load/store pointers 256-bit aligned, ldm a multiple of 8 (16-bit) or 4 (float) elements, and
// 128-bit accesses 16-byte aligned (uint4 is alignas(16); the test builds with
// -fsanitize=alignment), cp.async copies of 16 aligned bytes. Not a GPU: it checks the index
// math, tiling, guards, barriers and the waits for asynchronous copies.
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
static std::vector<std::barrier<> *> rt_host_warp_bar; // one per warp of the block

#define __global__
#define __device__
#define __forceinline__ inline
#define __restrict__
#define __launch_bounds__(...)
#define __shared__ static
#define __syncthreads() rt_host_bar->arrive_and_wait()
#define __syncwarp() rt_host_warp_bar[threadIdx.x / 32]->arrive_and_wait()

struct alignas(16) uint4 {
    unsigned x, y, z, w;
};

static inline float rt_host_bits_f(uint32_t x) {
    float f;
    memcpy(&f, &x, 4);
    return f;
}
static inline uint32_t rt_host_f_bits(float f) {
    uint32_t x;
    memcpy(&x, &f, 4);
    return x;
}

struct __half {
    uint16_t x;
};
struct __nv_bfloat16 {
    uint16_t x;
};
static inline float __half2float(__half h) {
    uint32_t sign = (uint32_t)(h.x & 0x8000u) << 16, exp = (h.x >> 10) & 0x1fu, man = h.x & 0x3ffu;
    if (exp == 0x1f)
        return rt_host_bits_f(sign | 0x7f800000u | (man << 13));
    if (exp == 0) {
        float v = std::ldexp((float)man, -24);
        return sign ? -v : v;
    }
    return rt_host_bits_f(sign | ((exp - 15 + 127) << 23) | (man << 13));
}
static inline __half __float2half_rn(float f) {
    // exact for the test's values (random halves and their float sums are not narrowed back)
    float a = std::fabs(f);
    uint16_t sign = std::signbit(f) ? 0x8000u : 0;
    if (a == 0.0f)
        return __half{sign};
    int e;
    std::frexp(a, &e); // a = m * 2^e, m in [0.5, 1)
    int ex = e - 1 + 15;
    if (ex <= 0) { // subnormal
        return __half{(uint16_t)(sign | (uint16_t)std::nearbyint(std::ldexp(a, 24)))};
    }
    float q = std::nearbyint(std::ldexp(a, 10 - (e - 1))); // 1024 .. 2048
    if (q >= 2048.0f) {
        q = 1024.0f;
        ex++;
    }
    if (ex >= 31)
        return __half{(uint16_t)(sign | 0x7c00u)};
    return __half{(uint16_t)(sign | (ex << 10) | ((uint16_t)q - 1024u))};
}
static inline float __bfloat162float(__nv_bfloat16 h) {
    return rt_host_bits_f((uint32_t)h.x << 16);
}
static inline __nv_bfloat16 __float2bfloat16_rn(float f) {
    uint32_t x = rt_host_f_bits(f);
    return __nv_bfloat16{(uint16_t)((x + 0x7fffu + ((x >> 16) & 1u)) >> 16)};
}
static inline float rt_host_f(__half h) {
    return __half2float(h);
}
static inline float rt_host_f(__nv_bfloat16 h) {
    return __bfloat162float(h);
}

static void rt_host_require(bool ok, const char *what) {
    if (!ok) {
        fprintf(stderr, "wmma-host: %s\n", what);
        abort();
    }
}

// cp.async (cuda_pipeline.h): each thread's copies are queued and land when a wait retires
// their group, except every third one (by destination), which lands at once: a kernel that
// reads a stage before waiting for it, or copies into a stage that warps still read, computes
// wrong values here as it would on a GPU. Copies are 16 bytes, both ends 16-byte aligned.
struct rt_host_async_copy {
    void *dst;
    const void *src;
};
static thread_local std::vector<std::vector<rt_host_async_copy>> rt_host_async_groups;
static thread_local std::vector<rt_host_async_copy> rt_host_async_open;
static inline void __pipeline_memcpy_async(void *dst, const void *src, size_t n) {
    rt_host_require(n == 16, "__pipeline_memcpy_async: not 16 bytes");
    rt_host_require((uintptr_t)dst % 16 == 0 && (uintptr_t)src % 16 == 0,
                    "__pipeline_memcpy_async: not 16-byte aligned");
    if ((uintptr_t)dst / 16 % 3 == 0)
        memcpy(dst, src, 16);
    else
        rt_host_async_open.push_back({dst, src});
}
static inline void __pipeline_commit() {
    rt_host_async_groups.push_back(rt_host_async_open);
    rt_host_async_open.clear();
}
static inline void __pipeline_wait_prior(size_t n) {
    while (rt_host_async_groups.size() > n) {
        for (const rt_host_async_copy &c : rt_host_async_groups.front())
            memcpy(c.dst, c.src, 16);
        rt_host_async_groups.erase(rt_host_async_groups.begin());
    }
}

// float2 (the mma.sync store's 64-bit stores: 8-byte aligned, checked by -fsanitize=alignment)
struct alignas(8) float2 {
    float x, y;
};
static inline float2 make_float2(float x, float y) {
    return float2{x, y};
}

// The mma.sync path's warp-wide instructions (codegen/lower-gpu-mma-sync.c; RT_MMA_HOST skips
// the kernel's inline-PTX helpers): each lane posts its operands in its warp's exchange slots,
// the warp meets at a barrier, each lane takes what the PTX ISA gives it, and the warp meets
// again before the slots are reused. The layouts, written here from the PTX ISA (9.7.14.5.8
// "Matrix Fragments for mma.m16n8k16 with floating point type" and 9.7.14.5.15 ldmatrix),
// independently of perfmodel/gpu-mma.c's tables:
//   ldmatrix .x4: lanes 8j .. 8j + 7 give the addresses of rows 0 .. 7 of 8x8 matrix j (16
//     bytes each, 16-byte aligned); lane t receives in register j row t / 4, columns
//     2 (t % 4) and 2 (t % 4) + 1 of matrix j (lower column in the lower half); .trans: column
//     t / 4, rows 2 (t % 4) and 2 (t % 4) + 1;
//   mma m16n8k16 .row.col, groupID g = lane >> 2, t = lane % 4: A element a_i (i = 0 .. 7,
//     register i / 2, half i % 2) is A(g + 8 ((i >> 1) & 1), 2 t + (i & 1) + 8 (i >> 2)); B
//     element b_i (i = 0 .. 3) is B(2 t + (i & 1) + 8 (i >> 1), g); C and D element c_i is
//     C(g + 8 (i >> 1), 2 t + (i & 1)).
#define RT_MMA_HOST 1
struct rt_host_mma_warp {
    const uint16_t *row[32];
    unsigned a[32][4], b[32][2];
};
static rt_host_mma_warp rt_host_mma_slots[32]; // per warp of the block
static inline uint16_t rt_host_half(const unsigned *regs, int i) {
    return (uint16_t)(regs[i / 2] >> (16 * (i % 2)));
}
static inline void rt_host_ldsm(unsigned *r, const void *p, bool trans) {
    int lane = threadIdx.x % 32;
    rt_host_mma_warp &w = rt_host_mma_slots[threadIdx.x / 32];
    rt_host_require((uintptr_t)p % 16 == 0, "ldmatrix: row address not 16-byte aligned");
    w.row[lane] = (const uint16_t *)p;
    __syncwarp();
    for (int j = 0; j < 4; j++) {
        uint16_t lo, hi;
        if (!trans) {
            const uint16_t *row = w.row[8 * j + lane / 4];
            lo = row[2 * (lane % 4)];
            hi = row[2 * (lane % 4) + 1];
        } else {
            lo = w.row[8 * j + 2 * (lane % 4)][lane / 4];
            hi = w.row[8 * j + 2 * (lane % 4) + 1][lane / 4];
        }
        r[j] = (unsigned)lo | (unsigned)hi << 16;
    }
    __syncwarp();
}
static inline void rt_ldsm_x4(unsigned &r0, unsigned &r1, unsigned &r2, unsigned &r3,
                              const void *p) {
    unsigned r[4];
    rt_host_ldsm(r, p, false);
    r0 = r[0], r1 = r[1], r2 = r[2], r3 = r[3];
}
static inline void rt_ldsm_x4_trans(unsigned &r0, unsigned &r1, unsigned &r2, unsigned &r3,
                                    const void *p) {
    unsigned r[4];
    rt_host_ldsm(r, p, true);
    r0 = r[0], r1 = r[1], r2 = r[2], r3 = r[3];
}
template <class T>
static inline void rt_host_mma(float *d, const unsigned *a, unsigned b0, unsigned b1) {
    int lane = threadIdx.x % 32;
    rt_host_mma_warp &w = rt_host_mma_slots[threadIdx.x / 32];
    memcpy(w.a[lane], a, sizeof w.a[lane]);
    w.b[lane][0] = b0;
    w.b[lane][1] = b1;
    __syncwarp();
    float A[16][16], B[16][8];
    for (int l = 0; l < 32; l++) {
        int g = l >> 2, t = l % 4;
        for (int i = 0; i < 8; i++)
            A[g + 8 * ((i >> 1) & 1)][2 * t + (i & 1) + 8 * (i >> 2)] =
                rt_host_f(T{rt_host_half(w.a[l], i)});
        for (int i = 0; i < 4; i++)
            B[2 * t + (i & 1) + 8 * (i >> 1)][g] = rt_host_f(T{rt_host_half(w.b[l], i)});
    }
    int g = lane >> 2, t = lane % 4;
    for (int i = 0; i < 4; i++) {
        int r = g + 8 * (i >> 1), c = 2 * t + (i & 1);
        float s = d[i];
        for (int k = 0; k < 16; k++)
            s += A[r][k] * B[k][c];
        d[i] = s;
    }
    __syncwarp();
}
static inline void rt_mma_16816_f16(float *d, const unsigned *a, unsigned b0, unsigned b1) {
    rt_host_mma<__half>(d, a, b0, b1);
}
static inline void rt_mma_16816_bf16(float *d, const unsigned *a, unsigned b0, unsigned b1) {
    rt_host_mma<__nv_bfloat16>(d, a, b0, b1);
}

namespace nvcuda {
namespace wmma {
struct row_major {};
struct col_major {};
struct matrix_a {};
struct matrix_b {};
struct accumulator {};
enum layout_t { mem_row_major, mem_col_major };
template <class Use, int M, int N, int K, class T, class L = void> struct fragment {
    float v[16][16];
};
template <class F> static inline void fill_fragment(F &f, float x) {
    for (int i = 0; i < 16; i++)
        for (int j = 0; j < 16; j++)
            f.v[i][j] = x;
}
template <class Use, class T, class L>
static inline void load_matrix_sync(fragment<Use, 16, 16, 16, T, L> &f, const T *p, unsigned ldm) {
    rt_host_require(((uintptr_t)p % 32) == 0, "load_matrix_sync: pointer not 256-bit aligned");
    rt_host_require(ldm % 8 == 0, "load_matrix_sync: ldm not a multiple of 8 elements");
    bool row = std::is_same<L, row_major>::value;
    for (int i = 0; i < 16; i++)
        for (int j = 0; j < 16; j++)
            f.v[i][j] = rt_host_f(row ? p[i * ldm + j] : p[j * ldm + i]);
}
template <class T, class LA, class LB>
static inline void mma_sync(fragment<accumulator, 16, 16, 16, float> &d,
                            const fragment<matrix_a, 16, 16, 16, T, LA> &a,
                            const fragment<matrix_b, 16, 16, 16, T, LB> &b,
                            const fragment<accumulator, 16, 16, 16, float> &c) {
    float r[16][16];
    for (int i = 0; i < 16; i++)
        for (int j = 0; j < 16; j++) {
            float s = c.v[i][j];
            for (int k = 0; k < 16; k++)
                s += a.v[i][k] * b.v[k][j];
            r[i][j] = s;
        }
    memcpy(d.v, r, sizeof r);
}
static inline void store_matrix_sync(float *p, const fragment<accumulator, 16, 16, 16, float> &f,
                                     unsigned ldm, layout_t l) {
    rt_host_require(((uintptr_t)p % 32) == 0, "store_matrix_sync: pointer not 256-bit aligned");
    rt_host_require(ldm % 4 == 0, "store_matrix_sync: ldm not a multiple of 4 elements");
    for (int i = 0; i < 16; i++)
        for (int j = 0; j < 16; j++)
            (l == mem_row_major ? p[i * ldm + j] : p[j * ldm + i]) = f.v[i][j];
}
} // namespace wmma
} // namespace nvcuda

#define extern_C_kernel
