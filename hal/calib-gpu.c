// calib-gpu.c: rtcalib's measurements of a GPU (classes cuda, hip, opencl). One generator prints
// the probes -- a grid-stride global-memory read, strided shared-memory reads, register-tile FMA
// loops (Roller's compute DB), f16 matrix instructions and an empty kernel -- as CUDA, HIP or
// OpenCL C through a small dialect table; hal-gpu.c compiles them (NVRTC, hipRTC, the OpenCL
// driver), checks they do not spill and, where the device is present, times them with device
// events. The timings become rt_calib_values that rt_calib_apply (calib-cpu.c) merges into the
// device, which rtcalib then writes as INI (hal-ini-write.c). The declarations are in calib.h.
#include "calib.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

// ---------------------------------------------------------------------------------------------
// Dialects
// ---------------------------------------------------------------------------------------------

typedef struct rt_cg_dialect {
    const char *kernel;     // before the kernel's name
    const char *global;     // address space of buffer arguments
    const char *shared;     // block-shared array qualifier
    const char *shared_ptr; // pointer into it
    const char *restrict_kw;
    const char *tid, *bid, *bdim, *gdim;
    const char *barrier;
    const char *i64;
    const char *fma;
    const char *bounds; // after "void": at most RT_CG_BOUND threads per block (register budget)
    bool one_program;   // every probe in one source: the driver builds (and caches) it once
} rt_cg_dialect;

// ORDER RT_DEVCLASS (the GPU classes)
// clang-format off
static const rt_cg_dialect rt_cg_dialects[3] = {
    { // cuda
        .kernel = "extern \"C\" __global__ void", .global = "", .shared = "__shared__",
        .shared_ptr = "const float *", .restrict_kw = "__restrict__",
        .tid = "threadIdx.x", .bid = "blockIdx.x", .bdim = "blockDim.x", .gdim = "gridDim.x",
        .barrier = "__syncthreads();", .i64 = "long long", .fma = "fmaf",
        .bounds = "__launch_bounds__(256) ", .one_program = false,
    },
    { // hip
        .kernel = "extern \"C\" __global__ void", .global = "", .shared = "__shared__",
        .shared_ptr = "const float *", .restrict_kw = "__restrict__",
        .tid = "threadIdx.x", .bid = "blockIdx.x", .bdim = "blockDim.x", .gdim = "gridDim.x",
        .barrier = "__syncthreads();", .i64 = "long long", .fma = "fmaf",
        .bounds = "__launch_bounds__(256) ", .one_program = false,
    },
    { // opencl
        .kernel = "__kernel void", .global = "__global ", .shared = "__local",
        .shared_ptr = "const __local float *", .restrict_kw = "restrict",
        .tid = "(int)get_local_id(0)", .bid = "(int)get_group_id(0)",
        .bdim = "(int)get_local_size(0)", .gdim = "(int)get_num_groups(0)",
        .barrier = "barrier(CLK_LOCAL_MEM_FENCE);", .i64 = "long", .fma = "fma",
        .bounds = "", .one_program = true,
    },
};
// clang-format on
_Static_assert(RT_DEVCLASS_CUDA == 0 && RT_DEVCLASS_HIP == 1 && RT_DEVCLASS_OPENCL == 2,
               "ORDER RT_DEVCLASS");

// Threads per block of the fma and mma probes: a launch bound lets hipRTC give the 8x8 tile the
// registers it needs (its default bound of 1024 caps gfx906 at 64 VGPRs, and the tile spills).
#define RT_CG_BOUND 256

static bool rt_cg_is_gpu(rt_devclass c) {
    return c == RT_DEVCLASS_CUDA || c == RT_DEVCLASS_HIP || c == RT_DEVCLASS_OPENCL;
}

// ---------------------------------------------------------------------------------------------
// The probes as source text
// ---------------------------------------------------------------------------------------------

// Global memory: every thread reads 4 float4 per iteration (4 x 16 B in flight), grid-stride.
static void rt_cg_global(rt_buf *b, const rt_cg_dialect *d, const char *name) {
    const char *g = d->global, *r = d->restrict_kw, *i64 = d->i64;
    rt_buf_linef(b, 0, "%s %s(%sconst float4 *%s in, %sfloat *%s out, %s n4) {", d->kernel, name, g,
                 r, g, r, i64);
    rt_buf_linef(b, 1, "const %s step = (%s)%s * %s;", i64, i64, d->gdim, d->bdim);
    rt_buf_linef(b, 1, "%s i = (%s)%s * %s + %s;", i64, i64, d->bid, d->bdim, d->tid);
    rt_buf_linef(b, 1, "float ax = 0.0f, ay = 0.0f, az = 0.0f, aw = 0.0f;");
    rt_buf_linef(b, 1, "for (; i + 3 * step < n4; i += 4 * step) {");
    rt_buf_linef(b, 2, "float4 v0 = in[i], v1 = in[i + step];");
    rt_buf_linef(b, 2, "float4 v2 = in[i + 2 * step], v3 = in[i + 3 * step];");
    static const char comp[] = "xyzw";
    for (int c = 0; c < 4; c++)
        rt_buf_linef(b, 2, "a%c += (v0.%c + v1.%c) + (v2.%c + v3.%c);", comp[c], comp[c], comp[c],
                     comp[c], comp[c]);
    rt_buf_linef(b, 1, "}");
    rt_buf_linef(b, 1, "for (; i < n4; i += step) {");
    rt_buf_linef(b, 2, "float4 v = in[i];");
    rt_buf_linef(b, 2, "ax += v.x; ay += v.y; az += v.z; aw += v.w;");
    rt_buf_linef(b, 1, "}");
    rt_buf_linef(b, 1, "float s = (ax + ay) + (az + aw);");
    rt_buf_linef(b, 1, "if (s == -1.0f) out[0] = s; // never true: keeps the loads alive");
    rt_buf_linef(b, 0, "}");
}

