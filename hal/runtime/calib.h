// calib.h: measuring a device for rtcalib. Three parts: the statistics of repeated probes and
// the refusal of noisy values; the host-CPU probes (calib-cpu.c: microbenchmarks generated as
// LLVM IR, JIT-compiled and run on a pinned thread pool) and the merge of their results into a
// device; and writing a device back as an INI file in the schema of device-ini.md, atomically
// (hal-ini-write.c).
#ifndef RT_CALIB_H
#define RT_CALIB_H

#include "hal.h"
#include "hal-gpu.h"

// ---------------------------------------------------------------------------------------------
// Statistics of repeated probes (calib-cpu.c)
// ---------------------------------------------------------------------------------------------

typedef struct rt_calib_stats {
    int32_t n;
    double min, median, max;
    double spread; // (max - min) / median; 0 for a single sample
} rt_calib_stats;

// Statistics of n samples (not modified). RT_ERR_USAGE for n < 1, a non-finite sample or a
// median of 0 with a non-zero range (the spread would be infinite).
rt_status rt_calib_stats_of(const double *samples, int32_t n, rt_calib_stats *out, rt_err *err);

// RT_OK when s->spread <= max_spread (a fraction: 0.1 = 10%). Otherwise RT_ERR_BACKEND with
// "WHAT not written: spread X% over N repeats exceeds --max-spread Y% (...)".
rt_status rt_calib_check_spread(const char *what, const rt_calib_stats *s, double max_spread,
                                rt_err *err);

// ---------------------------------------------------------------------------------------------
// Host-CPU probes (calib-cpu.c)
// ---------------------------------------------------------------------------------------------

#define RT_CALIB_MAX_VALUES 128 // the GPU probes report 64 register-tile shapes

// Where a measured value goes in the device. RT_CALIB_REPORT values are printed only.
typedef enum rt_calib_target {
    RT_CALIB_REPORT,
    RT_CALIB_PEAK,         // [compute] <dtype>_gflops
    RT_CALIB_MMA,          // [compute] mma_<dtype>_gflops
    RT_CALIB_INSN,         // [compute] <insn>_gflops_per_teu
    RT_CALIB_LEVEL_BW,     // [mem.<level>] bandwidth_gbps
    RT_CALIB_LEVEL_STREAM, // [mem.<level>] stream_gbps (the triad with non-temporal stores)
    RT_CALIB_CURVE,        // one point of [mem.<level>] bandwidth_curve_gbps
    // One point of a working-set sweep of a cache shared by the cores (curve_bytes: the working
    // set of all threads). Where the level's bandwidth_gbps, measured at half its reported
    // capacity, is no faster than DRAM (a VM reporting the host's whole last-level cache), the
    // largest point still clearly faster than DRAM gives [mem.<level>] capacity_bytes (twice
    // that working set) and bandwidth_gbps.
    RT_CALIB_SWEEP,
    RT_CALIB_LAUNCH, // [device] launch_overhead_us
    RT_CALIB_SYNC,   // [device] sync_overhead_us
    // [device] clock_mhz: the core clock under load (a dependent chain of integer adds, one per
    // cycle). With it and the 1-thread f32 FMA rate (RT_CALIB_INSN "f32_fma") rt_calib_apply
    // also writes [device] teus_per_unit: FMA pipes per core at the device's vector width,
    // rounded from that rate / (clock x lanes x 2).
    RT_CALIB_CLOCK,
    RT_CALIB_FMA_LATENCY, // [compute] fma_latency_cycles: one dependent FMA chain, in cycles
} rt_calib_target;

