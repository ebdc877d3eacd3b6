// test-gpu-launch: the launch path that hal-gpu.c runs for the cuda and hip classes (rt_gpu_run
// and rt_gpu_time over rt_gpu_driver_ops), on a machine without a GPU. A fake driver keeps
// device buffers in host memory, runs "kernels" that are C functions over the launch parameters
// (a vector add, one kernel per scalar type, the tiled SGEMM of gpu-sgemm.h thread by thread),
// and times with events that read a clock each launch advances by a set time. Checked: buffers
// in and out (copy_out only), scalars by type, grid/block/shared memory, the module cache,
// warm-up and repetition counts, the timing statistics, and for a failure injected at each
// driver call the exact message and that every buffer, event and module is released.
#include "hal-gpu.h"
#include "test.h"
#include "gpu-sgemm.h"

#include <stdint.h>

// ---------------------------------------------------------------------------------------------
// The fake driver
// ---------------------------------------------------------------------------------------------

typedef enum fake_op {
    FAKE_BIND,
    FAKE_LOAD,
    FAKE_FUNCTION,
    FAKE_SMEM,
    FAKE_ALLOC,
    FAKE_HTOD,
    FAKE_DTOH,
    FAKE_LAUNCH,
    FAKE_SYNC,
    FAKE_EVENT_CREATE,
    FAKE_EVENT_RECORD,
    FAKE_EVENT_SYNC,
    FAKE_EVENT_ELAPSED,
    FAKE_OP_COUNT
} fake_op;

enum { FAKE_INJECTED = 7, FAKE_NOT_FOUND = 500 };

typedef void fake_kernel_fn(void **params, const unsigned grid[3], const unsigned block[3]);

typedef struct fake_kernel {
    const char *name;
    fake_kernel_fn *run;
} fake_kernel;

typedef struct fake_event {
    double t_ns;
} fake_event;

typedef struct fake {
    int calls[FAKE_OP_COUNT];
    fake_op fail_op; // the fail_at-th call (from 1) of fail_op returns FAKE_INJECTED
    int fail_at;     // 0: none fails
    int live_buffers, live_events, live_modules;
    double clock_ns;         // device time, advanced by each launch
    const double *launch_ns; // how long the k-th launch takes (cycled); NULL: 1000 ns each
    int n_launch_ns;
    unsigned grid[3], block[3], smem_bytes; // of the last launch
    int64_t smem_allowed;                   // the last set_dyn_smem request
} fake;

static int fake_call(void *ctx, fake_op op) {
    fake *f = ctx;
    f->calls[op]++;
    return f->fail_at > 0 && f->fail_op == op && f->calls[op] == f->fail_at ? FAKE_INJECTED : 0;
}

static int fake_bind(void *ctx) {
    return fake_call(ctx, FAKE_BIND);
}

// A module is the kernel table; the image must be the bytes "fake-module".
static const fake_kernel *fake_kernels(void);

static int fake_module_load(void *ctx, const void *image, void **out) {
    fake *f = ctx;
    int r = fake_call(ctx, FAKE_LOAD);
    if (r == 0 && memcmp(image, "fake-module", 11) != 0)
        r = FAKE_NOT_FOUND;
    if (r == 0) {
        *out = malloc(1); // a live allocation, so that LeakSanitizer sees a module not unloaded
        f->live_modules++;
    }
    return r;
}

static int fake_module_function(void *ctx, void *module, const char *symbol, void **out) {
    (void)module;
    int r = fake_call(ctx, FAKE_FUNCTION);
    if (r != 0)
        return r;
    for (const fake_kernel *k = fake_kernels(); k->name; k++) {
        if (strcmp(k->name, symbol) == 0) {
            *out = (void *)k;
            return 0;
        }
    }
    return FAKE_NOT_FOUND;
}

static void fake_module_unload(void *ctx, void *module) {
    fake *f = ctx;
    free(module);
    f->live_modules--;
}

