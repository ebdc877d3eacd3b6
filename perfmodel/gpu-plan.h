// gpu-plan.h: the GPU plan of an rProgram, made once by the construction (construct.c) from the
// rTiles and the device file, priced by the model (cost.c: threads per block) and executed by
// the GPU lowering (codegen/lower-gpu.c), which derives none of it again.
//
// The operator's statements fall into phases (one kernel launch each, a tree group one per
// level): a phase runs statements that share the tiling statement's leading index vars and read
// what the phase wrote only at the thread's own element. The phase of the model's main statement
// is tiled by the rProgram: its spatial axes become grid dims of a block tile (the block-level
// rTile) and a per-thread register tile (the thread-level rTile) STRIDED over the block's
// threads; other phases get the naive tiling (the dense vars fused into one dim of up to 256
// threads, each ragged var a dim of its own). A phase runs in one mode:
//   staged   a dense contraction whose every float input's data tile of one reduction step is
//            copied into shared memory (rows padded by the bank rule), accumulators in
//            registers, a fused '=' epilogue in the store;
//   regtile  other reductions: the same register tile, inputs read from global memory;
//   direct   everything else: each thread runs the statements for each element of its tile;
//   tree     a tree group (recursion over a tree), launched level by level, `row` threads per
//            node;
//   rows     a row-wise group (softmax, layernorm: reductions over a row and elementwise
//            statements on it) tiled by the rProgram: `row_threads` threads share each row
//            element of the register tile, every statement's innermost loop strided over them
//            (coalesced), each reduction combined across them through shared memory (a tree),
//            a barrier after every statement.
#ifndef RT_GPU_PLAN_H
#define RT_GPU_PLAN_H

#include "perfmodel.h"

#define RT_GPU_PLAN_MAX_DIMS  (2 * RT_MAX_DIMS)
#define RT_GPU_PLAN_MAX_READS 16
#define RT_GPU_PLAN_MAX_VARS  64

typedef enum rt_gpu_mode {
    RT_GPU_DIRECT,
    RT_GPU_REGTILE,
    RT_GPU_STAGED,
    RT_GPU_TREE,
    RT_GPU_ROWS,
    RT_GPU_MODE_COUNT
} rt_gpu_mode;
const char *rt_gpu_mode_name(rt_gpu_mode m);

// One dim of the block grid: dense member vars fused into one linear index, or one ragged var.
typedef struct rt_gpu_dim {
    int32_t n_members;
    int32_t members[RT_MAX_DIMS]; // vars of the tiling statement, outer to inner
    int64_t mext[RT_MAX_DIMS];    // dense: extent of each member
    int64_t mlo[RT_MAX_DIMS];     // dense: lower bound of each member
    bool ragged;                  // one member whose range depends on other vars
    int64_t extent;               // dense: product of mext
    int64_t T1, R, nt, nb;        // block tile (nt * R), register tile, threads, blocks
    int32_t grid;                 // 0: part of grid x, 1: grid y, 2: grid z
    // The register tile in chunks of 4 (vec4 plans, R % 4 == 0): thread t's element j lies at
    // (j / 4) * nt * 4 + t * 4 + j % 4 of the block tile, else (strided) at t + j * nt.
    bool chunk4;
    // Blocks whose tile lies entirely inside the extent (extent / T1): the interior blocks of
    // an edge split (rt_gpu_phase_plan.split); nb where the extent is a multiple of the tile.
    int64_t nb_full;
} rt_gpu_dim;