// Shared memory: lane l reads word l * stride + 32 k (+ a rotating offset), 8 reads per
// iteration, so neighbouring lanes are `stride` words apart (bank conflicts) and nothing can be
// hoisted out of the loop. With stride <= 32 and lanes <= 64 every index stays below 4096.
static void rt_cg_shared(rt_buf *b, const rt_cg_dialect *d, const char *name, int32_t lanes) {
    const char *g = d->global, *r = d->restrict_kw;
    rt_buf_linef(b, 0, "%s %s(%sfloat *%s out, int iters, int stride) {", d->kernel, name, g, r);
    rt_buf_linef(b, 1, "%s float s[%d];", d->shared, RT_CALIB_GPU_SHARED_WORDS);
    rt_buf_linef(b, 1, "const int t = %s;", d->tid);
    rt_buf_linef(b, 1, "for (int i = t; i < %d; i += %s) s[i] = (float)i;",
                 RT_CALIB_GPU_SHARED_WORDS, d->bdim);
    rt_buf_linef(b, 1, "%s", d->barrier);
    rt_buf_linef(b, 1, "const int base = (t %% %d) * stride;", (int)lanes);
    rt_buf_linef(b, 1, "float a0 = 0.0f, a1 = 0.0f, a2 = 0.0f, a3 = 0.0f;");
    rt_buf_linef(b, 1, "for (int it = 0; it < iters; it++) {");
    rt_buf_linef(b, 2, "%sp = s + base + ((it & 7) << 8);", d->shared_ptr);
    for (int k = 0; k < 8; k++)
        rt_buf_linef(b, 2, "a%d += p[%d];", k % 4, 32 * k);
    rt_buf_linef(b, 1, "}");
    rt_buf_linef(b, 1, "float v = (a0 + a1) + (a2 + a3);");
    rt_buf_linef(b, 1, "if (v == -1.0f) out[t] = v;");
    rt_buf_linef(b, 0, "}");
}

// FMA: an m x n accumulator tile c[i][j] += a[i] * b[j], RT_CALIB_GPU_FMA_UNROLL times per
// iteration; the m x n chains are independent, so the tile's ILP is what is measured.
static void rt_cg_fma(rt_buf *b, const rt_cg_dialect *d, const char *name, int32_t m, int32_t n) {
    const char *g = d->global, *r = d->restrict_kw;
    rt_buf_linef(b, 0, "%s %s%s(%sfloat *%s out, int iters, float x, float y) {", d->kernel,
                 d->bounds, name, g, r);
    rt_buf_linef(b, 1, "const float t = (float)%s * 1.0e-6f;", d->tid);
    for (int i = 0; i < m; i++)
        rt_buf_linef(b, 1, "const float a%d = x + t + %d.0e-3f;", i, i);
    for (int j = 0; j < n; j++)
        rt_buf_linef(b, 1, "const float b%d = y - %d.0e-3f;", j, j);
    for (int i = 0; i < m; i++) {
        rt_buf_puts(b, "    float");
        for (int j = 0; j < n; j++)
            rt_buf_printf(b, "%s c%d_%d = 0.0f", j ? "," : "", i, j);
        rt_buf_puts(b, ";\n");
    }
    rt_buf_linef(b, 1, "for (int it = 0; it < iters; it++) {");
    for (int u = 0; u < RT_CALIB_GPU_FMA_UNROLL; u++)
        for (int i = 0; i < m; i++)
            for (int j = 0; j < n; j++)
                rt_buf_linef(b, 2, "c%d_%d = %s(a%d, b%d, c%d_%d);", i, j, d->fma, i, j, i, j);
    rt_buf_linef(b, 1, "}");
    rt_buf_puts(b, "    float s = 0.0f");
    for (int i = 0; i < m; i++)
        for (int j = 0; j < n; j++)
            rt_buf_printf(b, " + c%d_%d", i, j);
    rt_buf_puts(b, ";\n");
    rt_buf_linef(b, 1, "if (s == -1.0f) out[%s] = s;", d->tid);
    rt_buf_linef(b, 0, "}");
}

// f16 matrix instructions, RT_CALIB_GPU_MMA_CHAINS independent 16x16x16 products per iteration:
// WMMA on cuda, MFMA (v_mfma_f32_16x16x16f16) on hip.
static void rt_cg_mma(rt_buf *b, rt_devclass cls, const char *name) {
    if (cls == RT_DEVCLASS_CUDA) {
        rt_buf_linef(b, 0, "#include <mma.h>");
        rt_buf_linef(b, 0, "using namespace nvcuda;");
        rt_buf_linef(b, 0,
                     "extern \"C\" __global__ void __launch_bounds__(%d) %s(float "
                     "*__restrict__ out, int iters) {",
                     RT_CG_BOUND, name);
        rt_buf_linef(b, 1,
                     "wmma::fragment<wmma::matrix_a, 16, 16, 16, __half, wmma::row_major> a;");
        rt_buf_linef(b, 1,
                     "wmma::fragment<wmma::matrix_b, 16, 16, 16, __half, wmma::col_major> b;");
        rt_buf_linef(b, 1, "wmma::fill_fragment(a, __float2half(1.0e-3f));");
        rt_buf_linef(b, 1, "wmma::fill_fragment(b, __float2half(2.0e-3f));");
        for (int c = 0; c < RT_CALIB_GPU_MMA_CHAINS; c++) {
            rt_buf_linef(b, 1, "wmma::fragment<wmma::accumulator, 16, 16, 16, float> c%d;", c);
            rt_buf_linef(b, 1, "wmma::fill_fragment(c%d, 0.0f);", c);
        }
        rt_buf_linef(b, 1, "for (int it = 0; it < iters; it++) {");
        for (int c = 0; c < RT_CALIB_GPU_MMA_CHAINS; c++)
            rt_buf_linef(b, 2, "wmma::mma_sync(c%d, a, b, c%d);", c, c);
        rt_buf_linef(b, 1, "}");
        // Every accumulator element is consumed: WMMA's 16x16x16 is two m16n8k16 instructions
        // on sm_80/sm_90, and with only x[0] read the compiler drops the one that does not
        // reach it -- on an H200 the probe then read 1.23e6 GFLOP/s, above the 989.4 TFLOP/s
        // of the datasheet.
        rt_buf_linef(b, 1, "float s = 0.0f;");
        rt_buf_linef(b, 1, "for (int i = 0; i < c0.num_elements; i++)");
        rt_buf_puts(b, "        s += 0.0f");
        for (int c = 0; c < RT_CALIB_GPU_MMA_CHAINS; c++)
            rt_buf_printf(b, " + c%d.x[i]", c);
        rt_buf_puts(b, ";\n");
    } else {
        rt_buf_linef(b, 0, "typedef _Float16 rt_half4 __attribute__((ext_vector_type(4)));");
        rt_buf_linef(b, 0, "typedef float rt_float4 __attribute__((ext_vector_type(4)));");
        rt_buf_linef(b, 0,
                     "extern \"C\" __global__ void __launch_bounds__(%d) %s(float "
                     "*__restrict__ out, int iters) {",
                     RT_CG_BOUND, name);
        rt_buf_linef(b, 1, "const _Float16 x = (_Float16)1.0e-3f, y = (_Float16)2.0e-3f;");
        rt_buf_linef(b, 1, "const rt_half4 a = {x, x, x, x}, b = {y, y, y, y};");
        for (int c = 0; c < RT_CALIB_GPU_MMA_CHAINS; c++)
            rt_buf_linef(b, 1, "rt_float4 c%d = {0.0f, 0.0f, 0.0f, 0.0f};", c);
        rt_buf_linef(b, 1, "for (int it = 0; it < iters; it++) {");
        for (int c = 0; c < RT_CALIB_GPU_MMA_CHAINS; c++)
            rt_buf_linef(b, 2, "c%d = __builtin_amdgcn_mfma_f32_16x16x16f16(a, b, c%d, 0, 0, 0);",
                         c, c);
        rt_buf_linef(b, 1, "}");
        rt_buf_puts(b, "    float s = 0.0f");
        for (int c = 0; c < RT_CALIB_GPU_MMA_CHAINS; c++)
            rt_buf_printf(b, " + c%d[0]", c);
        rt_buf_puts(b, ";\n");
    }
    rt_buf_linef(b, 1, "if (s == -1.0f) out[threadIdx.x] = s;");
    rt_buf_linef(b, 0, "}");
}

