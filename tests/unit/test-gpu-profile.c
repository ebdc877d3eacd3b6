// test-gpu-profile: how rt_gpu_profile checks, times and ranks GPU candidates, on the fake CUDA
// driver of gpu-fake.h (no GPU needed). Hand-made candidates of a vector add c = a + b each
// launch a fake kernel with a scripted device time per launch (what events see) and a host
// time (what the wall clock of the checked run sees). The winner must be the lowest kernel
// median among the right candidates — not the fastest checked run, not a faster wrong kernel —
// and a candidate that fails to compile, fails to launch or is wrong is marked with its reason
// while the others go on. Then a 256^3 GEMM (16.8M interpreter points: the random-vector check,
// no interpreter run) whose fake kernels are right, one element off, NaN, never written, the
// output transposed, or an input overwritten: only the right one passes, with the check's name
// and time reported.
#include "run-gpu.h"
#include "interp.h"
#include "test.h"
#include "gpu-fake.h"
#include "gpu-sgemm.h"

enum { N = 1000 };

// vadd(const float *a, const float *b, float *c) over N elements, whatever the grid.
static void k_vadd(void **params, const unsigned grid[3], const unsigned block[3]) {
    (void)grid, (void)block;
    const float *a = dev_buffer(params, 0), *b = dev_buffer(params, 1);
    float *c = dev_buffer(params, 2);
    for (int i = 0; i < N; i++)
        c[i] = a[i] + b[i];
}

// vadd, but c(17) is off by one.
static void k_vadd_wrong(void **params, const unsigned grid[3], const unsigned block[3]) {
    k_vadd(params, grid, block);
    float *c = dev_buffer(params, 2);
    c[17] += 1.0f;
}

// slow_check: 100 ns a launch on the device, but 5 ms of host time a launch, so its checked run
// is the slowest; fast_check: 900 ns a launch, no host time; wrong: 10 ns, the fastest of all.
static const fake_kernel kernels[] = {{"fast_check", k_vadd, 900, 0},
                                      {"slow_check", k_vadd, 100, 5.0},
                                      {"wrong", k_vadd_wrong, 10, 0},
                                      {NULL, NULL, 0, 0}};

typedef struct cand_spec {
    const char *kernel; // the fake kernel its binary names
    bool compiled;
} cand_spec;