// One staged read: a shared array holding the read's data tile of one reduction step.
typedef struct rt_gpu_stage {
    const rt_expr *read;
    int32_t n_dims;
    rt_affine aff[RT_MAX_DIMS];
    int64_t span[RT_MAX_DIMS], stride[RT_MAX_DIMS]; // data tile extent, shared-array stride
    int64_t elems;                                  // of the shared array (bank padding included)
    // Every block's data tile of every reduction step lies inside the tensor (the extents are
    // multiples of the tiles and no affine offset reaches outside): its copy reads unguarded.
    bool full;
    // vec4 plans (rt_gpu_phase_plan.vec4): the tensor dim `vdim` (a spatial var's) is the
    // shared array's innermost (stride 1; transposed when it is not the tensor's innermost,
    // its rows then padded by 4 against bank conflicts), every other stride a multiple of 4,
    // and plan dim `frag` (chunk4) reads its register-tile fragment with 128-bit shared loads;
    // -1 both when the read is not vectorized.
    int32_t vdim, frag;
    // The copy moves 4 elements at once with 128-bit global loads (full tile, the tensor's
    // innermost dim a plain var of tile, origin and row length multiples of 4, the tensor
    // 16-byte aligned), and stores them with one 128-bit shared store where vdim is the
    // tensor's innermost dim too (else 4 scalar stores down the transposed column). False: the
    // scalar copy, element by element.
    bool gvec;
    // Edge split (rt_gpu_phase_plan.split): the data tile of every interior block and full
    // reduction step lies inside the tensor (ifull: copied unguarded there), and those copies
    // move 4 elements at once under gvec's alignment rules (igvec). Equal to full and gvec
    // without a split.
    bool ifull, igvec;
} rt_gpu_stage;

// The matrix-instruction form of a phase (codegen/lower-gpu-mma.c executes it): a half or
// bfloat16 GEMM C(m, n) +=! A(.m.k.) * B(.k.n.) with a float C, on a CUDA device of sm_80 or
// newer where the model prices matrix instructions (use_mma). The block tile and the threads are
// the phase's (the rProgram's); the block's warps tile it in a wgm x wgn grid of warp tiles
// wm x wn of WMMA 16x16x16 fragments (f32 accumulate); A's and B's tiles of one k step (the
// rProgram's block-level k tile) are staged in shared memory as 16-bit values; edges are
// guarded (zero-filled copies, a checked store) unless `full`.
// The instructions of a matrix-instruction phase: WMMA (nvcuda::wmma 16x16x16 fragments, which
// NVRTC lowers to mma.sync; any layout, guarded edges) or inline PTX mma.sync.m16n8k16 with
// ldmatrix.x4 fragment loads (full tiles whose A rows run along k and B rows along n in memory:
// A's fragments by ldmatrix, B's by ldmatrix.trans); on a HIP gfx90a device, MFMA
// (v_mfma_f32_16x16x16{f16,bf16_1k} over wavefronts of 64, codegen/lower-gpu-mfma.c).
typedef enum rt_gpu_mma_inst {
    RT_GPU_MMA_WMMA,
    RT_GPU_MMA_SYNC,
    RT_GPU_MMA_MFMA,
    RT_GPU_MMA_INST_COUNT
} rt_gpu_mma_inst;
const char *rt_gpu_mma_inst_name(rt_gpu_mma_inst i);
#define RT_GPU_MMA_MAX_STAGES 4 // cp.async stages of the k loop at most

typedef struct rt_gpu_mma {
    bool on;
    rt_gpu_mma_inst inst;
    int32_t a, b;       // tensors read as A and B
    int32_t vm, vn, vk; // the statement's vars m, n, k
    int32_t dm, dn;     // the plan dims of m and n
    int64_t wgm, wgn;   // warps along m and n (wgm * wgn * 32 = threads)
    int64_t wm, wn;     // warp tile (multiples of 16)
    int64_t ks;         // k step (a multiple of 16)
    int64_t M, N, K;    // extents
    bool full;          // M, N, K multiples of the block tile and k step: no guards
    // A's (B's) tile is copied 16 bytes per access (full tiles, A's rows along k, B's along n
    // in memory: lower-gpu-mma.c's rt_gm_copy_vec), every access of a step in flight at once;
    // else element by element, 4 loads per thread in flight (its unroll 4)
    bool vec_a, vec_b;
    // 1: copy, barrier, compute, barrier per k step; 2 .. RT_GPU_MMA_MAX_STAGES (sm_80+, full
    // tiles whose copies are 16-byte vectors): that many shared stages filled by cp.async, the
    // copy of step t + stages - 1 issued before step t's compute, one barrier per step. The
    // cheapest that fits (rt_gpu_mma_price).
    int32_t stages;
    int64_t smem_bytes; // the staged A and B tiles of every stage (and the edge store's scratch)
} rt_gpu_mma;

