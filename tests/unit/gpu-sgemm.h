// gpu-sgemm.h: the hand-written tiled SGEMM shared by the GPU tests (CUDA and HIP accept the
// same text), its launch shape, a plain C reference in double precision, and the run-and-time
// check of test-gpu-driver (real GPUs) and test-gpu-launch (the fake driver), which decides
// through the one acceptance rule (rt_compare_accept).
#ifndef RT_TEST_GPU_SGEMM_H
#define RT_TEST_GPU_SGEMM_H

#include "hal-gpu.h"
#include "interp.h"
#include "compare.h"
#include "test.h"

#include <stdint.h>
#include <stdio.h>
#include <string.h>

// 64x64 block tile, K step 8, 256 threads each holding a 4x4 register tile; guards for ragged
// edges. The same text compiles as CUDA and as HIP.
static const char sgemm_src[] =
    "#define BM 64\n#define BN 64\n#define BK 8\n#define TM 4\n#define TN 4\n"
    "extern \"C\" __global__ void __launch_bounds__(256)\n"
    "sgemm(int M, int N, int K, const float *__restrict__ A, const float *__restrict__ B,\n"
    "      float *__restrict__ C) {\n"
    "    __shared__ float As[BK][BM];\n"
    "    __shared__ float Bs[BK][BN];\n"
    "    int tx = threadIdx.x % 16, ty = threadIdx.x / 16;\n"
    "    int row0 = blockIdx.y * BM, col0 = blockIdx.x * BN;\n"
    "    float acc[TM][TN];\n"
    "    for (int i = 0; i < TM; i++)\n"
    "        for (int j = 0; j < TN; j++) acc[i][j] = 0.0f;\n"
    "    for (int k0 = 0; k0 < K; k0 += BK) {\n"
    "        for (int l = threadIdx.x; l < BM * BK; l += 256) {\n"
    "            int r = l / BK, c = l % BK, gr = row0 + r, gc = k0 + c;\n"
    "            As[c][r] = (gr < M && gc < K) ? A[gr * K + gc] : 0.0f;\n"
    "        }\n"
    "        for (int l = threadIdx.x; l < BK * BN; l += 256) {\n"
    "            int r = l / BN, c = l % BN, gr = k0 + r, gc = col0 + c;\n"
    "            Bs[r][c] = (gr < K && gc < N) ? B[gr * N + gc] : 0.0f;\n"
    "        }\n"
    "        __syncthreads();\n"
    "        for (int kk = 0; kk < BK; kk++) {\n"
    "            float a[TM], b[TN];\n"
    "            for (int i = 0; i < TM; i++) a[i] = As[kk][ty * TM + i];\n"
    "            for (int j = 0; j < TN; j++) b[j] = Bs[kk][tx * TN + j];\n"
    "            for (int i = 0; i < TM; i++)\n"
    "                for (int j = 0; j < TN; j++) acc[i][j] += a[i] * b[j];\n"
    "        }\n"
    "        __syncthreads();\n"
    "    }\n"
    "    for (int i = 0; i < TM; i++)\n"
    "        for (int j = 0; j < TN; j++) {\n"
    "            int r = row0 + ty * TM + i, c = col0 + tx * TN + j;\n"
    "            if (r < M && c < N) C[r * N + c] = acc[i][j];\n"
    "        }\n"
    "}\n";

// Launch: 256 threads per block, one block per 64x64 tile of C (grid x over N, y over M).
#define SGEMM_THREADS 256
#define SGEMM_TILE    64

// C = A * B, row-major, in double precision.
static inline void sgemm_ref(int M, int N, int K, const double *A, const double *B, double *C) {
    for (int i = 0; i < M; i++)
        for (int j = 0; j < N; j++) {
            double s = 0.0;
            for (int k = 0; k < K; k++)
                s += A[(int64_t)i * K + k] * B[(int64_t)k * N + j];
            C[(int64_t)i * N + j] = s;
        }
}

// Deterministic inputs in [0, 1) (no cancellation, so relative error is meaningful).
static inline void sgemm_fill(double *x, int64_t n, uint32_t seed) {
    uint32_t s = seed * 2654435761u + 1u;
    for (int64_t i = 0; i < n; i++) {
        s = s * 1664525u + 1013904223u;
        x[i] = (double)(s >> 8) / 16777216.0;
    }
}

