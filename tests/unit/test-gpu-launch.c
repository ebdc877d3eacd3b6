// test-gpu-launch: the launch path that hal-gpu.c runs for the cuda and hip classes (rt_gpu_run
// and rt_gpu_time over rt_gpu_driver_ops, one kernel or a sequence of them), on a machine
// without a GPU, over the fake driver of gpu-fake.h with its kernels here (a vector add, an
// in-place doubling, one kernel per scalar type, the tiled SGEMM of gpu-sgemm.h thread by
// thread). Checked: buffers in and out (copy_out only), scalars by type, grid/block/shared
// memory, the module cache, a sequence on device-resident buffers, warm-up and repetition
// counts, the timing statistics and how they were taken (events, or the wall clock where the
// driver has none), and for a failure injected at each driver call the exact message and that
// every buffer, event and module is released.
#include "hal-gpu.h"
#include "test.h"
#include "gpu-fake.h"
#include "gpu-sgemm.h"

#include <stdint.h>

// ---------------------------------------------------------------------------------------------
// Kernels: C functions that walk the grid as the GPU would
// ---------------------------------------------------------------------------------------------

// vadd(int n, const float *a, const float *b, float *c): one element per thread on a 1-D grid.
static void k_vadd(void **params, const unsigned grid[3], const unsigned block[3]) {
    int32_t n = *(const int32_t *)params[0];
    const float *a = dev_buffer(params, 1), *b = dev_buffer(params, 2);
    float *c = dev_buffer(params, 3);
    for (unsigned bx = 0; bx < grid[0]; bx++)
        for (unsigned tx = 0; tx < block[0]; tx++) {
            int64_t i = (int64_t)bx * block[0] + tx;
            if (i < n)
                c[i] = a[i] + b[i];
        }
}

// scalars(int32 a, int64 b, float c, double d, double *out): out = {a, b, c, d}, read at the
// width of each type.
static void k_scalars(void **params, const unsigned grid[3], const unsigned block[3]) {
    (void)grid, (void)block;
    double *out = dev_buffer(params, 4);
    out[0] = (double)*(const int32_t *)params[0];
    out[1] = (double)*(const int64_t *)params[1];
    out[2] = (double)*(const float *)params[2];
    out[3] = *(const double *)params[3];
}

// The tiled SGEMM of gpu-sgemm.h: block (bx, by) owns the 64x64 tile at row 64*by, column
// 64*bx; thread t a 4x4 register tile at (t / 16, t % 16); float accumulation in k order.
static void k_sgemm(void **params, const unsigned grid[3], const unsigned block[3]) {
    int32_t M = *(const int32_t *)params[0], N = *(const int32_t *)params[1];
    int32_t K = *(const int32_t *)params[2];
    const float *A = dev_buffer(params, 3), *B = dev_buffer(params, 4);
    float *C = dev_buffer(params, 5);
    for (unsigned by = 0; by < grid[1]; by++)
        for (unsigned bx = 0; bx < grid[0]; bx++)
            for (unsigned t = 0; t < block[0]; t++)
                for (int i = 0; i < 4; i++)
                    for (int j = 0; j < 4; j++) {
                        int64_t r = (int64_t)by * SGEMM_TILE + (t / 16) * 4 + i;
                        int64_t c = (int64_t)bx * SGEMM_TILE + (t % 16) * 4 + j;
                        if (r >= M || c >= N)
                            continue;
                        float acc = 0.0f;
                        for (int64_t k = 0; k < K; k++)
                            acc += A[r * K + k] * B[k * N + c];
                        C[r * N + c] = acc;
                    }
}

// sgemm_nan: a broken SGEMM whose every element is NaN; sgemm_nan1: right except C[1][2].
static void k_sgemm_nan(void **params, const unsigned grid[3], const unsigned block[3]) {
    (void)grid, (void)block;
    int32_t M = *(const int32_t *)params[0], N = *(const int32_t *)params[1];
    float *C = dev_buffer(params, 5);
    for (int64_t i = 0; i < (int64_t)M * N; i++)
        C[i] = NAN;
}