#define RT_GPU_MMA_PAD 8 // 16-bit elements after each shared row (16 B: WMMA's ldm rule)

// The mma.sync path's fragments (codegen/lower-gpu-mma-sync.c prints its lane math from these
// tables; tests/unit/test-gpu-mma-map.c checks them against the PTX ISA's layouts). An operand's
// 16x16 tile of one k16 step (A: rows m, columns k; B: rows k, columns n, as both lie in shared
// memory) is read by one ldmatrix.x4: lanes 8j .. 8j + 7 give the addresses of rows 0 .. 7 of
// 8x8 matrix j, whose origin in the tile is (row0[j], col0[j]); trans for B (ldmatrix.trans).
// Matrix j's register goes to mma operand register reg[j] of n8 tile ntile[j] (A: one m16 tile,
// ntile 0).
typedef struct rt_gpu_mma_ldsm_map {
    uint8_t row0[4], col0[4];
    uint8_t reg[4], ntile[4];
    bool trans;
} rt_gpu_mma_ldsm_map;
extern const rt_gpu_mma_ldsm_map rt_gpu_mma_ldsm_a, rt_gpu_mma_ldsm_b;
// The tile row and column lane `lane` addresses in map's ldmatrix.x4.
void rt_gpu_mma_ldsm_lane(const rt_gpu_mma_ldsm_map *map, int32_t lane, int32_t *row, int32_t *col);
// The m16n8 f32 accumulator: lane `lane`'s register q (0 .. 3) holds C(row, col) of the tile:
// row acc_row[lane >> 2] + 8 * (q >> 1), column acc_col[lane & 3] + (q & 1).
extern const uint8_t rt_gpu_mma_acc_row[8], rt_gpu_mma_acc_col[4];
void rt_gpu_mma_acc_lane(int32_t lane, int32_t q, int32_t *row, int32_t *col);
// Wavefronts over the ideal of the warp's ldmatrix.x4 of map's tile in a shared array of row
// length ld (16-bit elements): 1 when conflict-free (rt_gpu_bank_wavefronts, 16 B per lane).
double rt_gpu_mma_ldsm_ways(const rt_gpu_mma_ldsm_map *map, int64_t ld, int32_t banks);
// The MFMA path's fragments (v_mfma_f32_16x16x16f16 and _16x16x16bf16_1k, wave64; codegen/
// lower-gpu-mfma.c prints its lane math from these; tests/unit/test-gpu-mfma-map.c checks them
// against the CDNA 2 ISA's layouts). A 16x16 operand tile of one k16 step (A: rows m; B: rows n,
// both with k along the row): lane l's element v (0 .. 3) of its 4-element operand is row
// l % RT_GPU_MFMA_ROWS, column rt_gpu_mfma_ab_k[l / RT_GPU_MFMA_ROWS] + v. The f32 accumulator:
// lane l's element v is C(rt_gpu_mfma_acc_r[l / RT_GPU_MFMA_ROWS] + v, l % RT_GPU_MFMA_ROWS).
#define RT_GPU_MFMA_ROWS 16
extern const uint8_t rt_gpu_mfma_ab_k[4], rt_gpu_mfma_acc_r[4];
void rt_gpu_mfma_ab_lane(int32_t lane, int32_t v, int32_t *row, int32_t *k);
void rt_gpu_mfma_acc_lane(int32_t lane, int32_t v, int32_t *row, int32_t *col);
// Lanes of one warp (wavefront) of mm's instructions: 64 for MFMA, else 32.
int64_t rt_gpu_mma_wave(const rt_gpu_mma *mm);
// The instructions device dev offers for a 16-bit GEMM: CUDA sm_80 and newer WMMA and mma.sync
// (first, last: the range of rt_gpu_mma_inst), HIP gfx90a MFMA; false where none (gfx906).
bool rt_gpu_mma_insts(const rt_device *dev, rt_gpu_mma_inst *first, rt_gpu_mma_inst *last);
// Shared-memory bytes of mm's block (tiles of every stage, the edge store's scratch).
int64_t rt_gpu_mma_smem_bytes(const rt_gpu_mma *mm, int64_t T1m, int64_t T1n, int64_t threads);
// Sets mm->stages (and smem_bytes): where async_ok (sm_80+, both tiles copied as 16-byte
// vectors) and the tiles are full, the count of 2 .. RT_GPU_MMA_MAX_STAGES that fits
// block_cap_bytes and rt_gpu_mma_price says is fastest, if faster than one; else 1.
void rt_gpu_mma_choose_stages(const rt_device *dev, rt_gpu_mma *mm, int64_t T1m, int64_t T1n,
                              int64_t threads, int64_t blocks, double peak_gflops,
                              int64_t block_cap_bytes, int64_t unit_cap_bytes, bool async_ok);

