// dialect-opencl.c: the OpenCL C 1.2 constructs of the GPU emitter (emit-gpu.c prints every
// kernel; this table only says how OpenCL spells them): __kernel with a required work-group
// size, __global buffers, __local arrays, get_local_id / get_group_id, barrier(), overloaded
// math. This is how the tile programs of CUDA and HIP devices run on PoCL for the numerical
// checks (--emit=opencl), and the native target of opencl devices. 16-bit floats use core
// OpenCL only (no cl_khr_fp16): half buffers through vload_half / vstore_half_rte, bfloat16 as
// ushort widened by a shift and narrowed by the host's rounding (hal-gpu.c).
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
    .barrier_global    = "barrier(CLK_LOCAL_MEM_FENCE | CLK_GLOBAL_MEM_FENCE);",
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
    .f16_type          = "half",
    .f16_prelude       = "#define rt_ld_f16(p, i) vload_half((i), (p))\n"
                         "#define rt_st_f16(p, i, v) vstore_half_rte((v), (i), (p))\n",
    .bf16_type         = "ushort",
    .bf16_prelude      = "static inline ushort rt_f32_to_bf16(float f) {\n"
                         "    uint x = as_uint(f);\n"
                         "    if ((x & 0x7fffffffu) > 0x7f800000u)\n"
                         "        return (ushort)((x >> 16) | 0x40u);\n"
                         "    return (ushort)((x + 0x7fffu + ((x >> 16) & 1u)) >> 16);\n"
                         "}\n"
                         "#define rt_ld_bf16(p, i) as_float((uint)(p)[i] << 16)\n"
                         "#define rt_st_bf16(p, i, v) ((p)[i] = rt_f32_to_bf16(v))\n",
};
// clang-format on