static void test_rank(void) {
    rt_arena *a = rt_arena_new(1 << 16);
    rt_err err = {0};
    rt_op *op = NULL;
    rt_status st = rt_spec_parse(a,
                                 "size N = 1000\ndef vadd(float(N) a, float(N) b) -> (c) {\n"
                                 "    c(i) = a(i) + b(i)\n}\n",
                                 "vadd.spec", NULL, 0, &op, &err);
    RT_EXPECT_EQ(st, RT_OK);
    if (st != RT_OK) {
        fprintf(stderr, "%s\n", err.msg);
        rt_arena_free(a);
        return;
    }
    rt_gpu_buffer bufs[3];
    static const char *const names[3] = {"a", "b", "c"};
    for (int i = 0; i < 3; i++)
        bufs[i] = (rt_gpu_buffer){.name = names[i],
                                  .tensor = rt_op_tensor_index(op, names[i]),
                                  .dtype = RT_DTYPE_F32,
                                  .written = i == 2};
    rt_gpu_phase phase = {.kernel_name = "vadd", .grid_x = 8, .threads = 128, .what = "c"};
    rt_gpu_kernel k = {.op = op, .n_bufs = 3, .bufs = bufs, .n_phases = 1, .phases = &phase};

    // Rank 1 cannot be launched (its module lacks the kernel), rank 2 checks fast but runs slow,
    // rank 3 is wrong and fastest, rank 4 checks slowly but runs fastest, rank 5 did not compile.
    static const cand_spec specs[] = {{"nosuch", true},
                                      {"fast_check", true},
                                      {"wrong", true},
                                      {"slow_check", true},
                                      {"fast_check", false}};
    enum { N_CANDS = 5 };
    rt_gpu_binary bins[N_CANDS];
    rt_gpu_binary *bin_of[N_CANDS];
    rt_gpu_candidate cands[N_CANDS];
    for (int i = 0; i < N_CANDS; i++) {
        bins[i] = binary(specs[i].kernel);
        bin_of[i] = specs[i].compiled ? &bins[i] : NULL;
        cands[i] = (rt_gpu_candidate){.rank = i + 1,
                                      .kernel = &k,
                                      .target = RT_GPU_TARGET_CUDA,
                                      .source = "",
                                      .compiled = specs[i].compiled,
                                      .bins = &bin_of[i]};
        if (!specs[i].compiled)
            rt_fail(&cands[i].compile_err, RT_ERR_BACKEND, RT_NOLOC, "nvrtc: error: injected");
    }

    rt_device dev;
    make_gpu(&dev, RT_DEVCLASS_CUDA, "sm_80", 32, 167936);
    fake f = {.kernels = kernels};
    rt_gpu_driver drv;
    rt_gpu_runtime rt;
    fake_runtime(&rt, &drv, &f, &dev, a);
    rt_bindings *b = NULL;
    RT_EXPECT_EQ(rt_bindings_new(a, op, 1, &b, &err), RT_OK);
    RT_EXPECT_EQ(rt_bindings_prepare(b, &err), RT_OK);
    int32_t c_t = rt_op_tensor_index(op, "c");
    b->tensors[c_t].data[5] = 123.0; // b is left as it was

    rt_gpu_time_options o = {.warmup = 1, .min_reps = 3, .max_reps = 3, .budget_ns = 0};
    rt_gpu_result res[N_CANDS];
    int32_t winner = -2;
    st = rt_gpu_profile(a, &rt, &dev, cands, N_CANDS, b, &o, res, &winner, &err);
    RT_EXPECT_EQ(st, RT_OK);
    for (int i = 0; i < N_CANDS; i++)
        printf("rank %d: %-14s check %9.0f ns, kernel median %5.0f ns%s%s\n", i + 1,
               rt_gpu_cand_status_name(res[i].status), res[i].check.checked_run_ns,
               res[i].timing.median_ns, res[i].reason ? ": " : "",
               res[i].reason ? res[i].reason : "");

    RT_EXPECT_EQ(res[0].status, RT_GPU_CAND_RUN_FAILED);
    RT_EXPECT_STR(res[0].reason, "fakeModuleGetFunction failed: FAKE_ERROR_NOT_FOUND (500)");
    RT_EXPECT_EQ(res[1].status, RT_GPU_CAND_OK);
    RT_EXPECT_EQ(res[2].status, RT_GPU_CAND_WRONG);
    RT_EXPECT(res[2].reason && strstr(res[2].reason, "output 'c': max error 1 above") != NULL);
    RT_EXPECT_EQ(res[3].status, RT_GPU_CAND_OK);
    RT_EXPECT_EQ(res[4].status, RT_GPU_CAND_COMPILE_FAILED);
    RT_EXPECT_STR(res[4].reason, "nvrtc: error: injected");

    // The kernel times are the scripted device times, from events, 1 warm-up and 3 repetitions.
    RT_EXPECT_NEAR(res[1].timing.median_ns, 900.0, 1e-3);
    RT_EXPECT_NEAR(res[3].timing.median_ns, 100.0, 1e-3);
    RT_EXPECT_NEAR(res[3].timing.min_ns, 100.0, 1e-3);
    RT_EXPECT_EQ(res[3].timing.reps, 3);
    RT_EXPECT_EQ(res[3].timing.warmup, 1);
    RT_EXPECT_STR(res[3].timing.method, "fake events (fakeEventElapsedTime)");
    // The checked runs rank the other way: rank 2's was the faster by far.
    RT_EXPECT(res[3].check.checked_run_ns > 4e6);
    RT_EXPECT(res[1].check.checked_run_ns < res[3].check.checked_run_ns);
    // The winner: the lowest kernel median among the right candidates.
    RT_EXPECT_EQ(winner, 3);
    RT_EXPECT(b->tensors[c_t].data[5] == 123.0);

    // Launches: the failed rank 1 none; ranks 2 and 4 one checked run, 1 warm-up, 3 timed;
    // the wrong rank 3 its checked run only.
    RT_EXPECT_EQ(f.calls[FAKE_LAUNCH], 5 + 1 + 5);
    rt_gpu_driver_unload_all(&drv);
    RT_EXPECT_EQ(f.live_buffers, 0);
    RT_EXPECT_EQ(f.live_events, 0);
    RT_EXPECT_EQ(f.live_modules, 0);

    // Nothing right: no winner.
    int32_t one_winner = -2;
    RT_EXPECT_EQ(rt_gpu_profile(a, &rt, &dev, &cands[2], 1, b, &o, res, &one_winner, &err), RT_OK);
    RT_EXPECT_EQ(one_winner, -1);
    rt_gpu_driver_unload_all(&drv);

    // Bad options are refused.
    rt_gpu_time_options bad = {.warmup = 0, .min_reps = 4, .max_reps = 2};
    RT_EXPECT_EQ(rt_gpu_profile(a, &rt, &dev, cands, N_CANDS, b, &bad, res, &winner, &err),
                 RT_ERR_USAGE);
    RT_EXPECT(strstr(err.msg, "bad GPU timing options") != NULL);
    rt_arena_free(a);
}