// The price of a matrix-instruction phase (gpu-mma.c): per k step of the blocks resident on a
// unit, the copy (global level's bandwidth at those bytes in flight), the matrix instructions,
// the shared loads and stores, the barriers; the phase's whole time from them.
typedef struct rt_gpu_mma_cost {
    int64_t regs;     // registers per thread (estimate)
    int64_t resident; // blocks resident per unit (at most the blocks each unit gets)
    double copy_ns, mma_ns, shared_ns, barrier_ns, step_ns; // one k step of the resident blocks
    double unit_steps; // k steps a unit runs: rounds of resident blocks x steps per block
    double total_ns;   // the phase: rounds x steps x step_ns + C's store
    double compute_ns; // of it, the matrix instructions or shared traffic, and barriers
    double global_ns;  // of it, the global copies and the store
} rt_gpu_mma_cost;
// mm's price for a block tile T1m x T1n of `threads` over `blocks` blocks at matrix peak
// peak_gflops, smem_unit_bytes of shared memory per unit (0: no limit); false when no block
// fits on a unit or the arguments are out of range.
bool rt_gpu_mma_price(const rt_device *dev, const rt_gpu_mma *mm, int64_t T1m, int64_t T1n,
                      int64_t threads, int64_t blocks, double peak_gflops, int64_t smem_unit_bytes,
                      rt_gpu_mma_cost *out);
// Prices p's matrix-instruction phase (rt_gpu_mma_price) in place of the regtile pricing that
// rt_perf_evaluate gave it: predicted time, compute time, level times, blocks per unit,
// registers, bottleneck; true (p unchanged) when p's plan has no such phase. False (with why)
// when no block fits a unit (the warp tile's registers spill under __launch_bounds__).
bool rt_perf_gpu_mma_evaluate(const rt_perf_model *m, rt_rprog *p, const char **why);

typedef struct rt_gpu_phase_plan {
    int32_t first, n_stmts; // statements run by the phase (a tree group: si and its group)
    int32_t tstmt;          // tiling statement: its LHS vars are the spatial dims
    int32_t epi;            // statement fused into the store (staged / regtile), -1 none
    rt_gpu_mode mode;
    int32_t n_dims;
    rt_gpu_dim dims[RT_GPU_PLAN_MAX_DIMS];
    int64_t threads, Rtot; // threads per block, register-tile elements per thread
    int64_t blocks;        // grid x (the dense dims; ragged dims are sized at launch)
    bool from_prog;        // tiles come from the rProgram
    bool unroll;           // the register-tile loops are unrolled
    int64_t raster;        // grouped block order over the two innermost x dims: rows per group
    // The blocks run from a work list (src/run/gpu-launch.c builds it on the host from the
    // bound lengths, once per length data): the non-empty blocks only, as (grid x item, grid y,
    // grid z) entries ordered by their work (reduction length, then live tile elements, then the
    // sequence's extent), longest first; the kernel reads its block's coordinates from it by
    // its linear block id, and the launch has one block per entry. Set where the phase has a
    // ragged grid dim whose range reads only vars the host binds per block (a grid x dim's one
    // var at block tile 1, or for grid z grid y's var, row by row: a causal mask); no raster. The
    // model's blocks (rt_perf_tile_count: expected non-empty tiles) count the list's entries.
    bool work_list;
    int64_t red_T1[RT_GPU_PLAN_MAX_VARS]; // staged: reduction step per var of tstmt
    bool red_exact; // staged: every reduction range is a multiple of its step (no ragged step)
    // staged: 128-bit loads (rt_gp_vec4 in gpu-plan.c): chunked register tiles, fragments read
    // from shared memory 4 floats at a time, global->shared copies 4 at a time where gvec.
    bool vec4;
    int32_t n_stage;
    rt_gpu_stage *stage;
    // staged: the interior/edge split (rt_gp_edge_split in gpu-plan.c). Interior blocks (block
    // index below nb_full in every dim) run the full reduction steps (split_steps of var
    // split_var, every step of the others) with unguarded copies of the ifull reads (128-bit
    // where igvec) and exact, unrolled step loops; the rest — edge blocks, and the last,
    // partial step of split_var (-1: none, every reduction range a multiple of its step) — runs
    // the guarded code.
    bool split;
    int32_t split_var;
    int64_t split_steps;
    // staged: the step's innermost reduction loop (var step_var of tstmt) and its unroll
    // factor where its trips are exact (rt_gpu_step_unroll of its step and Rtot); the lowering
    // and the model read them
    int32_t step_var;
    int64_t step_unroll;
    int64_t row; // tree: threads per node (the longest row of the group's statements)
    // rows: threads per row element (the block-level rTile of the main statement's innermost
    // reduction axis over its thread-level one); threads counts them (row elements x this)
    int64_t row_threads;
    rt_gpu_mma mma; // matrix instructions (rt_gp_mma), mma.on false: scalar FMAs
} rt_gpu_phase_plan;

