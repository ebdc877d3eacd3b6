// test-opencl: the OpenCL backend on the device of devices/pocl-cpu.ini (PoCL's CPU device).
// A tiled SGEMM in OpenCL C (64x64 work-group tile in __local memory, barriers, a 4x4 private
// register tile) runs at a prime shape and a ragged-tail shape against a double-precision C
// reference (the acceptance rule of float outputs, rt_compare_accept), is timed with profiling
// events, and a build error comes back with its log. Exit 77 when no OpenCL platform matches the
// device.
#include "hal-gpu.h"
#include "test.h"
#include "gpu-sgemm.h"
#include "interp.h"
#include "compare.h"

static const char sgemm_cl[] =
    "#define BM 64\n#define BN 64\n#define BK 8\n#define TM 4\n#define TN 4\n"
    "__kernel __attribute__((reqd_work_group_size(256, 1, 1)))\n"
    "void sgemm(int M, int N, int K, __global const float *restrict A,\n"
    "           __global const float *restrict B, __global float *restrict C) {\n"
    "    __local float As[BK][BM];\n"
    "    __local float Bs[BK][BN];\n"
    "    int t = get_local_id(0), tx = t % 16, ty = t / 16;\n"
    "    int row0 = get_group_id(1) * BM, col0 = get_group_id(0) * BN;\n"
    "    float acc[TM][TN];\n"
    "    for (int i = 0; i < TM; i++)\n"
    "        for (int j = 0; j < TN; j++) acc[i][j] = 0.0f;\n"
    "    for (int k0 = 0; k0 < K; k0 += BK) {\n"
    "        for (int l = t; l < BM * BK; l += 256) {\n"
    "            int r = l / BK, c = l % BK, gr = row0 + r, gc = k0 + c;\n"
    "            As[c][r] = (gr < M && gc < K) ? A[gr * K + gc] : 0.0f;\n"
    "        }\n"
    "        for (int l = t; l < BK * BN; l += 256) {\n"
    "            int r = l / BN, c = l % BN, gr = k0 + r, gc = col0 + c;\n"
    "            Bs[r][c] = (gr < K && gc < N) ? B[gr * N + gc] : 0.0f;\n"
    "        }\n"
    "        barrier(CLK_LOCAL_MEM_FENCE);\n"
    "        for (int kk = 0; kk < BK; kk++) {\n"
    "            float a[TM], b[TN];\n"
    "            for (int i = 0; i < TM; i++) a[i] = As[kk][ty * TM + i];\n"
    "            for (int j = 0; j < TN; j++) b[j] = Bs[kk][tx * TN + j];\n"
    "            for (int i = 0; i < TM; i++)\n"
    "                for (int j = 0; j < TN; j++) acc[i][j] += a[i] * b[j];\n"
    "        }\n"
    "        barrier(CLK_LOCAL_MEM_FENCE);\n"
    "    }\n"
    "    for (int i = 0; i < TM; i++)\n"
    "        for (int j = 0; j < TN; j++) {\n"
    "            int r = row0 + ty * TM + i, c = col0 + tx * TN + j;\n"
    "            if (r < M && c < N) C[r * N + c] = acc[i][j];\n"
    "        }\n"
    "}\n";