static void rt_cg_launch(rt_buf *b, const rt_cg_dialect *d, const char *name) {
    rt_buf_linef(b, 0, "%s %s(%sfloat *%s out) {", d->kernel, name, d->global, d->restrict_kw);
    rt_buf_linef(b, 1, "if (%s < 0) out[0] = 0.0f; // never true: an empty kernel", d->tid);
    rt_buf_linef(b, 0, "}");
}

static void rt_cg_kernel_text(rt_buf *b, const rt_device *dev, const rt_calib_gpu_kernel *k) {
    const rt_cg_dialect *d = &rt_cg_dialects[dev->devclass];
    switch (k->kind) {
    case RT_CALIB_GPU_GLOBAL:
        rt_cg_global(b, d, k->name);
        break;
    case RT_CALIB_GPU_SHARED:
        rt_cg_shared(b, d, k->name, dev->lanes);
        break;
    case RT_CALIB_GPU_FMA:
        rt_cg_fma(b, d, k->name, k->m, k->n);
        break;
    case RT_CALIB_GPU_MMA:
        rt_cg_mma(b, dev->devclass, k->name);
        break;
    case RT_CALIB_GPU_LAUNCH:
    case RT_CALIB_GPU_KIND_COUNT:
        rt_cg_launch(b, d, k->name);
        break;
    }
}

// ---------------------------------------------------------------------------------------------
// Planning
// ---------------------------------------------------------------------------------------------

int64_t rt_calib_gpu_inflight_bytes(const rt_device *dev, int32_t w) {
    return (int64_t)w * dev->lanes * 16 * 4;
}

int32_t rt_calib_gpu_sweep(const rt_device *dev, bool quick, int32_t *out) {
    int32_t max_w = dev->lanes > 0 ? dev->max_threads_per_unit / dev->lanes : 0;
    if (max_w < 1)
        return 0;
    int32_t n = 0, step = quick ? 4 : 2;
    for (int64_t w = 1; w < max_w && n < RT_MAX_CURVE_POINTS - 1; w *= step)
        out[n++] = (int32_t)w;
    out[n++] = max_w;
    return n;
}

void rt_calib_gpu_spread(const rt_device *dev, int32_t w, int32_t *out_threads_per_block,
                         int32_t *out_blocks_per_unit) {
    int64_t threads = (int64_t)w * dev->lanes;
    int64_t max_block = dev->max_threads_per_block / dev->lanes * dev->lanes;
    if (max_block < dev->lanes)
        max_block = dev->lanes;
    int64_t blocks = rt_ceil_div(threads, max_block);
    *out_blocks_per_unit = (int32_t)blocks;
    *out_threads_per_block = (int32_t)(rt_round_up(rt_ceil_div(threads, blocks), dev->lanes));
}

// Has f16 matrix instructions this generator can print: cuda sm_70 and newer (WMMA), hip
// gfx90a / gfx908 / gfx94x (MFMA).
static bool rt_cg_has_mma(const rt_device *dev) {
    if (dev->devclass == RT_DEVCLASS_CUDA) {
        int v = 0;
        return sscanf(dev->arch, "sm_%d", &v) == 1 && v >= 70;
    }
    if (dev->devclass == RT_DEVCLASS_HIP)
        return strncmp(dev->arch, "gfx90a", 6) == 0 || strncmp(dev->arch, "gfx908", 6) == 0 ||
               strncmp(dev->arch, "gfx94", 5) == 0;
    return false;
}

// The per-TEU shapes written to the device (the others are printed): powers of 2.
static bool rt_cg_shape_written(int32_t m, int32_t n) {
    return (m & (m - 1)) == 0 && (n & (n - 1)) == 0;
}

typedef struct rt_cg_builder {
    rt_arena *a;
    rt_calib_gpu_plan *p;
    int32_t cap_kernels, cap_meas;
} rt_cg_builder;

