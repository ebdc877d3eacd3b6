// calib-cpu-impl.h: what the parts of rtcalib's CPU measurement share (hal-internal; only the
// calib-cpu*.c files include it): the JIT-compiled probe kernels (calib-cpu-ir.c) and the pool
// of pinned threads that runs them (calib-cpu-pool.c), used by the probe runner (calib-cpu.c).
#ifndef RT_CALIB_CPU_IMPL_H
#define RT_CALIB_CPU_IMPL_H

#include "calib.h"
#include "hal-cpu.h"

#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>

// Independent FMA accumulators: more than FMA latency (4) x ports (2), and with the two
// operands within the vector registers: 16 of AVX-512's 32, 12 of AVX2's 16 (16 there spill,
// which halved the f32 rate measured on a Zen 3 core: 47 against 96 GFLOP/s with 12).
#define RT_CALIB_ACCS        16
#define RT_CALIB_ACCS_16REGS 12
#define RT_CALIB_LOAD_ACCS   8 // read loop: fadd latency (4) x 2 loads per cycle

typedef float (*rt_fma_f32_fn)(int64_t iters, float x, float y);
typedef double (*rt_fma_f64_fn)(int64_t iters, double x, double y);
typedef float (*rt_dot_fn)(int64_t iters, const void *ops);
typedef void (*rt_amx_fn)(int64_t iters, const void *cfg, const void *a, const void *b, float *c);
typedef void (*rt_triad_fn)(float *a, const float *b, const float *c, int64_t elems,
                            int64_t slot_mask, int64_t k0, int64_t k1, const volatile float *s);
typedef float (*rt_load_fn)(const float *p, int64_t elems, int64_t reps);
typedef void (*rt_store_fn)(float *p, int64_t elems, int64_t reps, const volatile float *v);
typedef void (*rt_phase_fn)(void **args, int64_t lo, int64_t hi, float *scratch);

typedef struct rt_kernels {
    int32_t vec_bits;   // 512, 256 or 128
    int32_t f32_lanes;  // vec_bits / 32
    int32_t fma_chains; // accumulators of the f32 and f64 FMA probes
    bool f16, bf16, amx;
    rt_fma_f32_fn fma_f32, fma_f16, fma_chain_f32;
    rt_fma_f64_fn fma_f64;
    rt_dot_fn dot_bf16;
    rt_amx_fn amx_bf16;
    rt_triad_fn triad, triad_nt;
    rt_load_fn load;
    rt_store_fn store;
    rt_phase_fn empty;
} rt_kernels;

// Builds, verifies, optimizes (O3) and JIT-compiles every probe the host supports; for the
// host probe (host_probe) only the f32 FMA and the triad, which are all it runs.
rt_status rt_calib_build(rt_arena *a, bool host_probe, rt_kernels *k, char *cpu_name,
                         size_t cpu_size, rt_err *err);

// The probe pool (calib-cpu-pool.c): one pinned thread per core, the caller being thread 0.
// Workers spin for about a millisecond after a job, then sleep on a condition variable.

#define RT_CALIB_MAX_THREADS 256
#define RT_CALIB_SPINS       20000

typedef void (*rt_job_fn)(void *arg, int32_t tid);

typedef struct rt_pool rt_pool;
typedef struct rt_pool_worker {
    rt_pool *pool;
    int32_t tid;
} rt_pool_worker;

struct rt_pool {
    int32_t n;
    int32_t cpu[RT_CALIB_MAX_THREADS]; // -1: not pinned
    pthread_t th[RT_CALIB_MAX_THREADS];
    rt_pool_worker w[RT_CALIB_MAX_THREADS];
    pthread_mutex_t mu;
    pthread_cond_t cv;
    _Atomic uint64_t gen;
    _Atomic int32_t done;
    rt_job_fn fn; // published by the release increment of gen
    void *arg;
    int32_t active; // threads with tid < active run fn
    bool quit;
};

static inline void rt_cpu_relax(void) {
#if defined(__x86_64__) || defined(__i386__)
    __asm__ volatile("pause" ::: "memory");
#else
    __asm__ volatile("" ::: "memory");
#endif
}

// Runs fn(arg, tid) on threads 0..active-1 together and returns when all are done.
void rt_pool_run(rt_pool *p, int32_t active, rt_job_fn fn, void *arg);
// Stops and joins the workers.
void rt_pool_stop(rt_pool *p);
// Starts n - 1 workers pinned to the CPUs this process may use (round robin); signals are
// blocked in them so that SIGINT and SIGTERM reach the caller's handlers.
rt_status rt_pool_start(rt_pool *p, int32_t n, const cpu_set_t *allowed, rt_err *err);

#endif