// Runs the SGEMM at M x N x K (C poisoned with NaN: every element must be written) and returns
// whether C passes the acceptance rule of float outputs against the reference.
static bool check_sgemm(rt_gpu_runtime *rt, const rt_gpu_binary *bin, int M, int N, int K,
                        bool timed) {
    double *A = calloc((size_t)M * K, sizeof *A), *B = calloc((size_t)K * N, sizeof *B);
    double *C = calloc((size_t)M * N, sizeof *C), *R = calloc((size_t)M * N, sizeof *R);
    sgemm_fill(A, (int64_t)M * K, (uint32_t)M);
    sgemm_fill(B, (int64_t)K * N, (uint32_t)N);
    sgemm_ref(M, N, K, A, B, R);
    for (int64_t i = 0; i < (int64_t)M * N; i++)
        C[i] = NAN; // every element must be written
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
    rt_status st = rt_gpu_run(rt, bin, &cfg, args, 6, &e);
    RT_EXPECT_EQ(st, RT_OK);
    if (st == RT_OK) {
        rt_compare_result cmp;
        rt_compare_data(R, C, (int64_t)M * N, &cmp);
        accepted = rt_compare_accept(&cmp, RT_DTYPE_F32);
        printf("sgemm %dx%dx%d on %s: max abs err %.3g, nmse %.3g: %s\n", M, N, K,
               rt_gpu_runtime_device_name(rt), cmp.max_abs_err, cmp.nmse,
               accepted ? "accepted" : "rejected");
    } else {
        fprintf(stderr, "%s\n", e.msg);
    }
    if (st == RT_OK && timed) {
        rt_gpu_timing t;
        RT_EXPECT_EQ(rt_gpu_time(rt, bin, &cfg, args, 6, 1, 3, &t, &e), RT_OK);
        RT_EXPECT_EQ(t.reps, 3);
        RT_EXPECT(t.min_ns > 0.0 && t.median_ns >= t.min_ns && t.mean_ns >= t.min_ns);
        RT_EXPECT(t.method && strstr(t.method, "OpenCL profiling events"));
        printf("  timed: min %.0f ns, median %.0f ns (%.2f GFLOP/s), %s\n", t.min_ns, t.median_ns,
               2.0 * M * N * K / t.min_ns, t.method);
    }
    free(A);
    free(B);
    free(C);
    free(R);
    return accepted;
}

int main(void) {
    rt_device dev;
    rt_err e;
    rt_err_clear(&e);
    rt_status st = rt_hal_load_device("devices/pocl-cpu.ini", &dev, &e);
    RT_EXPECT_EQ(st, RT_OK);
    if (st != RT_OK) {
        fprintf(stderr, "%s:%d:%d: %s\n", e.where.file ? e.where.file : "", (int)e.where.line,
                (int)e.where.col, e.msg);
        return rt_test_finish("test-opencl");
    }
    RT_EXPECT_EQ(dev.devclass, RT_DEVCLASS_OPENCL);
    rt_arena *a = rt_arena_new(1 << 20);
    rt_gpu_runtime *rt = NULL;
    st = rt_gpu_runtime_open(a, &dev, &rt, &e);
    if (st != RT_OK && rt_gpu_err_is_absent(&e)) {
        printf("skip: %s\n", e.msg);
        rt_arena_free(a);
        return 77;
    }
    RT_EXPECT_EQ(st, RT_OK);

    rt_gpu_compile_options o = {.threads_per_block = SGEMM_THREADS};
    rt_gpu_binary *bin = NULL;
    rt_err_clear(&e);
    st = rt_gpu_compile(a, &dev, sgemm_cl, "sgemm", &o, &bin, &e);
    RT_EXPECT_EQ(st, RT_OK);
    if (st != RT_OK)
        fprintf(stderr, "%s\n%s\n", e.msg, e.log ? e.log : "");
    if (st == RT_OK && rt) {
        RT_EXPECT_EQ(bin->res.smem_bytes, 2 * 8 * 64 * 4);
        RT_EXPECT(bin->image_bytes > 0);
        RT_EXPECT(strstr(bin->options, "-cl-std=CL1.2") != NULL);
        RT_EXPECT_EQ(bin->occ.threads_per_block, SGEMM_THREADS);
        RT_EXPECT(bin->occ.blocks_per_unit >= 1);
        RT_EXPECT(check_sgemm(rt, bin, 67, 61, 59, true));   // primes
        RT_EXPECT(check_sgemm(rt, bin, 130, 33, 17, false)); // ragged tails, K % 8 = 1
        RT_EXPECT(check_sgemm(rt, bin, 1, 1, 1, false));
    }

    // A build error: RT_ERR_BACKEND with PoCL's build log.
    rt_err_clear(&e);
    bin = NULL;
    RT_EXPECT_EQ(rt_gpu_compile(a, &dev, "__kernel void k(__global float *x) { x[0] = ; }\n", "k",
                                NULL, &bin, &e),
                 RT_ERR_BACKEND);
    RT_EXPECT(strstr(e.msg, "clBuildProgram failed") != NULL);
    RT_EXPECT(strstr(e.msg, "CL_BUILD_PROGRAM_FAILURE") != NULL);
    RT_EXPECT(e.log && strstr(e.log, "error") != NULL);
    printf("build error: %s\n", e.msg);
    rt_arena_free(a);
    return rt_test_finish("test-opencl");
}