static int32_t rt_cg_add_kernel(rt_cg_builder *bl, rt_calib_gpu_kind kind, int32_t m, int32_t n) {
    rt_calib_gpu_kernel *k = &bl->p->kernels[bl->p->n_kernels];
    k->kind = kind;
    k->m = m;
    k->n = n;
    static const char *const names[] = {"rt_calib_read", "rt_calib_shared", "rt_calib_fma",
                                        "rt_calib_mma_f16", "rt_calib_empty"};
    _Static_assert(sizeof names / sizeof names[0] == RT_CALIB_GPU_KIND_COUNT, "ORDER KIND");
    if (kind == RT_CALIB_GPU_FMA)
        snprintf(k->name, sizeof k->name, "%s_%dx%d", names[kind], (int)m, (int)n);
    else
        snprintf(k->name, sizeof k->name, "%s", names[kind]);
    return bl->p->n_kernels++;
}

static rt_calib_gpu_meas *rt_cg_add_meas(rt_cg_builder *bl, int32_t kernel, rt_calib_target target,
                                         const char *unit) {
    rt_calib_gpu_meas *m = &bl->p->meas[bl->p->n_meas++];
    m->kernel = kernel;
    m->scale = 1.0;
    m->v.target = target;
    m->v.unit = unit;
    return m;
}

rt_status rt_calib_gpu_plan_new(rt_arena *a, const rt_device *dev, bool quick,
                                rt_calib_gpu_plan **out, rt_err *err) {
    *out = NULL;
    if (!rt_cg_is_gpu(dev->devclass))
        return rt_fail(err, RT_ERR_DEVICE, dev->origin,
                       "GPU probes need a GPU class (expected cuda, hip or opencl, got %s)",
                       rt_devclass_name(dev->devclass));
    if (dev->lanes <= 0 || dev->units <= 0 || dev->teus_per_unit <= 0 ||
        dev->max_threads_per_block < dev->lanes || dev->max_threads_per_unit < dev->lanes)
        return rt_fail(err, RT_ERR_DEVICE, dev->origin,
                       "device %s lacks the GPU keys the probes need (expected units, lanes, "
                       "teus_per_unit, max_threads_per_block and max_threads_per_unit >= lanes)",
                       dev->name);
    if (dev->lanes > 64)
        return rt_fail(err, RT_ERR_DEVICE, dev->origin,
                       "lanes too large for the shared-memory probe (expected at most 64, got %d)",
                       (int)dev->lanes);
    if (dev->n_levels < 1)
        return rt_fail(err, RT_ERR_DEVICE, dev->origin, "device %s has no memory level", dev->name);
    rt_calib_gpu_plan *p;
    RT_ALLOC(a, p, 1, err);
    p->dev = dev;
    rt_cg_builder bl = {.a = a, .p = p, .cap_kernels = 80, .cap_meas = 100};
    RT_ALLOC(a, p->kernels, bl.cap_kernels, err);
    RT_ALLOC(a, p->meas, bl.cap_meas, err);
    const char *lvl0 = dev->level[0].name;
    // Shared memory: the first explicit level of scope unit or block above level 0.
    int32_t shared = -1;
    for (int32_t i = 1; i < dev->n_levels && shared < 0; i++)
        if (dev->level[i].managed == RT_MEM_EXPLICIT &&
            (dev->level[i].scope == RT_MEM_SCOPE_UNIT || dev->level[i].scope == RT_MEM_SCOPE_BLOCK))
            shared = i;

    // 1. global memory bandwidth by resident warps per unit
    int32_t kg = rt_cg_add_kernel(&bl, RT_CALIB_GPU_GLOBAL, 0, 0);
    int64_t bytes = quick ? ((int64_t)16 << 20) : ((int64_t)256 << 20);
    if (dev->level[0].capacity_bytes > 0 && bytes > dev->level[0].capacity_bytes / 4)
        bytes = dev->level[0].capacity_bytes / 4 / 64 * 64;
    if (bytes < 4096)
        bytes = 4096;
    int32_t ws[RT_MAX_CURVE_POINTS];
    int32_t n_ws = rt_calib_gpu_sweep(dev, quick, ws);
    for (int32_t i = 0; i < n_ws; i++) {
        rt_calib_gpu_meas *m = rt_cg_add_meas(&bl, kg, RT_CALIB_CURVE, "GB/s");
        m->warps_per_unit = ws[i];
        m->elems = bytes / 4;
        rt_calib_gpu_spread(dev, ws[i], &m->threads_per_block, &m->blocks_per_unit);
        m->v.level = 0;
        m->v.curve_bytes = rt_calib_gpu_inflight_bytes(dev, ws[i]);
        snprintf(m->v.name, sizeof m->v.name, "%.12s read, %d warp%s per unit (%lld B in flight)",
                 lvl0, (int)ws[i], ws[i] == 1 ? "" : "s", (long long)m->v.curve_bytes);
    }

    // 2. shared memory by stride
    if (shared >= 0) {
        int32_t ks = rt_cg_add_kernel(&bl, RT_CALIB_GPU_SHARED, 0, 0);
        static const int32_t strides[] = {1, 2, 4, 8, 16, 32};
        static const int32_t quick_strides[] = {1, 2, 32};
        const int32_t *st = quick ? quick_strides : strides;
        int32_t n_st = quick ? 3 : 6;
        int32_t tpb = (int32_t)rt_min64(256, dev->max_threads_per_block / dev->lanes * dev->lanes);
        for (int32_t i = 0; i < n_st; i++) {
            rt_calib_gpu_meas *m =
                rt_cg_add_meas(&bl, ks, st[i] == 1 ? RT_CALIB_LEVEL_BW : RT_CALIB_REPORT, "GB/s");
            m->stride_words = st[i];
            m->threads_per_block = tpb;
            m->v.level = shared;
            snprintf(m->v.name, sizeof m->v.name, "%.12s read, stride %d word%s per lane",
                     dev->level[shared].name, (int)st[i], st[i] == 1 ? "" : "s");
        }
    }

    // 3. register-tile FMA per TEU (one warp per TEU), and the largest tile at full occupancy
    static const int32_t quick_shapes[][2] = {{1, 1}, {2, 4}, {4, 4}, {8, 8}};
    int32_t n_shapes = quick ? 4 : 64, kbig = -1;
    for (int32_t s = 0; s < n_shapes; s++) {
        int32_t mm = quick ? quick_shapes[s][0] : s / 8 + 1;
        int32_t nn = quick ? quick_shapes[s][1] : s % 8 + 1;
        int32_t kf = rt_cg_add_kernel(&bl, RT_CALIB_GPU_FMA, mm, nn);
        kbig = kf;
        bool written = rt_cg_shape_written(mm, nn);
        rt_calib_gpu_meas *m =
            rt_cg_add_meas(&bl, kf, written ? RT_CALIB_INSN : RT_CALIB_REPORT, "GFLOP/s");
        m->threads_per_block = (int32_t)rt_min64((int64_t)dev->teus_per_unit * dev->lanes,
                                                 rt_min64(RT_CG_BOUND, dev->max_threads_per_block) /
                                                     dev->lanes * dev->lanes);
        m->blocks_per_unit = 1;
        m->scale = 1.0 / dev->units;
        m->v.dtype = RT_DTYPE_F32;
        snprintf(m->v.insn, sizeof m->v.insn, "f32_fma_%dx%d", (int)mm, (int)nn);
        snprintf(m->v.name, sizeof m->v.name, "f32 fma %dx%d tile, per unit (1 warp per TEU)",
                 (int)mm, (int)nn);
    }
    rt_calib_gpu_meas *pk = rt_cg_add_meas(&bl, kbig, RT_CALIB_PEAK, "GFLOP/s");
    pk->threads_per_block =
        (int32_t)(rt_min64(RT_CG_BOUND, dev->max_threads_per_block) / dev->lanes * dev->lanes);
    pk->v.dtype = RT_DTYPE_F32;
    snprintf(pk->v.name, sizeof pk->v.name, "f32 fma %dx%d tile, full occupancy",
             (int)p->kernels[kbig].m, (int)p->kernels[kbig].n);

    // 4. matrix instructions
    if (rt_cg_has_mma(dev)) {
        int32_t km = rt_cg_add_kernel(&bl, RT_CALIB_GPU_MMA, 16, 16);
        rt_calib_gpu_meas *m = rt_cg_add_meas(&bl, km, RT_CALIB_MMA, "GFLOP/s");
        m->threads_per_block = (int32_t)rt_min64(4 * dev->lanes, RT_CG_BOUND);
        m->v.dtype = RT_DTYPE_F16;
        snprintf(m->v.name, sizeof m->v.name, "mma f16 16x16x16, full occupancy");
    }

    // 5. launch overhead
    int32_t ke = rt_cg_add_kernel(&bl, RT_CALIB_GPU_LAUNCH, 0, 0);
    rt_calib_gpu_meas *ml = rt_cg_add_meas(&bl, ke, RT_CALIB_LAUNCH, "us");
    ml->threads_per_block = dev->lanes;
    ml->blocks_per_unit = 0;
    ml->iters = quick ? 16 : 200;
    snprintf(ml->v.name, sizeof ml->v.name, "launch and wait, empty kernel");

    // Sources: one per kernel, or one program holding every kernel.
    const rt_cg_dialect *d = &rt_cg_dialects[dev->devclass];
    rt_buf all;
    rt_buf_init(&all, a);
    for (int32_t i = 0; i < p->n_kernels; i++) {
        rt_buf one;
        rt_buf_init(&one, a);
        rt_buf *b = d->one_program ? &all : &one;
        if (i == 0 || !d->one_program)
            rt_buf_printf(b, "// rtcalib probe%s for %s (%s, class %s)\n",
                          d->one_program ? "s" : "", dev->name, dev->arch,
                          rt_devclass_name(dev->devclass));
        rt_cg_kernel_text(b, dev, &p->kernels[i]);
        if (one.oom || all.oom)
            return rt_fail(err, RT_ERR_NOMEM, RT_NOLOC, "out of memory");
        p->kernels[i].source = one.data;
    }
    if (d->one_program)
        for (int32_t i = 0; i < p->n_kernels; i++)
            p->kernels[i].source = all.data;
    *out = p;
    return RT_OK;
}

