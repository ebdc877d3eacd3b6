// hal-gpu.h: the GPU backends of the HAL (classes cuda, hip, opencl) — compile kernel source
// in-process (NVRTC, hipRTC, the OpenCL driver), report resource usage and occupancy, and, where
// a device is present, load, launch and time kernels through a driver opened at run time.
// The run layer and the calibration include it; vendor headers stay inside hal-cuda.c,
// hal-hip.c and hal-opencl.c. Every entry point reaches the backend of dev->devclass through
// that class's ops (hal-ops.h), which each backend file defines; the backends' own state is in
// hal-gpu-impl.h.
#ifndef RT_HAL_GPU_H
#define RT_HAL_GPU_H

#include "hal.h"

// ---------------------------------------------------------------------------------------------
// Compilation and resources
// ---------------------------------------------------------------------------------------------

typedef struct rt_gpu_compile_options {
    int32_t threads_per_block; // for the occupancy report; 0 = dev->max_threads_per_block
    int32_t max_regs;          // cuda: --maxrregcount; 0 = compiler's choice (hip/opencl: ignored)
    double timeout_s;          // rt_gpu_compile_many only: per source; 0 = 120 s
    int32_t n_extra;           // extra compiler options, passed as given after rtgen's own
    const char *const *extra;
} rt_gpu_compile_options;

// Resource usage of one kernel, read from the compiler's report (ptxas -v log for cuda, the code
// object's metadata for hip, clGetKernelWorkGroupInfo for opencl). -1 = the backend cannot say.
typedef struct rt_gpu_resources {
    int32_t regs;              // 32-bit registers per thread (VGPRs on hip)
    int32_t sregs;             // scalar registers per wavefront (hip SGPRs); -1 elsewhere
    int64_t spill_store_bytes; // cuda: bytes; hip: VGPR+SGPR spill count x 4
    int64_t spill_load_bytes;
    int64_t smem_bytes;            // static shared memory / LDS / local memory per block
    int64_t stack_frame_bytes;     // per thread (private memory on opencl)
    int32_t barriers;              // named barriers used (cuda); -1 elsewhere
    int32_t max_threads_per_block; // what the compiled kernel allows (opencl/hip); -1 unknown
} rt_gpu_resources;

// Occupancy of a unit (SM / CU) for one block size, from the device's INI numbers.
typedef struct rt_gpu_occupancy {
    int32_t threads_per_block;
    int32_t blocks_per_unit; // resident blocks; 0 = the kernel does not fit at all
    double occupancy;        // resident threads / max_threads_per_unit, 0..1
    const char *limiter;     // "threads", "blocks", "registers", "shared memory"
} rt_gpu_occupancy;

typedef struct rt_gpu_binary {
    rt_devclass devclass;
    const char *kernel_name; // as asked for
    const char *symbol;      // the name to load (cuda: lowered name)
    char compiled_arch[128]; // "sm_75", "gfx906", the OpenCL device name
    const char *note;        // e.g. why compiled_arch differs from dev->arch; NULL: none
    const uint8_t *image;    // CUBIN / code object / OpenCL program binary
    size_t image_bytes;
    const char *source;  // the source text (the opencl runtime builds from it)
    const char *options; // the options used, space separated
    const char *log;     // the compiler's log (may be empty)
    double compile_ms;
    rt_gpu_resources res;
    rt_gpu_occupancy occ;
} rt_gpu_binary;

// Compiles source for dev (class cuda, hip or opencl) and reports resources and occupancy.
// kernel_name is the __global__ / __kernel function. opts may be NULL. Everything returned lives
// in a. Errors: RT_ERR_BACKEND with the compiler log in err->log (syntax errors, unsupported
// arch, library not built in), RT_ERR_DEVICE for a class that is not a GPU class.
rt_status rt_gpu_compile(rt_arena *a, const rt_device *dev, const char *source,
                         const char *kernel_name, const rt_gpu_compile_options *opts,
                         rt_gpu_binary **out, rt_err *err);