static void k_sgemm_nan1(void **params, const unsigned grid[3], const unsigned block[3]) {
    k_sgemm(params, grid, block);
    int32_t N = *(const int32_t *)params[1];
    float *C = dev_buffer(params, 5);
    C[1 * N + 2] = NAN;
}

// vdouble(int n, const float *a, const float *b, float *c): c = 2 c, in place (after vadd in a
// sequence, it reads what vadd left on the device).
static void k_vdouble(void **params, const unsigned grid[3], const unsigned block[3]) {
    int32_t n = *(const int32_t *)params[0];
    float *c = dev_buffer(params, 3);
    for (unsigned bx = 0; bx < grid[0]; bx++)
        for (unsigned tx = 0; tx < block[0]; tx++) {
            int64_t i = (int64_t)bx * block[0] + tx;
            if (i < n)
                c[i] = 2.0f * c[i];
        }
}

// vaddk(int n, const float *a, const float *b, float *c, int k): c += k, k the step's own int
// argument after the shared ones.
static void k_vaddk(void **params, const unsigned grid[3], const unsigned block[3]) {
    int32_t n = *(const int32_t *)params[0], k = *(const int32_t *)params[4];
    float *c = dev_buffer(params, 3);
    for (unsigned bx = 0; bx < grid[0]; bx++)
        for (unsigned tx = 0; tx < block[0]; tx++) {
            int64_t i = (int64_t)bx * block[0] + tx;
            if (i < n)
                c[i] += (float)k;
        }
}

// Device times: vadd and sgemm follow the fake's launch_ns table; vdouble takes 300 ns;
// vadd_slow is vadd taking 2 ms of host time per launch; sgemm_nan and sgemm_nan1 are broken.
static const fake_kernel fake_kernel_table[] = {{"vadd", k_vadd, 0, 0},
                                                {"vdouble", k_vdouble, 300, 0},
                                                {"vaddk", k_vaddk, 0, 0},
                                                {"scalars", k_scalars, 0, 0},
                                                {"sgemm", k_sgemm, 0, 0},
                                                {"vadd_slow", k_vadd, 0, 2.0},
                                                {"sgemm_nan", k_sgemm_nan, 0, 0},
                                                {"sgemm_nan1", k_sgemm_nan1, 0, 0},
                                                {NULL, NULL, 0, 0}};

// ---------------------------------------------------------------------------------------------
// Fixtures
// ---------------------------------------------------------------------------------------------

enum { VADD_N = 1000, VADD_BLOCK = 128 };

// A runtime on a fresh fake driver, and a vector add ready to run on it: inputs a and b, output
// c (the only copy_out buffer, -1 before any run), arguments (n, a, b, c).
typedef struct fixture {
    rt_device dev;
    rt_arena *arena;
    fake f;
    rt_gpu_driver drv;
    rt_gpu_runtime rt;
    double a[VADD_N], b[VADD_N], c[VADD_N];
    rt_gpu_arg args[4];
    rt_gpu_launch cfg;
    rt_gpu_binary vadd;
    const rt_gpu_binary *bin; // what vadd_run launches: &vadd unless a test points it elsewhere
    rt_err e;
} fixture;

static void fixture_open(fixture *x) {
    memset(x, 0, sizeof *x);
    make_gpu(&x->dev, RT_DEVCLASS_CUDA, "sm_80", 32, 167936);
    x->arena = rt_arena_new(1 << 14);
    x->f.kernels = fake_kernel_table;
    fake_runtime(&x->rt, &x->drv, &x->f, &x->dev, x->arena);
    for (int i = 0; i < VADD_N; i++) {
        x->a[i] = 0.25 * i;
        x->b[i] = 1000.0 - i;
        x->c[i] = -1.0;
    }
    x->args[0] = (rt_gpu_arg){.kind = RT_GPU_ARG_I32, .i = VADD_N};
    double *host[3] = {x->a, x->b, x->c};
    for (int k = 0; k < 3; k++)
        x->args[1 + k] = (rt_gpu_arg){.kind = RT_GPU_ARG_BUFFER,
                                      .dtype = RT_DTYPE_F32,
                                      .n_elems = VADD_N,
                                      .host = host[k],
                                      .copy_out = k == 2};
    x->cfg = (rt_gpu_launch){.grid = {(VADD_N + VADD_BLOCK - 1) / VADD_BLOCK, 0, 0},
                             .block = {VADD_BLOCK, 0, 0},
                             .dyn_smem_bytes = 64 * 1024};
    x->vadd = binary("vadd");
    x->bin = &x->vadd;
    rt_err_clear(&x->e);
}

