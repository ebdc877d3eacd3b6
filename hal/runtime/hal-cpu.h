// hal-cpu.h: the CPU device class at run time — an ORC LLJIT for the device's CPU (LLVM 16),
// a small thread pool that runs a kernel's phases over the cores, and fork-based isolation of
// one candidate run (a crash or a hang is reported, never fatal). LLVM objects cross this
// header untyped (void *) so that only hal-cpu.c and codegen/emit-llvm*.c include llvm-c.
#ifndef RT_HAL_CPU_H
#define RT_HAL_CPU_H

#include "rt.h"
#include "hal.h"

// ---------------------------------------------------------------------------------------------
// JIT
// ---------------------------------------------------------------------------------------------

typedef struct rt_cpu_jit rt_cpu_jit;

// Does code built for dev run on this host? The detected host (or arch "native") does; a device
// of another instruction set, or with a feature this CPU lacks, does not: *why then says so
// ("not this host (a aarch64 device; ...)", in the arena).
bool rt_cpu_runs_here(rt_arena *a, const rt_device *dev, const char **why);

// Creates a JIT whose target machine is the device's CPU: the host CPU name and features when
// dev is the detected host or its arch is "native", else dev->arch with dev->features. Released
// with the arena. Errors: RT_ERR_BACKEND with LLVM's message, or when dev's code does not run
// here (rt_cpu_runs_here).
rt_status rt_cpu_jit_new(rt_arena *a, const rt_device *dev, rt_cpu_jit **out, rt_err *err);
// The same target machine and context for any CPU device, without a JIT (add_module and lookup
// fail): for emitting and compiling code that does not run here. The device's isa gives the
// triple (<isa>-unknown-linux-gnu unless it is the host's). *out is NULL when this build of
// LLVM has no backend for that isa (then only C can be emitted).
rt_status rt_cpu_target_new(rt_arena *a, const rt_device *dev, rt_cpu_jit **out, rt_err *err);
// Compiles a module built in the target's context to an object in memory (and disposes of it):
// the check that code for a device that does not run here compiles. *out_bytes: its size.
rt_status rt_cpu_jit_emit_object(rt_cpu_jit *j, void *module, size_t *out_bytes, rt_err *err);
const char *rt_cpu_jit_triple(const rt_cpu_jit *j);
// Registers the LLVM backend (target, MC layer, asm printer) of an instruction set; false when
// this build links none for it (hal-cpu-targets.c, chosen in CMake). Not thread-safe.
bool rt_cpu_llvm_target_init(rt_cpu_isa isa);
void *rt_cpu_jit_context(rt_cpu_jit *j);        // LLVMContextRef to build modules in
void *rt_cpu_jit_target_machine(rt_cpu_jit *j); // LLVMTargetMachineRef (passes, data layout)
bool rt_cpu_jit_avx512(const rt_cpu_jit *j);    // the target has avx512f
const char *rt_cpu_jit_cpu_name(const rt_cpu_jit *j);
// Adds an LLVMModuleRef built in rt_cpu_jit_context (ownership passes to the JIT).
rt_status rt_cpu_jit_add_module(rt_cpu_jit *j, void *module, rt_err *err);
// Address of a JIT'd function (compiles its module on first lookup).
rt_status rt_cpu_jit_lookup(rt_cpu_jit *j, const char *name, void **out_fn, rt_err *err);

// ---------------------------------------------------------------------------------------------
// Running a kernel: phases in order, each split into contiguous chunks of work items over the
// threads, with a barrier after every phase. Each thread has its own 64-byte aligned scratch.
// ---------------------------------------------------------------------------------------------

typedef void (*rt_cpu_phase_fn)(void **args, int64_t lo, int64_t hi, float *scratch);

// A launch is a list of steps (a kernel's phases, a level-by-level phase once per level): step
// i runs fns[i] over the items first_item[i] .. first_item[i] + n_items[i] (from 0 when
// first_item is NULL), split into contiguous chunks over the threads.
typedef struct rt_cpu_launch {
    int32_t n_phases; // steps
    const rt_cpu_phase_fn *fns;
    const int64_t *n_items;
    void **args;
    int64_t scratch_bytes;     // per thread
    const int64_t *first_item; // NULL: every step's items start at 0
} rt_cpu_launch;

typedef struct rt_cpu_pool rt_cpu_pool;

// threads >= 1 (the caller is thread 0). NULL when threads or memory cannot be had. Idle
// workers spin for up to 50 us after a launch, then sleep until the next one. A pool made
// before a fork has no workers in the child: used there, it runs every chunk on the caller.
rt_cpu_pool *rt_cpu_pool_new(int32_t threads);
void rt_cpu_pool_free(rt_cpu_pool *p);
int32_t rt_cpu_pool_threads(const rt_cpu_pool *p);
// Runs l on the caller and the workers, returning when every phase is done; one launch at a
// time per pool. False when the scratch memory could not be allocated.
bool rt_cpu_pool_run(rt_cpu_pool *p, const rt_cpu_launch *l);

// ---------------------------------------------------------------------------------------------
// Isolation and timing
// ---------------------------------------------------------------------------------------------

typedef enum rt_cpu_child_status {
    RT_CPU_CHILD_OK,      // fn returned 0
    RT_CPU_CHILD_FAILED,  // fn returned nonzero (exit code in code)
    RT_CPU_CHILD_CRASHED, // killed by a signal (in code)
    RT_CPU_CHILD_TIMEOUT, // ran past the timeout and was killed
} rt_cpu_child_status;

// Runs fn(ctx) in a forked child and waits at most timeout_ms. Memory the child must report
// through comes from rt_cpu_shared_alloc (mapped shared before the fork). Errors: RT_ERR_BACKEND
// when fork fails.
rt_status rt_cpu_run_isolated(int (*fn)(void *ctx), void *ctx, double timeout_ms,
                              rt_cpu_child_status *out_status, int *out_code, rt_err *err);
// Zeroed memory shared with forked children; NULL on failure. Free with rt_cpu_shared_free.
void *rt_cpu_shared_alloc(size_t bytes);
void rt_cpu_shared_free(void *p, size_t bytes);
// Monotonic clock in nanoseconds.
double rt_cpu_now_ns(void);
// Online CPUs of this process (>= 1).
int32_t rt_cpu_online(void);

// ---------------------------------------------------------------------------------------------
// The system C compiler (the --emit=c target checked against the JIT)
// ---------------------------------------------------------------------------------------------

// Compiles C source text with `cc -O3 -march=native -fopenmp -shared -fPIC` in a temporary
// directory, loads it with dlopen (closed with the arena) and looks up names[0..n). Errors:
// RT_ERR_BACKEND with the compiler's output as err->log.
rt_status rt_cpu_cc_load(rt_arena *a, const char *c_text, const char *const *names, int32_t n,
                         void **out_fns, rt_err *err);

#endif