// One source of rt_gpu_compile_many, with its outcome.
typedef struct rt_gpu_compile_job {
    const char *source;
    const char *kernel_name;
    rt_gpu_binary *out; // NULL when the compile failed or timed out
    rt_status status;
    rt_err err; // the job's own error (log in err.log, arena-owned)
} rt_gpu_compile_job;

// Compiles n jobs on up to n_threads threads (0 = 2), each limited to opts->timeout_s. A compile
// that exceeds its timeout is reported as failed (RT_ERR_BACKEND, "compile timed out ...") and
// left to finish in the background (see rt_gpu_compile_pending). Results live in a. Returns
// RT_OK when every job was attempted (check each job's status); errors only for bad arguments
// or out of memory.
rt_status rt_gpu_compile_many(rt_arena *a, const rt_device *dev, const rt_gpu_compile_options *opts,
                              int32_t n_threads, rt_gpu_compile_job *jobs, int32_t n, rt_err *err);

// Number of timed-out compiles still running in the background. A program waits for 0 (bounded)
// before exiting so that no compiler thread is torn down mid-compile.
int32_t rt_gpu_compile_pending(void);

// Occupancy of a kernel with resources res at threads_per_block threads on dev (CUDA occupancy
// calculator rules: warps allocated whole, registers in per-warp granules, shared memory per
// block against the unit's shared level). Errors: RT_ERR_DEVICE when threads_per_block is not in
// 1..max_threads_per_block or the device lacks the GPU keys.
rt_status rt_gpu_occupancy_of(const rt_device *dev, const rt_gpu_resources *res,
                              int32_t threads_per_block, rt_gpu_occupancy *out, rt_err *err);

// ---------------------------------------------------------------------------------------------
// Runtime: load, launch, time (needs the device present)
// ---------------------------------------------------------------------------------------------

typedef struct rt_gpu_runtime rt_gpu_runtime;

// Opens the driver of dev's class at run time (dlopen libcuda.so.1 / libamdhip64.so.5; the
// OpenCL ICD), picks the device and checks dev->arch against it. The runtime is closed when a is
// freed. Errors: RT_ERR_BACKEND "no GPU: ..." when the driver or a device is absent (see
// rt_gpu_err_is_absent), RT_ERR_DEVICE at dev->arch_loc when the live device's architecture
// differs from the INI's.
rt_status rt_gpu_runtime_open(rt_arena *a, const rt_device *dev, rt_gpu_runtime **out, rt_err *err);
// True when err came from rt_gpu_runtime_open finding no driver or no device (skip, not fail).
bool rt_gpu_err_is_absent(const rt_err *err);
// The live device's name ("NVIDIA H100 80GB HBM3", the OpenCL device name).
const char *rt_gpu_runtime_device_name(const rt_gpu_runtime *rt);
// The arena the runtime lives in (and the kernels it loads are kept in): rt_gpu_runtime_open's.
rt_arena *rt_gpu_runtime_arena(const rt_gpu_runtime *rt);

typedef enum rt_gpu_arg_kind {
    RT_GPU_ARG_BUFFER, // device buffer of n_elems elements of dtype, from/to host doubles
    RT_GPU_ARG_I32,
    RT_GPU_ARG_I64,
    RT_GPU_ARG_F32,
    RT_GPU_ARG_F64,
    RT_GPU_ARG_LOCAL, // opencl: __local buffer of local_bytes (cuda/hip: use dyn_smem_bytes)
    RT_GPU_ARG_COUNT
} rt_gpu_arg_kind;

typedef struct rt_gpu_arg {
    rt_gpu_arg_kind kind;
    rt_dtype dtype;      // BUFFER: element type on the device
    int64_t n_elems;     // BUFFER: element count (> 0)
    double *host;        // BUFFER: n_elems values, converted to dtype; NULL = zero-filled
    bool copy_out;       // BUFFER: read back into host (rounded values of dtype) after rt_gpu_run
    int64_t i;           // I32 / I64
    double f;            // F32 / F64
    int64_t local_bytes; // LOCAL
    // BUFFER: 0, or 1 + the index of an earlier BUFFER argument of the same dtype (itself no
    // view) whose elements [view_offset, view_offset + n_elems) this argument is: no memory of
    // its own, nothing uploaded or read back for it (host and copy_out are ignored; the parent's
    // are used). view_offset in bytes must be a multiple of RT_GPU_VIEW_ALIGN_BYTES (an OpenCL
    // sub-buffer's origin must be a multiple of the device's base address alignment).
    int32_t view_of;
    int64_t view_offset;
} rt_gpu_arg;