// Unloads the modules as the backend's close does; nothing may be left alive.
static void fixture_close(fixture *x) {
    rt_gpu_driver_unload_all(&x->drv);
    RT_EXPECT_EQ(x->f.live_modules, 0);
    RT_EXPECT_EQ(x->f.live_buffers, 0);
    RT_EXPECT_EQ(x->f.live_events, 0);
    rt_arena_free(x->arena);
}

static rt_status vadd_run(fixture *x) {
    rt_err_clear(&x->e);
    return rt_gpu_run(&x->rt, x->bin, &x->cfg, x->args, 4, &x->e);
}

static rt_status vadd_time(fixture *x, int32_t warmup, int32_t reps, rt_gpu_timing *t) {
    rt_err_clear(&x->e);
    return rt_gpu_time(&x->rt, x->bin, &x->cfg, x->args, 4, warmup, reps, t, &x->e);
}

static bool vadd_correct(const fixture *x) {
    for (int i = 0; i < VADD_N; i++)
        if (x->c[i] != (double)((float)x->a[i] + (float)x->b[i]))
            return false;
    return true;
}

// ---------------------------------------------------------------------------------------------
// Tests
// ---------------------------------------------------------------------------------------------

// One run: the buffers go in, the kernel sees the launch shape, only copy_out comes back; the
// module is loaded once per binary.
static void test_run(void) {
    fixture x;
    fixture_open(&x);
    RT_EXPECT_EQ(vadd_run(&x), RT_OK);
    RT_EXPECT(vadd_correct(&x));
    RT_EXPECT(x.a[3] == 0.75); // inputs are not read back
    const fake *f = &x.f;
    expect_calls(f, (const int[FAKE_OP_COUNT]){[FAKE_BIND] = 1,
                                               [FAKE_LOAD] = 1,
                                               [FAKE_FUNCTION] = 1,
                                               [FAKE_SMEM] = 1,
                                               [FAKE_ALLOC] = 3,
                                               [FAKE_HTOD] = 3,
                                               [FAKE_DTOH] = 1, // c only
                                               [FAKE_LAUNCH] = 1,
                                               [FAKE_SYNC] = 1});
    RT_EXPECT_EQ(f->grid[0], 8);
    RT_EXPECT_EQ(f->grid[1], 1); // 0 counts as 1
    RT_EXPECT_EQ(f->block[0], VADD_BLOCK);
    RT_EXPECT_EQ(f->block[2], 1);
    RT_EXPECT_EQ(f->smem_bytes, 64 * 1024);
    RT_EXPECT_EQ(f->smem_allowed, 64 * 1024);
    RT_EXPECT_EQ(f->live_buffers, 0);

    // The same binary again: no second load. Another binary (modules are cached per binary, by
    // address): loaded anew.
    RT_EXPECT_EQ(vadd_run(&x), RT_OK);
    RT_EXPECT_EQ(f->calls[FAKE_LOAD], 1);
    RT_EXPECT_EQ(f->calls[FAKE_LAUNCH], 2);
    rt_gpu_binary other = binary("vadd");
    x.bin = &other;
    RT_EXPECT_EQ(vadd_run(&x), RT_OK);
    RT_EXPECT_EQ(f->calls[FAKE_LOAD], 2);
    RT_EXPECT_EQ(f->live_modules, 2);
    fixture_close(&x);
}

