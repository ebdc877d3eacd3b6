// calib-cpu.c: rtcalib's measurements of the host CPU: which probes run (the plan), their
// buffers, and the runs. The microbenchmarks are LLVM IR (calib-cpu-ir.c: independent FMA chains
// per data type, AVX512-BF16 dot products, AMX tile products, STREAM triad over working sets and
// over chunks of DRAM, load and store loops), JIT-compiled through hal-cpu.c's LLJIT, and run on
// a pool of pinned threads started together (calib-cpu-pool.c). Each probe is repeated; its
// statistics (min, median, spread) decide whether rt_calib_apply (calib-cpu-apply.c) writes the
// value into the device, which rtcalib then serializes with hal-ini-write.c.
#define _GNU_SOURCE // sched_setaffinity, cpu_set_t
#include "calib-cpu-impl.h"

#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

// ---------------------------------------------------------------------------------------------
// Statistics
// ---------------------------------------------------------------------------------------------

static int rt_calib_cmp(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

rt_status rt_calib_stats_of(const double *samples, int32_t n, rt_calib_stats *out, rt_err *err) {
    if (n < 1)
        return rt_fail(err, RT_ERR_USAGE, RT_NOLOC,
                       "no samples to summarize (expected at least 1, got %d)", (int)n);
    double *s = malloc((size_t)n * sizeof *s);
    if (!s)
        return rt_fail(err, RT_ERR_NOMEM, RT_NOLOC, "out of memory");
    for (int32_t i = 0; i < n; i++) {
        if (!isfinite(samples[i]) || samples[i] < 0.0) {
            free(s);
            return rt_fail(err, RT_ERR_USAGE, RT_NOLOC,
                           "bad sample %d (expected a finite value >= 0, got %g)", (int)i + 1,
                           samples[i]);
        }
        s[i] = samples[i];
    }
    qsort(s, (size_t)n, sizeof *s, rt_calib_cmp);
    out->n = n;
    out->min = s[0];
    out->max = s[n - 1];
    out->median = n % 2 ? s[n / 2] : 0.5 * (s[n / 2 - 1] + s[n / 2]);
    free(s);
    if (out->max == out->min)
        out->spread = 0.0;
    else if (out->median > 0.0)
        out->spread = (out->max - out->min) / out->median;
    else
        return rt_fail(err, RT_ERR_USAGE, RT_NOLOC,
                       "samples with a median of 0 have no spread (min %g, max %g)", out->min,
                       out->max);
    return RT_OK;
}

rt_status rt_calib_check_spread(const char *what, const rt_calib_stats *s, double max_spread,
                                rt_err *err) {
    if (s->spread <= max_spread)
        return RT_OK;
    return rt_fail(err, RT_ERR_BACKEND, RT_NOLOC,
                   "%s not written: spread %.1f%% over %d repeats exceeds --max-spread %.1f%% "
                   "(min %.4g, median %.4g, max %.4g)",
                   what, 100.0 * s->spread, (int)s->n, 100.0 * max_spread, s->min, s->median,
                   s->max);
}

// ---------------------------------------------------------------------------------------------
// Probes: what each one runs, and how its samples become values
// ---------------------------------------------------------------------------------------------

typedef enum rt_probe_kind {
    RT_PROBE_FMA_F32,
    RT_PROBE_FMA_F64,
    RT_PROBE_FMA_F16,
    RT_PROBE_DOT_BF16,
    RT_PROBE_AMX_BF16,
    RT_PROBE_TRIAD,    // working set repeated (chunk_bytes 0) or scattered chunks of a buffer
    RT_PROBE_TRIAD_NT, // the same with non-temporal stores
    RT_PROBE_LOAD,
    RT_PROBE_STORE,
    RT_PROBE_FORK,        // fork/join of the probe pool
    RT_PROBE_LAUNCH,      // a JIT'd empty kernel launched through hal-cpu.c's pool
    RT_PROBE_SYNC,        // one phase barrier of hal-cpu.c's pool
    RT_PROBE_CLOCK,       // a dependent chain of integer adds: the clock under load
    RT_PROBE_FMA_LATENCY, // one dependent chain of f32 vector FMAs, in cycles of the clock probe
} rt_probe_kind;

typedef struct rt_probe {
    rt_probe_kind kind;
    int32_t threads;
    int64_t elems;       // TRIAD, LOAD, STORE: floats per array per thread
    int64_t chunk_elems; // TRIAD with chunks: floats per array per chunk; 0 = whole arrays
    rt_calib_value v;    // name, target and unit filled when planned
} rt_probe;

#define RT_CALIB_MAX_PROBES  64
#define RT_CALIB_SYNC_PHASES 16

typedef struct rt_calib {
    const rt_calib_opts *opts;
    rt_kernels k;
    rt_pool pool;
    rt_cpu_pool *rpool;
    int32_t threads;
    double target_s; // wall time of one sample
    // Per-thread arrays of the bandwidth probes.
    int64_t buf_elems;
    size_t buf_bytes;
    float *a[RT_CALIB_MAX_THREADS], *b[RT_CALIB_MAX_THREADS], *c[RT_CALIB_MAX_THREADS];
    // The job being run.
    const rt_probe *probe;
    int64_t count;
    volatile float scalar;
    volatile float sink[RT_CALIB_MAX_THREADS];
    double clock_mhz; // the clock probe's value once measured (0: none)
    // Each thread's last job: wall-clock start and end, and thread CPU time. A sample whose
    // threads ran for less than RT_CALIB_RUN_SHARE of its span was disturbed
    // (rt_calib_measure_host).
    double start_s[RT_CALIB_MAX_THREADS], end_s[RT_CALIB_MAX_THREADS];
    double cpu_s[RT_CALIB_MAX_THREADS];
    int64_t k0; // the next chunk of a chunked triad: samples walk the whole buffer
    // The barrier after the untimed pass of a host-probe triad (rt_calib_job).
    _Atomic int32_t arrived;
    _Atomic uint64_t passed;
    // AMX and bf16 operands.
    unsigned char *amx_cfg, *amx_a, *amx_b, *amx_c;
    int32_t *bf16_ops;
} rt_calib;

static double rt_now_s(void) {
    return rt_cpu_now_ns() * 1e-9;
}

// RT_CALIB_CHAIN dependent integer adds per iteration, iters iterations: one add per cycle on
// every core we know of, so the rate is the clock under load (turbo included), which neither
// /proc/cpuinfo nor a VM's CPUID reports. Host assembly: the probes JIT'd through LLVM would
// fold a chain of constant adds into one. The addend is a register, not an immediate: Intel
// cores from Golden Cove on fold adds of small immediates at rename, several per cycle (a
// chain of `add $1` read 14.5 GHz on a 2.9 GHz Xeon, `add reg` 2.9).
#define RT_CALIB_CHAIN   16
#define RT_CALIB_STR(x)  #x
#define RT_CALIB_REPT(n) ".rept " RT_CALIB_STR(n) "\n\t"
static bool rt_calib_has_add_chain(void) {
#if defined(__x86_64__) || defined(__aarch64__)
    return true;
#else
    return false;
#endif
}

// The loop is in the assembly too: compiled without optimization (the sanitizer builds), a C loop
// kept x on the stack, and its store and reload joined the chain (the clock read 20% low).
#if defined(__x86_64__)
#define RT_CALIB_ADD  "add %2, %0\n\t"
#define RT_CALIB_NEXT "dec %1\n\tjnz 1b"
#elif defined(__aarch64__)
#define RT_CALIB_ADD  "add %0, %0, %2\n\t"
#define RT_CALIB_NEXT "subs %1, %1, #1\n\tb.ne 1b"
#endif
static void rt_calib_add_chain(int64_t iters) {
    uint64_t x = 0, one = 1;
    if (iters <= 0)
        return;
#if defined(RT_CALIB_ADD)
    __asm__ volatile("1:\n\t" RT_CALIB_REPT(RT_CALIB_CHAIN) RT_CALIB_ADD ".endr\n\t" RT_CALIB_NEXT
                     : "+r"(x), "+r"(iters)
                     : "r"(one)
                     : "cc");
#else
    (void)one;
#endif
    __asm__ volatile("" ::"r"(x));
}

static double rt_thread_cpu_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static void rt_calib_job_run(rt_calib *c, int32_t tid, int64_t count);

// Waits until all n threads of the job have arrived.
static void rt_calib_barrier(rt_calib *c, int32_t n) {
    uint64_t gen = atomic_load_explicit(&c->passed, memory_order_acquire);
    if (atomic_fetch_add_explicit(&c->arrived, 1, memory_order_acq_rel) == n - 1) {
        atomic_store_explicit(&c->arrived, 0, memory_order_relaxed);
        atomic_fetch_add_explicit(&c->passed, 1, memory_order_release);
        return;
    }
    while (atomic_load_explicit(&c->passed, memory_order_acquire) == gen)
        rt_cpu_relax();
}

// One thread's part of a sample. The host probe's triad over a cache-sized working set first
// makes one untimed pass, then waits for the other threads: other processes that shared the
// cores since the last sample may have evicted it (on a loaded machine the first pass read
// 50 GB/s where an L3 gives 90), and a thread that other work delayed there would start late.
static void rt_calib_job(void *arg, int32_t tid) {
    rt_calib *c = arg;
    if (c->opts->host_probe && c->probe->kind == RT_PROBE_TRIAD && c->probe->chunk_elems == 0) {
        rt_calib_job_run(c, tid, 1);
        rt_calib_barrier(c, c->probe->threads);
    }
    c->start_s[tid] = rt_now_s();
    double t0 = rt_thread_cpu_s();
    rt_calib_job_run(c, tid, c->count);
    c->cpu_s[tid] = rt_thread_cpu_s() - t0;
    c->end_s[tid] = rt_now_s();
}

static void rt_calib_job_run(rt_calib *c, int32_t tid, int64_t count) {
    const rt_probe *p = c->probe;
    const rt_kernels *k = &c->k;
    switch (p->kind) {
    case RT_PROBE_FMA_F32:
        c->sink[tid] = k->fma_f32(count, 0.999f, 0.001f);
        break;
    case RT_PROBE_FMA_F64:
        c->sink[tid] = (float)k->fma_f64(count, 0.999, 0.001);
        break;
    case RT_PROBE_FMA_F16:
        c->sink[tid] = k->fma_f16(count, 0.99f, 0.01f);
        break;
    case RT_PROBE_DOT_BF16:
        c->sink[tid] = k->dot_bf16(count, c->bf16_ops);
        break;
    case RT_PROBE_AMX_BF16:
        k->amx_bf16(count, c->amx_cfg, c->amx_a, c->amx_b, (float *)(c->amx_c + tid * 4096));
        break;
    case RT_PROBE_TRIAD:
    case RT_PROBE_TRIAD_NT: {
        rt_triad_fn triad = p->kind == RT_PROBE_TRIAD_NT ? k->triad_nt : k->triad;
        if (p->chunk_elems > 0) {
            int64_t slots = 1;
            while (slots * 2 * p->chunk_elems <= c->buf_elems)
                slots *= 2;
            triad(c->a[tid], c->b[tid], c->c[tid], p->chunk_elems, slots - 1, c->k0, c->k0 + count,
                  &c->scalar);
        } else {
            triad(c->a[tid], c->b[tid], c->c[tid], p->elems, 0, 0, count, &c->scalar);
        }
        break;
    }
    case RT_PROBE_LOAD:
        c->sink[tid] = k->load(c->a[tid], p->elems, count);
        break;
    case RT_PROBE_CLOCK:
        rt_calib_add_chain(count);
        break;
    case RT_PROBE_FMA_LATENCY:
        c->sink[tid] = k->fma_chain_f32(count, 0.999f, 0.001f);
        break;
    case RT_PROBE_STORE:
        k->store(c->a[tid], p->elems, count, &c->scalar);
        break;
    case RT_PROBE_FORK:
    case RT_PROBE_LAUNCH:
    case RT_PROBE_SYNC:
        break;
    }
}

static void rt_calib_noop(void *arg, int32_t tid) {
    (void)arg;
    (void)tid;
}

static void rt_calib_noop_phase(void **args, int64_t lo, int64_t hi, float *scratch) {
    (void)args;
    (void)lo;
    (void)hi;
    (void)scratch;
}

// Runs the probe once with c->count; returns the wall time in seconds.
static double rt_calib_once(rt_calib *c, const rt_probe *p, int64_t count) {
    c->probe = p;
    c->count = count;
    double t0 = rt_now_s();
    switch (p->kind) {
    case RT_PROBE_FORK:
        for (int64_t i = 0; i < count; i++)
            rt_pool_run(&c->pool, p->threads, rt_calib_noop, c);
        break;
    case RT_PROBE_LAUNCH:
    case RT_PROBE_SYNC: {
        bool sync = p->kind == RT_PROBE_SYNC;
        rt_cpu_phase_fn fns[RT_CALIB_SYNC_PHASES];
        int64_t items[RT_CALIB_SYNC_PHASES];
        for (int i = 0; i < RT_CALIB_SYNC_PHASES; i++) {
            fns[i] = sync ? rt_calib_noop_phase : c->k.empty;
            items[i] = c->threads;
        }
        rt_cpu_launch l = {.n_phases = sync ? RT_CALIB_SYNC_PHASES : 1,
                           .fns = fns,
                           .n_items = items,
                           .args = NULL,
                           .scratch_bytes = 0};
        for (int64_t i = 0; i < count; i++)
            rt_cpu_pool_run(c->rpool, &l);
        break;
    }
    default:
        rt_pool_run(&c->pool, p->threads, rt_calib_job, c);
        if ((p->kind == RT_PROBE_TRIAD || p->kind == RT_PROBE_TRIAD_NT) && p->chunk_elems > 0)
            c->k0 += count;
        break;
    }
    return rt_now_s() - t0;
}

// The value of one sample, in the probe's unit.
static double rt_calib_metric(const rt_calib *c, const rt_probe *p, int64_t count, double t) {
    double n = (double)count * p->threads, lanes = c->k.f32_lanes;
    if (!(t > 0.0))
        t = 1e-9;
    switch (p->kind) {
    case RT_PROBE_FMA_F32:
        return n * c->k.fma_chains * lanes * 2.0 / t * 1e-9;
    case RT_PROBE_FMA_F64:
        return n * c->k.fma_chains * lanes / 2.0 * 2.0 / t * 1e-9;
    case RT_PROBE_FMA_F16:
        return n * RT_CALIB_ACCS * 32.0 * 2.0 / t * 1e-9;
    case RT_PROBE_DOT_BF16:
        return n * RT_CALIB_ACCS * 16.0 * 4.0 / t * 1e-9; // 16 lanes x 2 products x 2 flop
    case RT_PROBE_AMX_BF16:
        return n * 4.0 * 16.0 * 16.0 * 32.0 * 2.0 / t * 1e-9;
    case RT_PROBE_TRIAD:
    case RT_PROBE_TRIAD_NT: {
        double elems = (double)(p->chunk_elems > 0 ? p->chunk_elems : p->elems);
        return n * elems * 12.0 / t * 1e-9; // STREAM counts 12 bytes per element
    }
    case RT_PROBE_LOAD:
    case RT_PROBE_STORE:
        return n * (double)p->elems * 4.0 / t * 1e-9;
    case RT_PROBE_SYNC:
        return t / ((double)count * RT_CALIB_SYNC_PHASES) * 1e6;
    case RT_PROBE_CLOCK:
        return (double)count * RT_CALIB_CHAIN / t * 1e-6;
    case RT_PROBE_FMA_LATENCY:
        return t / (double)count * c->clock_mhz * 1e6;
    case RT_PROBE_FORK:
    case RT_PROBE_LAUNCH:
        return t / (double)count * 1e6;
    }
    return 0.0;
}

// Overheads and latencies keep their lowest repeat, throughputs (the clock too) their highest.
static bool rt_probe_is_overhead(const rt_probe *p) {
    return p->kind == RT_PROBE_FORK || p->kind == RT_PROBE_LAUNCH || p->kind == RT_PROBE_SYNC ||
           p->kind == RT_PROBE_FMA_LATENCY;
}

// Finds the count for which one run takes about c->target_s (it also warms caches and clocks).
static int64_t rt_calib_count(rt_calib *c, const rt_probe *p) {
    int64_t count = 1;
    for (int tries = 0; tries < 40; tries++) {
        double t = rt_calib_once(c, p, count);
        if (t >= c->target_s / 4.0 || count >= ((int64_t)1 << 40)) {
            double want = (double)count * c->target_s / (t > 0.0 ? t : 1e-9);
            return want < 1.0 ? 1 : want > 1e12 ? (int64_t)1e12 : (int64_t)want;
        }
        double grow = t > 0.0 ? 0.5 * c->target_s / t : 64.0;
        count = (int64_t)((double)count * (grow < 2.0 ? 2.0 : grow > 64.0 ? 64.0 : grow));
    }
    return count;
}

// Samples a probe opts->repeats times (once more when too noisy) into p->v.
static rt_status rt_calib_measure(rt_calib *c, rt_probe *p, rt_err *err) {
    int32_t r = c->opts->repeats;
    double samples[256];
    if (r > 256)
        r = 256;
    int64_t count = rt_calib_count(c, p);
    for (int attempt = 0; attempt < 2; attempt++) {
        for (int32_t i = 0; i < r; i++)
            samples[i] = rt_calib_metric(c, p, count, rt_calib_once(c, p, count));
        RT_TRY(rt_calib_stats_of(samples, r, &p->v.stats, err));
        if (p->v.stats.spread <= c->opts->max_spread)
            break;
    }
    p->v.value = rt_probe_is_overhead(p) ? p->v.stats.min : p->v.stats.max;
    return RT_OK;
}

// The host probe's sampling (opts->host_probe), for a machine that other work may be loading: a
// sample is timed from the first of its threads' start to the last one's end, and counts only
// when each thread ran (thread CPU time) for RT_CALIB_RUN_SHARE of that span or more, so that a
// thread descheduled mid-sample -- or started late -- cannot lower the value or raise it. The
// value is the best (the median: rt_probe_holds_clock) of RT_CALIB_HOST_GOOD undisturbed
// samples, or fewer where other work makes them slow to come by (RT_CALIB_HOST_ENOUGH after
// RT_CALIB_HOST_SOON_S, any after RT_CALIB_HOST_LATE_S); fewer than RT_CALIB_HOST_MIN skip the
// probe (the note says so), and so does a probe still short of them after
// RT_CALIB_HOST_GIVE_UP_S: on a loaded machine each sample of a two-thread probe can wait out a
// descheduled thread's time slice, 400 of them seconds (a first-use probe in CI's sanitizer run
// once took over 10 s). 50: the best of 20 read the L3 of the Zen 3 VM anywhere from 62 to
// 133 GB/s, of 50 from 104 to 129.
#define RT_CALIB_RUN_SHARE      0.9
#define RT_CALIB_HOST_TRIES     400
#define RT_CALIB_HOST_GOOD      50
#define RT_CALIB_HOST_ENOUGH    20
#define RT_CALIB_HOST_MIN       3
#define RT_CALIB_HOST_SOON_S    0.05
#define RT_CALIB_HOST_LATE_S    0.25
#define RT_CALIB_HOST_GIVE_UP_S 1.5

// The clock and the FMA rate a core holds over a kernel's run, not its best turbo: their
// short samples' median. A bandwidth sample reads low only when other work shares the memory
// system, so those keep their best. On the 2-core Intel VM the best of 50 0.3 ms FMA samples
// read 242 GFLOP/s on one core where rtcalib's 100 ms samples read 222, and an FMA loop over
// 0.4 s ran at 198-233 in 0.7 ms windows; a GEMM micro-kernel on L1-resident panels ran at
// 0.94-0.99 of a same-process FMA loop, so the model's compute time follows the held rate.
static bool rt_probe_holds_clock(const rt_probe *p) {
    return p->kind == RT_PROBE_CLOCK || p->kind == RT_PROBE_FMA_F32;
}

static rt_status rt_calib_measure_host(rt_calib *c, rt_probe *p, rt_err *err) {
    double samples[RT_CALIB_HOST_TRIES];
    int32_t good = 0, tries = 0;
    int64_t count = rt_calib_count(c, p);
    double share = c->opts->run_share > 0 ? c->opts->run_share : RT_CALIB_RUN_SHARE;
    double give_up = c->opts->give_up_s > 0 ? c->opts->give_up_s : RT_CALIB_HOST_GIVE_UP_S;
    double t0 = rt_now_s();
    for (; tries < RT_CALIB_HOST_TRIES && good < RT_CALIB_HOST_GOOD; tries++) {
        double spent = rt_now_s() - t0;
        if ((good >= RT_CALIB_HOST_ENOUGH && spent > RT_CALIB_HOST_SOON_S) ||
            (good >= RT_CALIB_HOST_MIN && spent > RT_CALIB_HOST_LATE_S) || spent > give_up)
            break;
        rt_calib_once(c, p, count);
        double first = c->start_s[0], last = c->end_s[0];
        for (int32_t i = 1; i < p->threads; i++) {
            first = fmin(first, c->start_s[i]);
            last = fmax(last, c->end_s[i]);
        }
        double t = last - first;
        bool ran = t > 0;
        for (int32_t i = 0; i < p->threads; i++)
            ran = ran && c->cpu_s[i] >= share * t;
        if (t < 0.5 * c->target_s && count < ((int64_t)1 << 40)) {
            // Too short to time (the count was calibrated on a slow first run): longer ones.
            count = (int64_t)fmin(1e12, (double)count * c->target_s / t);
            continue;
        }
        if (ran)
            samples[good++] = rt_calib_metric(c, p, count, t);
    }
    if (good < RT_CALIB_HOST_MIN) {
        p->v.skipped = true;
        snprintf(p->v.note, sizeof p->v.note,
                 "skipped: %d of %d samples had a thread descheduled for over %.0f%% of the time "
                 "(a loaded machine)",
                 (int)(tries - good), (int)tries, 100.0 * (1.0 - fmin(share, 1.0)));
        return RT_OK;
    }
    RT_TRY(rt_calib_stats_of(samples, good, &p->v.stats, err));
    p->v.value = rt_probe_holds_clock(p) ? p->v.stats.median : p->v.stats.max;
    return RT_OK;
}

// Runs the probe in a forked child first, single-threaded and short: a CPU that advertises an
// ISA it cannot run (SIGILL) costs a skipped probe, not the run.
static rt_calib *rt_trial_calib;
static const rt_probe *rt_trial_probe;
static int rt_calib_trial_child(void *ctx) {
    (void)ctx;
    rt_probe p = *rt_trial_probe;
    p.threads = 1;
    rt_trial_calib->probe = &p;
    rt_trial_calib->count = 16;
    rt_calib_job(rt_trial_calib, 0);
    return 0;
}

static rt_status rt_calib_trial(rt_calib *c, rt_probe *p, rt_err *err) {
    rt_trial_calib = c;
    rt_trial_probe = p;
    rt_cpu_child_status st;
    int code = 0;
    RT_TRY(rt_cpu_run_isolated(rt_calib_trial_child, NULL, 10000.0, &st, &code, err));
    if (st != RT_CPU_CHILD_OK) {
        p->v.skipped = true;
        snprintf(p->v.note, sizeof p->v.note, "skipped: the probe %s in a trial run%s",
                 st == RT_CPU_CHILD_CRASHED   ? "crashed"
                 : st == RT_CPU_CHILD_TIMEOUT ? "hung"
                                              : "failed",
                 st == RT_CPU_CHILD_CRASHED && code == SIGILL ? " (illegal instruction)" : "");
    }
    return RT_OK;
}

// ---------------------------------------------------------------------------------------------
// Buffers
// ---------------------------------------------------------------------------------------------

static void rt_calib_free_buffers(rt_calib *c) {
    for (int32_t t = 0; t < RT_CALIB_MAX_THREADS; t++) {
        free(c->a[t]);
        free(c->b[t]);
        free(c->c[t]);
        c->a[t] = c->b[t] = c->c[t] = NULL;
    }
    c->buf_elems = 0;
    c->buf_bytes = 0;
}

static void rt_calib_init_job(void *arg, int32_t tid) {
    rt_calib *c = arg;
    for (int64_t i = 0; i < c->buf_elems; i++) {
        c->a[tid][i] = 0.0f;
        c->b[tid][i] = 1.0f;
        c->c[tid][i] = 2.0f;
    }
}

// Per-thread arrays of elems floats, first touched by their (pinned) thread. They get the
// system's default paging, like a STREAM build and like the tensors rtgen's kernels run on
// (arena chunks from malloc): with transparent huge pages on "madvise", as on most
// distributions, asking for huge pages here made the DRAM triad 10-20% faster than any kernel
// can read its operands (fewer TLB misses; more under nested paging in a VM), so the model
// overestimated memory-bound kernels and rtcalib disagreed with bench-ops' triad.
static rt_status rt_calib_buffers(rt_calib *c, int64_t elems, rt_err *err) {
    if (c->buf_elems == elems)
        return RT_OK;
    rt_calib_free_buffers(c);
    size_t bytes = (size_t)elems * sizeof(float);
    size_t align = 64;
    bytes = (bytes + align - 1) / align * align;
    for (int32_t t = 0; t < c->threads; t++) {
        float **arrs[] = {&c->a[t], &c->b[t], &c->c[t]};
        for (int i = 0; i < 3; i++) {
            *arrs[i] = aligned_alloc(align, bytes);
            if (!*arrs[i]) {
                rt_calib_free_buffers(c);
                return rt_fail(err, RT_ERR_NOMEM, RT_NOLOC,
                               "out of memory for the probe buffers (%d x 3 x %zu bytes)",
                               (int)c->threads, bytes);
            }
        }
    }
    c->buf_elems = elems;
    c->buf_bytes = bytes;
    rt_pool_run(&c->pool, c->threads, rt_calib_init_job, c);
    return RT_OK;
}

// ---------------------------------------------------------------------------------------------
// The plan: which probes, in which order
// ---------------------------------------------------------------------------------------------

typedef struct rt_plan {
    int32_t n;
    rt_probe p[RT_CALIB_MAX_PROBES];
} rt_plan;

static rt_probe *rt_plan_add(rt_plan *plan, rt_probe_kind kind, int32_t threads,
                             rt_calib_target target, const char *unit, const char *fmt, ...)
    RT_PRINTF(6, 7);
static rt_probe *rt_plan_add(rt_plan *plan, rt_probe_kind kind, int32_t threads,
                             rt_calib_target target, const char *unit, const char *fmt, ...) {
    if (plan->n >= RT_CALIB_MAX_PROBES)
        return NULL;
    rt_probe *p = &plan->p[plan->n++];
    memset(p, 0, sizeof *p);
    p->kind = kind;
    p->threads = threads;
    p->v.target = target;
    p->v.unit = unit;
    p->v.threads = threads;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(p->v.name, sizeof p->v.name, fmt, ap);
    va_end(ap);
    return p;
}

static const char *rt_plural(int32_t n) {
    return n == 1 ? "" : "s";
}

// Bytes as "48 KiB" / "1 MiB" / "1000 B".
static void rt_fmt_bytes(int64_t b, char *buf, size_t size) {
    if (b >= (1 << 20) && b % (1 << 20) == 0)
        snprintf(buf, size, "%lld MiB", (long long)(b >> 20));
    else if (b >= 1024 && b % 1024 == 0)
        snprintf(buf, size, "%lld KiB", (long long)(b >> 10));
    else if (b >= (1 << 20))
        snprintf(buf, size, "%.1f MiB", (double)b / (1 << 20));
    else
        snprintf(buf, size, "%lld B", (long long)b);
}

// The clock, the FMA latency, the compute probes (one thread: per-TEU entries; all threads:
// device peaks) and one core's L1 load and store throughput.
static void rt_calib_plan_compute(const rt_calib *c, rt_plan *plan) {
    int32_t T = c->threads;
    // The clock, then the latency of one FMA in its cycles.
    if (rt_calib_has_add_chain()) {
        rt_plan_add(plan, RT_PROBE_CLOCK, 1, RT_CALIB_CLOCK, "MHz", "clock (add chain), 1 thread");
        rt_plan_add(plan, RT_PROBE_FMA_LATENCY, 1, RT_CALIB_FMA_LATENCY, "cycles",
                    "f32 fma latency (one chain), 1 thread");
    }

    // Compute: one thread (per-TEU entries) and all threads (device peaks).
    static const struct {
        rt_probe_kind kind;
        const char *name, *insn;
        rt_dtype dtype;
        bool mma;
    } compute[] = {
        {RT_PROBE_FMA_F32, "f32 fma", "f32_fma", RT_DTYPE_F32, false},
        {RT_PROBE_FMA_F64, "f64 fma", "f64_fma", RT_DTYPE_F64, false},
        {RT_PROBE_FMA_F16, "f16 fma (avx512-fp16)", "f16_fma", RT_DTYPE_F16, false},
        {RT_PROBE_DOT_BF16, "bf16 dot (avx512-bf16)", "bf16_dot", RT_DTYPE_BF16, false},
        {RT_PROBE_AMX_BF16, "bf16 tile product (amx)", "amx_bf16", RT_DTYPE_BF16, true},
    };
    for (size_t i = 0; i < sizeof compute / sizeof compute[0]; i++) {
        rt_probe_kind kind = compute[i].kind;
        if ((kind == RT_PROBE_FMA_F16 && !c->k.f16) || (kind == RT_PROBE_DOT_BF16 && !c->k.bf16) ||
            (kind == RT_PROBE_AMX_BF16 && !c->k.amx))
            continue;
        rt_probe *p1 = rt_plan_add(plan, kind, 1, compute[i].mma ? RT_CALIB_REPORT : RT_CALIB_INSN,
                                   "GFLOP/s", "%s, 1 thread", compute[i].name);
        snprintf(p1->v.insn, sizeof p1->v.insn, "%s", compute[i].insn);
        rt_probe *pt =
            rt_plan_add(plan, kind, T, compute[i].mma ? RT_CALIB_MMA : RT_CALIB_PEAK, "GFLOP/s",
                        "%s, %d thread%s", compute[i].name, (int)T, rt_plural(T));
        pt->v.dtype = compute[i].dtype;
    }

    // Load and store throughput of one core, L1-resident.
    int64_t l1_elems = 4096; // 16 KiB
    rt_probe *ld =
        rt_plan_add(plan, RT_PROBE_LOAD, 1, RT_CALIB_REPORT, "GB/s", "load, 1 thread (16 KiB)");
    ld->elems = l1_elems;
    rt_probe *st =
        rt_plan_add(plan, RT_PROBE_STORE, 1, RT_CALIB_REPORT, "GB/s", "store, 1 thread (16 KiB)");
    st->elems = l1_elems;
}

// The working set of the DRAM triad, bytes over all threads.
static int64_t rt_calib_dram_bytes(const rt_calib *c, const rt_device *base) {
    bool quick = c->opts->quick;
    int32_t top = base->n_levels - 1;
    int64_t last_cache_bytes = 0;
    for (int32_t i = 1; i < top; i++) {
        const rt_mem_level *l = &base->level[i];
        if (l->managed != RT_MEM_CACHE)
            continue;
        int64_t total = l->capacity_bytes * (l->scope == RT_MEM_SCOPE_DEVICE ? 1 : base->units);
        if (total > last_cache_bytes)
            last_cache_bytes = total;
    }
    // DRAM: STREAM's sizing rule, the working set at least 4x the caches (total over threads,
    // 3 arrays), within [768 MiB, 2 GiB] and a quarter of memory. A VM may report the host's
    // whole last-level cache (480 MiB on the 2-core development VM): past the cache the VM
    // really has, the triad does not depend on size (3 x 128 MiB and 3 x 640 MiB agree within
    // 1% there), so the cap costs nothing. Threads: one per core, pinned, as bench-util.c's
    // triad and the kernel pool run one per core (the scheduler keeps those apart; pinning only
    // keeps migrations out of the samples).
    int64_t dram_bytes = 4 * last_cache_bytes;
    int64_t dram_min = quick ? (24 << 20) : ((int64_t)768 << 20);
    int64_t dram_max = quick ? (24 << 20) : ((int64_t)2 << 30);
    long pages = sysconf(_SC_PHYS_PAGES), page_bytes = sysconf(_SC_PAGESIZE);
    if (pages > 0 && page_bytes > 0 && (int64_t)pages * page_bytes / 4 < dram_max)
        dram_max = (int64_t)pages * page_bytes / 4;
    dram_bytes = dram_bytes < dram_min ? dram_min : dram_bytes > dram_max ? dram_max : dram_bytes;
    return dram_bytes;
}

// A cache shared by the cores (level i, ws bytes per thread): the triad over working sets
// doubling from twice the caches below it (over all threads) up to the half-capacity point
// above, so that rt_calib_apply can tell the capacity that really behaves as a cache.
static void rt_calib_plan_sweep(const rt_calib *c, const rt_device *base, int32_t i, int64_t ws,
                                int64_t step, rt_plan *plan) {
    int32_t T = c->threads, top = base->n_levels - 1;
    const rt_mem_level *l = &base->level[i];
    int64_t below = 0;
    for (int32_t j = i + 1; j < top; j++) {
        const rt_mem_level *in = &base->level[j];
        int64_t b = in->capacity_bytes * (in->scope == RT_MEM_SCOPE_DEVICE ? 1 : T);
        if (in->managed == RT_MEM_CACHE && b > below)
            below = b;
    }
    for (int64_t w = 2 * below; below > 0 && 2 * w <= ws * T; w *= 2) {
        int64_t e = w / T / 12 / step * step;
        if (e < step)
            continue;
        char s[32];
        rt_fmt_bytes(e * 12 * T, s, sizeof s);
        rt_probe *ps = rt_plan_add(plan, RT_PROBE_TRIAD, T, RT_CALIB_SWEEP, "GB/s",
                                   "triad mem.%s sweep (%s in all), %d thread%s", l->name, s,
                                   (int)T, rt_plural(T));
        ps->elems = e;
        ps->v.level = i;
        ps->v.curve_bytes = e * 12 * T;
    }
}

// The DRAM curve: triad on chunks of S bytes at scattered places of the buffer (elems per
// thread).
static void rt_calib_plan_curve(const rt_calib *c, const rt_device *base, int64_t elems,
                                rt_plan *plan) {
    int32_t T = c->threads, L = c->k.f32_lanes;
    bool quick = c->opts->quick;
    const rt_mem_level *l = &base->level[0];
    static const int64_t full[] = {1 << 10, 4 << 10, 16 << 10, 64 << 10, 256 << 10,
                                   1 << 20, 4 << 20, 16 << 20, 64 << 20};
    static const int64_t tiny[] = {4 << 10, 64 << 10, 1 << 20};
    const int64_t *pts = quick ? tiny : full;
    size_t n = quick ? sizeof tiny / sizeof tiny[0] : sizeof full / sizeof full[0];
    for (size_t j = 0; j < n; j++) {
        int64_t chunk = pts[j] / 12 / L * L;
        if (chunk < L || 2 * chunk > elems)
            continue;
        char s[32];
        rt_fmt_bytes(pts[j], s, sizeof s);
        rt_probe *pc =
            rt_plan_add(plan, RT_PROBE_TRIAD, T, RT_CALIB_CURVE, "GB/s",
                        "triad mem.%s chunks of %s, %d thread%s", l->name, s, (int)T, rt_plural(T));
        pc->elems = elems;
        pc->chunk_elems = chunk;
        pc->v.level = 0;
        pc->v.curve_bytes = pts[j];
    }
}

static void rt_calib_plan(const rt_calib *c, const rt_device *base, rt_plan *plan) {
    int32_t T = c->threads, L = c->k.f32_lanes;
    bool quick = c->opts->quick;
    plan->n = 0;
    rt_calib_plan_compute(c, plan);

    // Triad at about half of each cache level (from the top), then DRAM.
    int32_t top = base->n_levels - 1;
    int64_t dram_bytes = rt_calib_dram_bytes(c, base);
    int64_t step = (int64_t)L * RT_CALIB_LOAD_ACCS;
    for (int32_t i = top - 1; i >= 0; i--) {
        const rt_mem_level *l = &base->level[i];
        if (i > 0 && l->managed != RT_MEM_CACHE)
            continue;
        int64_t ws; // bytes per thread, 3 arrays
        if (i == 0)
            ws = dram_bytes / T;
        else if (l->scope == RT_MEM_SCOPE_DEVICE)
            ws = l->capacity_bytes / 2 / T;
        else
            ws = l->capacity_bytes / 2;
        if (quick && ws > (8 << 20))
            ws = 8 << 20;
        int64_t elems = ws / 12 / step * step;
        if (elems < step)
            elems = step;
        char ws_text[32];
        rt_fmt_bytes(elems * 12, ws_text, sizeof ws_text);
        rt_probe *p1 = rt_plan_add(plan, RT_PROBE_TRIAD, 1, RT_CALIB_REPORT, "GB/s",
                                   "triad mem.%s (%s), 1 thread", l->name, ws_text);
        p1->elems = elems;
        p1->v.ws_bytes = elems * 12;
        rt_probe *pt = rt_plan_add(plan, RT_PROBE_TRIAD, T, RT_CALIB_LEVEL_BW, "GB/s",
                                   "triad mem.%s (%s per thread), %d thread%s", l->name, ws_text,
                                   (int)T, rt_plural(T));
        pt->elems = elems;
        pt->v.level = i;
        pt->v.ws_bytes = elems * 12 * T;
        if (i == 0) { // the ceiling of kernels that stream their outputs
            rt_probe *pn = rt_plan_add(plan, RT_PROBE_TRIAD_NT, T, RT_CALIB_LEVEL_STREAM, "GB/s",
                                       "triad mem.%s, non-temporal stores (%s per thread), %d "
                                       "thread%s",
                                       l->name, ws_text, (int)T, rt_plural(T));
            pn->elems = elems;
            pn->v.level = 0;
            pn->v.ws_bytes = elems * 12 * T;
        }
        if (i > 0 && l->scope == RT_MEM_SCOPE_DEVICE && !quick)
            rt_calib_plan_sweep(c, base, i, ws, step, plan);
        if (i == 0)
            rt_calib_plan_curve(c, base, elems, plan);
    }

    rt_plan_add(plan, RT_PROBE_FORK, T, RT_CALIB_REPORT, "us",
                "fork/join of the probe pool, %d "
                "thread%s",
                (int)T, rt_plural(T));
    rt_plan_add(plan, RT_PROBE_SYNC, T, RT_CALIB_SYNC, "us",
                "phase barrier of the kernel pool, %d thread%s", (int)T, rt_plural(T));
    rt_plan_add(plan, RT_PROBE_LAUNCH, T, RT_CALIB_LAUNCH, "us",
                "empty JIT kernel launch, %d thread%s", (int)T, rt_plural(T));
}

// The first-use probe of the default device (opts->host_probe; hal-host-probe.c): the clock
// and one core's f32 FMA rate (the device peak is units x that rate), then the triad on all
// threads at a quarter of level 1 -- the cache the model's warm rule (rt_perf_cpu_warm) keeps
// an operator in, if it fits in half of it -- and, with ordinary and with non-temporal stores,
// on a DRAM buffer of twice the caches, 64 MiB to 1 GiB and at most a quarter of memory.
// A quarter of level 1, not half: on the 2-core Zen 3 VM (32 MiB L3 shared with other tenants)
// the 2-thread triad ran at 100-116 GB/s from 4 to 12 MiB, 54 at 16 and 27 at 24, so half sat on
// the edge and read anywhere from 55 to 95. DRAM at 2x, not the full plan's 4x: first touch of
// its pages is most of the probe's cost, and with the samples walking the buffer in scattered
// chunks (each last touched a whole buffer ago) the triad read the same at 1, 2, 4 and 6x the
// L3 there (within the noise, 27-32 GB/s). One buffer, allocated for DRAM, serves all triads.
static void rt_calib_plan_host(const rt_calib *c, const rt_device *base, rt_plan *plan) {
    int32_t T = c->threads;
    int64_t step = (int64_t)c->k.f32_lanes * RT_CALIB_LOAD_ACCS;
    plan->n = 0;
    if (rt_calib_has_add_chain())
        rt_plan_add(plan, RT_PROBE_CLOCK, 1, RT_CALIB_CLOCK, "MHz", "clock (add chain), 1 thread");
    rt_probe *f =
        rt_plan_add(plan, RT_PROBE_FMA_F32, 1, RT_CALIB_INSN, "GFLOP/s", "f32 fma, 1 thread");
    snprintf(f->v.insn, sizeof f->v.insn, "f32_fma");
    int64_t caches = 0;
    for (int32_t i = 1; i < base->n_levels; i++) {
        const rt_mem_level *l = &base->level[i];
        if (l->managed == RT_MEM_CACHE)
            caches += l->capacity_bytes * (l->scope == RT_MEM_SCOPE_DEVICE ? 1 : base->units);
    }
    int64_t llc = 0; // working set of all threads at a quarter of level 1
    if (base->n_levels > 2 && base->level[1].managed == RT_MEM_CACHE)
        llc = base->level[1].capacity_bytes / 4 *
              (base->level[1].scope == RT_MEM_SCOPE_DEVICE ? 1 : T);
    // DRAM: twice all caches (a 300 MiB L3 is no longer rare), within 64 MiB and 1 GiB and a
    // quarter of the memory.
    int64_t dram = 2 * caches, lo = (int64_t)64 << 20, hi = (int64_t)1 << 30;
    long pages = sysconf(_SC_PHYS_PAGES), page_bytes = sysconf(_SC_PAGESIZE);
    if (pages > 0 && page_bytes > 0 && (int64_t)pages * page_bytes / 4 < hi)
        hi = (int64_t)pages * page_bytes / 4;
    dram = dram < lo ? lo : dram > hi ? hi : dram;
    // Level 1, DRAM, and DRAM with non-temporal stores (the ceiling of kernels that stream).
    const struct {
        int32_t level;
        int64_t ws;
        bool nt;
    } triads[] = {{1, llc, false}, {0, dram, false}, {0, dram, true}};
    for (size_t i = 0; i < sizeof triads / sizeof triads[0]; i++) {
        if (triads[i].ws <= 0)
            continue;
        int64_t elems = triads[i].ws / T / 12 / step * step;
        if (elems < step)
            elems = step;
        char ws_text[32];
        rt_fmt_bytes(elems * 12 * T, ws_text, sizeof ws_text);
        const rt_mem_level *l = &base->level[triads[i].level];
        bool nt = triads[i].nt;
        rt_probe *p = rt_plan_add(plan, nt ? RT_PROBE_TRIAD_NT : RT_PROBE_TRIAD, T,
                                  nt ? RT_CALIB_LEVEL_STREAM : RT_CALIB_LEVEL_BW, "GB/s",
                                  "triad mem.%s%s (%s in all), %d thread%s", l->name,
                                  nt ? ", non-temporal stores" : "", ws_text, (int)T, rt_plural(T));
        p->elems = elems;
        p->v.level = triads[i].level;
        p->v.ws_bytes = elems * 12 * T;
        // DRAM: a sample is a few chunks of 2 MiB (3 arrays) at scattered places, and the
        // samples walk the buffer, so that each is short (rt_calib_measure_host) and each chunk
        // was last touched a whole buffer ago.
        if (triads[i].level == 0 && elems >= 4 * ((2 << 20) / 12))
            p->chunk_elems = (2 << 20) / 12 / step * step;
    }
}

// ---------------------------------------------------------------------------------------------
// The run
// ---------------------------------------------------------------------------------------------

// Requests the AMX tile state from Linux (needed before the first tile instruction).
static bool rt_calib_amx_permit(char *why, size_t size) {
#if defined(__x86_64__) && defined(SYS_arch_prctl)
    if (syscall(SYS_arch_prctl, 0x1023 /* ARCH_REQ_XCOMP_PERM */, 18 /* XTILEDATA */) == 0)
        return true;
    snprintf(why, size, "skipped: the kernel refused the AMX tile state (arch_prctl: %s)",
             strerror(errno));
    return false;
#else
    snprintf(why, size, "skipped: AMX needs x86-64 Linux");
    return false;
#endif
}

static rt_status rt_calib_operands(rt_calib *c, rt_err *err) {
    c->amx_cfg = aligned_alloc(64, 64);
    c->amx_a = aligned_alloc(64, 2048);
    c->amx_b = aligned_alloc(64, 2048);
    c->amx_c = aligned_alloc(64, (size_t)4096 * (size_t)c->threads);
    c->bf16_ops = aligned_alloc(64, 128);
    if (!c->amx_cfg || !c->amx_a || !c->amx_b || !c->amx_c || !c->bf16_ops)
        return rt_fail(err, RT_ERR_NOMEM, RT_NOLOC, "out of memory");
    // Tile configuration: palette 1, tiles 0-7 of 16 rows x 64 bytes.
    memset(c->amx_cfg, 0, 64);
    c->amx_cfg[0] = 1;
    for (int t = 0; t < 8; t++) {
        c->amx_cfg[16 + 2 * t] = 64;
        c->amx_cfg[48 + t] = 16;
    }
    // bf16 operands: 2^-7 in every element (0x3c00), small enough never to overflow.
    for (int i = 0; i < 1024; i++) {
        ((uint16_t *)(void *)c->amx_a)[i] = 0x3c00;
        ((uint16_t *)(void *)c->amx_b)[i] = 0x3c00;
    }
    for (int i = 0; i < 32; i++)
        c->bf16_ops[i] = 0x3c003c00;
    memset(c->amx_c, 0, (size_t)4096 * (size_t)c->threads);
    return RT_OK;
}

static void rt_calib_release(rt_calib *c) {
    rt_calib_free_buffers(c);
    free(c->amx_cfg);
    free(c->amx_a);
    free(c->amx_b);
    free(c->amx_c);
    free(c->bf16_ops);
}

static rt_status rt_calib_probes(rt_calib *c, const rt_device *base, rt_calib_result *out,
                                 double t_start, rt_err *err) {
    const rt_calib_opts *o = c->opts;
    char amx_note[512] = "";
    bool amx_ok = !c->k.amx || rt_calib_amx_permit(amx_note, sizeof amx_note);
    rt_plan *plan = calloc(1, sizeof *plan);
    if (!plan)
        return rt_fail(err, RT_ERR_NOMEM, RT_NOLOC, "out of memory");
    if (o->host_probe)
        rt_calib_plan_host(c, base, plan);
    else
        rt_calib_plan(c, base, plan);
    int64_t host_elems = 0; // the host probe's one buffer: the largest of its triads
    for (int32_t i = 0; o->host_probe && i < plan->n; i++)
        if ((plan->p[i].kind == RT_PROBE_TRIAD || plan->p[i].kind == RT_PROBE_TRIAD_NT) &&
            plan->p[i].elems > host_elems)
            host_elems = plan->p[i].elems;
    rt_status st = RT_OK;
    for (int32_t i = 0; i < plan->n && st == RT_OK; i++) {
        rt_probe *p = &plan->p[i];
        rt_calib_event ev = {.index = i + 1,
                             .count = plan->n,
                             .probe = p->v.name,
                             .elapsed_s = rt_now_s() - t_start};
        if (o->progress)
            o->progress(o->progress_ctx, &ev);
        if (p->kind == RT_PROBE_AMX_BF16 && !amx_ok) {
            p->v.skipped = true;
            snprintf(p->v.note, sizeof p->v.note, "%s", amx_note);
        } else if (p->kind == RT_PROBE_FMA_F16 || p->kind == RT_PROBE_DOT_BF16 ||
                   p->kind == RT_PROBE_AMX_BF16) {
            st = rt_calib_trial(c, p, err);
        }
        bool buffers = p->kind == RT_PROBE_TRIAD || p->kind == RT_PROBE_TRIAD_NT ||
                       p->kind == RT_PROBE_LOAD || p->kind == RT_PROBE_STORE;
        if (st == RT_OK && !p->v.skipped && buffers && !(o->host_probe && c->buf_elems >= p->elems))
            st = rt_calib_buffers(c, host_elems > p->elems ? host_elems : p->elems, err);
        if (p->kind == RT_PROBE_FMA_LATENCY && !(c->clock_mhz > 0)) {
            p->v.skipped = true;
            snprintf(p->v.note, sizeof p->v.note, "skipped: no clock measured to count cycles");
        }
        if (st == RT_OK && !p->v.skipped)
            st = o->host_probe ? rt_calib_measure_host(c, p, err) : rt_calib_measure(c, p, err);
        if (st != RT_OK)
            break;
        if (p->kind == RT_PROBE_CLOCK && !p->v.skipped)
            c->clock_mhz = p->v.value;
        out->values[out->n_values++] = p->v;
        ev.value = &out->values[out->n_values - 1];
        ev.elapsed_s = rt_now_s() - t_start;
        if (o->progress)
            o->progress(o->progress_ctx, &ev);
    }
    free(plan);
    return st;
}

rt_status rt_calib_cpu_run(const rt_device *base, const rt_calib_opts *opts, rt_calib_result *out,
                           rt_err *err) {
    memset(out, 0, sizeof *out);
    if (base->devclass != RT_DEVCLASS_CPU)
        return rt_fail(err, RT_ERR_DEVICE, base->origin,
                       "rtcalib measures class cpu devices on this host (got class %s)",
                       rt_devclass_name(base->devclass));
    if (opts->repeats < 2 || opts->repeats > 256)
        return rt_fail(err, RT_ERR_USAGE, RT_NOLOC,
                       "repeats out of range (expected 2 to 256, got %d)", (int)opts->repeats);
    if (opts->threads < 0 || opts->threads > RT_CALIB_MAX_THREADS)
        return rt_fail(err, RT_ERR_USAGE, RT_NOLOC,
                       "threads out of range (expected 1 to %d, got %d)", RT_CALIB_MAX_THREADS,
                       (int)opts->threads);
    if (!(opts->max_spread >= 0.0))
        return rt_fail(err, RT_ERR_USAGE, RT_NOLOC, "max spread must be >= 0 (got %g)",
                       opts->max_spread);
    if (!(opts->run_share >= 0.0) || !(opts->give_up_s >= 0.0))
        return rt_fail(err, RT_ERR_USAGE, RT_NOLOC,
                       "run share and give-up time must be >= 0 (got %g and %g)", opts->run_share,
                       opts->give_up_s);
    double t_start = rt_now_s();
    cpu_set_t saved;
    bool have_mask = sched_getaffinity(0, sizeof saved, &saved) == 0;
    if (!have_mask) {
        CPU_ZERO(&saved);
        CPU_SET(0, &saved);
    }
    int32_t n_cpus = CPU_COUNT(&saved);
    rt_calib *c = calloc(1, sizeof *c);
    if (!c)
        return rt_fail(err, RT_ERR_NOMEM, RT_NOLOC, "out of memory");
    c->opts = opts;
    c->threads = opts->threads;
    if (c->threads == 0)
        c->threads = base->units < n_cpus ? base->units : n_cpus;
    if (c->threads < 1)
        c->threads = 1;
    c->target_s = opts->quick ? 0.002 : opts->host_probe ? 0.0003 : 0.1;
    c->scalar = 0.5f;
    out->threads = c->threads;

    rt_arena *a = rt_arena_new(64 * 1024);
    rt_status st = a ? RT_OK : rt_fail(err, RT_ERR_NOMEM, RT_NOLOC, "out of memory");
    if (st == RT_OK)
        st = rt_calib_build(a, opts->host_probe, &c->k, out->cpu_name, sizeof out->cpu_name, err);
    if (st == RT_OK)
        st = rt_calib_operands(c, err);
    bool pool = false;
    if (st == RT_OK && !opts->host_probe) { // the kernel pool: the launch and sync probes
        c->rpool = rt_cpu_pool_new(c->threads);
        if (!c->rpool)
            st = rt_fail(err, RT_ERR_BACKEND, RT_NOLOC, "cannot start the kernel thread pool");
    }
    if (st == RT_OK) {
        st = rt_pool_start(&c->pool, c->threads, &saved, err);
        pool = st == RT_OK;
    }
    if (st == RT_OK)
        st = rt_calib_probes(c, base, out, t_start, err);
    if (pool)
        rt_pool_stop(&c->pool);
    if (c->rpool)
        rt_cpu_pool_free(c->rpool);
    if (have_mask)
        sched_setaffinity(0, sizeof saved, &saved);
    rt_calib_release(c);
    free(c);
    rt_arena_free(a);
    out->seconds = rt_now_s() - t_start;
    return st;
}