// The alignment of a view's offset in bytes: what every OpenCL device asks of a sub-buffer's
// origin (CL_DEVICE_MEM_BASE_ADDR_ALIGN is at most 4096 bits).
#define RT_GPU_VIEW_ALIGN_BYTES 512

typedef struct rt_gpu_launch {
    int64_t grid[3];  // blocks (work-groups) per dimension; 0 counts as 1
    int32_t block[3]; // threads (work-items) per block; 0 counts as 1. OpenCL global = grid*block
    int64_t dyn_smem_bytes; // cuda/hip dynamic shared memory per block
} rt_gpu_launch;

// One launch of a sequence (the phases of a generated kernel): every kernel of a sequence takes
// the same argument list, on the same device buffers, each launched after the previous one; a
// step may add int arguments of its own after them (a tree level's index, for the kernels that
// run a recursion level by level: one step per level).
#define RT_GPU_STEP_MAX_INTS 2
typedef struct rt_gpu_step {
    const rt_gpu_binary *bin;
    rt_gpu_launch cfg;
    int32_t n_ints; // 0..RT_GPU_STEP_MAX_INTS trailing int (32-bit) arguments
    int32_t ints[RT_GPU_STEP_MAX_INTS];
    // The kernel's own argument list where the kernels of a sequence take different ones (the
    // defs of a layer on the layer's buffers): its argument j is the sequence's argument
    // arg_map[j] (0 <= arg_map[j] < n_args; an argument may be passed to several), its ints
    // after them. NULL: the whole list in order (n_mapped ignored).
    const int32_t *arg_map;
    int32_t n_mapped;
} rt_gpu_step;

// How a timing's samples were taken (rt_gpu_timing.method): the backend's device events, or,
// where the runtime has none, the host's monotonic clock around launches followed by a wait.
#define RT_GPU_TIMED_WALL "wall clock around synchronised launches (no device events)"

typedef struct rt_gpu_timing {
    int32_t warmup, reps;
    double min_ns, median_ns, mean_ns;
    const char *method; // "CUDA events (cuEventElapsedTime)", ..., or RT_GPU_TIMED_WALL
} rt_gpu_timing;

// Uploads the buffers, launches the kernel once, waits, reads back the copy_out buffers.
rt_status rt_gpu_run(rt_gpu_runtime *rt, const rt_gpu_binary *bin, const rt_gpu_launch *cfg,
                     rt_gpu_arg *args, int32_t n_args, rt_err *err);
// Uploads the buffers, launches warmup + reps times and times each of the reps with device
// events (cuEvent / hipEvent / OpenCL profiling; the wall clock where there are none); reads
// nothing back. reps >= 1.
rt_status rt_gpu_time(rt_gpu_runtime *rt, const rt_gpu_binary *bin, const rt_gpu_launch *cfg,
                      rt_gpu_arg *args, int32_t n_args, int32_t warmup, int32_t reps,
                      rt_gpu_timing *out, rt_err *err);
// rt_gpu_run over a sequence: uploads the buffers once, launches steps[0..n_steps) in order on
// the device-resident buffers, waits, reads back the copy_out buffers. n_steps >= 1.
rt_status rt_gpu_run_steps(rt_gpu_runtime *rt, const rt_gpu_step *steps, int32_t n_steps,
                           rt_gpu_arg *args, int32_t n_args, rt_err *err);
// rt_gpu_time over a sequence: one warm-up or repetition launches every step in order; a sample
// spans the whole sequence (from before the first launch to after the last).
rt_status rt_gpu_time_steps(rt_gpu_runtime *rt, const rt_gpu_step *steps, int32_t n_steps,
                            rt_gpu_arg *args, int32_t n_args, int32_t warmup, int32_t reps,
                            rt_gpu_timing *out, rt_err *err);

#endif
