// gpu.h: the GPU code generator — lowering of a ranked rProgram to GPU-structured kernel IR
// (blocks, threads, shared-memory staging, per-thread register tiles), and one emitter printing
// it as CUDA, HIP or OpenCL C through a dialect table. It only lowers and emits text: compiling
// the candidates, checking them against the reference and timing them is the run layer's
// (src/run/run-gpu.h), which reaches the device through the HAL's runtime headers.
//
// Pipeline position: rt_perf_construct (perfmodel.h) --rt_gpu_lower--> rt_gpu_kernel
//   --rt_gpu_emit--> source text (then src/run: compile, check, time, pick).
// Everything lives in the caller's arena. Output is deterministic.
#ifndef RT_GPU_H
#define RT_GPU_H

#include "rt.h"
#include "spec.h"
#include "hal.h"
#include "perfmodel.h"
#include "kir.h"

// ---------------------------------------------------------------------------------------------
// Dialects (dialect-cuda.c, dialect-hip.c, dialect-opencl.c): the constructs a target prints.
// ---------------------------------------------------------------------------------------------

typedef enum rt_gpu_target {
    RT_GPU_TARGET_CUDA,
    RT_GPU_TARGET_HIP,
    RT_GPU_TARGET_OPENCL,
    RT_GPU_TARGET_COUNT
} rt_gpu_target;

typedef struct rt_gpu_dialect {
    const char *target;              // "cuda", "hip", "opencl"
    const char *ext;                 // file extension of the source ("cu", "hip.cpp", "cl")
    const char *prelude;             // lines before the kernels (pragmas, helpers), may be ""
    const char *kernel_qual;         // before the return type: `extern "C" __global__`, `__kernel`
    const char *bounds_fmt;          // launch-bounds attribute, one %d for threads per block
    bool bounds_after_void;          // cuda/hip: `__global__ void __launch_bounds__(n) k(`
    const char *global_qual;         // address space of kernel buffer arguments ("" or "__global ")
    const char *shared_qual;         // block-shared arrays: "__shared__", "__local"
    const char *restrict_kw;         // "__restrict__", "restrict"
    const char *thread_idx;          // thread index in the block
    const char *block_idx[3];        // block index along x, y, z
    const char *barrier;             // block barrier statement
    const char *barrier_global;      // the same, ordering global memory accesses as well
    const char *unroll;              // pragma line asking for full unrolling
    const char *i64;                 // 64-bit signed integer type
    const char *vec4;                // 4-wide float vector type
    bool vec_fns;                    // 128-bit accesses through vload4 / vstore4, not float4 casts
    const char *align16;             // after a shared array's declarator: 16-byte alignment
    const char *inf;                 // +infinity of float
    const char *fn_qual;             // qualifiers of the helper functions of the prelude
    const char *fmod_f32;            // float remainder ("fmodf", "fmod")
    const char *fn_f32[RT_FN_COUNT]; // math functions of float (NULL: printed as an expression)
    const char *fn_f64[RT_FN_COUNT]; // of double
    // 16-bit float buffers (half, bfloat16): the element type of a kernel argument, and the
    // prelude lines (headers, helpers) defining rt_ld_f16(p, i) / rt_st_f16(p, i, v) (and
    // rt_ld_bf16 / rt_st_bf16): a float from element i, float v stored rounded to nearest even.
    // Arithmetic stays in float; only loads and stores convert.
    const char *f16_type, *f16_prelude;
    const char *bf16_type, *bf16_prelude;
} rt_gpu_dialect;

extern const rt_gpu_dialect rt_gpu_dialect_cuda;
extern const rt_gpu_dialect rt_gpu_dialect_hip;
extern const rt_gpu_dialect rt_gpu_dialect_opencl;

// The dialect of a target, and the target of a device class (cuda, hip, opencl).
const rt_gpu_dialect *rt_gpu_dialect_of(rt_gpu_target t);
// Parses "cuda" / "hip" / "opencl" (the --emit values of GPU targets); false when unknown.
bool rt_gpu_target_from_name(const char *name, rt_gpu_target *out);
// The natural target of a GPU device class; false for the cpu class.
bool rt_gpu_target_of_device(const rt_device *dev, rt_gpu_target *out);

// ---------------------------------------------------------------------------------------------
// Lowering (lower-gpu.c)
// ---------------------------------------------------------------------------------------------

// One kernel argument, in order: the data array of a tensor, or the start array of a ragged dim
// (int32 on the device, rt_layout.start of the tensor's dim).
typedef struct rt_gpu_buffer {
    const char *name;
    bool is_start; // false: data of tensor; true: start array of tensor's dim
    bool is_tree;  // an int32 array of tree parameter `tensor`: rt_kir_tree_field `dim`
    bool is_work;  // the work list of phase `dim` (int32, rt_gpu_work_list); tensor -1
    int32_t tensor;
    int32_t dim;     // is_start: the ragged dim; is_tree: the tree array; is_work: the phase
    rt_dtype dtype;  // element type on the device
    bool written;    // the kernel writes it (outputs, materialized temporaries)
    int32_t kir_buf; // its buffer in the kernel IR
} rt_gpu_buffer;

// A grid dimension whose block count depends on the bound lengths (ragged spatial dims).
typedef struct rt_gpu_ragged_grid {
    int32_t stmt, var; // statement and index var whose maximum extent sets the block count
    int64_t tile;      // elements of var per block
} rt_gpu_ragged_grid;