// ---------------------------------------------------------------------------------------------
// Compiling
// ---------------------------------------------------------------------------------------------

rt_status rt_calib_gpu_compile(rt_arena *a, rt_calib_gpu_plan *plan, int32_t n_threads,
                               rt_err *err) {
    const rt_device *dev = plan->dev;
    rt_gpu_compile_job *jobs;
    RT_ALLOC(a, jobs, plan->n_kernels, err);
    for (int32_t i = 0; i < plan->n_kernels; i++) {
        jobs[i].source = plan->kernels[i].source;
        jobs[i].kernel_name = plan->kernels[i].name;
    }
    rt_gpu_compile_options o = {.threads_per_block = dev->lanes};
    if (rt_cg_dialects[dev->devclass].one_program) {
        // One cold build of the shared program, then the driver's cache: compiled here, in
        // order, not raced on threads.
        for (int32_t i = 0; i < plan->n_kernels; i++) {
            rt_err_clear(&jobs[i].err);
            jobs[i].status = rt_gpu_compile(a, dev, jobs[i].source, jobs[i].kernel_name, &o,
                                            &jobs[i].out, &jobs[i].err);
        }
    } else {
        RT_TRY(rt_gpu_compile_many(a, dev, &o, n_threads > 0 ? n_threads : 2, jobs, plan->n_kernels,
                                   err));
    }
    for (int32_t i = 0; i < plan->n_kernels; i++) {
        rt_calib_gpu_kernel *k = &plan->kernels[i];
        if (jobs[i].status != RT_OK) {
            rt_fail(err, jobs[i].status, RT_NOLOC, "probe %s does not compile: %s", k->name,
                    jobs[i].err.msg);
            err->log = jobs[i].err.log;
            return err->status;
        }
        k->bin = jobs[i].out;
        const rt_gpu_resources *r = &k->bin->res;
        if (r->spill_store_bytes > 0 || r->spill_load_bytes > 0)
            return rt_fail(err, RT_ERR_BACKEND, RT_NOLOC,
                           "probe %s spills on %s (expected no spills, got %lld bytes stored, "
                           "%lld loaded)",
                           k->name, k->bin->compiled_arch, (long long)r->spill_store_bytes,
                           (long long)r->spill_load_bytes);
        snprintf(plan->compiled_arch, sizeof plan->compiled_arch, "%s", k->bin->compiled_arch);
    }
    return RT_OK;
}

