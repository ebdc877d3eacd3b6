// test-gpu-cupti: CUPTI kernel timing of the cuda class (hal-cupti.c behind rt_gpu_time_steps),
// to the library boundary, without a GPU: the fake driver of gpu-fake.h launches a sequence of
// two kernels, and a fake libcupti (fake-cupti.c, a shared library opened through
// $RTGEN_LIBCUPTI) writes one kernel record per launch into the buffers hal-cupti.c hands it and
// returns them through the completion callback. Checked: the samples are the rounds' spans from
// the kernel records (not the events, which also see the launch gap), records across several
// buffers and among other kinds, the forced flush; and for each failure — no library, a library
// without CUPTI's entry points, an entry point failing, dropped, lost or foreign records, a
// failed launch while recording — that timing falls back to events with the reason in the
// method, drops the timer for the driver, and leaves nothing alive. The toolkit's real
// libcupti (no driver here) is loaded in a child process: it must fall back too.
#include "hal-gpu.h"
#include "test.h"
#include "gpu-fake.h"
#include "gpu-sgemm.h"

#include <dlfcn.h>
#include <stdint.h>
#include <sys/wait.h>
#include <unistd.h>

#define EVENTS       "fake events (fakeEventElapsedTime)"
#define CUPTI_METHOD "CUPTI activity records (CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL)"

// The fake library's controls (fake-cupti.c).
static struct {
    void (*reset)(void);
    void (*fail)(const char *fn, int at, int result);
    void (*options)(int per_buffer, int dropped, int lose, int hold_unforced);
    int (*calls)(const char *fn);
    void (*kernel)(const char *name, uint64_t start_ns, uint64_t end_ns);
} cupti;

// Device clock zero of the records (CUPTI's timestamps are never 0), the gap between a launch
// and its kernel's start that events see and the records do not, and the kernel whose record
// names another kernel (0: none).
enum { CLOCK0_NS = 1000000000, GAP_NS = 100 };
static int rename_launch, launches;

static void on_ran(const char *name, double start_ns, double end_ns) {
    launches++;
    if (cupti.kernel)
        cupti.kernel(launches == rename_launch ? "k_other" : name,
                     CLOCK0_NS + (uint64_t)start_ns + GAP_NS, CLOCK0_NS + (uint64_t)end_ns);
}

static void k_nop(void **params, const unsigned grid[3], const unsigned block[3]) {
    (void)params, (void)grid, (void)block;
}

// k_a takes 1000 ns on the device, k_b 3000: a round spans 4000 ns by events, 3900 by records.
static const fake_kernel kernels[] = {
    {"k_a", k_nop, 1000, 0}, {"k_b", k_nop, 3000, 0}, {NULL, NULL, 0, 0}};

typedef struct rig {
    rt_device dev;
    rt_arena *arena;
    fake f;
    rt_gpu_driver drv;
    rt_gpu_runtime rt;
    double x[16];
    rt_gpu_arg arg;
    rt_gpu_binary ka, kb;
    rt_gpu_step steps[2];
    rt_err e;
} rig;

static void rig_open(rig *r) {
    memset(r, 0, sizeof *r);
    make_gpu(&r->dev, RT_DEVCLASS_CUDA, "sm_90", 32, 233472);
    r->arena = rt_arena_new(1 << 14);
    r->f.kernels = kernels;
    r->f.ran = on_ran;
    fake_runtime(&r->rt, &r->drv, &r->f, &r->dev, r->arena);
    r->drv.timer = rt_cupti_timer();
    r->arg =
        (rt_gpu_arg){.kind = RT_GPU_ARG_BUFFER, .dtype = RT_DTYPE_F32, .n_elems = 16, .host = r->x};
    r->ka = binary("k_a");
    r->kb = binary("k_b");
    rt_gpu_launch cfg = {.grid = {1, 1, 1}, .block = {32, 1, 1}};
    r->steps[0] = (rt_gpu_step){.bin = &r->ka, .cfg = cfg};
    r->steps[1] = (rt_gpu_step){.bin = &r->kb, .cfg = cfg};
    launches = 0;
    rename_launch = 0;
    if (cupti.reset)
        cupti.reset();
}

static rt_status rig_time(rig *r, int32_t warmup, int32_t reps, rt_gpu_timing *t) {
    rt_err_clear(&r->e);
    return rt_gpu_time_steps(&r->rt, r->steps, 2, &r->arg, 1, warmup, reps, t, &r->e);
}

