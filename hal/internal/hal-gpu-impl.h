// hal-gpu-impl.h: internal to the GPU backends of the HAL (hal-gpu.c, hal-cuda.c, hal-hip.c,
// hal-opencl.c) and to the white-box tests that stand a fake driver in for one: the runtime's
// state, one execution of a kernel sequence, the helpers the backends share, and the table of
// driver calls of the launch-style drivers. Nothing above the HAL includes it: the run layer
// sees the public hal-gpu.h and reaches a class's backend through its ops (hal-ops.h).
#ifndef RT_HAL_GPU_IMPL_H
#define RT_HAL_GPU_IMPL_H

#include "hal-gpu.h"
#include "hal-ops.h"
#include "hal-impl.h"

// ---------------------------------------------------------------------------------------------
// The runtime and one execution as the backends see them (hal-gpu.c fills, a class's run and
// time ops carry out).
// ---------------------------------------------------------------------------------------------

// A loaded sequence of kernels plus its device buffers, owned by the backend.
typedef struct rt_gpu_exec {
    const rt_gpu_step *steps; // n_steps >= 1 kernels, launched in order on the same buffers
    int32_t n_steps;
    rt_gpu_arg *args;
    int32_t n_args;
    void **host_staging;  // per BUFFER arg: the dtype-converted host bytes (hal-gpu.c fills)
    int32_t warmup, reps; // reps == 0: one launch of the sequence, then read back
    double *samples_ns;   // reps entries when reps > 0: one per launch of the whole sequence
    const char *method;   // reps > 0: how the samples were taken (the backend sets it)
    // Launch-style drivers: per step with an arg_map, its own parameter list (n_mapped
    // pointers into the shared one, then room for its ints); NULL entries: the shared list.
    void ***step_params;
} rt_gpu_exec;

struct rt_gpu_runtime {
    rt_devclass devclass;
    const rt_device *dev;
    rt_arena *arena;
    char device_name[128];
    void *impl;                   // the backend's state
    struct rt_gpu_driver *driver; // cuda, hip (tests: a fake): what hal-gpu.c launches on;
                                  // NULL: the backend's own exec (opencl)
};

// Shared by the backends: "no GPU: " errors (rt_gpu_err_is_absent recognises them) and the
// element size of a buffer argument.
#define RT_GPU_ABSENT_PREFIX "no GPU: "
size_t rt_gpu_arg_bytes(const rt_gpu_arg *arg);

// A failed compile: "WHAT failed for TARGET (WHY): <first error line of log>", with the whole
// log in err->log (unless an earlier error set one). Returns RT_ERR_BACKEND.
rt_status rt_gpu_compile_fail(rt_arena *a, const char *what, const char *target, const char *why,
                              const char *log, rt_err *err);
// The n compiler options o joined with spaces, in a. Errors: RT_ERR_NOMEM (also for a NULL
// option, the trace of a failed rt_arena_printf).
rt_status rt_gpu_join_options(rt_arena *a, const char *const *o, int32_t n, const char **out,
                              rt_err *err);

// ---------------------------------------------------------------------------------------------
// Launch-style drivers (the CUDA driver API, the HIP runtime): hal-gpu.c loads modules, moves
// buffers, launches, times with events and copies out through this table of driver calls, and
// each backend supplies thin adapters over its dlopen'd entry points. Every int-returning op
// returns 0 on success or the driver's nonzero result code (CUresult, hipError_t), which
// error_name and error_string describe; out-parameters are read only after success. ctx is the
// backend's state, passed to every op.
// ---------------------------------------------------------------------------------------------

typedef uint64_t rt_gpu_devptr; // a device address; a buffer parameter is a pointer to one