typedef struct rt_gpu_plan {
    int32_t n_phases;
    rt_gpu_phase_plan *phases;
    int32_t banks, lanes; // the device's shared-memory banks (0: none) and warp (gpu-smem.c)
    uint64_t key;         // equal plans, equal keys: the same kernel up to names
} rt_gpu_plan;

// The plan of rProgram p (built by model m) of op on GPU device dev; m and p NULL: the naive
// plan (every phase tiled naively). Errors: RT_ERR_BACKEND "... is not supported by the GPU
// backend" at the statement, RT_ERR_NOFIT when a block has more threads than the device allows,
// RT_ERR_NOMEM.
rt_status rt_gpu_plan_make(rt_arena *a, const rt_op *op, const rt_device *dev,
                           const rt_perf_model *m, const rt_rprog *p, const rt_gpu_plan **out,
                           rt_err *err);
// Elements of tree statement s's output at one node (the product of its LHS vars after the node
// var, each of a constant range); -1 when not constant.
int64_t rt_gpu_plan_tree_row(const rt_op *op, const rt_stmt *s);
// Threads per block of the phase tiled by the rProgram (the one of main statement main_stmt);
// 0 when pl is NULL or has none.
int64_t rt_gpu_plan_main_threads(const rt_gpu_plan *pl, int32_t main_stmt);
// Bytes one block of the phase tiled by the rProgram has in flight from global memory at once:
// staged, its shared tiles of one reduction step (loaded together before the barrier);
// regtile, each thread's register-tile row per dim of one reduction step; direct, one element
// per thread, or the register tile when unrolled; rows, one element per thread (the register
// tile's elements are apart, barriers between them); regtile and direct times 4 for a loop over a
// reduction (reduces: the main statement has a reduction axis). 0 when pl has no such phase. The model
// reads the global level's bandwidth curve at this times the blocks resident on a unit (cost.c).
double rt_gpu_plan_main_inflight_bytes(const rt_gpu_plan *pl, int32_t main_stmt, int32_t elem_bytes,
                                       bool reduces);
// Per reduction iteration, the FMA issue share of the phase tiled by the rProgram:
// FMAs / (FMAs + shared-load instructions + copy instructions per iteration), where a 128-bit
// load or store counts once for 4 elements (vec4 plans); 1 when pl has no staged phase. The
// model scales the compute rate by it (cost.c): a GPU issues loads and FMAs from the same slots.
double rt_gpu_plan_main_issue_share(const rt_gpu_plan *pl, int32_t main_stmt);
// Mode of the phase tiled by the rProgram (the one of main statement main_stmt);
// RT_GPU_MODE_COUNT when pl is NULL or has none. The model prices a regtile phase's reads as
// the global loads they are (cost.c).
rt_gpu_mode rt_gpu_plan_main_mode(const rt_gpu_plan *pl, int32_t main_stmt);
// The phase tiled by the rProgram when it runs on matrix instructions (mma.on); else NULL.
const rt_gpu_phase_plan *rt_gpu_plan_main_mma(const rt_gpu_plan *pl, int32_t main_stmt);
// The axis of model m whose tiles give a rows phase its threads per row element (block-level
// rTile over thread-level), the main statement's innermost reduction axis, when the phase of
// m's main statement is a row-wise group that runs in rows mode given such threads; else -1.
// The construction counts those threads in a block's (construct.c threads_of).
rt_status rt_gpu_plan_rows_axis(rt_arena *a, const rt_op *op, const rt_device *dev,
                                const rt_perf_model *m, int32_t *axis, rt_err *err);