// Each scalar reaches the kernel at its own width and rounding.
static void test_scalars(void) {
    fixture x;
    fixture_open(&x);
    double out[4] = {0};
    rt_gpu_arg args[5] = {
        {.kind = RT_GPU_ARG_I32, .i = -7},
        {.kind = RT_GPU_ARG_I64, .i = ((int64_t)1 << 40) + 3},
        {.kind = RT_GPU_ARG_F32, .f = 0.1},
        {.kind = RT_GPU_ARG_F64, .f = 0.1},
        {.kind = RT_GPU_ARG_BUFFER,
         .dtype = RT_DTYPE_F64,
         .n_elems = 4,
         .host = out,
         .copy_out = true},
    };
    rt_gpu_launch cfg = {.grid = {1, 1, 1}, .block = {1, 1, 1}};
    rt_gpu_binary bin = binary("scalars");
    rt_err e;
    rt_err_clear(&e);
    RT_EXPECT_EQ(rt_gpu_run(&x.rt, &bin, &cfg, args, 5, &e), RT_OK);
    RT_EXPECT(out[0] == -7.0);
    RT_EXPECT(out[1] == (double)(((int64_t)1 << 40) + 3));
    RT_EXPECT(out[2] == (double)0.1f);
    RT_EXPECT(out[3] == 0.1);
    fixture_close(&x);
}

// test-gpu-driver's SGEMM check (run, then time) at ragged and prime shapes.
static void test_sgemm(int M, int N, int K) {
    fixture x;
    fixture_open(&x);
    rt_gpu_binary bin = binary("sgemm");
    RT_EXPECT(sgemm_run(&x.rt, &bin, M, N, K));
    expect_calls(&x.f, (const int[FAKE_OP_COUNT]){[FAKE_BIND] = 2,
                                                  [FAKE_LOAD] = 1,
                                                  [FAKE_FUNCTION] = 1,
                                                  [FAKE_SMEM] = 2,
                                                  [FAKE_ALLOC] = 6,
                                                  [FAKE_HTOD] = 6,
                                                  [FAKE_DTOH] = 1,
                                                  [FAKE_LAUNCH] = 1 + 2 + 5,
                                                  [FAKE_SYNC] = 1,
                                                  [FAKE_EVENT_CREATE] = 2,
                                                  [FAKE_EVENT_RECORD] = 10,
                                                  [FAKE_EVENT_SYNC] = 5,
                                                  [FAKE_EVENT_ELAPSED] = 5});
    fixture_close(&x);
}

// The SGEMM check rejects NaN: an all-NaN result, and one NaN among right values (a relative
// error that NaN makes false passed both).
static void test_sgemm_nan(void) {
    static const char *const broken[] = {"sgemm_nan", "sgemm_nan1"};
    for (int k = 0; k < 2; k++) {
        fixture x;
        fixture_open(&x);
        rt_gpu_binary bin = binary(broken[k]);
        RT_EXPECT(!sgemm_run(&x.rt, &bin, 67, 61, 59));
        fixture_close(&x);
    }
}

// Warm-up launches are untimed; each repetition is timed by its own pair of event records; the
// statistics are those of the launch times; nothing is read back.
static void test_time(void) {
    fixture x;
    fixture_open(&x);
    static const double launch_ns[] = {100, 200, 300, 700, 500, 900, 400, 800};
    x.f.launch_ns = launch_ns;
    x.f.n_launch_ns = 8;
    rt_gpu_timing t;
    RT_EXPECT_EQ(vadd_time(&x, 3, 5, &t), RT_OK);
    const fake *f = &x.f;
    expect_calls(f, (const int[FAKE_OP_COUNT]){[FAKE_BIND] = 1,
                                               [FAKE_LOAD] = 1,
                                               [FAKE_FUNCTION] = 1,
                                               [FAKE_SMEM] = 1,
                                               [FAKE_ALLOC] = 3,
                                               [FAKE_HTOD] = 3,
                                               [FAKE_LAUNCH] = 3 + 5,
                                               [FAKE_EVENT_CREATE] = 2,
                                               [FAKE_EVENT_RECORD] = 2 * 5,
                                               [FAKE_EVENT_SYNC] = 5,
                                               [FAKE_EVENT_ELAPSED] = 5});
    RT_EXPECT(x.c[0] == -1.0);
    RT_EXPECT_EQ(t.warmup, 3);
    RT_EXPECT_EQ(t.reps, 5);
    RT_EXPECT_NEAR(t.min_ns, 400.0, 1e-3);    // samples 700 500 900 400 800
    RT_EXPECT_NEAR(t.median_ns, 700.0, 1e-3); // sorted 400 500 700 800 900
    RT_EXPECT_NEAR(t.mean_ns, 660.0, 1e-3);
    RT_EXPECT_STR(t.method, "fake events (fakeEventElapsedTime)");

    // No warm-up, an even count: launches 9..12 take 100 200 300 700 (the table cycles).
    RT_EXPECT_EQ(vadd_time(&x, 0, 4, &t), RT_OK);
    RT_EXPECT_EQ(f->calls[FAKE_LAUNCH], 12);
    RT_EXPECT_NEAR(t.min_ns, 100.0, 1e-3);
    RT_EXPECT_NEAR(t.median_ns, 250.0, 1e-3);
    RT_EXPECT_NEAR(t.mean_ns, 325.0, 1e-3);
    fixture_close(&x);
}