enum { MM = 256 };

// C = A B (row-major MM x MM floats) as the fake "mm" kernels compute it, then the fault.
static void mm_run(void **params, int fault) {
    const float *A = dev_buffer(params, 0), *B = dev_buffer(params, 1);
    float *C = dev_buffer(params, 2);
    for (int m = 0; m < MM; m++) {
        float row[MM] = {0};
        for (int k = 0; k < MM; k++)
            for (int n = 0; n < MM; n++)
                row[n] += A[m * MM + k] * B[k * MM + n];
        for (int n = 0; n < MM; n++) {
            if (fault == 3 && m == 100 && n == 37)
                continue; // never written: keeps the poison
            C[fault == 4 ? n * MM + m : m * MM + n] = row[n];
        }
    }
    if (fault == 1)
        C[100 * MM + 37] += 1.0f;
    if (fault == 2)
        C[100 * MM + 37] = 0.0f / 0.0f;
    if (fault == 5)
        ((float *)dev_buffer(params, 0))[5] += 1.0f;
}
#define MM_KERNEL(name, fault)                                                                     \
    static void name(void **params, const unsigned grid[3], const unsigned block[3]) {             \
        (void)grid, (void)block;                                                                   \
        mm_run(params, fault);                                                                     \
    }
MM_KERNEL(k_mm, 0)
MM_KERNEL(k_mm_off, 1)
MM_KERNEL(k_mm_nan, 2)
MM_KERNEL(k_mm_unwritten, 3)
MM_KERNEL(k_mm_transposed, 4)
MM_KERNEL(k_mm_clobber, 5)

static const fake_kernel mm_kernels[] = {{"mm", k_mm, 1000, 0},
                                         {"mm_off", k_mm_off, 1000, 0},
                                         {"mm_nan", k_mm_nan, 1000, 0},
                                         {"mm_unwritten", k_mm_unwritten, 1000, 0},
                                         {"mm_transposed", k_mm_transposed, 1000, 0},
                                         {"mm_clobber", k_mm_clobber, 1000, 0},
                                         {NULL, NULL, 0, 0}};