// Shared-memory bytes of phase ph's staged tiles.
int64_t rt_gpu_plan_smem_bytes(const rt_gpu_phase_plan *ph);
// ---------------------------------------------------------------------------------------------
// Shared-memory banks and step loops (gpu-smem.c): the accesses of a staged phase as the
// lowering emits them, for the plan's row padding, the lowering and the model alike.
// ---------------------------------------------------------------------------------------------

#define RT_GPU_SMEM_MAX_LANES 64
#define RT_GPU_SMEM_MAX_BANKS 64
// A staged step's innermost reduction loop of exact trips is unrolled fully when its body (the
// register tile's FMAs) times its trips stays within this many FMAs, else by the largest
// divisor of its trips that does (rt_gpu_step_unroll).
#define RT_GPU_MAX_UNROLLED_FMAS 2048
// Instructions of one trip of a rolled loop: counter, test, branch.
#define RT_GPU_LOOP_INSTRS 3

// Wavefronts (shared-memory cycles) of one warp instruction whose lane i touches `width`
// consecutive 4-byte words from word[i] (word[i] < 0: inactive): lanes in phases of
// banks / width (a 128-bit access: 8 lanes), per phase the most distinct words one bank holds
// (lanes reading the same word share it). 1 without banks.
int32_t rt_gpu_bank_wavefronts(const int64_t *word, int32_t lanes, int32_t width, int32_t banks);

// Per thread, the shared-memory accesses of staged read sg in phase pl: store instructions of
// one step's copy (128-bit where gvec) and their wavefronts over the ideal (1: conflict-free),
// load instructions of one reduction iteration (128-bit fragments where sg->frag >= 0) and
// theirs; averaged over the block's warps and the copy's rounds.
typedef struct rt_gpu_smem_cost {
    double store_instr, store_ways;
    double load_instr, load_ways;
} rt_gpu_smem_cost;
void rt_gpu_stage_smem(const rt_gpu_phase_plan *pl, const rt_gpu_stage *sg, bool gvec,
                       int32_t banks, int32_t lanes, rt_gpu_smem_cost *out);

// Lays sg's shared array out (strides, elems) with its first row `row` elements plus the pad,
// a multiple of step below banks, that costs the fewest wavefronts per step (the copy's stores
// plus every reduction iteration's loads, rt_gpu_stage_smem); the smallest such pad; returns it.
int64_t rt_gpu_stage_pad(const rt_gpu_phase_plan *pl, rt_gpu_stage *sg, int64_t row, int64_t step,
                         int32_t banks, int32_t lanes);

// Unroll factor of a step loop of `trips` exact trips around body_fmas FMAs: trips when
// trips * body_fmas <= RT_GPU_MAX_UNROLLED_FMAS, else the largest divisor of trips within it
// (1: rolled).
int64_t rt_gpu_step_unroll(int64_t trips, int64_t body_fmas);
// The loop instructions per trip that a step loop of `trips` trips unrolled by f keeps (0 when
// f >= trips): per rolled trip the loop's counter, test and branch and the address of each of
// n_reads shared reads.
double rt_gpu_step_loop_instrs(int64_t trips, int64_t f, int32_t n_reads);

// One line per phase ("phase 0: staged C; 160 threads x 1 blocks; m 96/6, n 80/8; ..."), the
// text both the JSON report and the kernel's header comment print.
void rt_gpu_plan_print_phase(const rt_op *op, const rt_gpu_plan *pl, int32_t i, rt_buf *out);

#endif