// A sequence (vadd, then vdouble) on the same device buffers: each buffer is uploaded once, the
// second kernel reads what the first wrote, only c comes back, each step has its own launch
// shape and shared memory. Timed, one sample spans the whole sequence (vadd's 1000 ns + vdouble's
// 300 ns), and each repetition launches both.
static void test_steps(void) {
    fixture x;
    fixture_open(&x);
    rt_gpu_binary vdouble = binary("vdouble");
    rt_gpu_step steps[2] = {{.bin = &x.vadd, .cfg = x.cfg}, {.bin = &vdouble, .cfg = x.cfg}};
    steps[1].cfg.dyn_smem_bytes = 1024;
    RT_EXPECT_EQ(rt_gpu_run_steps(&x.rt, steps, 2, x.args, 4, &x.e), RT_OK);
    bool ok = true;
    for (int i = 0; i < VADD_N; i++)
        ok = ok && x.c[i] == 2.0 * (double)((float)x.a[i] + (float)x.b[i]);
    RT_EXPECT(ok);
    const fake *f = &x.f;
    expect_calls(f, (const int[FAKE_OP_COUNT]){[FAKE_BIND] = 1,
                                               [FAKE_LOAD] = 2,
                                               [FAKE_FUNCTION] = 2,
                                               [FAKE_SMEM] = 2,
                                               [FAKE_ALLOC] = 3,
                                               [FAKE_HTOD] = 3,
                                               [FAKE_DTOH] = 1,
                                               [FAKE_LAUNCH] = 2,
                                               [FAKE_SYNC] = 1});
    RT_EXPECT_EQ(f->smem_bytes, 1024); // the last launch was vdouble's

    rt_gpu_timing t;
    RT_EXPECT_EQ(rt_gpu_time_steps(&x.rt, steps, 2, x.args, 4, 1, 3, &t, &x.e), RT_OK);
    RT_EXPECT_EQ(f->calls[FAKE_LAUNCH], 2 + 2 * (1 + 3));
    RT_EXPECT_EQ(f->calls[FAKE_EVENT_RECORD], 2 * 3);
    RT_EXPECT_NEAR(t.min_ns, 1300.0, 1e-3);
    RT_EXPECT_NEAR(t.median_ns, 1300.0, 1e-3);

    // No step, or a step without a kernel: refused before any driver call.
    int loads = f->calls[FAKE_LOAD];
    RT_EXPECT_EQ(rt_gpu_run_steps(&x.rt, steps, 0, x.args, 4, &x.e), RT_ERR_BACKEND);
    RT_EXPECT_STR(x.e.msg, "no kernel to launch (expected at least 1)");
    steps[1].bin = NULL;
    rt_err_clear(&x.e);
    RT_EXPECT_EQ(rt_gpu_run_steps(&x.rt, steps, 2, x.args, 4, &x.e), RT_ERR_BACKEND);
    RT_EXPECT_STR(x.e.msg, "step 1 has no kernel");
    RT_EXPECT_EQ(f->calls[FAKE_LOAD], loads);
    fixture_close(&x);
}