static void rig_close(rig *r) {
    rt_gpu_driver_unload_all(&r->drv);
    RT_EXPECT_EQ(r->f.live_modules, 0);
    RT_EXPECT_EQ(r->f.live_buffers, 0);
    RT_EXPECT_EQ(r->f.live_events, 0);
    rt_arena_free(r->arena);
}

// A timing that fell back to events: their samples (4000 ns a round), the method with the note
// "(CUPTI not used: WHY)", and the timer dropped: the next timing goes to events at once.
static void expect_fallback(rig *r, const rt_gpu_timing *t, const char *why) {
    char want[768];
    snprintf(want, sizeof want, "%s (CUPTI not used: %s)", EVENTS, why);
    RT_EXPECT_STR(t->method, want);
    RT_EXPECT_NEAR(t->min_ns, 4000.0, 1e-3);
    RT_EXPECT_NEAR(t->median_ns, 4000.0, 1e-3);
    RT_EXPECT(r->drv.timer == NULL);
    int enables = cupti.calls ? cupti.calls("cuptiActivityEnable") : 0;
    rt_gpu_timing t2;
    RT_EXPECT_EQ(rig_time(r, 0, 2, &t2), RT_OK);
    RT_EXPECT(t2.method == t->method); // the same note, not a second try
    if (cupti.calls)
        RT_EXPECT_EQ(cupti.calls("cuptiActivityEnable"), enables);
}

// Before the fake is loaded: no library, or one that is not CUPTI.
static void test_no_library(void) {
    rig r;
    rt_gpu_timing t;
    setenv("RTGEN_LIBCUPTI", "/nonexistent/libcupti.so", 1);
    rig_open(&r);
    RT_EXPECT_EQ(rig_time(&r, 1, 3, &t), RT_OK);
    expect_fallback(&r, &t,
                    "cannot load CUPTI from RTGEN_LIBCUPTI (/nonexistent/libcupti.so: cannot "
                    "open shared object file: No such file or directory)");
    RT_EXPECT_EQ(r.f.calls[FAKE_EVENT_RECORD], 2 * (3 + 2));
    rig_close(&r);

    setenv("RTGEN_LIBCUPTI", "libm.so.6", 1);
    rig_open(&r);
    RT_EXPECT_EQ(rig_time(&r, 1, 3, &t), RT_OK);
    expect_fallback(&r, &t, "the CUPTI library libm.so.6 lacks cuptiGetResultString");
    rig_close(&r);
}

// The records time the rounds: 3900 ns each (the span from k_a's start to k_b's end), no event
// is created, the warm-up is waited for before recording starts and is not recorded, each round
// is waited for, the kernel records come in buffers of 3 among memcpy records; recording is on
// only around the rounds.
static void test_records(void) {
    rig r;
    rt_gpu_timing t;
    rig_open(&r);
    cupti.options(3, 0, 0, 0);
    RT_EXPECT_EQ(rig_time(&r, 2, 5, &t), RT_OK);
    RT_EXPECT_STR(t.method, CUPTI_METHOD);
    RT_EXPECT_NEAR(t.min_ns, 3900.0, 1e-3);
    RT_EXPECT_NEAR(t.median_ns, 3900.0, 1e-3);
    RT_EXPECT_NEAR(t.mean_ns, 3900.0, 1e-3);
    RT_EXPECT_EQ(t.reps, 5);
    expect_calls(&r.f, (const int[FAKE_OP_COUNT]){[FAKE_BIND] = 1,
                                                  [FAKE_LOAD] = 2,
                                                  [FAKE_FUNCTION] = 2,
                                                  [FAKE_SMEM] = 2,
                                                  [FAKE_ALLOC] = 1,
                                                  [FAKE_HTOD] = 1,
                                                  [FAKE_LAUNCH] = 2 * (2 + 5),
                                                  [FAKE_SYNC] = 1 + 5});
    RT_EXPECT_EQ(cupti.calls("cuptiActivityEnable"), 1);
    RT_EXPECT_EQ(cupti.calls("cuptiActivityDisable"), 1);
    RT_EXPECT_EQ(cupti.calls("cuptiActivityFlushAll"), 1);
    RT_EXPECT(r.drv.timer != NULL);

    // Again on the same runtime, with a buffer that only a forced flush returns.
    cupti.options(0, 0, 0, 1);
    RT_EXPECT_EQ(rig_time(&r, 0, 4, &t), RT_OK);
    RT_EXPECT_STR(t.method, CUPTI_METHOD);
    RT_EXPECT_NEAR(t.median_ns, 3900.0, 1e-3);
    RT_EXPECT_EQ(cupti.calls("cuptiActivityFlushAll"), 3);
    rig_close(&r);

    // A round whose kernels take different times: each sample is its own round's span.
    rig_open(&r);
    static const fake_kernel varied[] = {
        {"k_a", k_nop, 0, 0}, {"k_b", k_nop, 0, 0}, {NULL, NULL, 0, 0}};
    static const double launch_ns[] = {500, 500, 1000, 2000, 3000, 4000, 5000, 6000};
    r.f.kernels = varied;
    r.f.launch_ns = launch_ns;
    r.f.n_launch_ns = 8;
    RT_EXPECT_EQ(rig_time(&r, 1, 3, &t), RT_OK);
    RT_EXPECT_STR(t.method, CUPTI_METHOD);
    RT_EXPECT_NEAR(t.min_ns, 2900.0, 1e-3);    // rounds 1000+2000, 3000+4000, 5000+6000
    RT_EXPECT_NEAR(t.median_ns, 6900.0, 1e-3); // less the gap before each round's first kernel
    RT_EXPECT_NEAR(t.mean_ns, 6900.0, 1e-3);
    rig_close(&r);
}