void rt_calib_gpu_print_resources(const rt_calib_gpu_plan *plan, rt_buf *out) {
    rt_buf_printf(out, "%-22s %-10s %5s %6s %12s %10s\n", "probe", "arch", "regs", "sregs",
                  "spill bytes", "smem bytes");
    for (int32_t i = 0; i < plan->n_kernels; i++) {
        const rt_calib_gpu_kernel *k = &plan->kernels[i];
        if (!k->bin) {
            rt_buf_printf(out, "%-22s (not compiled)\n", k->name);
            continue;
        }
        const rt_gpu_resources *r = &k->bin->res;
        char regs[16] = "-", sregs[16] = "-", spill[24] = "-";
        if (r->spill_store_bytes >= 0 && r->spill_load_bytes >= 0)
            snprintf(spill, sizeof spill, "%lld",
                     (long long)(r->spill_store_bytes + r->spill_load_bytes));
        if (r->regs >= 0)
            snprintf(regs, sizeof regs, "%d", (int)r->regs);
        if (r->sregs >= 0)
            snprintf(sregs, sizeof sregs, "%d", (int)r->sregs);
        rt_buf_printf(out, "%-22s %-10.10s %5s %6s %12s %10lld\n", k->name, k->bin->compiled_arch,
                      regs, sregs, spill, (long long)r->smem_bytes);
    }
    if (plan->n_kernels > 0 && plan->kernels[0].bin && plan->kernels[0].bin->note)
        rt_buf_printf(out, "note: %s\n", plan->kernels[0].bin->note);
}

// ---------------------------------------------------------------------------------------------
// Timings into values (no device needed)
// ---------------------------------------------------------------------------------------------

static bool rt_cg_is_overhead(const rt_calib_gpu_meas *m) {
    return m->v.target == RT_CALIB_LAUNCH || m->v.target == RT_CALIB_SYNC;
}

// The value of each sample in the unit of the measurement.
static rt_status rt_cg_metrics(const rt_calib_gpu_meas *m, double *out, rt_err *err) {
    if (m->n_samples < 1)
        return rt_fail(err, RT_ERR_BACKEND, RT_NOLOC, "%s: no timings (expected at least 1)",
                       m->v.name);
    for (int32_t i = 0; i < m->n_samples; i++) {
        double ns = m->samples_ns[i];
        if (!(ns > 0.0) || !isfinite(ns))
            return rt_fail(err, RT_ERR_BACKEND, RT_NOLOC,
                           "%s: bad timing %d (expected a time > 0 ns, got %g)", m->v.name,
                           (int)i + 1, ns);
        out[i] = rt_cg_is_overhead(m) ? ns * 1e-3 : m->work / ns * m->scale;
    }
    return RT_OK;
}

static rt_status rt_cg_push(rt_calib_result *out, const rt_calib_value *v, rt_err *err) {
    if (out->n_values >= RT_CALIB_MAX_VALUES)
        return rt_fail(err, RT_ERR_USAGE, RT_NOLOC, "too many values (expected at most %d)",
                       RT_CALIB_MAX_VALUES);
    out->values[out->n_values++] = *v;
    return RT_OK;
}

rt_status rt_calib_gpu_finish(rt_calib_gpu_plan *plan, rt_calib_result *out, rt_err *err) {
    double metric[RT_CALIB_GPU_MAX_SAMPLES];
    const rt_calib_gpu_meas *best_global = NULL, *shared1 = NULL;
    for (int32_t i = 0; i < plan->n_meas; i++) {
        rt_calib_gpu_meas *m = &plan->meas[i];
        if (m->v.skipped)
            continue;
        if (m->n_samples > RT_CALIB_GPU_MAX_SAMPLES)
            return rt_fail(err, RT_ERR_USAGE, RT_NOLOC, "%s: too many samples (got %d)", m->v.name,
                           (int)m->n_samples);
        if (!rt_cg_is_overhead(m) && !(m->work > 0.0 && m->scale > 0.0))
            return rt_fail(err, RT_ERR_BACKEND, RT_NOLOC,
                           "%s: no work per launch (expected > 0, got %g)", m->v.name, m->work);
        RT_TRY(rt_cg_metrics(m, metric, err));
        RT_TRY(rt_calib_stats_of(metric, m->n_samples, &m->v.stats, err));
        m->v.value = rt_cg_is_overhead(m) ? m->v.stats.min : m->v.stats.max;
        const rt_calib_gpu_kernel *k = &plan->kernels[m->kernel];
        if (k->kind == RT_CALIB_GPU_GLOBAL && (!best_global || m->v.value > best_global->v.value))
            best_global = m;
        if (k->kind == RT_CALIB_GPU_SHARED && m->stride_words == 1)
            shared1 = m;
    }
    // Bank behaviour: replay factor of each stride against stride 1.
    if (shared1) {
        char note[sizeof shared1->v.note] = "bank replay by stride:";
        for (int32_t i = 0; i < plan->n_meas; i++) {
            rt_calib_gpu_meas *m = &plan->meas[i];
            if (plan->kernels[m->kernel].kind != RT_CALIB_GPU_SHARED || m->v.skipped)
                continue;
            double replay = shared1->v.value / m->v.value;
            size_t n = strlen(note);
            snprintf(note + n, sizeof note - n, " %d:%.2fx", (int)m->stride_words, replay);
            if (m != shared1)
                snprintf(m->v.note, sizeof m->v.note, "replay %.2fx against stride 1", replay);
        }
        memcpy(plan->meas[shared1 - plan->meas].v.note, note, sizeof note);
    }
    for (int32_t i = 0; i < plan->n_meas; i++)
        RT_TRY(rt_cg_push(out, &plan->meas[i].v, err));
    if (best_global) {
        rt_calib_value v = best_global->v;
        v.target = RT_CALIB_LEVEL_BW;
        snprintf(v.name, sizeof v.name, "%.12s read, best of sweep (%d warps per unit)",
                 plan->dev->level[0].name, (int)best_global->warps_per_unit);
        RT_TRY(rt_cg_push(out, &v, err));
    }
    return RT_OK;
}