static int fake_set_dyn_smem(void *ctx, void *fn, int64_t bytes) {
    (void)fn;
    fake *f = ctx;
    f->smem_allowed = bytes;
    return fake_call(ctx, FAKE_SMEM);
}

static int fake_alloc(void *ctx, size_t bytes, rt_gpu_devptr *out) {
    fake *f = ctx;
    int r = fake_call(ctx, FAKE_ALLOC);
    if (r != 0)
        return r;
    void *p = malloc(bytes);
    memset(p, 0xa5, bytes); // device memory is not zeroed: an upload that is skipped shows
    *out = (rt_gpu_devptr)(uintptr_t)p;
    f->live_buffers++;
    return 0;
}

static void fake_free(void *ctx, rt_gpu_devptr p) {
    fake *f = ctx;
    free((void *)(uintptr_t)p);
    f->live_buffers--;
}

static int fake_htod(void *ctx, rt_gpu_devptr dst, const void *src, size_t bytes) {
    int r = fake_call(ctx, FAKE_HTOD);
    if (r == 0)
        memcpy((void *)(uintptr_t)dst, src, bytes);
    return r;
}

static int fake_dtoh(void *ctx, void *dst, rt_gpu_devptr src, size_t bytes) {
    int r = fake_call(ctx, FAKE_DTOH);
    if (r == 0)
        memcpy(dst, (const void *)(uintptr_t)src, bytes);
    return r;
}

static int fake_launch(void *ctx, void *fn, const unsigned grid[3], const unsigned block[3],
                       unsigned dyn_smem_bytes, void **params) {
    fake *f = ctx;
    int k = f->calls[FAKE_LAUNCH];
    int r = fake_call(ctx, FAKE_LAUNCH);
    if (r != 0)
        return r;
    memcpy(f->grid, grid, sizeof f->grid);
    memcpy(f->block, block, sizeof f->block);
    f->smem_bytes = dyn_smem_bytes;
    f->clock_ns += f->launch_ns ? f->launch_ns[k % f->n_launch_ns] : 1000.0;
    ((const fake_kernel *)fn)->run(params, grid, block);
    return 0;
}

static int fake_sync(void *ctx) {
    return fake_call(ctx, FAKE_SYNC);
}

static int fake_event_create(void *ctx, void **out) {
    fake *f = ctx;
    int r = fake_call(ctx, FAKE_EVENT_CREATE);
    if (r == 0) {
        *out = calloc(1, sizeof(fake_event));
        f->live_events++;
    }
    return r;
}

static int fake_event_record(void *ctx, void *ev) {
    fake *f = ctx;
    int r = fake_call(ctx, FAKE_EVENT_RECORD);
    if (r == 0)
        ((fake_event *)ev)->t_ns = f->clock_ns;
    return r;
}

static int fake_event_synchronize(void *ctx, void *ev) {
    (void)ev;
    return fake_call(ctx, FAKE_EVENT_SYNC);
}

static int fake_event_elapsed_ms(void *ctx, void *start, void *end, float *out_ms) {
    int r = fake_call(ctx, FAKE_EVENT_ELAPSED);
    if (r == 0)
        *out_ms = (float)((((fake_event *)end)->t_ns - ((fake_event *)start)->t_ns) * 1e-6);
    return r;
}

static void fake_event_destroy(void *ctx, void *ev) {
    fake *f = ctx;
    free(ev);
    f->live_events--;
}

static const char *fake_error_name(void *ctx, int result) {
    (void)ctx;
    return result == FAKE_INJECTED ? "FAKE_ERROR_INJECTED" : "FAKE_ERROR_NOT_FOUND";
}

// Like CUDA's cuGetErrorString, with a result it has no text for (as HIP has none at all).
static const char *fake_error_string(void *ctx, int result) {
    (void)ctx;
    return result == FAKE_INJECTED ? "injected by the test" : NULL;
}