// One kernel of the program (a phase of the IR): launched in order, each after the previous.
typedef struct rt_gpu_phase {
    const char *kernel_name;
    int64_t grid_x;   // blocks along x (fixed)
    int32_t n_ragged; // 0..2: grid y and z are ragged_grid[0], [1]
    rt_gpu_ragged_grid ragged[2];
    // The phase runs a work list (gpu-plan.h work_list): its plan, and its int32 buffer (an
    // index into bufs) holding the entry count, then per entry (grid x item, grid y block,
    // grid z block), non-empty blocks only, longest first; launched as one block per entry
    // along x (rt_gpu_phase_launch). NULL (work_buf -1, or 0 in a tree phase, unused): the grid
    // is grid_x x ragged[0] x ragged[1].
    const struct rt_gpu_phase_plan *work;
    int32_t work_buf;
    int32_t threads;    // threads per block (x)
    int64_t smem_bytes; // static shared memory per block
    bool staged;        // inputs staged through shared memory per reduction step
    const char *what;   // one line: statements it runs
    // Level by level (kir phase levels, lower-tree.c): launched once per level of the tree with
    // the level as a trailing int argument and ceil(nodes of the level * row / threads) blocks;
    // grid_x is then the bound for all the tree's nodes.
    bool by_level;
    int64_t row; // by_level: threads per node (elements of the output at one node)
    // The matrix-instruction GEMM (lower-gpu-mma.c): the kernel's whole body as CUDA text,
    // printed in place of the kernel IR's (whose phase then holds only its launch shape); NULL
    // for every other phase.
    const char *body;
    bool mma_sync; // body uses the mma.sync helpers (lower-gpu-mma-sync.c's prelude)
    bool mfma;     // body is HIP on MFMA (lower-gpu-mfma.c's prelude)
} rt_gpu_phase;

typedef struct rt_gpu_lower_options {
    int32_t rank;          // candidate rank (1-based), in names and the header
    const char *spec_path; // for the header comment (NULL: op->file)
    // Measurements only (tests, bench): ignore the plan's work lists (gpu-plan.h work_list), so
    // that ragged phases run the padded grid (batch in grid x, ragged dims in grid y / z sized
    // by the longest sequence, empty blocks exiting at once) for a before/after comparison.
    bool padded_grid;
} rt_gpu_lower_options;

typedef struct rt_gpu_kernel {
    const rt_op *op;
    const rt_device *dev;
    const rt_rprog *prog; // NULL for the naive lowering
    rt_kir_kernel *kir;
    int32_t n_bufs;
    rt_gpu_buffer *bufs; // kernel arguments, the same list for every phase
    int32_t n_phases;
    rt_gpu_phase *phases; // phases[i] is kir->phases[i]
    const char *header;   // the comment text opening the source (spec, device, rTiles, time)
    bool idx32;           // every index fits in 32 bits: index math is printed as int
} rt_gpu_kernel;

// Lowers rProgram p of op (built by model m) for GPU device dev. p == NULL lowers a naive
// program (one element per thread, 256 threads per block, no staging) used as a baseline.
// Errors: RT_ERR_BACKEND at the construct the GPU backend does not support (recursion over trees,
// int8 tensors, a run-time size), RT_ERR_NOMEM.
rt_status rt_gpu_lower(rt_arena *a, const rt_op *op, const rt_device *dev, const rt_perf_model *m,
                       const rt_rprog *p, const rt_gpu_lower_options *opt, rt_gpu_kernel **out,
                       rt_err *err);

// The CUDA body of a phase planned on matrix instructions (pl->mma.on, gpu-plan.h): WMMA
// fragments over the plan's block tile, threads and k step; data_buf[t] is tensor t's buffer in
// k. Errors: RT_ERR_BACKEND for a phase without such a plan, RT_ERR_NOMEM.
struct rt_gpu_phase_plan;
// The device helpers of mma.sync phases (ldmatrix, mma.sync; lower-gpu-mma-sync.c), printed
// once before the kernels of a file that has one.
extern const char rt_gpu_mma_sync_prelude[];
// The MFMA phases' vector types and instructions (lower-gpu-mfma.c), once before the kernels of a
// HIP file that has one.
extern const char rt_gpu_mfma_prelude[];
rt_status rt_gpu_mma_body(rt_arena *a, const rt_op *op, const struct rt_gpu_phase_plan *pl,
                          const rt_kir_kernel *k, const int32_t *data_buf, const char **out,
                          rt_err *err);

// ---------------------------------------------------------------------------------------------
// Emitter (emit-gpu.c)
// ---------------------------------------------------------------------------------------------

// Prints every phase of k as one source text in dialect d. Errors: RT_ERR_BACKEND for an
// invalid kernel.
rt_status rt_gpu_emit(rt_arena *a, const rt_gpu_kernel *k, const rt_gpu_dialect *d,
                      const char **out_text, rt_err *err);

// The line of a kernel's opening comment that gives candidate `rank`'s (rProgram p's on dev)
// predicted time, bottleneck, threads and blocks (no comment marker, a newline at the end);
// NULL when out of memory. The runtime rewrites it once the compiled registers reprice p.
const char *rt_gpu_candidate_line(rt_arena *a, const rt_device *dev, const rt_rprog *p,
                                  int32_t rank);

#endif
