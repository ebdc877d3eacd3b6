// hal-ops.h: the behaviour of a device class, the public runtime interface of the HAL. One
// instance per class, each defined in its backend file (hal-cpu.c, hal-cuda.c, hal-hip.c,
// hal-opencl.c); hal.c only lists them (rt_hal_class_ops). Members that may be NULL say what
// NULL means. The GPU entry points of hal-gpu.h (rt_gpu_compile, rt_gpu_runtime_open, rt_gpu_run,
// rt_gpu_time, ...) check their arguments, then call these.
#ifndef RT_HAL_OPS_H
#define RT_HAL_OPS_H

#include "hal.h"
#include "hal-gpu.h"

struct rt_gpu_exec;

struct rt_hal_ops {
    const char *class_name; // "cuda", "hip", "opencl", "cpu": rt_devclass_name of its row
    // Extra validation of the loaded numbers for this class (e.g. arch spelling). NULL: none.
    rt_status (*validate)(const rt_device *dev, rt_err *err);
    // Compiles source (kernel kernel_name) for dev into bin, whose fields rt_gpu_compile has
    // defaulted (resources -1): the image, symbol, compiled_arch, options, log and resources.
    // NULL: the class compiles no source text (cpu: its kernels are LLVM modules built by
    // codegen and JIT-compiled through hal-cpu.h).
    rt_status (*compile)(rt_arena *a, const rt_device *dev, const char *source,
                         const char *kernel_name, const rt_gpu_compile_options *opts,
                         rt_gpu_binary *bin, rt_err *err);
    // Opens the class's driver and its device for rt (rt->dev, rt->arena), leaving its state in
    // rt->impl (and, for a launch-style driver, rt->driver); everything is released with
    // rt->arena. "no GPU: " errors when the driver or a device is absent. NULL: no runtime.
    rt_status (*load)(rt_gpu_runtime *rt, rt_err *err);
    // Runs one execution x (x->reps == 0: every step once, then the copy_out buffers are read
    // back into x->host_staging). NULL: no runtime.
    rt_status (*run)(rt_gpu_runtime *rt, struct rt_gpu_exec *x, rt_err *err);
    // Times one execution x (x->reps > 0: x->warmup untimed rounds, then one sample per round
    // into x->samples_ns, the method in x->method). NULL: no runtime.
    rt_status (*time)(rt_gpu_runtime *rt, struct rt_gpu_exec *x, rt_err *err);
};

#endif