// Steps with int arguments of their own (a tree's levels): one binary launched three times,
// each launch seeing its step's value after the shared arguments; a step with more than
// RT_GPU_STEP_MAX_INTS is refused.
static void test_step_ints(void) {
    fixture x;
    fixture_open(&x);
    rt_gpu_binary vaddk = binary("vaddk");
    rt_gpu_step steps[3] = {{.bin = &x.vadd, .cfg = x.cfg},
                            {.bin = &vaddk, .cfg = x.cfg, .n_ints = 1, .ints = {10}},
                            {.bin = &vaddk, .cfg = x.cfg, .n_ints = 1, .ints = {100}}};
    RT_EXPECT_EQ(rt_gpu_run_steps(&x.rt, steps, 3, x.args, 4, &x.e), RT_OK);
    bool ok = true;
    for (int i = 0; i < VADD_N; i++)
        ok = ok && x.c[i] == (double)((float)x.a[i] + (float)x.b[i] + 110.0f);
    RT_EXPECT(ok);
    RT_EXPECT_EQ(x.f.calls[FAKE_LOAD], 2); // vaddk loaded once for both of its steps
    steps[2].n_ints = RT_GPU_STEP_MAX_INTS + 1;
    rt_err_clear(&x.e);
    RT_EXPECT_EQ(rt_gpu_run_steps(&x.rt, steps, 3, x.args, 4, &x.e), RT_ERR_BACKEND);
    RT_EXPECT_STR(x.e.msg, "step 2 has 3 int arguments (expected at most 2)");
    fixture_close(&x);
}

// Kernels taking their own arguments from one list (arg_map, a layer's defs), a and b views
// inside one buffer (view_of): vadd then vaddk (its int after its mapped arguments) read the
// views; the views take no memory and are not copied; a misaligned view is refused.
static void test_step_maps(void) {
    fixture x;
    fixture_open(&x);
    rt_gpu_binary vaddk = binary("vaddk");
    enum { OFF = 1024 }; // elements: 4096 bytes, a multiple of RT_GPU_VIEW_ALIGN_BYTES
    double *ab = rt_arena_alloc(x.arena, (OFF + VADD_N) * sizeof(double));
    for (int i = 0; i < OFF + VADD_N; i++)
        ab[i] = i < VADD_N ? x.a[i] : i >= OFF ? x.b[i - OFF] : 0.0;
    rt_gpu_arg args[5] = {
        x.args[0],
        {.kind = RT_GPU_ARG_BUFFER, .dtype = RT_DTYPE_F32, .n_elems = OFF + VADD_N, .host = ab},
        {.kind = RT_GPU_ARG_BUFFER, .dtype = RT_DTYPE_F32, .n_elems = VADD_N, .view_of = 2},
        {.kind = RT_GPU_ARG_BUFFER,
         .dtype = RT_DTYPE_F32,
         .n_elems = VADD_N,
         .view_of = 2,
         .view_offset = OFF * 4},
        x.args[3]};
    const int32_t map[4] = {0, 2, 3, 4};
    rt_gpu_step steps[2] = {
        {.bin = &x.vadd, .cfg = x.cfg, .arg_map = map, .n_mapped = 4},
        {.bin = &vaddk, .cfg = x.cfg, .n_ints = 1, .ints = {10}, .arg_map = map, .n_mapped = 4}};
    RT_EXPECT_EQ(rt_gpu_run_steps(&x.rt, steps, 2, args, 5, &x.e), RT_OK);
    bool ok = true;
    for (int i = 0; i < VADD_N; i++)
        ok = ok && x.c[i] == (double)((float)x.a[i] + (float)x.b[i] + 10.0f);
    RT_EXPECT(ok);
    RT_EXPECT_EQ(x.f.calls[FAKE_ALLOC], 2); // ab and c: the views are inside ab
    RT_EXPECT_EQ(x.f.calls[FAKE_HTOD], 2);
    args[3].view_offset = 100;
    rt_err_clear(&x.e);
    RT_EXPECT_EQ(rt_gpu_run_steps(&x.rt, steps, 2, args, 5, &x.e), RT_ERR_BACKEND);
    RT_EXPECT_STR(x.e.msg, "buffer argument 3: a view (of argument 1 at byte 100, 1000 elements) "
                           "must lie inside an earlier buffer of its type that is no view, at a "
                           "multiple of 512 bytes");
    fixture_close(&x);
}