typedef struct rt_gpu_driver_ops {
    const char *class_name; // "cuda": in messages
    const char *image_name; // "CUBIN": in the message for a binary without one
    // The driver's names of the calls behind each step, for messages.
    const char *bind_call, *load_call, *function_call, *smem_call, *upload_calls, *launch_call,
        *sync_call, *timed_calls, *download_call;
    const char *event_timer; // rt_gpu_timing.method of event-timed samples
                             // ("CUDA events (cuEventElapsedTime)")
    int (*bind)(void *ctx);  // make the driver's context current on this thread; NULL: none
    int (*module_load)(void *ctx, const void *image, void **out_module);
    int (*module_function)(void *ctx, void *module, const char *symbol, void **out_fn);
    void (*module_unload)(void *ctx, void *module);
    // Called once per exec, before the launches, with cfg->dyn_smem_bytes, so that the driver
    // can allow more than its default (cuda: above 48 KiB); NULL: nothing to allow.
    int (*set_dyn_smem)(void *ctx, void *fn, int64_t bytes);
    int (*alloc)(void *ctx, size_t bytes, rt_gpu_devptr *out);
    void (*free)(void *ctx, rt_gpu_devptr p);
    int (*htod)(void *ctx, rt_gpu_devptr dst, const void *src, size_t bytes);
    int (*dtoh)(void *ctx, void *dst, rt_gpu_devptr src, size_t bytes);
    // One asynchronous launch on the default stream; params: one pointer per kernel argument.
    int (*launch)(void *ctx, void *fn, const unsigned grid[3], const unsigned block[3],
                  unsigned dyn_smem_bytes, void **params);
    int (*sync)(void *ctx); // waits for every launch
    // Events; event_create NULL: the driver has none, and timed launches are timed with the
    // wall clock around launch + sync (RT_GPU_TIMED_WALL).
    int (*event_create)(void *ctx, void **out);
    int (*event_record)(void *ctx, void *ev); // on the default stream
    int (*event_synchronize)(void *ctx, void *ev);
    int (*event_elapsed_ms)(void *ctx, void *start, void *end, float *out_ms);
    void (*event_destroy)(void *ctx, void *ev);
    const char *(*error_name)(void *ctx, int result);   // never NULL
    const char *(*error_string)(void *ctx, int result); // NULL (op or result): none
} rt_gpu_driver_ops;

// A timer of kernels from the device's own record of each kernel it executed (CUPTI's activity
// API on cuda: hal-cupti.c), which times a driver's repetitions in place of events where the
// backend offers one. Both ops return 0, or nonzero with the reason in why; hal-gpu.c then times
// with events and notes the reason in rt_gpu_timing.method.
typedef struct rt_gpu_kernel_timer {
    const char *name;   // "CUPTI": in the note of a fallback
    const char *method; // rt_gpu_timing.method of its samples
    // Starts recording every kernel executed from now on (opens the library at first use).
    int (*begin)(char *why, size_t why_size);
    // Called once after every begin that returned 0, when the launches since were waited for:
    // stops recording and gives the start and end on the device (ns) of the n kernels launched
    // since begin, in launch order, each checked to be symbols[i]. n == 0 only stops (after a
    // failed launch).
    int (*end)(const char *const *symbols, int64_t n, uint64_t *start_ns, uint64_t *end_ns,
               char *why, size_t why_size);
} rt_gpu_kernel_timer;

// CUPTI's kernel timer (hal-cupti.c); NULL when rtgen was built without CUPTI.
const rt_gpu_kernel_timer *rt_cupti_timer(void);

typedef struct rt_gpu_module rt_gpu_module;

// A launch-style driver as rt_gpu_runtime holds it, embedded in the backend's state.
typedef struct rt_gpu_driver {
    const rt_gpu_driver_ops *ops;
    void *ctx;
    rt_gpu_module *modules; // loaded binaries, newest first (arena-owned nodes)
    // The kernel timer of the repetitions; NULL: events (or the wall clock). A timer that fails
    // once is dropped for the driver's life, and event_method says why (arena text).
    const rt_gpu_kernel_timer *timer;
    const char *event_method; // NULL: ops->event_timer
} rt_gpu_driver;

// Unloads every module of d (the backend's close, with its context current).
void rt_gpu_driver_unload_all(rt_gpu_driver *d);
// "WHAT failed: NAME (CODE)[: TEXT]" for driver result r. Returns RT_ERR_BACKEND.
rt_status rt_gpu_driver_fail(const rt_gpu_driver_ops *ops, void *ctx, const char *what, int r,
                             rt_err *err);

// The run and time ops of the launch-style classes (cuda, hip): the execution of x on
// rt->driver (module cache, buffers, launches, events), the same for both ops (x->reps says
// which).
rt_status rt_gpu_driver_exec(rt_gpu_runtime *rt, rt_gpu_exec *x, rt_err *err);

#endif
