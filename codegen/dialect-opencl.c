// dialect-opencl.c: the OpenCL C 1.2 constructs of the GPU emitter (emit-gpu.c prints every
// kernel; this table only says how OpenCL spells them): __kernel with a required work-group
// size, __global buffers, __local arrays, get_local_id / get_group_id, barrier(), overloaded
// math. This is how the tile programs of CUDA and HIP devices run on PoCL for the numerical
// checks (--emit=opencl), and the native target of opencl devices.
#include "gpu.h"

// clang-format off
const rt_gpu_dialect rt_gpu_dialect_opencl = {
    .target            = "opencl",
    .ext               = "cl",
    .prelude           = "#pragma OPENCL EXTENSION cl_khr_fp64 : enable\n",
    .kernel_qual       = "__kernel",
    .bounds_fmt        = "__attribute__((reqd_work_group_size(%d, 1, 1)))",
    .bounds_after_void = false,
    .global_qual       = "__global ",
    .shared_qual       = "__local",
    .restrict_kw       = "restrict",
    .thread_idx        = "get_local_id(0)",
    .block_idx         = {"get_group_id(0)", "get_group_id(1)", "get_group_id(2)"},
    .barrier           = "barrier(CLK_LOCAL_MEM_FENCE);",
    .unroll            = "#pragma unroll",
    .i64               = "long",
    .vec4              = "float4",
    .vec_fns           = true,
    .align16           = "__attribute__((aligned(16)))",
    .inf               = "INFINITY",
    .fn_qual           = "static inline",
    .fmod_f32          = "fmod",
    .fn_f32 = {"exp", "log", "sqrt", "rsqrt", "tanh", NULL, "erf", "fabs", "fmax", "fmin"},
    .fn_f64 = {"exp", "log", "sqrt", "rsqrt", "tanh", NULL, "erf", "fabs", "fmax", "fmin"},
};
// clang-format on