// A driver without events: timed launches are timed with the wall clock around launch + sync,
// and labelled so. vadd_slow sleeps 2 ms per launch on the host, which the wall clock sees and
// the fake's event clock (1000 ns a launch) would not.
static void test_time_wall(void) {
    fixture x;
    fixture_open(&x);
    rt_gpu_driver_ops no_events = fake_ops;
    no_events.event_create = NULL;
    no_events.event_record = NULL;
    no_events.event_synchronize = NULL;
    no_events.event_elapsed_ms = NULL;
    no_events.event_destroy = NULL;
    x.drv.ops = &no_events;
    rt_gpu_binary slow = binary("vadd_slow");
    x.bin = &slow;
    rt_gpu_timing t;
    RT_EXPECT_EQ(vadd_time(&x, 1, 3, &t), RT_OK);
    RT_EXPECT_STR(t.method, RT_GPU_TIMED_WALL);
    RT_EXPECT(t.min_ns >= 2e6 && t.median_ns >= t.min_ns);
    expect_calls(&x.f, (const int[FAKE_OP_COUNT]){[FAKE_BIND] = 1,
                                                  [FAKE_LOAD] = 1,
                                                  [FAKE_FUNCTION] = 1,
                                                  [FAKE_SMEM] = 1,
                                                  [FAKE_ALLOC] = 3,
                                                  [FAKE_HTOD] = 3,
                                                  [FAKE_LAUNCH] = 1 + 3,
                                                  [FAKE_SYNC] = 1 + 3});
    fixture_close(&x);
}

// A failure injected at the at-th call of op: the status, the exact message, and nothing left
// alive. Then a clean run on the same runtime succeeds.
typedef struct injection {
    fake_op op;
    int at;
    int32_t reps; // 0: rt_gpu_run; else rt_gpu_time with 3 warm-up launches
    const char *msg;
} injection;

static const injection injections[] = {
    {FAKE_BIND, 1, 0, "fakeBind failed: FAKE_ERROR_INJECTED (7): injected by the test"},
    {FAKE_LOAD, 1, 0, "fakeModuleLoad failed: FAKE_ERROR_INJECTED (7): injected by the test"},
    {FAKE_FUNCTION, 1, 0,
     "fakeModuleGetFunction failed: FAKE_ERROR_INJECTED (7): injected by the test"},
    {FAKE_SMEM, 1, 0, "fakeFuncSetAttribute failed: FAKE_ERROR_INJECTED (7): injected by the test"},
    {FAKE_ALLOC, 1, 0,
     "fakeMalloc/fakeMemcpyHtoD failed: FAKE_ERROR_INJECTED (7): injected by the test"},
    {FAKE_ALLOC, 3, 2,
     "fakeMalloc/fakeMemcpyHtoD failed: FAKE_ERROR_INJECTED (7): injected by the test"},
    {FAKE_HTOD, 2, 0,
     "fakeMalloc/fakeMemcpyHtoD failed: FAKE_ERROR_INJECTED (7): injected by the test"},
    {FAKE_LAUNCH, 1, 0, "fakeLaunch failed: FAKE_ERROR_INJECTED (7): injected by the test"},
    {FAKE_LAUNCH, 2, 2, "fakeLaunch failed: FAKE_ERROR_INJECTED (7): injected by the test"},
    {FAKE_LAUNCH, 5, 2,
     "timed launch (fakeEventRecord/fakeLaunch) failed: FAKE_ERROR_INJECTED (7): injected by "
     "the test"},
    {FAKE_SYNC, 1, 0, "fakeSynchronize failed: FAKE_ERROR_INJECTED (7): injected by the test"},
    {FAKE_EVENT_CREATE, 1, 2,
     "timed launch (fakeEventRecord/fakeLaunch) failed: FAKE_ERROR_INJECTED (7): injected by "
     "the test"},
    {FAKE_EVENT_CREATE, 2, 2,
     "timed launch (fakeEventRecord/fakeLaunch) failed: FAKE_ERROR_INJECTED (7): injected by "
     "the test"},
    {FAKE_EVENT_RECORD, 3, 2,
     "timed launch (fakeEventRecord/fakeLaunch) failed: FAKE_ERROR_INJECTED (7): injected by "
     "the test"},
    {FAKE_EVENT_SYNC, 2, 2,
     "timed launch (fakeEventRecord/fakeLaunch) failed: FAKE_ERROR_INJECTED (7): injected by "
     "the test"},
    {FAKE_EVENT_ELAPSED, 1, 2,
     "timed launch (fakeEventRecord/fakeLaunch) failed: FAKE_ERROR_INJECTED (7): injected by "
     "the test"},
    {FAKE_DTOH, 1, 0, "fakeMemcpyDtoH failed: FAKE_ERROR_INJECTED (7): injected by the test"},
};

