// bench-util.h: what the benchmark programs share — a monotonic clock, the timing method every
// kernel (rtgen's and the peers') is measured with, and the machine's own ceilings: an FMA loop
// on the widest vectors the CPU has for the FP32 peak, and a STREAM triad for the bandwidth of
// DRAM or of the last-level cache. Not part of librtgen.
#ifndef RT_BENCH_UTIL_H
#define RT_BENCH_UTIL_H

#include <stdint.h>

// Min and median of the timed repetitions of one kernel.
typedef struct rt_bench_stats {
    double min_ns, median_ns;
    int32_t reps;
} rt_bench_stats;

double rt_bench_now_ns(void);

// The timing method: one warm-up call, then repetitions until at least 3 were taken and
// budget_ms has passed (at most 1000); min and median of the repetitions. The same method as
// rtgen's profiler (rtgen.c), whose first (checked) run is its warm-up.
void rt_bench_time(void (*fn)(void *ctx), void *ctx, double budget_ms, rt_bench_stats *out);

// The method for comparing n contenders (rtgen's winner and a peer): they take turns, so that a
// shared machine's drift (another tenant's load, the clock, the DRAM bandwidth, which swings
// from minute to minute here) falls on all of them alike instead of on whichever ran during it.
// `rounds` rounds; in each, every contender in order sleeps settle_ms (the threads the one
// before it left spinning go idle: libgomp spins for milliseconds after a parallel region),
// makes an untimed warm-up call (skipped once a single call outlasts its share: its data
// streams through the caches anyway), then timed calls for budget_ms / rounds (at least one).
// out[i]: min and median over all rounds.
void rt_bench_time_turns(int32_t n, void (*const *fns)(void *ctx), void *const *ctxs,
                         double budget_ms, int32_t rounds, double settle_ms, rt_bench_stats *out);

// Median of n doubles (sorts v in place); 0 when n == 0.
double rt_bench_median(double *v, int32_t n);

// The vector ISA the FMA peak is measured with: "avx512" (512-bit), "avx2" (256-bit, AVX2 and
// FMA), NULL when the CPU has neither.
const char *rt_bench_fma_isa(void);

// Measured FP32 FMA peak in GFLOP/s on `threads` threads: 12 independent FMA chains per thread
// on rt_bench_fma_isa()'s vectors, best of 3; 0 when that is NULL.
double rt_bench_fma_peak_gflops(int32_t threads);

// Size of the last-level cache in bytes, from cpu0's cache directories in sysfs (the unified or
// data cache of the highest level); 0 when they cannot be read. (glibc's sysconf reads CPUID
// and gave 256 MiB for the 32 MiB L3 of the Zen 3 VM.)
int64_t rt_bench_llc_bytes(void);

// Measured STREAM triad a[i] = b[i] + s*c[i] on floats in GB/s (12 bytes per element, as STREAM
// counts), each thread on its own chunk, best of 5. bytes_per_array: the working set of one
// array (e.g. 64 MiB for DRAM, 256 KiB for L2).
double rt_bench_triad_gbps(int32_t threads, int64_t bytes_per_array);

#endif
