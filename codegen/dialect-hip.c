// dialect-hip.c: the HIP constructs of the GPU emitter (emit-gpu.c prints every kernel; this
// table only says how HIP spells them). HIP accepts CUDA's spelling of kernels, indices and
// barriers; what differs is the helper qualifier and the infinity builtin of clang. Sources are
// compiled in-process by hipRTC (hal-hip.c) for the device's gfx architecture, which predefines the
// kernel language and __HIPCC_RTC__ without any header; hipcc (`hipcc --genco`) does neither, so
// the prelude includes the header everywhere but under hipRTC. 16-bit floats need no header
// either: half is clang's _Float16 (conversions round to nearest even), bfloat16 is an unsigned
// short widened by a shift and narrowed by the same rounding as the host (hal-gpu.c).
#include "gpu.h"

// clang-format off
const rt_gpu_dialect rt_gpu_dialect_hip = {
    .target            = "hip",
    .ext               = "hip.cpp",
    .prelude           = "#if !defined(__HIPCC_RTC__)\n"
                         "#include <hip/hip_runtime.h>\n"
                         "#endif\n",
    .kernel_qual       = "extern \"C\" __global__",
    .bounds_fmt        = "__launch_bounds__(%d)",
    .bounds_after_void = true,
    .global_qual       = "",
    .shared_qual       = "__shared__",
    .restrict_kw       = "__restrict__",
    .thread_idx        = "threadIdx.x",
    .block_idx         = {"blockIdx.x", "blockIdx.y", "blockIdx.z"},
    .barrier           = "__syncthreads();",
    .barrier_global    = "__syncthreads();", // orders global and shared accesses alike
    .unroll            = "#pragma unroll",
    .i64               = "long long",
    .vec4              = "float4",
    .vec_fns           = false,
    .align16           = "__attribute__((aligned(16)))",
    .inf               = "__builtin_huge_valf()",
    .fn_qual           = "static __device__ inline",
    .fmod_f32          = "fmodf",
    .fn_f32 = {"expf", "logf", "sqrtf", "rsqrtf", "tanhf", NULL, "erff", "fabsf", "fmaxf", "fminf"},
    .fn_f64 = {"exp", "log", "sqrt", "rsqrt", "tanh", NULL, "erf", "fabs", "fmax", "fmin"},
    .f16_type          = "_Float16",
    .f16_prelude       = "#define rt_ld_f16(p, i) ((float)(p)[i])\n"
                         "#define rt_st_f16(p, i, v) ((p)[i] = (_Float16)(v))\n",
    .bf16_type         = "unsigned short",
    .bf16_prelude      = "static __device__ inline unsigned short rt_f32_to_bf16(float f) {\n"
                         "    unsigned int x = __float_as_uint(f);\n"
                         "    if ((x & 0x7fffffffu) > 0x7f800000u)\n"
                         "        return (unsigned short)((x >> 16) | 0x40u);\n"
                         "    return (unsigned short)((x + 0x7fffu + ((x >> 16) & 1u)) >> 16);\n"
                         "}\n"
                         "#define rt_ld_bf16(p, i) __uint_as_float((unsigned int)(p)[i] << 16)\n"
                         "#define rt_st_bf16(p, i, v) ((p)[i] = rt_f32_to_bf16(v))\n",
};
// clang-format on