// ---------------------------------------------------------------------------------------------
// Running on the device
// ---------------------------------------------------------------------------------------------

static double rt_cg_now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

typedef struct rt_cg_run {
    rt_gpu_runtime *rt;
    const rt_device *dev;
    const rt_calib_opts *opts;
    double target_ns; // kernel time a sample aims at
} rt_cg_run;

// The arguments of a measurement's kernel (at most 4).
static int32_t rt_cg_args(const rt_calib_gpu_meas *m, rt_calib_gpu_kind kind, rt_gpu_arg *args) {
    memset(args, 0, 4 * sizeof *args);
    int32_t n = 0;
    if (kind == RT_CALIB_GPU_GLOBAL) {
        args[n++] =
            (rt_gpu_arg){.kind = RT_GPU_ARG_BUFFER, .dtype = RT_DTYPE_F32, .n_elems = m->elems};
        args[n++] = (rt_gpu_arg){.kind = RT_GPU_ARG_BUFFER, .dtype = RT_DTYPE_F32, .n_elems = 1};
        args[n++] = (rt_gpu_arg){.kind = RT_GPU_ARG_I64, .i = m->elems / 4};
        return n;
    }
    int64_t threads = m->launch.grid[0] * m->launch.block[0];
    args[n++] = (rt_gpu_arg){.kind = RT_GPU_ARG_BUFFER,
                             .dtype = RT_DTYPE_F32,
                             .n_elems = kind == RT_CALIB_GPU_LAUNCH ? 1 : threads};
    if (kind == RT_CALIB_GPU_LAUNCH)
        return n;
    args[n++] = (rt_gpu_arg){.kind = RT_GPU_ARG_I32, .i = m->iters};
    if (kind == RT_CALIB_GPU_SHARED)
        args[n++] = (rt_gpu_arg){.kind = RT_GPU_ARG_I32, .i = m->stride_words};
    if (kind == RT_CALIB_GPU_FMA) {
        args[n++] = (rt_gpu_arg){.kind = RT_GPU_ARG_F32, .f = 0.5};
        args[n++] = (rt_gpu_arg){.kind = RT_GPU_ARG_F32, .f = 1.0e-3};
    }
    return n;
}

// Work of one launch in bytes or flop.
static double rt_cg_work(const rt_calib_gpu_meas *m, const rt_calib_gpu_kernel *k, int32_t lanes) {
    double threads = (double)m->launch.grid[0] * m->launch.block[0], it = (double)m->iters;
    switch (k->kind) {
    case RT_CALIB_GPU_GLOBAL:
        return (double)m->elems * 4.0;
    case RT_CALIB_GPU_SHARED:
        return threads * it * 8.0 * 4.0;
    case RT_CALIB_GPU_FMA:
        return threads * it * RT_CALIB_GPU_FMA_UNROLL * k->m * k->n * 2.0;
    case RT_CALIB_GPU_MMA:
        return threads / lanes * it * RT_CALIB_GPU_MMA_CHAINS * 16.0 * 16.0 * 16.0 * 2.0;
    default:
        return 0.0;
    }
}

// One sample: the best of 3 timed launches after one warm-up.
static rt_status rt_cg_time(rt_cg_run *r, const rt_calib_gpu_kernel *k, rt_calib_gpu_meas *m,
                            double *out_ns, rt_err *err) {
    rt_gpu_arg args[4];
    int32_t n = rt_cg_args(m, k->kind, args);
    rt_gpu_timing t;
    RT_TRY(rt_gpu_time(r->rt, k->bin, &m->launch, args, n, 1, 3, &t, err));
    *out_ns = t.min_ns;
    return RT_OK;
}

// Launch overhead: wall time of n launches, each waited for, less that of a few, per launch
// (the difference cancels the buffer set-up of rt_gpu_time).
static rt_status rt_cg_time_launch(rt_cg_run *r, const rt_calib_gpu_kernel *k, rt_calib_gpu_meas *m,
                                   double *out_ns, rt_err *err) {
    rt_gpu_arg args[4];
    int32_t n = rt_cg_args(m, k->kind, args);
    rt_gpu_timing t;
    int32_t few = 2, many = few + (int32_t)m->iters;
    double t0 = rt_cg_now_s();
    RT_TRY(rt_gpu_time(r->rt, k->bin, &m->launch, args, n, 0, few, &t, err));
    double t1 = rt_cg_now_s();
    RT_TRY(rt_gpu_time(r->rt, k->bin, &m->launch, args, n, 0, many, &t, err));
    double t2 = rt_cg_now_s();
    double per = ((t2 - t1) - (t1 - t0)) / (many - few) * 1e9;
    *out_ns = per > 1.0 ? per : 1.0;
    return RT_OK;
}

static rt_status rt_cg_sample(rt_cg_run *r, const rt_calib_gpu_kernel *k, rt_calib_gpu_meas *m,
                              double *out_ns, rt_err *err) {
    if (k->kind == RT_CALIB_GPU_LAUNCH)
        return rt_cg_time_launch(r, k, m, out_ns, err);
    return rt_cg_time(r, k, m, out_ns, err);
}