static void test_injected_failures(void) {
    for (size_t k = 0; k < sizeof injections / sizeof injections[0]; k++) {
        const injection *inj = &injections[k];
        int failures = rt_test_failures;
        fixture x;
        fixture_open(&x);
        x.f.fail_op = inj->op;
        x.f.fail_at = inj->at;
        rt_gpu_timing t;
        rt_status st = inj->reps == 0 ? vadd_run(&x) : vadd_time(&x, 3, inj->reps, &t);
        RT_EXPECT_EQ(st, RT_ERR_BACKEND);
        RT_EXPECT_STR(x.e.msg, inj->msg);
        RT_EXPECT_EQ(x.f.calls[inj->op], inj->at); // stopped at the failure
        RT_EXPECT_EQ(x.f.live_buffers, 0);
        RT_EXPECT_EQ(x.f.live_events, 0);
        // the module stays loaded unless the failure came before it was
        bool loaded = inj->op != FAKE_BIND && inj->op != FAKE_LOAD && inj->op != FAKE_FUNCTION;
        RT_EXPECT_EQ(x.f.live_modules, loaded ? 1 : 0);
        RT_EXPECT(x.c[0] == -1.0); // a failed run copies nothing back

        x.f.fail_at = 0;
        RT_EXPECT_EQ(vadd_run(&x), RT_OK);
        RT_EXPECT(vadd_correct(&x));
        RT_EXPECT_EQ(x.f.live_modules, 1);
        fixture_close(&x);
        if (rt_test_failures != failures)
            fprintf(stderr, "  (in injection %zu)\n", k);
    }
}

// Refusals of the common path: a local argument, a binary without an image, a symbol the
// module lacks (a driver result without text).
static void test_refusals(void) {
    fixture x;
    fixture_open(&x);
    rt_gpu_arg b = x.args[2];
    x.args[2] = (rt_gpu_arg){.kind = RT_GPU_ARG_LOCAL, .local_bytes = 256};
    RT_EXPECT_EQ(vadd_run(&x), RT_ERR_BACKEND);
    RT_EXPECT_STR(x.e.msg, "argument 2: local buffers are for opencl (expected dyn_smem_bytes on "
                           "cuda)");
    RT_EXPECT_EQ(x.f.calls[FAKE_ALLOC], 1);
    RT_EXPECT_EQ(x.f.calls[FAKE_LAUNCH], 0);
    RT_EXPECT_EQ(x.f.live_buffers, 0);
    x.args[2] = b;

    rt_gpu_binary empty = binary("vadd");
    empty.image = NULL;
    x.bin = &empty;
    RT_EXPECT_EQ(vadd_run(&x), RT_ERR_BACKEND);
    RT_EXPECT_STR(x.e.msg, "kernel vadd has no CUBIN");

    rt_gpu_binary missing = binary("nosuch");
    x.bin = &missing;
    RT_EXPECT_EQ(vadd_run(&x), RT_ERR_BACKEND);
    RT_EXPECT_STR(x.e.msg, "fakeModuleGetFunction failed: FAKE_ERROR_NOT_FOUND (500)");
    RT_EXPECT_EQ(x.f.live_modules, 1); // the first run's module; nosuch's was unloaded
    fixture_close(&x);
}

int main(void) {
    test_run();
    test_scalars();
    test_sgemm(67, 61, 59);
    test_sgemm(130, 33, 17);
    test_sgemm_nan();
    test_time();
    test_steps();
    test_step_ints();
    test_step_maps();
    test_time_wall();
    test_injected_failures();
    test_refusals();
    return rt_test_finish("test-gpu-launch");
}