static void test_vector(void) {
    rt_arena *a = rt_arena_new(1 << 16);
    rt_err err = {0};
    rt_op *op = NULL;
    RT_EXPECT_EQ(rt_spec_parse(a,
                               "size M = 256\nsize N = 256\nsize K = 256\n"
                               "def mm(float(M, K) A, float(K, N) B) -> (C) {\n"
                               "    C(m, n) +=! A(m, k) * B(k, n)\n}\n",
                               "mm.spec", NULL, 0, &op, &err),
                 RT_OK);
    if (!op) {
        rt_arena_free(a);
        return;
    }
    rt_gpu_buffer bufs[3];
    static const char *const names[3] = {"A", "B", "C"};
    for (int i = 0; i < 3; i++)
        bufs[i] = (rt_gpu_buffer){.name = names[i],
                                  .tensor = rt_op_tensor_index(op, names[i]),
                                  .dtype = RT_DTYPE_F32,
                                  .written = i == 2};
    rt_gpu_phase phase = {.kernel_name = "mm", .grid_x = 1, .threads = 1, .what = "C"};
    rt_gpu_kernel k = {.op = op, .n_bufs = 3, .bufs = bufs, .n_phases = 1, .phases = &phase};
    enum { N_CANDS = 6 };
    rt_gpu_binary bins[N_CANDS];
    rt_gpu_binary *bin_of[N_CANDS];
    rt_gpu_candidate cands[N_CANDS];
    for (int i = 0; i < N_CANDS; i++) {
        bins[i] = binary(mm_kernels[i].name);
        bin_of[i] = &bins[i];
        cands[i] = (rt_gpu_candidate){.rank = i + 1,
                                      .kernel = &k,
                                      .target = RT_GPU_TARGET_CUDA,
                                      .source = "",
                                      .compiled = true,
                                      .bins = &bin_of[i]};
    }
    rt_device dev;
    make_gpu(&dev, RT_DEVCLASS_CUDA, "sm_80", 32, 167936);
    fake f = {.kernels = mm_kernels};
    rt_gpu_driver drv;
    rt_gpu_runtime rt;
    fake_runtime(&rt, &drv, &f, &dev, a);
    rt_bindings *b = NULL;
    RT_EXPECT_EQ(rt_bindings_new(a, op, 1, &b, &err), RT_OK);
    rt_gpu_time_options o = {.warmup = 0, .min_reps = 1, .max_reps = 1, .budget_ns = 0};
    rt_gpu_result res[N_CANDS];
    int32_t winner = -2;
    RT_EXPECT_EQ(rt_gpu_profile(a, &rt, &dev, cands, N_CANDS, b, &o, res, &winner, &err), RT_OK);
    static const char *const want[N_CANDS] = {
        NULL,
        "output 'C': C t differs from alpha A (B t) by",
        "output 'C': C t differs from alpha A (B t): not finite",
        "output 'C': C t differs from alpha A (B t): not finite",
        "output 'C': C t differs from alpha A (B t) by",
        "the kernel changed input 'A': element 5"};
    for (int i = 0; i < N_CANDS; i++) {
        printf("mm %-14s %-6s check %-13s %8.0f us%s%s\n", mm_kernels[i].name,
               rt_gpu_cand_status_name(res[i].status),
               res[i].check.check ? res[i].check.check : "-", res[i].check.check_ns / 1e3,
               res[i].reason ? ": " : "", res[i].reason ? res[i].reason : "");
        RT_EXPECT_STR(res[i].check.check, "random-vector");
        RT_EXPECT(res[i].check.check_ns > 0);
        RT_EXPECT_EQ(res[i].status, want[i] ? RT_GPU_CAND_WRONG : RT_GPU_CAND_OK);
        RT_EXPECT(want[i] ? res[i].reason && strstr(res[i].reason, want[i]) : !res[i].reason);
    }
    RT_EXPECT_EQ(winner, 0);
    // b was not run through the interpreter: C still holds what it was bound with (zeros).
    int32_t c_t = rt_op_tensor_index(op, "C");
    RT_EXPECT(b->tensors[c_t].data[100 * MM + 37] == 0.0);
    rt_gpu_driver_unload_all(&drv);
    rt_arena_free(a);
}

int main(void) {
    test_rank();
    test_vector();
    return rt_test_finish("test-gpu-profile");
}
