// calib.h: measuring a device for rtcalib. Three parts: the statistics of repeated probes and
// the refusal of noisy values; the host-CPU probes (calib-cpu.c: microbenchmarks generated as
// LLVM IR, JIT-compiled and run on a pinned thread pool) and the merge of their results into a
// device; and writing a device back as an INI file in the schema of device-ini.md, atomically
// (hal-ini-write.c).
#ifndef RT_CALIB_H
#define RT_CALIB_H

#include "hal.h"

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

#define RT_CALIB_MAX_VALUES 64

// Where a measured value goes in the device. RT_CALIB_REPORT values are printed only.
typedef enum rt_calib_target {
    RT_CALIB_REPORT,
    RT_CALIB_PEAK,     // [compute] <dtype>_gflops
    RT_CALIB_MMA,      // [compute] mma_<dtype>_gflops
    RT_CALIB_INSN,     // [compute] <insn>_gflops_per_teu
    RT_CALIB_LEVEL_BW, // [mem.<level>] bandwidth_gbps
    RT_CALIB_CURVE,    // one point of [mem.<level>] bandwidth_curve_gbps
    RT_CALIB_LAUNCH,   // [device] launch_overhead_us
    RT_CALIB_SYNC,     // [device] sync_overhead_us
} rt_calib_target;

typedef struct rt_calib_value {
    char name[64];          // what was measured: "f32 fma, 2 threads"
    rt_calib_target target;
    rt_dtype dtype;         // RT_CALIB_PEAK, RT_CALIB_MMA
    char insn[48];          // RT_CALIB_INSN: "f32_fma"
    int32_t level;          // RT_CALIB_LEVEL_BW, RT_CALIB_CURVE: index into dev->level
    int64_t curve_bytes;    // RT_CALIB_CURVE: bytes moved per unit
    const char *unit;       // "GFLOP/s", "GB/s", "us"
    int32_t threads;
    double value;           // the best repeat (throughputs: the highest; overheads: the lowest)
    rt_calib_stats stats;   // over the repeats, in the unit of value
    bool skipped;           // not measured; note says why
    bool refused;           // measured but too noisy to write (rt_calib_apply); note says why
    char note[512];
} rt_calib_value;

typedef struct rt_calib_result {
    int32_t n_values;
    rt_calib_value values[RT_CALIB_MAX_VALUES];
    int32_t threads;
    char cpu_name[64];  // LLVM's name of the host CPU
    double seconds;     // wall time of the whole run
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
    void (*progress)(void *ctx, const rt_calib_event *ev); // may be NULL
    void *progress_ctx;
} rt_calib_opts;

// Runs every probe the host supports on the levels of base (a class cpu device). Errors:
// RT_ERR_BACKEND (LLVM, threads), RT_ERR_NOMEM, RT_ERR_USAGE (bad opts), RT_ERR_DEVICE (base
// not class cpu).
rt_status rt_calib_cpu_run(const rt_device *base, const rt_calib_opts *opts,
                           rt_calib_result *out, rt_err *err);

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

#endif