static const rt_gpu_driver_ops fake_ops = {
    .class_name = "cuda",
    .image_name = "CUBIN",
    .bind_call = "fakeBind",
    .load_call = "fakeModuleLoad",
    .function_call = "fakeModuleGetFunction",
    .smem_call = "fakeFuncSetAttribute",
    .upload_calls = "fakeMalloc/fakeMemcpyHtoD",
    .launch_call = "fakeLaunch",
    .sync_call = "fakeSynchronize",
    .timed_calls = "timed launch (fakeEventRecord/fakeLaunch)",
    .download_call = "fakeMemcpyDtoH",
    .bind = fake_bind,
    .module_load = fake_module_load,
    .module_function = fake_module_function,
    .module_unload = fake_module_unload,
    .set_dyn_smem = fake_set_dyn_smem,
    .alloc = fake_alloc,
    .free = fake_free,
    .htod = fake_htod,
    .dtoh = fake_dtoh,
    .launch = fake_launch,
    .sync = fake_sync,
    .event_create = fake_event_create,
    .event_record = fake_event_record,
    .event_synchronize = fake_event_synchronize,
    .event_elapsed_ms = fake_event_elapsed_ms,
    .event_destroy = fake_event_destroy,
    .error_name = fake_error_name,
    .error_string = fake_error_string,
};

// Checks the number of calls of every op (want: in fake_op order).
static void expect_calls(const fake *f, const int want[FAKE_OP_COUNT]) {
    static const char *const names[FAKE_OP_COUNT] = {
        "bind",   "load", "function",     "smem",         "alloc",      "htod",         "dtoh",
        "launch", "sync", "event_create", "event_record", "event_sync", "event_elapsed"};
    for (int op = 0; op < FAKE_OP_COUNT; op++) {
        RT_EXPECT_EQ(f->calls[op], want[op]);
        if (f->calls[op] != want[op])
            fprintf(stderr, "  (calls of %s)\n", names[op]);
    }
}

// ---------------------------------------------------------------------------------------------
// Kernels: C functions that walk the grid as the GPU would
// ---------------------------------------------------------------------------------------------

// The device buffer behind parameter i: the parameter points at the buffer's device address.
static void *dev_buffer(void **params, int i) {
    rt_gpu_devptr p;
    memcpy(&p, params[i], sizeof p);
    return (void *)(uintptr_t)p;
}

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

static const fake_kernel *fake_kernels(void) {
    static const fake_kernel table[] = {
        {"vadd", k_vadd}, {"scalars", k_scalars}, {"sgemm", k_sgemm}, {NULL, NULL}};
    return table;
}

// ---------------------------------------------------------------------------------------------
// Fixtures
// ---------------------------------------------------------------------------------------------

static rt_gpu_binary binary(const char *kernel) {
    return (rt_gpu_binary){.devclass = RT_DEVCLASS_CUDA,
                           .kernel_name = kernel,
                           .symbol = kernel,
                           .image = (const uint8_t *)"fake-module",
                           .image_bytes = 12};
}

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
    x->drv = (rt_gpu_driver){.ops = &fake_ops, .ctx = &x->f};
    x->rt = (rt_gpu_runtime){.devclass = RT_DEVCLASS_CUDA,
                             .dev = &x->dev,
                             .arena = x->arena,
                             .device_name = "fake",
                             .driver = &x->drv};
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
    RT_EXPECT(sgemm_run(&x.rt, &bin, M, N, K) < 1e-5);
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

    // No warm-up, an even count: launches 9..12 take 100 200 300 700 (the table cycles).
    RT_EXPECT_EQ(vadd_time(&x, 0, 4, &t), RT_OK);
    RT_EXPECT_EQ(f->calls[FAKE_LAUNCH], 12);
    RT_EXPECT_NEAR(t.min_ns, 100.0, 1e-3);
    RT_EXPECT_NEAR(t.median_ns, 250.0, 1e-3);
    RT_EXPECT_NEAR(t.mean_ns, 325.0, 1e-3);
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
    test_time();
    test_injected_failures();
    test_refusals();
    return rt_test_finish("test-gpu-launch");
}