// A timing that works, so that no record of an earlier failed one is left with the fake (a
// failure makes the next timing flush CUPTI first).
static void drain(void) {
    rig r;
    rt_gpu_timing t;
    rig_open(&r);
    RT_EXPECT_EQ(rig_time(&r, 0, 1, &t), RT_OK);
    RT_EXPECT_STR(t.method, CUPTI_METHOD);
    rig_close(&r);
}

// Each failure of CUPTI falls back to events with its reason; recording, once started, is
// stopped (disables: the calls of cuptiActivityDisable).
static void test_failures(void) {
    static const struct {
        const char *fn;
        int at, result;
        int dropped, lose, rename, disables;
        const char *why;
    } cases[] = {
        {"cuptiActivityEnable", 1, 999, 0, 0, 0, 0,
         "cuptiActivityEnable(CONCURRENT_KERNEL) failed: CUPTI_ERROR_UNKNOWN (999)"},
        // a result cuptiGetResultString has no text for
        {"cuptiActivityEnable", 1, 21, 0, 0, 0, 0,
         "cuptiActivityEnable(CONCURRENT_KERNEL) failed: unknown CUPTI result (21)"},
        {"cuptiActivityFlushAll", 1, 15, 0, 0, 0, 1,
         "cuptiActivityFlushAll failed: CUPTI_ERROR_NOT_INITIALIZED (15)"},
        {"cuptiActivityDisable", 1, 35, 0, 0, 0, 1,
         "cuptiActivityDisable(CONCURRENT_KERNEL) failed: CUPTI_ERROR_INSUFFICIENT_PRIVILEGES "
         "(35)"},
        {"cuptiActivityGetNextRecord", 2, 999, 0, 0, 0, 1,
         "cuptiActivityGetNextRecord failed: CUPTI_ERROR_UNKNOWN (999)"},
        {NULL, 0, 0, 2, 0, 0, 1, "CUPTI dropped 2 records"},
        {NULL, 0, 0, 0, 4, 0, 1, "CUPTI gave 5 kernel records for 6 launches"},
        // the warm-up's two launches, then the second round's k_a: record 2
        {NULL, 0, 0, 0, 0, 2 + 3, 1, "CUPTI's kernel record 2 is of k_other (expected k_a)"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        rig r;
        rt_gpu_timing t;
        drain();
        rig_open(&r);
        if (cases[i].fn)
            cupti.fail(cases[i].fn, cases[i].at, cases[i].result);
        cupti.options(0, cases[i].dropped, cases[i].lose, 0);
        rename_launch = cases[i].rename;
        RT_EXPECT_EQ(rig_time(&r, 1, 3, &t), RT_OK);
        expect_fallback(&r, &t, cases[i].why);
        RT_EXPECT_EQ(cupti.calls("cuptiActivityDisable"), cases[i].disables);
        rig_close(&r);
    }
}

// Records a failed flush left with CUPTI are not the next timing's: a runtime whose flush failed
// falls back, and the next runtime's timing records its own rounds only.
static void test_stale_records(void) {
    rig r;
    rt_gpu_timing t;
    drain();
    rig_open(&r);
    cupti.fail("cuptiActivityFlushAll", 1, 15);
    RT_EXPECT_EQ(rig_time(&r, 1, 3, &t), RT_OK);
    RT_EXPECT(r.drv.timer == NULL);
    rig_close(&r);
    rig_open(&r);
    RT_EXPECT_EQ(rig_time(&r, 1, 3, &t), RT_OK);
    RT_EXPECT_STR(t.method, CUPTI_METHOD);
    RT_EXPECT_NEAR(t.median_ns, 3900.0, 1e-3);
    RT_EXPECT_EQ(cupti.calls("cuptiActivityFlushAll"), 2); // the stale records', the rounds'
    rig_close(&r);
}

// A launch that fails while CUPTI records is the kernels' failure, reported as for events;
// recording is stopped (and its lock released: the next timing records again).
static void test_launch_failure(void) {
    rig r;
    rt_gpu_timing t;
    rig_open(&r);
    r.f.fail_op = FAKE_LAUNCH;
    r.f.fail_at = 2 + 3; // the warm-up's two, then the second round's first
    RT_EXPECT_EQ(rig_time(&r, 1, 3, &t), RT_ERR_BACKEND);
    RT_EXPECT_STR(r.e.msg, "timed launch (fakeEventRecord/fakeLaunch) failed: FAKE_ERROR_INJECTED "
                           "(7): injected by the test");
    RT_EXPECT_EQ(cupti.calls("cuptiActivityDisable"), 1);
    RT_EXPECT(r.drv.timer != NULL);
    r.f.fail_at = 0;
    RT_EXPECT_EQ(rig_time(&r, 1, 3, &t), RT_OK);
    RT_EXPECT_STR(t.method, CUPTI_METHOD);
    RT_EXPECT_NEAR(t.median_ns, 3900.0, 1e-3);
    rig_close(&r);
}

// The toolkit's libcupti without a GPU driver: it loads, and fails to record (the probe saw
// cuptiActivityEnable return CUPTI_ERROR_UNKNOWN); timing falls back to events. In a child, so
// that the real library's state is not this process's.
static void test_real_cupti(void) {
    pid_t pid = fork();
    if (pid == 0) {
        unsetenv("RTGEN_LIBCUPTI");
        rig r;
        rt_gpu_timing t;
        rig_open(&r);
        int bad =
            rig_time(&r, 1, 3, &t) != RT_OK || !t.method ||
            strncmp(t.method,
                    EVENTS " (CUPTI not used: ", sizeof EVENTS " (CUPTI not used: " - 1) != 0 ||
            fabs(t.median_ns - 4000.0) > 1e-3;
        printf("real CUPTI: %s\n", t.method ? t.method : r.e.msg);
        fflush(stdout);
        _exit(bad);
    }
    int status = 0;
    RT_EXPECT(pid > 0 && waitpid(pid, &status, 0) == pid);
    RT_EXPECT(WIFEXITED(status) && WEXITSTATUS(status) == 0);
}

int main(void) {
    if (!rt_cupti_timer()) {
        rt_test_skip("rtgen was built without CUPTI");
        return rt_test_finish("test-gpu-cupti");
    }
    test_real_cupti();
    test_no_library();
#if defined(FAKE_CUPTI_PATH)
    setenv("RTGEN_LIBCUPTI", FAKE_CUPTI_PATH, 1);
    void *lib = dlopen(FAKE_CUPTI_PATH, RTLD_NOW | RTLD_LOCAL);
    RT_EXPECT(lib != NULL);
    if (lib) {
        void *p[5] = {dlsym(lib, "fake_cupti_reset"), dlsym(lib, "fake_cupti_fail"),
                      dlsym(lib, "fake_cupti_options"), dlsym(lib, "fake_cupti_calls"),
                      dlsym(lib, "fake_cupti_kernel")};
        memcpy(&cupti.reset, &p[0], sizeof p[0]);
        memcpy(&cupti.fail, &p[1], sizeof p[1]);
        memcpy(&cupti.options, &p[2], sizeof p[2]);
        memcpy(&cupti.calls, &p[3], sizeof p[3]);
        memcpy(&cupti.kernel, &p[4], sizeof p[4]);
        test_records();
        test_failures();
        test_stale_records();
        test_launch_failure();
    }
#else
    rt_test_skip("the fake libcupti was not built");
#endif
    return rt_test_finish("test-gpu-cupti");
}
