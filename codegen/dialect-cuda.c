// dialect-cuda.c: the CUDA C constructs of the GPU emitter (emit-gpu.c prints every kernel; this
// table only says how CUDA spells a kernel, shared memory, thread/block indices, barriers,
// vector types and math functions). Sources are compiled in-process by NVRTC (hal-cuda.c), so
// nothing here may need a header: infinity comes from a bit pattern, not <math.h>. The one
// exception is 16-bit floats: cuda_fp16.h / cuda_bf16.h (NVRTC's built-in copies, or the -I of
// hal-cuda.c), included only by kernels with such buffers.
#include "gpu.h"

// clang-format off
const rt_gpu_dialect rt_gpu_dialect_cuda = {
    .target            = "cuda",
    .ext               = "cu",
    .prelude           = "",
    .kernel_qual       = "extern \"C\" __global__",
    .bounds_fmt        = "__launch_bounds__(%d, 1)",
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
    .inf               = "__int_as_float(0x7f800000)",
    .fn_qual           = "static __device__ __forceinline__",
    .fmod_f32          = "fmodf",
    .fn_f32 = {"expf", "logf", "sqrtf", "rsqrtf", "tanhf", NULL, "erff", "fabsf", "fmaxf", "fminf"},
    .fn_f64 = {"exp", "log", "sqrt", "rsqrt", "tanh", NULL, "erf", "fabs", "fmax", "fmin"},
    .f16_type          = "__half",
    .f16_prelude       = "#include <cuda_fp16.h>\n"
                         "#define rt_ld_f16(p, i) __half2float((p)[i])\n"
                         "#define rt_st_f16(p, i, v) ((p)[i] = __float2half_rn(v))\n",
    .bf16_type         = "__nv_bfloat16",
    .bf16_prelude      = "#include <cuda_bf16.h>\n"
                         "#define rt_ld_bf16(p, i) __bfloat162float((p)[i])\n"
                         "#define rt_st_bf16(p, i, v) ((p)[i] = __float2bfloat16_rn(v))\n",
};
// clang-format on