typedef struct rt_calib_value {
    char name[64]; // what was measured: "f32 fma, 2 threads"
    rt_calib_target target;
    rt_dtype dtype;      // RT_CALIB_PEAK, RT_CALIB_MMA
    char insn[48];       // RT_CALIB_INSN: "f32_fma"
    int32_t level;       // RT_CALIB_LEVEL_BW, _CURVE, _SWEEP: index into dev->level
    int64_t curve_bytes; // RT_CALIB_CURVE: bytes moved per unit; _SWEEP: working set
    int64_t ws_bytes;    // triad probes: the working set of all threads (3 arrays); else 0
    const char *unit;    // "GFLOP/s", "GB/s", "us"
    int32_t threads;
    double value;         // the best repeat (throughputs: the highest; overheads: the lowest)
    rt_calib_stats stats; // over the repeats, in the unit of value
    bool skipped;         // not measured; note says why
    bool refused;         // measured but too noisy to write (rt_calib_apply); note says why
    char note[512];
} rt_calib_value;

typedef struct rt_calib_result {
    int32_t n_values;
    rt_calib_value values[RT_CALIB_MAX_VALUES];
    int32_t threads;
    char cpu_name[64]; // LLVM's name of the host CPU
    double seconds;    // wall time of the whole run
} rt_calib_result;

// One step of the run, for a progress display (the caller prints; the HAL never does).
typedef struct rt_calib_event {
    int32_t index, count;        // probe index (1-based) and number of probes
    const char *probe;           // "triad l2, 2 threads"
    const rt_calib_value *value; // NULL when the probe starts; the result when it is done
    double elapsed_s;            // since the run started
} rt_calib_event;

typedef struct rt_calib_opts {
    int32_t threads;   // 0: min(base units, CPUs this process may run on)
    int32_t repeats;   // samples per probe, >= 2
    double max_spread; // fraction; a probe over it is repeated once before it is reported
    bool quick;        // tiny probes (tests): the whole run takes well under 3 s
    // The default device's first-use probe (hal-host-probe.c) instead of the full plan: the
    // clock (RT_CALIB_CLOCK) and one core's f32 FMA rate (RT_CALIB_INSN "f32_fma"), then the
    // triad on every thread (RT_CALIB_LEVEL_BW) at a quarter of level 1 (the last-level cache of
    // the model's warm rule) and on a DRAM buffer 2x the caches (64 MiB to 1 GiB), there also with
    // non-temporal stores (RT_CALIB_LEVEL_STREAM); samples of 0.3 ms,
    // about 0.2 s in all. Samples whose threads were descheduled are dropped
    // (rt_calib_measure_host); a probe without enough others is skipped.
    bool host_probe;
    // The host probe's share of a sample's span that each thread must have run for the sample to
    // count (0: 0.9); over 1, none counts (tests: a probe that never gets an undisturbed sample).
    double run_share;
    // Seconds after which a host probe still short of undisturbed samples is skipped (0: 1.5).
    double give_up_s;
    void (*progress)(void *ctx, const rt_calib_event *ev); // may be NULL
    void *progress_ctx;
} rt_calib_opts;

// Runs every probe the host supports on the levels of base (a class cpu device). Errors:
// RT_ERR_BACKEND (LLVM, threads), RT_ERR_NOMEM, RT_ERR_USAGE (bad opts), RT_ERR_DEVICE (base
// not class cpu).
rt_status rt_calib_cpu_run(const rt_device *base, const rt_calib_opts *opts, rt_calib_result *out,
                           rt_err *err);

// Copies base into out and replaces every measured value whose spread is at most max_spread;
// the others are marked refused (their note says why) and keep base's value. Each section that
// received a value gets "source = measured: rtcalib DATE (keys); other values: <old source>".
// date is "YYYY-MM-DD". The result passes rt_hal_check_device, else RT_ERR_DEVICE.
rt_status rt_calib_apply(const rt_device *base, rt_calib_result *res, double max_spread,
                         const char *date, rt_device *out, rt_err *err);

// ---------------------------------------------------------------------------------------------
// Writing device files (hal-ini-write.c)
// ---------------------------------------------------------------------------------------------

// Appends dev to out as INI text that rt_hal_load_device reads back to an equal device
// (numbers in their shortest exact form). header (may be NULL) is written first, each of its
// lines as a "; " comment. Fails with RT_ERR_DEVICE when dev does not pass
// rt_hal_check_device or has a value the schema cannot spell.
rt_status rt_hal_write_ini(const rt_device *dev, const char *header, rt_buf *out, rt_err *err);