// Runs the SGEMM at M x N x K on rt (C poisoned with NaN first, so that an element never written
// shows), checks that it times (2 warm-up launches, 5 repetitions), and returns whether C passes
// the acceptance rule of float outputs against sgemm_ref (rt_compare_data, rt_compare_accept:
// a NaN anywhere fails); false when the run fails.
static inline bool sgemm_run(rt_gpu_runtime *rt, const rt_gpu_binary *bin, int M, int N, int K) {
    double *A = calloc((size_t)M * K, sizeof *A), *B = calloc((size_t)K * N, sizeof *B);
    double *C = calloc((size_t)M * N, sizeof *C), *R = calloc((size_t)M * N, sizeof *R);
    sgemm_fill(A, (int64_t)M * K, 1);
    sgemm_fill(B, (int64_t)K * N, 2);
    sgemm_ref(M, N, K, A, B, R);
    for (int64_t i = 0; i < (int64_t)M * N; i++)
        C[i] = NAN;
    rt_gpu_arg args[6] = {
        {.kind = RT_GPU_ARG_I32, .i = M},
        {.kind = RT_GPU_ARG_I32, .i = N},
        {.kind = RT_GPU_ARG_I32, .i = K},
        {.kind = RT_GPU_ARG_BUFFER, .dtype = RT_DTYPE_F32, .n_elems = (int64_t)M * K, .host = A},
        {.kind = RT_GPU_ARG_BUFFER, .dtype = RT_DTYPE_F32, .n_elems = (int64_t)K * N, .host = B},
        {.kind = RT_GPU_ARG_BUFFER,
         .dtype = RT_DTYPE_F32,
         .n_elems = (int64_t)M * N,
         .host = C,
         .copy_out = true},
    };
    rt_gpu_launch cfg = {
        .grid = {(N + SGEMM_TILE - 1) / SGEMM_TILE, (M + SGEMM_TILE - 1) / SGEMM_TILE, 1},
        .block = {SGEMM_THREADS, 1, 1}};
    rt_err e;
    rt_err_clear(&e);
    bool accepted = false;
    RT_EXPECT_EQ(rt_gpu_run(rt, bin, &cfg, args, 6, &e), RT_OK);
    if (e.status == RT_OK) {
        rt_compare_result cmp;
        rt_compare_data(R, C, (int64_t)M * N, &cmp);
        accepted = rt_compare_accept(&cmp, RT_DTYPE_F32);
        rt_gpu_timing t;
        RT_EXPECT_EQ(rt_gpu_time(rt, bin, &cfg, args, 6, 2, 5, &t, &e), RT_OK);
        RT_EXPECT(t.min_ns > 0.0 && t.median_ns >= t.min_ns);
        printf("%s %s %dx%dx%d: max abs err %.3g, nmse %.3g, %lld non-finite: %s; min %.0f ns, "
               "median %.0f ns (%s)\n",
               rt_gpu_runtime_device_name(rt), bin->kernel_name, M, N, K, cmp.max_abs_err, cmp.nmse,
               (long long)cmp.n_nonfinite, accepted ? "accepted" : "rejected", t.min_ns,
               t.median_ns, t.method);
    } else {
        fprintf(stderr, "%s\n", e.msg);
    }
    free(A);
    free(B);
    free(C);
    free(R);
    return accepted;
}

// A GPU device described in code (the unit tests do not depend on devices/*.ini): 3 levels,
// global / shared (scope unit) / registers, arch given at test.ini:4:9.
static inline void make_gpu(rt_device *d, rt_devclass cls, const char *arch, int32_t lanes,
                            int64_t shared_bytes) {
    memset(d, 0, sizeof *d);
    d->devclass = cls;
    d->ops = rt_hal_class_ops(cls);
    snprintf(d->name, sizeof d->name, "test-%s", arch);
    snprintf(d->arch, sizeof d->arch, "%s", arch);
    snprintf(d->path, sizeof d->path, "test-%s.ini", arch);
    d->origin = rt_loc_make("test.ini", 1, 1);
    d->arch_loc = rt_loc_make("test.ini", 4, 9);
    d->units = 80;
    d->lanes = lanes;
    d->teus_per_unit = 4;
    d->clock_mhz = 1500;
    d->max_threads_per_block = 1024;
    d->max_threads_per_unit = 2048;
    d->max_blocks_per_unit = 32;
    d->regs_per_unit = 65536;
    d->reg_granule_warp = cls == RT_DEVCLASS_CUDA ? 256 : 0; // as the shipped device files
    d->reg_granule_lane = cls == RT_DEVCLASS_HIP ? 8 : 0;
    d->n_levels = 3;
    static const char *const names[] = {"global", "shared", "reg"};
    const rt_mem_scope scopes[] = {RT_MEM_SCOPE_DEVICE, RT_MEM_SCOPE_UNIT, RT_MEM_SCOPE_THREAD};
    const int64_t caps[] = {(int64_t)16 << 30, shared_bytes, 1020};
    for (int i = 0; i < 3; i++) {
        rt_mem_level *l = &d->level[i];
        snprintf(l->name, sizeof l->name, "%s", names[i]);
        l->level = i;
        l->scope = scopes[i];
        l->managed = RT_MEM_EXPLICIT;
        l->capacity_bytes = caps[i];
        l->tile_capacity_bytes = caps[i];
        l->bandwidth_gbps = 1000.0 * (i + 1);
    }
}

#endif
