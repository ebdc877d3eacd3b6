// gpu-fake.h: a fake launch-style GPU driver (rt_gpu_driver_ops) for tests on a machine without
// a GPU, shared by test-gpu-launch (hal-gpu.c's launch path) and test-gpu-profile (codegen's
// check and ranking of candidates). It keeps device buffers in host memory, runs "kernels" that
// are C functions over the launch parameters (each test gives its own table), times with events
// that read a clock each launch advances by a scripted time, and can sleep on the host per
// launch (what a wall clock sees). A failure can be injected at the n-th call of any op; live
// buffers, events and modules are counted.
#ifndef RT_TEST_GPU_FAKE_H
#define RT_TEST_GPU_FAKE_H

#include "hal-gpu-impl.h"
#include "test.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

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
    double ns;      // device time of each launch (0: the fake's launch_ns table)
    double host_ms; // host time each launch takes (a sleep): what a wall clock sees
} fake_kernel;

typedef struct fake_event {
    double t_ns;
} fake_event;

typedef struct fake {
    const fake_kernel *kernels; // the module's kernels, up to a NULL name
    int calls[FAKE_OP_COUNT];
    fake_op fail_op; // the fail_at-th call (from 1) of fail_op returns FAKE_INJECTED
    int fail_at;     // 0: none fails
    int live_buffers, live_events, live_modules;
    double clock_ns;         // device time, advanced by each launch
    const double *launch_ns; // how long the k-th launch takes (cycled); NULL: 1000 ns each
    int n_launch_ns;
    unsigned grid[3], block[3], smem_bytes; // of the last launch
    int64_t smem_allowed;                   // the last set_dyn_smem request
    // Called per launch with the kernel's name and the device clock around it (a profiler's
    // view of the kernel, e.g. a fake CUPTI); NULL: none.
    void (*ran)(const char *name, double start_ns, double end_ns);
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
    fake *f = ctx;
    int r = fake_call(ctx, FAKE_FUNCTION);
    if (r != 0)
        return r;
    for (const fake_kernel *k = f->kernels; k && k->name; k++) {
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
    const fake_kernel *kn = fn;
    double start_ns = f->clock_ns;
    if (kn->ns > 0.0)
        f->clock_ns += kn->ns;
    else
        f->clock_ns += f->launch_ns ? f->launch_ns[k % f->n_launch_ns] : 1000.0;
    if (kn->host_ms > 0.0) {
        struct timespec ts = {0, (long)(kn->host_ms * 1e6)};
        nanosleep(&ts, NULL);
    }
    kn->run(params, grid, block);
    if (f->ran)
        f->ran(kn->name, start_ns, f->clock_ns);
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
    .event_timer = "fake events (fakeEventElapsedTime)",
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
static inline void expect_calls(const fake *f, const int want[FAKE_OP_COUNT]) {
    static const char *const names[FAKE_OP_COUNT] = {
        "bind",   "load", "function",     "smem",         "alloc",      "htod",         "dtoh",
        "launch", "sync", "event_create", "event_record", "event_sync", "event_elapsed"};
    for (int op = 0; op < FAKE_OP_COUNT; op++) {
        RT_EXPECT_EQ(f->calls[op], want[op]);
        if (f->calls[op] != want[op])
            fprintf(stderr, "  (calls of %s)\n", names[op]);
    }
}

// The device buffer behind parameter i: the parameter points at the buffer's device address.
static inline void *dev_buffer(void **params, int i) {
    rt_gpu_devptr p;
    memcpy(&p, params[i], sizeof p);
    return (void *)(uintptr_t)p;
}

// A binary the fake driver loads: its kernel is looked up by name in the fake's table.
static inline rt_gpu_binary binary(const char *kernel) {
    return (rt_gpu_binary){.devclass = RT_DEVCLASS_CUDA,
                           .kernel_name = kernel,
                           .symbol = kernel,
                           .image = (const uint8_t *)"fake-module",
                           .image_bytes = 12};
}

// A CUDA runtime on fake driver f (device dev, arena a): what rt_gpu_runtime_open would return.
static inline void fake_runtime(rt_gpu_runtime *rt, rt_gpu_driver *drv, fake *f,
                                const rt_device *dev, rt_arena *a) {
    *drv = (rt_gpu_driver){.ops = &fake_ops, .ctx = f};
    *rt = (rt_gpu_runtime){
        .devclass = RT_DEVCLASS_CUDA, .dev = dev, .arena = a, .device_name = "fake", .driver = drv};
}

#endif