// A file written all at once or not at all: begin creates a temporary file next to path
// (".NAME.tmp-PID" in the same directory), commit writes, fsyncs and renames it over path,
// abort removes it. Only one may be in progress at a time per process.
typedef struct rt_atomic_file {
    char path[1024];
    char tmp[1100];
    int fd; // -1 when none is open
} rt_atomic_file;

// Errors: RT_ERR_IO at path ("cannot write: <reason>"); nothing is left behind.
rt_status rt_hal_file_begin(rt_atomic_file *f, const char *path, rt_err *err);
// On failure the temporary file is removed and path is untouched.
rt_status rt_hal_file_commit(rt_atomic_file *f, const char *data, size_t len, rt_err *err);
void rt_hal_file_abort(rt_atomic_file *f);
// Async-signal-safe: removes the temporary file of the write in progress, if any (for SIGINT
// and SIGTERM handlers, which then end the process).
void rt_hal_file_abort_signal(void);

// ---------------------------------------------------------------------------------------------
// GPU probes (calib-gpu.c) -- BEGIN block owned by calib-gpu.c
// ---------------------------------------------------------------------------------------------
// Probes generated as CUDA, HIP or OpenCL C from one generator with a small dialect table,
// compiled through hal-gpu.h and, where the device is present, timed with device events:
//   global  grid-stride float4 read, warps per unit swept 1..max -> [mem.<level 0>]
//           bandwidth_curve_gbps keyed by bytes in flight per unit (resident warps x lanes x
//           16 B x 4 loads: what a unit requests in one iteration) and bandwidth_gbps (the best)
//   shared  reads with a stride of 1..32 words per lane -> [mem.<level 1>] bandwidth_gbps
//           (stride 1) and, per stride, the bank replay factor (printed)
//   fma     an m x n f32 accumulator tile updated by broadcast FMAs, one warp per TEU
//           (Roller's compute DB) -> f32_fma_<m>x<n>_gflops_per_teu; the largest tile at full
//           occupancy -> f32_gflops
//   mma     f16 16x16x16 matrix instructions (cuda sm_70+: WMMA; hip gfx90a: MFMA)
//           -> mma_f16_gflops
//   launch  an empty kernel launched and waited for one at a time -> launch_overhead_us

#define RT_CALIB_GPU_MAX_SAMPLES  256
#define RT_CALIB_GPU_FMA_UNROLL   8 // tile updates per loop iteration of the fma probe
#define RT_CALIB_GPU_MMA_CHAINS   4 // independent accumulators of the mma probe
#define RT_CALIB_GPU_SHARED_WORDS 4096

typedef enum rt_calib_gpu_kind {
    RT_CALIB_GPU_GLOBAL,
    RT_CALIB_GPU_SHARED,
    RT_CALIB_GPU_FMA,
    RT_CALIB_GPU_MMA,
    RT_CALIB_GPU_LAUNCH,
    RT_CALIB_GPU_KIND_COUNT
} rt_calib_gpu_kind;

// One generated kernel.
typedef struct rt_calib_gpu_kernel {
    rt_calib_gpu_kind kind;
    int32_t m, n;       // fma: the register tile
    char name[48];      // the kernel function: "rt_calib_fma_4x4"
    const char *source; // the text compiled (opencl: every probe in one program)
    rt_gpu_binary *bin; // after rt_calib_gpu_compile; NULL when it failed
} rt_calib_gpu_kernel;

// One measurement: a kernel, its launch and the work one launch does.
typedef struct rt_calib_gpu_meas {
    int32_t kernel;         // index into plan->kernels
    int32_t warps_per_unit; // global: resident warps per unit
    int32_t stride_words;   // shared: words between the reads of neighbouring lanes
    int32_t threads_per_block;
    int32_t blocks_per_unit; // 0: as many as are resident (occupancy of the compiled kernel)
    int64_t elems;           // global: floats read
    int64_t iters;           // loop count (shared, fma, mma; set by the runner); launch: launches
    rt_gpu_launch launch;    // set by the runner
    double work;             // bytes or flop of one launch (set by the runner); 0 for launch
    double scale;            // multiplies the throughput (fma per unit: 1 / units)
    rt_calib_value v;        // where the value goes; value and stats filled by finish
    int32_t n_samples;
    double samples_ns[RT_CALIB_GPU_MAX_SAMPLES]; // launch: ns per launch; else ns per launch
} rt_calib_gpu_meas;