static rt_status rt_cg_measure(rt_cg_run *r, rt_calib_gpu_plan *plan, rt_calib_gpu_meas *m,
                               rt_err *err) {
    const rt_device *dev = r->dev;
    const rt_calib_gpu_kernel *k = &plan->kernels[m->kernel];
    int32_t bpu = m->blocks_per_unit;
    if (bpu == 0 && k->kind != RT_CALIB_GPU_LAUNCH) {
        rt_gpu_occupancy occ;
        RT_TRY(rt_gpu_occupancy_of(dev, &k->bin->res, m->threads_per_block, &occ, err));
        bpu = occ.blocks_per_unit > 0 ? occ.blocks_per_unit : 1;
    }
    memset(&m->launch, 0, sizeof m->launch);
    m->launch.grid[0] = k->kind == RT_CALIB_GPU_LAUNCH ? 1 : (int64_t)dev->units * bpu;
    m->launch.block[0] = m->threads_per_block;
    if (k->kind != RT_CALIB_GPU_GLOBAL && k->kind != RT_CALIB_GPU_LAUNCH) {
        // Iterations for about target_ns per launch: grow from 16 until a launch takes a tenth
        // of it, then scale.
        m->iters = 16;
        for (int tries = 0; tries < 12; tries++) {
            double ns;
            RT_TRY(rt_cg_sample(r, k, m, &ns, err));
            if (ns >= r->target_ns / 10.0 || m->iters >= (1 << 28)) {
                double want = (double)m->iters * r->target_ns / (ns > 1.0 ? ns : 1.0);
                m->iters = want < 1.0 ? 1 : want > (1 << 30) ? (1 << 30) : (int64_t)want;
                break;
            }
            m->iters *= 8;
        }
    }
    m->work = rt_cg_work(m, k, dev->lanes);
    int32_t reps =
        r->opts->repeats < RT_CALIB_GPU_MAX_SAMPLES ? r->opts->repeats : RT_CALIB_GPU_MAX_SAMPLES;
    double metric[RT_CALIB_GPU_MAX_SAMPLES];
    for (int attempt = 0; attempt < 2; attempt++) {
        m->n_samples = 0;
        for (int32_t i = 0; i < reps; i++)
            RT_TRY(rt_cg_sample(r, k, m, &m->samples_ns[m->n_samples++], err));
        rt_calib_stats s;
        RT_TRY(rt_cg_metrics(m, metric, err));
        RT_TRY(rt_calib_stats_of(metric, m->n_samples, &s, err));
        if (s.spread <= r->opts->max_spread)
            break;
    }
    return RT_OK;
}

rt_status rt_calib_gpu_run(rt_arena *a, const rt_device *base, const rt_calib_opts *opts,
                           rt_calib_gpu_plan **out_plan, rt_calib_result *out, rt_err *err) {
    memset(out, 0, sizeof *out);
    if (out_plan)
        *out_plan = NULL;
    if (opts->repeats < 2 || opts->repeats > 256)
        return rt_fail(err, RT_ERR_USAGE, RT_NOLOC,
                       "repeats out of range (expected 2 to 256, got %d)", (int)opts->repeats);
    if (!(opts->max_spread >= 0.0))
        return rt_fail(err, RT_ERR_USAGE, RT_NOLOC, "max spread must be >= 0 (got %g)",
                       opts->max_spread);
    double t_start = rt_cg_now_s();
    rt_calib_gpu_plan *plan;
    RT_TRY(rt_calib_gpu_plan_new(a, base, opts->quick, &plan, err));
    if (out_plan)
        *out_plan = plan;
    RT_TRY(rt_calib_gpu_compile(a, plan, 2, err));
    rt_gpu_runtime *rt = NULL;
    rt_err e;
    rt_err_clear(&e);
    if (rt_gpu_runtime_open(a, base, &rt, &e) != RT_OK) {
        if (!rt_gpu_err_is_absent(&e)) {
            *err = e;
            return e.status;
        }
        return rt_fail(err, RT_ERR_BACKEND, RT_NOLOC, "%.380s; probes compiled for %s but not run",
                       e.msg, plan->compiled_arch);
    }
    snprintf(plan->device_name, sizeof plan->device_name, "%s", rt_gpu_runtime_device_name(rt));
    snprintf(out->cpu_name, sizeof out->cpu_name, "%s", plan->device_name);
    rt_cg_run r = {.rt = rt, .dev = base, .opts = opts, .target_ns = opts->quick ? 1.0e6 : 1.0e7};
    for (int32_t i = 0; i < plan->n_meas; i++) {
        rt_calib_gpu_meas *m = &plan->meas[i];
        rt_calib_event ev = {.index = i + 1,
                             .count = plan->n_meas,
                             .probe = m->v.name,
                             .elapsed_s = rt_cg_now_s() - t_start};
        if (opts->progress)
            opts->progress(opts->progress_ctx, &ev);
        RT_TRY(rt_cg_measure(&r, plan, m, err));
    }
    RT_TRY(rt_calib_gpu_finish(plan, out, err));
    if (opts->progress) {
        for (int32_t i = 0; i < out->n_values; i++) {
            rt_calib_event ev = {.index = i + 1,
                                 .count = out->n_values,
                                 .probe = out->values[i].name,
                                 .value = &out->values[i],
                                 .elapsed_s = rt_cg_now_s() - t_start};
            opts->progress(opts->progress_ctx, &ev);
        }
    }
    out->threads = 0;
    out->seconds = rt_cg_now_s() - t_start;
    return RT_OK;
}

rt_status rt_calib_gpu_apply(const rt_device *base, rt_calib_result *res, double max_spread,
                             const char *date, rt_device *out, rt_err *err) {
    // The shape goes in only with a peak that rt_calib_apply will accept (the device check
    // refuses a shape without an mma peak).
    bool mma = false;
    for (int32_t i = 0; i < res->n_values && base->mma_m == 0; i++) {
        const rt_calib_value *v = &res->values[i];
        rt_err e;
        rt_err_clear(&e);
        mma |= v->target == RT_CALIB_MMA && !v->skipped &&
               rt_calib_check_spread(v->name, &v->stats, max_spread, &e) == RT_OK;
    }
    if (!mma)
        return rt_calib_apply(base, res, max_spread, date, out, err);
    rt_device *start = malloc(sizeof *start); // large: not on the stack
    if (!start)
        return rt_fail(err, RT_ERR_NOMEM, RT_NOLOC, "out of memory");
    rt_hal_device_copy(start, base);
    start->mma_m = start->mma_n = start->mma_k = 16;
    rt_status st = rt_calib_apply(start, res, max_spread, date, out, err);
    free(start);
    return st;
}