typedef struct rt_calib_gpu_plan {
    const rt_device *dev;
    int32_t n_kernels;
    rt_calib_gpu_kernel *kernels;
    int32_t n_meas;
    rt_calib_gpu_meas *meas;
    char compiled_arch[128]; // after rt_calib_gpu_compile: what the probes were compiled for
    char device_name[64];    // after a run: the live device
} rt_calib_gpu_plan;

// Warps per unit of the global-memory sweep for dev: powers of 2 (quick: of 4) from 1 to
// max_threads_per_unit / lanes, the maximum always included; at most RT_MAX_CURVE_POINTS.
// Returns the count written to out.
int32_t rt_calib_gpu_sweep(const rt_device *dev, bool quick, int32_t *out);
// Bytes in flight per unit (the curve's key) for w resident warps per unit.
int64_t rt_calib_gpu_inflight_bytes(const rt_device *dev, int32_t w);
// The launch that holds w warps on every unit: blocks of at most max_threads_per_block.
void rt_calib_gpu_spread(const rt_device *dev, int32_t w, int32_t *out_threads_per_block,
                         int32_t *out_blocks_per_unit);

// Plans the probes of dev (class cuda, hip or opencl) and generates their sources in a.
// quick: a few sizes and tile shapes (tests). Errors: RT_ERR_DEVICE (not a GPU class, missing
// GPU keys), RT_ERR_NOMEM.
rt_status rt_calib_gpu_plan_new(rt_arena *a, const rt_device *dev, bool quick,
                                rt_calib_gpu_plan **out, rt_err *err);

// Compiles every kernel of the plan (n_threads compiler threads, 0 = 2). Errors: RT_ERR_BACKEND
// for a kernel that does not compile (log in err->log) or that spills registers.
rt_status rt_calib_gpu_compile(rt_arena *a, rt_calib_gpu_plan *plan, int32_t n_threads,
                               rt_err *err);

// Resource usage of the compiled kernels, one line each.
void rt_calib_gpu_print_resources(const rt_calib_gpu_plan *plan, rt_buf *out);

// Turns the samples of every measurement into rt_calib_values appended to out (pure: no
// device needed): throughput = work / time x scale (value: the best sample), launch overhead =
// the time (value: the lowest), the global curve's best point as bandwidth_gbps, shared
// replay factors against stride 1 in the notes. Errors: RT_ERR_BACKEND for a measurement
// without samples or with a non-positive or non-finite time, RT_ERR_USAGE when out is full.
rt_status rt_calib_gpu_finish(rt_calib_gpu_plan *plan, rt_calib_result *out, rt_err *err);

// Plans, compiles, opens the device, times every probe (opts->repeats samples each, sampled
// again once when the spread exceeds opts->max_spread) and finishes into out. *out_plan (may be
// NULL) receives the plan, also on failure after compiling. Without a GPU the error is
// RT_ERR_BACKEND "no GPU: ...; probes compiled for ARCH but not run" (rt_gpu_err_is_absent).
rt_status rt_calib_gpu_run(rt_arena *a, const rt_device *base, const rt_calib_opts *opts,
                           rt_calib_gpu_plan **out_plan, rt_calib_result *out, rt_err *err);

// rt_calib_apply for GPU results: a device without mma_shape that gets a measured mma peak
// gets mma_shape = 16x16x16 (the shape of the probe).
rt_status rt_calib_gpu_apply(const rt_device *base, rt_calib_result *res, double max_spread,
                             const char *date, rt_device *out, rt_err *err);

// ---------------------------------------------------------------------------------------------
// GPU probes -- END
// ---------------------------------------------------------------------------------------------

#endif
