// perfmodel.h: rTile construction and the micro-performance model (Roller §3.1-3.3).
//
// Pipeline position: rt_op (canonical IR, spec.h) + rt_device (hal.h) --rt_perf_construct-->
// ranked rPrograms (one rTile per memory level, launch configuration, predicted time) that
// codegen turns into kernels. Levels follow the device: level 0 is DRAM (the whole operator),
// level n_levels-1 the registers. Everything lives in the caller's arena; nothing is global.
//
// The lower part of this header (rt_perf_model and its functions) is the model's internal
// vocabulary, exposed so that tests and the benchmark can check each formula on its own.
#ifndef RT_PERFMODEL_H
#define RT_PERFMODEL_H

#include "rt.h"
#include "spec.h"
#include "hal.h"

#define RT_PERF_MAX_AXES   12 // axes of the modeled statement (fused axes + implicit sums)
#define RT_PERF_MAX_ACCESS 12 // distinct tensor accesses of the modeled statement (output last)

// ---------------------------------------------------------------------------------------------
// Extents as distributions
// ---------------------------------------------------------------------------------------------

// A distribution of loop extents: values[i] occurs with weights[i] (weights sum to 1, values
// ascending and >= 0). A dense extent is one value of weight 1. Ragged extents (vloops) take a
// length histogram, so that e.g. the number of tiles along a vloop is E[ceil(len / T)].
typedef struct rt_extent_dist {
    int32_t n;
    const int64_t *values;
    const double *weights;
} rt_extent_dist;

// A single value. Errors: RT_ERR_NOMEM.
rt_status rt_extent_dist_dense(rt_arena *a, int64_t value, rt_extent_dist *out, rt_err *err);
// Uniform over lo..hi inclusive (lo <= hi, lo >= 0), compressed into at most max_points
// equal-width buckets represented by their upper end (a conservative choice for tiling).
rt_status rt_extent_dist_uniform(rt_arena *a, int64_t lo, int64_t hi, int32_t max_points,
                                 rt_extent_dist *out, rt_err *err);
// Points of a distribution the model sums over (every expectation costs one step per point):
// more distinct samples are merged into this many buckets, so that the model's work does not
// grow with a ragged batch.
#define RT_EXTENT_DIST_MAX_POINTS 64
// Entries the per-entry GEMM's model sums over (rt_perf_cpu_rentry_time): independent length
// sources are coarsened (rt_extent_dist_coarsen) so that the product of their points stays
// within this.
#define RT_PERF_RENTRY_MAX_POINTS 64

// From raw samples (lengths of a batch): a normalized histogram of the distinct values; with
// more than RT_EXTENT_DIST_MAX_POINTS of them, buckets of about equal weight over the sorted
// samples, each represented by its largest value (as rt_extent_dist_uniform: conservative for
// tiling, the maximum kept). Errors: RT_ERR_SPEC for n == 0 or a negative sample (loc is used
// in the message).
rt_status rt_extent_dist_from_samples(rt_arena *a, const int64_t *samples, int32_t n, rt_loc loc,
                                      rt_extent_dist *out, rt_err *err);
// d with at most max_points points, for an expectation over several distributions jointly (the
// product of their points is its work): consecutive points merged into buckets of about equal
// weight, each represented by its weighted mean (rounded), the total weight kept. values and
// weights hold max_points each; d itself when it is small enough.
void rt_extent_dist_coarsen(const rt_extent_dist *d, int32_t max_points, int64_t *values,
                            double *weights, rt_extent_dist *out);
double rt_extent_dist_mean(const rt_extent_dist *d);
int64_t rt_extent_dist_max(const rt_extent_dist *d);
// E[ceil(v / tile)] and E[ceil(v / tile) * tile] (the padded extent), tile >= 1.
double rt_extent_dist_tiles(const rt_extent_dist *d, int64_t tile);
double rt_extent_dist_padded(const rt_extent_dist *d, int64_t tile);

// Vloops whose lengths are not bound get a uniform distribution over 1..this many (buckets of
// the uniform are capped at RT_EXTENT_DIST_MAX_POINTS).
#define RT_PERF_DEFAULT_MAX_LEN 512

// ---------------------------------------------------------------------------------------------
// The public API
// ---------------------------------------------------------------------------------------------

// A distribution for the values of one length tensor (by name, as in the spec).
typedef struct rt_perf_length_dist {
    const char *tensor;
    rt_extent_dist dist;
    // Where the values come from when not a file the user gave (generated lengths), reported as
    // the construction's length_note; NULL for a file.
    const char *note;
} rt_perf_length_dist;

typedef struct rt_perf_options {
    int32_t top_k;                      // candidates kept (0: 10)
    rt_buf *explain;                    // when not NULL, the construction trace is appended here
    const rt_perf_length_dist *lengths; // distributions of length tensors (may be NULL)
    int32_t n_lengths;
    int64_t default_max_len; // 0: RT_PERF_DEFAULT_MAX_LEN
    bool no_mma;             // never use matrix instructions even where the dtype allows
    int32_t max_evals;       // tile evaluations per epsilon round (0: 1000; 2x in all)
} rt_perf_options;

// One rTile: a tile shape over the modeled statement's axes at one memory level, its storage
// padding and the data tiles it implies. At level 0 the shape is the whole iteration space.
typedef struct rt_rtile {
    int32_t level;
    int64_t shape[RT_PERF_MAX_AXES];               // per axis, elements
    int64_t data[RT_PERF_MAX_ACCESS][RT_MAX_DIMS]; // data tile extents per access and dim
    int64_t pad_elems[RT_PERF_MAX_ACCESS];         // storage padding of the innermost dim
    int64_t footprint_bytes;                       // per instance of the level's scope
    double traffic_bytes;                          // into this level, whole operator
    double time_ns;                                // traffic / bandwidth share of level-1
} rt_rtile;

// ---------------------------------------------------------------------------------------------
// The CPU plan: what the CPU backend compiles for an rProgram, made once by the model
// ---------------------------------------------------------------------------------------------

typedef struct rt_perf_model rt_perf_model;
typedef struct rt_rprog rt_rprog;
typedef struct rt_perf_gemm_memo rt_perf_gemm_memo;

// Groups of a contraction's axes (rt_perf_cpu_gemm.group). ORDER RT_GEMM_G: codegen's groups.
typedef enum rt_perf_gemm_group {
    RT_PERF_GEMM_M,     // output axes A holds (rows of C)
    RT_PERF_GEMM_N,     // the output's unit-stride suffix of axes B holds (columns of C)
    RT_PERF_GEMM_K,     // reduction axes both inputs hold
    RT_PERF_GEMM_BATCH, // other output axes B holds, or both hold: independent GEMMs
    RT_PERF_GEMM_GROUP_COUNT
} rt_perf_gemm_group;

// Triangular (affine) extents: row m of a GEMM reduces over k in [lo0 + lo1 m, hi0 + hi1 m)
// intersected with [0, K) (perfmodel/cpu-tri.c). The packed GEMM then skips the k blocks outside
// each row block's range and, within a block, each row panel's k steps outside its rows' range;
// A's pack stores zeros outside each row's range (masked edge blocks).
typedef struct rt_perf_tri_range {
    bool on;
    int64_t lo0, lo1, hi0, hi1;
} rt_perf_tri_range;

typedef struct rt_perf_cpu_gemm {
    int32_t axis_m, axis_n, axis_k; // model axes: the innermost of each group
    int32_t in_a, in_b;             // accesses holding m and n
    int64_t M, N, K;                // products of the groups' extents
    int64_t mr, nr, kc, mc, nc;
    int64_t ng;      // n groups: a work item is one mc row block x a run of nc blocks (A packed
                     // once per (mc, kc) and reused across the run)
    int64_t items;   // batch x row blocks x n groups, spread over the cores
    int64_t batch;   // independent GEMMs (product of the batch axes), 1 without
    bool a_batch;    // A holds batch axes too (heads of an attention): A is packed per entry and
                     // the runs of column blocks stay within an entry (items entry-major)
    bool implicit;   // an operand is read through a window or over several axes (a convolution):
                     // the backend packs it by gathering (the implicit GEMM)
    bool b_window;   // B's reads combine axes or stride them (y + r, 2x): its pack tests bounds
                     // per row instead of copying a plain strided block
    bool b_prefetch; // a plain GEMM with B contiguous along n: the backend prefetches the next B
                     // block while the current one's micro-kernels run
    bool a_k_unit;   // A contiguous along k: its panels are packed with vector loads along k
    bool b_k_unit;   // a plain B contiguous along k, not n (K of an attention read as (j, d)): its
                     // nr-wide panels are gathered, interleaved with shuffles up to 8 rows
    int32_t b_sub;   // per-entry plan: B packed as b_sub-wide sub-panels (rt_perf_cpu_rentry_b_sub;
                     // 8 of a k-contiguous B), interleaved with shuffles; 0: nr-wide panels
    int32_t group[RT_PERF_MAX_AXES];  // per model axis, its rt_perf_gemm_group
    double a_bytes, b_bytes, c_bytes; // the tensors behind A, B and C
    int64_t steps;         // loop steps rt_perf_cpu_gemm_block took (rt_perf_model.steps)
    rt_perf_tri_range tri; // a triangular (affine) k range per row, tri.on (rt_perf_tri_detect)
    bool tokens;    // token-flattened (rt_perf_gemm_tokens_of): M is the expected sum(len), the
                    // backend reads the actual one at run time and spreads its row blocks over
                    // the items cyclically (item i: row blocks i % mt, + mt, ...)
    bool rentry;    // one GEMM per batch entry at its own extents (rt_perf_gemm_rentry_of): M, N,
                    // K are the longest entry's, batch the entries; the backend's items split
                    // the work list of (entry, row block) units by cost (cpu-rentry.c)
    int32_t re_tri; // per-entry plan with a causal range (rt_perf_gemm_rentry.tri, tri_c)
    int64_t re_tri_c;
    int64_t re_run;     // per-entry plan: entries of equal cost in a row (rt_perf_gemm_rentry_run)
    double re_n_mean;   // per-entry plan: the mean of the entries' N
    bool re_a_in_place; // per-entry plan: the micro-kernel reads A's rows where they are (k
                        // contiguous, a row stride the entry decides, no causal pack, entries
                        // narrower than RT_PERF_RENTRY_A_PACK_COLS), alpha folded into B's
                        // pack (cpu-rentry.c rentry_a_in_place, rt_perf_cpu_rentry_block)
    // Per-entry plan: the micro-kernel reads B's rows where they are (codegen/kir.h b_ld): n is
    // B's innermost dim, of a constant extent that nr and nc divide, no causal range, alpha 1
    // where A is read in place too (no pack to fold it into), and a k block's rows stay in L1
    // at their stride. Attention x V's V over short sentences: its pack only copied whole rows
    // of nr floats (cpu-rentry.c rentry_b_in_place, rentry_b_rows_fit).
    bool re_b_in_place;
    int64_t re_b_ld; // its row stride (elements between B's k steps)
    // Per-entry plan of a warm operator (rt_perf_cpu_warm): no software prefetch of the C tiles
    // for writing (codegen/kir.h no_pf_c) nor of the next entry's A and B rows. Their lines are
    // in the last-level cache, misses the store buffer and the hardware prefetchers absorb; the
    // prefetches took fill buffers from the loads of A and B. Same-process A/B turns on a 2-core
    // Sapphire Rapids VM, attention over short sentences: 3-7% faster without the C prefetch,
    // up to 8-17% more without the next entry's; over long ones, whose tensors spill to DRAM,
    // 8-20% slower without the C prefetch, 3-5% without the next entry's.
    bool re_warm;
    // Per-entry plan: a tile with fewer than mr valid rows (an entry's last row panel) runs a
    // micro-kernel of rt_perf_cpu_tail_rows(mr, rows) rows instead of the mr-row one, its k
    // steps split over rt_perf_cpu_tail_sets(mr, nv, those rows, row_tail_acc) accumulator
    // sets; 0: the mr-row kernel on every tile. Either way the rows past the valid ones are
    // computed and dropped.
    int32_t row_tail_acc;
} rt_perf_cpu_gemm;
typedef enum rt_perf_cpu_win_pack {
    RT_PERF_CPU_WIN_PACK_NONE, // read in place
    RT_PERF_CPU_WIN_PACK_X,    // each output row packs all the window's rows
    RT_PERF_CPU_WIN_PACK_ROWS, // y handed over: each row packed once into a ring of rows
} rt_perf_cpu_win_pack;

typedef struct rt_perf_cpu_loops {
    int32_t n_vars;
    int32_t var[RT_MAX_DIMS * 2]; // statement variable
    bool tiled[RT_MAX_DIMS * 2];  // false: a vloop or a variable of no model axis (own range)
    int64_t lo[RT_MAX_DIMS * 2];  // its constant lower bound (tiled variables)
    int64_t extent[RT_MAX_DIMS * 2];
    int64_t tile[RT_MAX_DIMS * 2][RT_MAX_MEM_LEVELS]; // levels block_level..top
    int64_t items;                                    // work items (scale-out tiles)
    // A window reduction (pooling, depthwise convolution: one to three dense reduction axes of at
    // most 7 points, 49 in all, accumulated): the innermost variable runs in vector lanes with
    // the window unrolled in its body. win_pack: its strided (or padded) read is packed into
    // scratch rows, RT_PERF_CPU_WIN_PACK_ROWS when y's loop is handed to the packing (win_yu
    // output rows per y iteration).
    bool window;
    rt_perf_cpu_win_pack win_pack;
    int64_t win_yu;
} rt_perf_cpu_loops;
typedef enum rt_perf_cpu_plan_kind {
    RT_PERF_CPU_PLAN_NONE,  // not a CPU plan (a device with a thread level)
    RT_PERF_CPU_PLAN_NEST,  // the plain loop nests (nothing tiled, the main statement fused
                            // row-wise with others, or recursion over a tree)
    RT_PERF_CPU_PLAN_LOOPS, // the main statement's nest blocked by the rTiles: loops
    RT_PERF_CPU_PLAN_GEMM,  // the packed GEMM: gemm, micro-kernel uk_mr x uk_nr in uk_lanes
    RT_PERF_CPU_PLAN_KIND_COUNT
} rt_perf_cpu_plan_kind;

// The complete plan of one rProgram on a CPU, from the rTiles and the device file alone (lanes,
// vector registers, FMA latency x pipes, cache levels): rt_perf_evaluate makes it once, cost.c
// prices it, construct.c merges rPrograms with equal plans, and codegen/lower-cpu.c executes it
// without deriving any of it again.
typedef struct rt_perf_cpu_plan {
    rt_perf_cpu_plan_kind kind;
    rt_perf_cpu_gemm gemm;    // kind GEMM
    rt_perf_cpu_loops loops;  // kind LOOPS (and the nest the loop model times)
    bool loops_tiled;         // loops holds a tiled nest (rt_perf_cpu_loop_plan)
    int32_t block_level, top; // the levels of loops' tiles (scale-out .. registers)
    int64_t uk_lanes;         // kind GEMM: floats per vector of the micro-kernel
} rt_perf_cpu_plan;
// Fills pl for p (rt_perf_evaluate calls it once per rProgram).
void rt_perf_cpu_plan_make(const rt_perf_model *m, const rt_rprog *p, rt_perf_cpu_plan *pl);
// The backend's row-wise fusion of loop nests: the first kept loop of s when its range is a
// constant [lo, hi) (spread over work items); whether e reads tensor t, clearing *ok where a read
// of t is not indexed by first_var first; whether statement j may join the row-wise group
// [g0, j) (same outer range, rows read where written).
bool rt_perf_cpu_stmt_outer(const rt_op *op, const rt_stmt *s, int32_t *var, int64_t *lo,
                            int64_t *hi);
bool rt_perf_cpu_reads_tensor(const rt_expr *e, int32_t t, int32_t first_var, bool *ok);
bool rt_perf_cpu_row_fusable(const rt_op *op, int32_t g0, int32_t j);
// The row depth of the row-wise group [g0, g1) (statements g0..g1-1, each fusable with the
// ones before it): how many leading kept loops its statements share as one nest of rows (1: the
// outer loop only). At depth k every statement's first k LHS vars are its first k loops over
// the same ranges, at least one loop stays below them, all over constant ranges, and each read
// of a tensor the group writes is of the reader's own row; the backend then runs every statement on one row before
// the next row (L1-resident rows, temporaries one row per thread: codegen/lower-cpu.c).
int32_t rt_perf_cpu_row_depth(const rt_op *op, int32_t g0, int32_t g1);
// Does the row-wise group [.., g1) at depth keep statement si's output, a temporary, in one row
// per thread (scratch) instead of an array? Written by si alone (not '+='), read only by the
// statements after it in the group, f32, its dims from depth on dense (all of them at depth 1)
// making a row of up to 16384 elements (*row_elems). The backend's rule (codegen/lower-cpu.c)
// and the model's (such a tensor moves between the registers and L1 only).
bool rt_perf_cpu_row_local(const rt_op *op, int32_t g1, int32_t depth, int32_t si,
                           int64_t *row_elems);
// The row-wise group [*g0, *g1) holding statement s when the statements are grouped from the
// first, as the general path groups them; false when s is alone in it.
bool rt_perf_cpu_row_group(const rt_op *op, int32_t s, int32_t *g0, int32_t *g1);
const char *rt_perf_cpu_plan_kind_name(rt_perf_cpu_plan_kind k);
// The plan as one canonical line (no newline), printed in the JSON report ("plan") and in the
// kernel's opening comment ("plan: ..."): op and s name the variables of a loop plan.
void rt_perf_cpu_plan_text(const rt_perf_cpu_plan *pl, const rt_op *op, const rt_stmt *s,
                           rt_buf *out);
// Equal plans lower to the same kernel (construct.c keeps one rProgram per plan).
uint64_t rt_perf_cpu_plan_key(const rt_perf_cpu_plan *pl);

// One candidate rProgram.
typedef struct rt_rprog {
    int32_t n_levels;
    rt_rtile tile[RT_MAX_MEM_LEVELS]; // tile[0]: the whole operator
    int64_t threads_per_block;        // GPU: threads of one block; CPU: 1
    int64_t blocks;                   // tiles of the scale-out level (spatial), ceil of expectation
    int64_t blocks_per_unit;          // concurrent blocks on one unit (occupancy)
    int64_t grid[RT_PERF_MAX_AXES];   // blocks along each axis (expected, rounded up)
    int32_t regs_per_thread;          // 32-bit registers of the thread-level tile (0 without one)
    int32_t compiled_regs;            // GPU: registers per thread of the compiled kernel (0 before
                                      // compilation): blocks_per_unit follows them once known
    double wave_eff;                  // real / (max * ceil(real / max))
    double compute_ns;                // compute time
    double predicted_ns;              // bottleneck time + launch overhead
    int32_t bottleneck;               // level whose bandwidth binds, or -1 when compute bound
    double bound_bytes;               // bytes priced at that level's bandwidth where the CPU's
                                      // packed GEMM reads its operands (its roof); 0: the
                                      // traffic of the bottleneck's tile (tile[b + 1])
    double bound_gbps;                // the roof's bandwidth with bound_bytes (L3's blended
                                      // with L2's: rt_perf_cpu_roof_gbps)
    double waste;                     // padded iteration points / real points - 1
    double flops;                     // arithmetic including padding and fused statements
    double construct_ns;              // time from the start of construction to this candidate
    double epsilon;                   // padding bound it was constructed under
    bool shrunk;                      // produced by the small-operator shrink
    int64_t reg_block_elems;          // CPU: output elements of the register block (ties go to the
                                      // larger micro-kernel); 0 elsewhere
    int32_t order;                    // discovery order (final tie-break)
    rt_perf_cpu_plan cpu;             // CPU: what the backend compiles (rt_perf_evaluate)
    const struct rt_gpu_plan *gpu;    // GPU: the plan the backend executes (gpu-plan.h); NULL
                                      // on a CPU or where no plan could be made
} rt_rprog;

typedef struct rt_perf_result {
    const rt_perf_model *model;
    int32_t n_cands; // ranked, best first, at most top_k
    int32_t top_k;   // asked for: n_cands < top_k when the op admits fewer different kernels
    rt_rprog *cands;
    int32_t n_found;       // candidates constructed before ranking, one per distinct kernel
    int32_t n_same_kernel; // rPrograms dropped because a found one lowers to the same kernel
                           // (the better predicted of the two is kept; GPU: the same plan)
    int64_t n_evals;       // tile evaluations
    int64_t n_steps;       // the model's loop steps over the construction (rt_perf_model.steps)
    double construct_ns;   // whole construction
    double top1_ns;        // time until the first complete candidate
} rt_perf_result;

// Constructs and ranks candidates for op on dev. Errors: RT_ERR_DEVICE when the device has no
// tiled level or no compute peak; RT_ERR_NOFIT when no candidate fits; RT_ERR_SPEC when the op
// has no statement; RT_ERR_NOMEM.
rt_status rt_perf_construct(rt_arena *a, const rt_op *op, const rt_device *dev,
                            const rt_perf_options *opt, rt_perf_result **out, rt_err *err);
// JSON report (jansson json_t *, caller owns the reference; NULL on out of memory).
void *rt_perf_result_to_json(const rt_perf_result *r);
// Short table for stdout.
void rt_perf_print_table(const rt_perf_result *r, rt_buf *out);
// One line "op device: L1 [128,128,8] L2 [8,8,1] threads 256 ..." for the golden table.
void rt_perf_print_top1(const rt_perf_result *r, rt_buf *out);

// ---------------------------------------------------------------------------------------------
// Model internals (rtile.c, align.c, cost.c), exposed for tests
// ---------------------------------------------------------------------------------------------

typedef struct rt_perf_axis {
    const char *name;
    bool is_reduce;
    bool ragged;
    bool pinned;    // a vloop's extent depends on it (batch axis of a ragged op): tile 1
    int32_t group;  // ragged axes sharing one length source (joint expectation); -1 dense
    int64_t extent; // dense extent, or the maximum of dist
    rt_extent_dist dist;
} rt_perf_axis;

// One tensor access A(e_0, ..., e_{n-1}) of the modeled statement, over its axes.
typedef struct rt_perf_access {
    int32_t tensor;
    bool is_output;
    bool local; // CPU: a row-wise group's temporary kept in one L1 row per thread (model_local)
    int32_t elem_bytes;
    int32_t n_dims;
    int64_t dim_extent[RT_MAX_DIMS];             // storage extent (max for ragged dims)
    bool affine[RT_MAX_DIMS];                    // false: uses[] says which axes it involves
    int64_t coef[RT_MAX_DIMS][RT_PERF_MAX_AXES]; // |coefficient| of each axis in dim d
    // The axes of nonzero coef in dim d, in axis order (coef's sparse form: rt_perf_data_tile
    // runs for every tile the construction weighs).
    int8_t n_terms[RT_MAX_DIMS];
    int8_t term_axis[RT_MAX_DIMS][RT_PERF_MAX_AXES];
    uint32_t axes_mask; // bit x: some dim has a term of axis x (its data tile depends on it)
} rt_perf_access;
_Static_assert(RT_PERF_MAX_AXES <= 32, "rt_perf_access.axes_mask");
// Derives acc's n_terms and term_axis from its coef: after every change of coef.
void rt_perf_access_terms(const rt_perf_model *m, rt_perf_access *acc);

// The main statement's flat axis (rt_perf_cpu_flat_axis): n members (0: none), outer first,
// of model axis `axis`, whose range is total points.
typedef struct rt_perf_flat {
    int32_t n, axis;
    int32_t mem[RT_MAX_DIMS];
    int64_t total;
} rt_perf_flat;

struct rt_perf_model {
    const rt_op *op;
    const rt_device *dev;
    int32_t main_stmt;
    int32_t n_fused; // other statements, fused as prologue/epilogue
    int32_t fused[16];
    int32_t n_axes;
    rt_perf_axis axes[RT_PERF_MAX_AXES];
    int32_t n_access; // inputs first, the output last
    rt_perf_access access[RT_PERF_MAX_ACCESS];
    rt_assign assign;
    rt_dtype dtype; // of the computation (the output)
    double flops_per_point;
    double extra_dram_bytes; // traffic of the fused statements
    double extra_flops;
    // CPU: core cycles the vector instructions of the statements take (rt_perf_cpu_expr_cycles
    // per vector of lanes points, over their points): the main statement's and the fused ones';
    // and per vector, those of the main statement's right-hand side (the loop model's step).
    double main_vector_cycles, fused_vector_cycles, main_expr_cycles;
    double real_points;   // iteration points of the main statement (expectation)
    int32_t top;          // register level
    int32_t thread_level; // level of scope thread, -1 when none (CPU)
    int32_t block_level;  // scale-out level: lowest tiled level of scope unit/block
    bool acc_persist;     // accumulators stay in thread registers across the reduction
    bool use_mma;
    bool recursive;    // modeled as a simple per-statement plan
    bool warm;         // CPU: the operator stays in the last-level cache (rt_perf_cpu_warm)
    double l2_share;   // CPU: of a warm operator, the share its cores' L2s keep between runs
                       // (rt_perf_cpu_l2_share); 0 otherwise
    rt_perf_flat flat; // CPU loop nests: the main statement's flat axis
    double peak_gflops;
    double epsilon;                // current tensor-padding bound
    const char *default_dist_note; // where a vloop's lengths came from when no file gave them
    // Steps of the model's loops whose trip counts come from the operator (work items, column
    // blocks, blocking choices, distribution values) since the model was built: a deterministic
    // measure of the model's work, which the memory hierarchy and the cores bound, not the
    // extents. Arena-owned; NULL counts nothing.
    int64_t *steps;
    // CPU: rt_perf_cpu_gemm_view's results (cpu-view.c), which depend on the model and five rTile
    // seeds only: arena-owned, made with the model (rt_perf_gemm_memo_new), filled as views are
    // asked for. NULL: every view is made anew. The model must not change once built (epsilon,
    // which the view does not read, aside).
    rt_perf_gemm_memo *gemm_memo;
};

static inline void rt_perf_count_steps(const rt_perf_model *m, int64_t n) {
    if (m->steps)
        *m->steps += n;
}

// Builds the model of op's main statement. Errors as rt_perf_construct.
rt_status rt_perf_model_build(rt_arena *a, const rt_op *op, const rt_device *dev,
                              const rt_perf_options *opt, rt_perf_model **out, rt_err *err);

// Data tile of access i for tile shape (extent per dim, capped at the storage extent): an affine
// dim sum c_a * x_a + c0 spans sum |c_a| * (T_a - 1) + 1, so 2*y + r spans 2*(Ty-1) + Tr.
void rt_perf_data_tile(const rt_perf_model *m, int32_t i, const int64_t *shape, int64_t *out);
// The innermost extent of that data tile alone.
int64_t rt_perf_data_tile_inner(const rt_perf_model *m, int32_t i, const int64_t *shape);
// The data tiles of every access for shape (out[i] as rt_perf_data_tile's), each computed, or,
// given from (those of a shape that differs from shape along `axis` only), computed for the
// accesses whose dims have a term of axis and copied from from for the others: the
// construction weighs every axis's growth of one tile.
void rt_perf_data_tiles(const rt_perf_model *m, const int64_t *shape,
                        const int64_t (*from)[RT_MAX_DIMS], int32_t axis,
                        int64_t (*out)[RT_MAX_DIMS]);
// Expected number of tiles of shape over the iteration space (spatial axes only when asked).
double rt_perf_tile_count(const rt_perf_model *m, const int64_t *shape, bool spatial_only);
// Expected padded iteration points when tiled by shape.
double rt_perf_padded_points(const rt_perf_model *m, const int64_t *shape);
// Bank-conflict-free storage padding (elements) of a data tile whose innermost extent is n_elems
// when read by a tile whose innermost extent is reader_elems (Roller §3.1):
// pad = (B*L - N mod B*L + L*ceil(n/L)) mod B*L bytes, N and n in bytes, rounded to elements.
int64_t rt_perf_bank_pad_elems(int32_t banks, int32_t bank_bytes, int32_t elem_bytes,
                               int64_t n_elems, int64_t reader_elems);
// Footprint at level of tile shape (bytes, per scope instance), with storage padding computed
// against reader (the tile one level up, or NULL). pad_out (may be NULL) receives per access.
int64_t rt_perf_footprint_bytes(const rt_perf_model *m, int32_t level, const int64_t *shape,
                                const int64_t *reader, int64_t *pad_out);
// The same from the shape's data tiles dt (rt_perf_data_tiles).
int64_t rt_perf_footprint_of(const rt_perf_model *m, int32_t level,
                             const int64_t (*dt)[RT_MAX_DIMS], const int64_t *reader,
                             int64_t *pad_out);
// Bytes moved into level from level-1 for the whole operator at the granularity of shape,
// counting transaction rounding of level-1. red_shape (may be NULL) is the tile whose reduction
// extent the output accumulators live across when they do not persist (CPU register level).
double rt_perf_traffic_bytes(const rt_perf_model *m, int32_t level, const int64_t *shape,
                             const int64_t *red_shape);
// The same from the shape's data tiles dt (rt_perf_data_tiles).
double rt_perf_traffic_of(const rt_perf_model *m, int32_t level, const int64_t *shape,
                          const int64_t (*dt)[RT_MAX_DIMS], const int64_t *red_shape);
// Models without a ragged axis (no joint expectations), for a construction that weighs many
// tiles differing along one axis: the tiles of shape[x] along dense axis x (a factor of
// rt_perf_tile_count's product); the products of such factors f, over all axes and over the
// spatial ones (rt_perf_tile_count's, the same doubles); the traffic from the data tiles and
// those counts, n_red the tile count along the reduction that the output's accumulators go
// through (rt_perf_tile_count(red_shape, false) / (.., true); negative: n_all / n_sp).
double rt_perf_axis_tiles(const rt_perf_model *m, int32_t x, int64_t tile);
void rt_perf_tile_counts_of(const rt_perf_model *m, const double *f, double *n_all, double *n_sp);
double rt_perf_traffic_counted(const rt_perf_model *m, int32_t level,
                               const int64_t (*dt)[RT_MAX_DIMS], double n_all, double n_sp,
                               double n_red);
// Effective capacity of one rTile at level (tile_capacity_bytes; for caches minus one way).
int64_t rt_perf_capacity_bytes(const rt_perf_model *m, int32_t level);

// Alignment rules (align.c). A rule accepts or rejects value for axis at level given the tile
// (other axes as in shape) and the tile of the level above (upper, NULL at the top).
typedef struct rt_align_rule {
    const char *name;
    bool (*accept)(const rt_perf_model *m, const int64_t *shape, int32_t axis, int32_t level,
                   const int64_t *upper, int64_t value);
} rt_align_rule;
const rt_align_rule *rt_perf_align_rules(int32_t *n_out);
// The next size of axis above shape[axis] (or >= when inclusive) that is a multiple of upper's
// extent and satisfies every rule; 0 when there is none.
int64_t rt_perf_next_aligned_size(const rt_perf_model *m, const int64_t *shape, int32_t axis,
                                  int32_t level, const int64_t *upper, bool inclusive);
// The name of the first rule rejecting value, or NULL when all accept.
const char *rt_perf_align_check(const rt_perf_model *m, const int64_t *shape, int32_t axis,
                                int32_t level, const int64_t *upper, int64_t value);

// Cost model (cost.c): fills footprints, traffic, launch configuration and times of p, whose
// tile shapes at levels 1..top are set. Returns false (with a reason) when p does not fit.
bool rt_perf_evaluate(const rt_perf_model *m, rt_rprog *p, const char **why);
// Prices candidate p of r again once its kernel is compiled, with the registers per thread the
// compiler allocated (regs > 0) in place of the thread tile's: the blocks resident on a unit, and
// so the latency they hide, follow them. The plan is unchanged. False (with why) when a block no
// longer fits on a unit.
bool rt_perf_reprice_compiled(const rt_perf_result *r, rt_rprog *p, int32_t regs, const char **why);
// Compute time (ns) of the whole operator at the given efficiency factors.
double rt_perf_compute_ns(const rt_perf_model *m, double flops, double eff);

// CPU model (cpu.c). Vector load slots per cycle per core come from the L1 (level top-1)
// bandwidth: gbps / (units x clock x lanes x 4 B); without a clock or an L1 bandwidth, this:
#define RT_PERF_CPU_DEFAULT_LOAD_PORTS 2.0
// Cycles of entering one micro-kernel call besides its k loop and C update (policy: pointer
// set-up, the full/edge test and the loop branches of the two loops around it).
#define RT_PERF_CPU_CALL_CYCLES 24.0
// Share of an L1 overflow's reload from L2 (cycles per k step) that the FMAs do not hide. Fitted
// to bench-model on an Intel 2-core VM when B's micro-panel was the L1-resident one (14x32 at
// kc = 256, a 49 KiB set in a 48 KiB L1, ran 9-11% behind 8x32); the A micro-panel that is
// resident now rarely overflows (kc is sized to half of L1 for it).
#define RT_PERF_CPU_RELOAD_EXPOSED 0.5
// The k step's time where the B stream from L2 and the FMAs (or the loads) both take most of
// it: they overlap imperfectly (the stream's lines arrive in bursts the FMAs wait on), so the
// step takes their p-norm (busy^p + stream^p)^(1/p) rather than the larger one. A 4x64 kernel
// whose 256 B of B per step need its 8 FMA cycles at 32 B per cycle takes 19% more; 12x32's
// 128 B over 12 cycles 0.4%. Policy: p chosen so that on a 2-core Sapphire Rapids VM, one
// thread, 1024^3 and 512x1024x1024, the kernels at a stream equal to their FMA time (4x64,
// 4x48) and above it (3x64) ran 5-25% behind 12x32, 14x32 and 6x64, which the plain maximum
// priced alike.
#define RT_PERF_CPU_STREAM_OVERLAP_P 4.0

// The core clock in GHz that cycle counts convert with: the one the measured FP32 FMA peak
// implies (peak / (units x FMA ports x lanes x 2)), since cores run FMA-heavy code at their
// turbo clock, not the nominal clock_mhz; clock_mhz when there is no peak; 0 without a clock.
double rt_perf_cpu_ghz(const rt_device *dev);
double rt_perf_cpu_load_ports(const rt_device *dev);
// Vector registers: the register level's capacity / (lanes x 4 B).
int64_t rt_perf_cpu_vector_regs(const rt_device *dev);

// The register-block rules of the packed GEMM's micro-kernel (mr rows x nv vectors of B), all
// from the device file: a vector holds `lanes` floats; a k step keeps mr x nv accumulators, its
// nv B vectors and one broadcast A value in the vector registers (LLVM broadcasts A into a
// register on AVX-512 too: 7x64's 33 registers spilled one zmm per k step); at least
// acc_min accumulators hide the FMA latency on every FMA pipe, with half again as slack
// (3/2 x fma_latency_cycles x teus_per_unit: 12 on two pipes of latency 4, the 6x16 of AVX2 and
// the 6x32 of AVX-512); nv runs from nv_min (two vectors, so that B's loads amortize over the
// broadcasts) to nv_max, the most B vectors (at most RT_PERF_CPU_UK_MAX_NV) whose acc_min
// accumulators still fit. Without a device: 16 lanes, 32 registers, 2 pipes of latency 4.
#define RT_PERF_CPU_UK_MAX_NV  4  // policy: a k step's B row is at most 4 vectors
#define RT_PERF_CPU_UK_MAX_ACC 32 // accumulators the backend's micro-kernel may keep
typedef struct rt_perf_cpu_uk_rules {
    int64_t lanes; // floats per vector register
    int64_t regs;  // vector registers
    int64_t acc_min;
    int64_t nv_min, nv_max;
    bool masked_edge; // vectors with mask registers (16 lanes: AVX-512): an edge tile's cut
                      // vector is stored as one masked vector, not element by element
} rt_perf_cpu_uk_rules;
void rt_perf_cpu_uk_rules_of(const rt_device *dev, rt_perf_cpu_uk_rules *out);
// The most rows whose accumulators, nv B vectors and the broadcast fit the registers.
int64_t rt_perf_cpu_uk_max_mr(const rt_perf_cpu_uk_rules *r, int64_t nv);

// One register micro-kernel mr x nr (elements) over kc reduction steps: C(mr x nr) += A panel
// (mr broadcasts per step) x B panel (ceil(nr / vector) loads per step).
typedef struct rt_perf_ukernel {
    int64_t acc_vectors; // accumulators: mr x ceil(nr / vector elements)
    int64_t vector_regs; // accumulators + B vectors of one step + one broadcast A
    double cycles_per_k; // max(FMAs / FMA ports, loads / load ports, FMA latency); the loads
                         // include B's lines from L2 when the call's panels overflow L1
    double call_cycles;  // kc steps + C load and store + RT_PERF_CPU_CALL_CYCLES
    double eff;          // FMA-port cycles / call cycles (1 = peak)
} rt_perf_ukernel;
// Fills out (spilled accumulators cost a reload and a store per step); false when the block
// needs more vector registers than the device has.
bool rt_perf_cpu_ukernel(const rt_device *dev, int32_t elem_bytes, int64_t mr, int64_t nr,
                         int64_t kc, rt_perf_ukernel *out);
// The same with its k steps split over `sets` sets of accumulators (a row tail's: consecutive
// steps go to different sets, summed after the loop), so that the FMA latency bounds the step
// only once per sets steps.
bool rt_perf_cpu_ukernel_sets(const rt_device *dev, int32_t elem_bytes, int64_t mr, int64_t nr,
                              int64_t kc, int64_t sets, rt_perf_ukernel *out);
// Row tails (rt_perf_cpu_gemm.row_tail_acc): the accumulator sets of the micro-kernel that
// computes exactly rows (< mr) rows of nv vectors: enough for about acc accumulators in flight,
// at most the mr x nv registers of the full kernel; 1 for a full tile or acc 0.
int64_t rt_perf_cpu_tail_sets(int64_t mr, int64_t nv, int64_t rows, int64_t acc);
// The rows of the kernel that runs a row tail of `rows` valid rows: rows rounded up to a
// multiple of rt_perf_cpu_tail_quantum(mr) = ceil(mr / 4) (1 up to mr = 4), so that at most
// three tail kernels join the mr-row one (one per row count tripled the JIT's compile time);
// mr for a full tile.
int64_t rt_perf_cpu_tail_quantum(int64_t mr);
int64_t rt_perf_cpu_tail_rows(int64_t mr, int64_t rows);

// The packed GEMM the CPU backend compiles for a contraction C(m, n) (+)= A(m, k) * B(k, n):
// the blocking codegen/lower-cpu.c derives from the rTiles (one rule, called by both).
// The packed GEMM the backend compiles for p: a plain GEMM or the implicit GEMM of a
// convolution-like contraction (groups as codegen/lower-cpu.c forms them from the statement's
// variables). False when the statement is not such a contraction or the device has a thread
// level.
bool rt_perf_cpu_gemm_view(const rt_perf_model *m, const rt_rprog *p, rt_perf_cpu_gemm *g);
// An empty memo of views for rt_perf_model.gemm_memo; NULL when out of memory.
rt_perf_gemm_memo *rt_perf_gemm_memo_new(rt_arena *a);
// The groups of a plain or implicit GEMM (cpu.c): C (+)= A * B grouped as codegen/lower-cpu.c
// groups the statement's variables (rt_gemm_detect_implicit); false for anything else.
bool rt_perf_cpu_gemm_groups(const rt_perf_model *m, rt_perf_cpu_gemm *g);
// A token-flattened contraction (CORA's proj, a ragged FFN): C(b, i, n) (+)= A(b, i, k) * W(k, n)
// (W also as W(n, k)) times constants, where A and C are packed ragged tensors of dims
// (b:B, len(b), D) of one length tensor and W is dense. In the packed layout (src/ref/layout.h)
// element (b, i, d) of such a tensor sits at (start[1][b] + i) * D + d, so (b, i) is one row
// index r = start[1][b] + i over [0, sum(len)): the contraction is a plain GEMM with
// M = sum(len), known at run time only (start[1][B]). Decided here once, for the model
// (rt_perf_cpu_gemm_view) and the CPU backend (codegen/lower-cpu-gemm.c rt_gemm_detect_tokens).
// The n (k) side may be a run of several dims, C(b, i, h, d) += A(b, i, m) * W(m, h, d) or
// C(b, i, n) += A(b, i, h, d) * W(h, d, n): the run's vars in the same order in C (A) and W,
// adjacent, over W's dims of the same constant extents, so that they flatten into one index of
// extent N (K) with the same row-major strides in both tensors.
#define RT_PERF_TOKENS_MAX_RUN 4
typedef struct rt_perf_gemm_tokens {
    int32_t b_var, i_var, k_var, n_var; // statement vars (k_var, n_var: the runs' innermost)
    int32_t k_vars[RT_PERF_TOKENS_MAX_RUN], n_vars[RT_PERF_TOKENS_MAX_RUN]; // the runs, outer first
    int32_t n_k, n_n;
    int32_t ta, tw, len;    // A (ragged rows), W (dense), the length tensor
    const rt_expr *ra, *rw; // their reads
    int64_t batch, K, N;    // B, A's row length, C's row length
    int64_t wk, wn;         // W's strides along k and n
    double alpha;           // the constant factors
} rt_perf_gemm_tokens;
bool rt_perf_gemm_tokens_of(const rt_op *op, const rt_stmt *s, rt_perf_gemm_tokens *out);
// The group of a model axis of token-flattened contraction tk: RT_PERF_GEMM_M for the fused
// (b.i), N (K) for an axis of n-run (k-run) vars only, -1 for any other.
int32_t rt_perf_gemm_tokens_group(const rt_axis *ax, const rt_perf_gemm_tokens *tk);
// The blocking rule behind the view, for callers that seed it themselves (the backend's
// implicit GEMMs): g->M, N, K and the rTile seeds mr, nr, kc, mc, nc in, the blocking and items
// (batch x blocks) out. dev may be NULL (no cache or core counts).
void rt_perf_cpu_gemm_block(const rt_device *dev, int64_t batch, rt_perf_cpu_gemm *g);

// A contraction over a ragged batch whose every entry is its own GEMM (perfmodel/cpu-rentry.c,
// codegen/lower-cpu-rentry.c): C (+)= alpha * A * B where every dim of A, B and C is indexed by
// one statement var, the batch vars (stored, read by both: b and h of attention scores) have
// constant ranges, and m (stored, A's), n (C's innermost dim, B's) and k (reduced) each range
// over a constant or over len(x) of a length tensor at a batch var, one of them ragged. Inside
// one entry every dim within a GEMM var's dim has an extent the batch vars decide, so that the
// entry's A, B and C are strided matrices (row strides known at run time).
#define RT_PERF_RENTRY_MAX_BATCH 4
typedef struct rt_perf_gemm_rentry {
    int32_t m_var, n_var, k_var;
    int32_t n_batch, batch_var[RT_PERF_RENTRY_MAX_BATCH]; // in loop order
    int64_t batch_ext[RT_PERF_RENTRY_MAX_BATCH], entries;
    const rt_expr *ra, *rb; // A holds m, B holds n
    double alpha;
    int64_t ext[3]; // per m, n, k: its constant extent, -1 when ragged
    int32_t len[3]; // ragged: the length tensor of its range, read at batch var len_b
    int32_t len_b[3];
    // Causal (masked) attention: n (scores: C is stored packed lower-triangular, row m holding
    // m + tri_c entries) or k (attention x V: A is) ranges over [0, m + tri_c), tri_c <= 1, the
    // tensor's last dim of extent m + tri_c (i + 1). The entry's extent of that var is then
    // M + tri_c - 1; a row block computes only the columns (k steps) up to its last row's.
    // tri: 0 none, 1 on n (one k block, '+=!'), 2 on k.
    int32_t tri;
    int64_t tri_c;
} rt_perf_gemm_rentry;
bool rt_perf_gemm_rentry_of(const rt_op *op, const rt_stmt *s, rt_perf_gemm_rentry *out);
// Entries in a row of equal extents (so equal cost): the product of the innermost batch vars'
// extents up to the first one a length is read at (the heads of one sequence).
int64_t rt_perf_gemm_rentry_run(const rt_perf_gemm_rentry *r);
// The model's groups of such a contraction (g->rentry), its blocks and work items, and the
// busiest thread's time over the length distributions (rt_perf_cpu_gemm_time calls it).
bool rt_perf_cpu_rentry_groups(const rt_perf_model *m, rt_perf_cpu_gemm *g);
void rt_perf_cpu_rentry_block(const rt_perf_model *m, rt_perf_cpu_gemm *g);
int64_t rt_perf_cpu_rentry_items(const rt_device *dev);
// Width of the per-entry plan's B sub-panels (codegen/kir.h b_sub): 8 where B's k is contiguous
// (k_unit) and nr a multiple of 8 above it, on vectors of at most 8 lanes; else 0 (nr-wide).
int32_t rt_perf_cpu_rentry_b_sub(int32_t nr, int64_t lanes, bool k_unit);
// Where B's k is contiguous on 16-lane vectors (per-entry and dense packed GEMMs): each group of
// 16 rows of an nr-wide panel is packed by 16 x 16 transposes in registers (codegen/kir.h
// rt_kir_tpack), RT_PERF_CPU_T16_CYCLES per 16 x 16 block: 16 vector loads, 64 two-source
// shuffles on the one shuffle port (four rounds of interleaving pairs of rows), 16 stores.
bool rt_perf_cpu_b_t16(int64_t nr, int64_t lanes, bool k_unit);
#define RT_PERF_CPU_T16_CYCLES 72.0
// Columns of B the per-entry plan packs at once (a multiple of nc): B is packed once per entry,
// k block and run of this many columns, and every row block of the entry that a thread owns
// reuses it; the longest entry's N, up to RT_PERF_RENTRY_B_BYTES of panels.
#define RT_PERF_RENTRY_B_BYTES (8 << 20)
// The per-entry plan packs A, even where it could be read in place, when the entries' mean N is
// at least this many columns. Same-process A/B on Sapphire Rapids, A packed against in place:
// CORA's vgemm (8 entries, N 512-1408, mean 960) 1.10-1.20x on 1 and 2 threads; Q.K^T over
// RACE (mean N 361) 0.99x, SQuAD (191) 0.93x, MRPC (59) 0.89x; attention x V (N 64) 0.84x.
#define RT_PERF_RENTRY_A_PACK_COLS 512.0
int64_t rt_perf_cpu_rentry_b_cols(const rt_perf_cpu_gemm *g);
bool rt_perf_cpu_rentry_time(const rt_perf_model *m, const rt_perf_cpu_gemm *g, double *ns,
                             double *pack_ns, double *eff);
// Cycles of packing one rows x kcur block of A or B of g (cpu.c).
double rt_perf_cpu_pack_cycles(const rt_device *dev, const rt_perf_cpu_gemm *g, bool is_b,
                               int64_t rows, int64_t kcur, double ghz);
// Cycles per byte, on one core, of a stream over a tensor of total_bytes in chunks of
// chunk_bytes, at the bandwidth share of the level it lives in (the first whose half holds it,
// DRAM otherwise), as the packs read their sources (cpu.c).
double rt_perf_cpu_stream_cycles_per_byte(const rt_device *dev, double total_bytes,
                                          double chunk_bytes, double ghz);

// Tile of statement var v in a tile of `tile` points over the fused model axis ax, as the CPU
// backend splits it: the members are filled from the innermost (whole rows of the inner
// members, then as many of the next as fit). 0 when a member has no constant range.
int64_t rt_perf_member_tile(const rt_op *op, const rt_stmt *s, int32_t ax, int32_t v, int64_t tile);
// Time of the busiest core (packing + micro-kernel calls over its blocks), in ns, with the part
// spent packing and the micro-kernel's efficiency. False when the device has no clock (why is
// then empty: the caller keeps its peak-based estimate).
bool rt_perf_cpu_gemm_time(const rt_perf_model *m, const rt_perf_cpu_gemm *g, double *ns,
                           double *pack_ns, double *eff, const char **why);

// A triangular contraction (perfmodel/cpu-tri.c; examples/trmm.spec, bench/specs/
// trmm_upper.spec): C(m, n) (+)= alpha * A(m, k) * B(k + s m + c, n), C and B dense f32 with
// constant extents, A f32 read as A(m, k) (dense, or ragged: packed lower- or upper-triangular
// storage), k over [lo(m), hi(m)) affine in m and not constant. In B's row coordinate
// kk = k + s m + c (the GEMM's k, over [0, K) = B's rows) row m reduces over range; A's element
// of (m, kk) is A(m, kk - s m - c).
typedef struct rt_perf_tri {
    int32_t m_var, n_var, k_var;
    const rt_expr *ra, *rb; // the reads of A and B
    int64_t M, N, K;
    double alpha;
    int64_t s, c;
    rt_perf_tri_range range;
} rt_perf_tri;
bool rt_perf_tri_detect(const rt_op *op, int32_t si, rt_perf_tri *t);
// A triangular main statement on the CPU (thread_level < 0) whose B row moves with m (s != 0,
// trmm_upper's X(i + k, p)): B's access in the GEMM's coordinates, where the backend packs its
// rows kk = k + s m + c as the GEMM's k. A tile of tk k steps then reads tk rows of B whatever
// its m tile, as it does in the packed GEMM (B(k, n) of the lower case).
void rt_perf_tri_access_view(rt_perf_model *m);
// Union of the k ranges of rows [m0, m1) (m1 > m0), within [0, K): [*lo, *hi), *hi >= *lo.
void rt_perf_tri_rows_range(const rt_perf_tri_range *r, int64_t K, int64_t m0, int64_t m1,
                            int64_t *lo, int64_t *hi);
// Sum over j in [0, n) of |[lo0 + lo1 j, hi0 + hi1 j) within [0, K)| in O(1): the useful k steps
// of n rows (r itself) or, with the coefficients of a panel index, of n panels.
double rt_perf_tri_sum(int64_t lo0, int64_t lo1, int64_t hi0, int64_t hi1, int64_t K, int64_t n);
// The model's view of a triangular main statement (rt_perf_cpu_gemm_view): groups, extents,
// accesses, sizes and g->tri; false when it is not one.
bool rt_perf_cpu_tri_groups(const rt_perf_model *m, rt_perf_cpu_gemm *g);
// After rt_perf_cpu_gemm_block: rows of unequal work balanced over the cores (the backend pairs
// row block j with row block mt - 1 - j in its item order, rt_perf_tri_row_block).
void rt_perf_cpu_tri_block(const rt_device *dev, rt_perf_cpu_gemm *g);
// The row block at item position q of mt: longest-first pairs, (mt - 1, 0), (mt - 2, 1), ...
// for a growing range (lower), (0, mt - 1), ... for a shrinking one, so that any even run of
// positions holds rows of equal total work.
int64_t rt_perf_tri_row_block(const rt_perf_tri_range *r, int64_t q, int64_t mt);

// The general CPU path (codegen/lower-cpu.c rt_tiled_plan, rt_lower_tiled): the modeled
// statement's kept (non-reduction) variables in loop order, each tiled from the scale-out
// level (work items) down to the registers, each tile capped by the one above and by the
// variable's range, the innermost variable in whole vectors.
// An elementwise statement (no reduction, '=') whose innermost loops are the members of one
// fused axis (Roller's canonical form: n.c.h.w of a ReLU) that every access reads as one
// contiguous run: the members as plain index arguments at consecutive positions, the dims after
// the first of exactly their extents, or none of them at all. The CPU loop nest then runs the
// axis as one flat index with the axis's rTiles, its outer members at 0 in every offset,
// instead of spreading a tile back over the members (256 elements as 6 rows of 42): tiles of
// whole cache lines let the output take non-temporal stores, which rows of 42 floats cannot
// (8x1008x42x42 ReLU on a Zen 5 core: 2.3 ms against 2.9 ms). Fills *out (needs m's axes) and
// returns out->n: the member count (>= 2), 0 when not flat. The model holds its main
// statement's in m->flat, set once when it is built.
int32_t rt_perf_cpu_flat_axis(const rt_perf_model *m, const rt_stmt *s, rt_perf_flat *out);

// False when no variable is tiled (the backend then lowers the plain nest, whatever p is).
// A flat axis (m->flat) is one entry: its last member's variable over the whole axis, with the
// axis's tiles.
bool rt_perf_cpu_loop_plan(const rt_perf_model *m, const rt_rprog *p, rt_perf_cpu_loops *out);

// Time the busiest core spends executing that loop nest, in two parts. *ns overlaps with the
// nest's memory traffic (the out-of-order core issues it while lines stream in): per run of the
// innermost (vector) loop its vectors, per iteration of the other loops its control, for window
// reductions (pooling, depthwise convolution: the window loops outside the vector loop) once per
// window point, and the row packing of a strided or padded window read. *serial_ns does not: per
// work item its index decomposition, per run of a vector loop whose trip count is only known at
// run time the vectorizer's dispatch (its branches, mispredicted as the trip count changes, stall
// the loads behind them). False when it does not apply (untiled variables, other reductions,
// fused statements, no clock); the caller then keeps the roofline alone.
bool rt_perf_cpu_loop_time(const rt_perf_model *m, const rt_perf_cpu_loops *lp, double *ns,
                           double *serial_ns);
// The backend's row packing of a window read (codegen/lower-cpu.c rt_win_pack), shared so that
// the model times the packing the backend builds: a row of x_max outputs at stride a over a
// window bspan + 1 wide holds a phases of this many elements (the run, a shift of up to 15 to
// align the copy's stores, rounded to whole vectors of 16); with y's loop handed over, each y
// iteration computes yu output rows (RT_WIN_Y_ROWS when the rows may be recomputed, rt_win_rows)
// and the rows live in a ring of this many (the span + ay (yu - 1) rows of one iteration and the
// ay yu rows packed ahead for the next, rounded up to a power of two); all rows of a phase at
// most RT_WIN_PACK_ELEMS elements.
#define RT_WIN_PACK_ELEMS 8192
#define RT_WIN_Y_ROWS     2
static inline int64_t rt_win_pack_row_elems(int64_t x_max, int64_t a, int64_t bspan) {
    return (x_max - 1 + (bspan + a) / a + 15 + 15) / 16 * 16;
}
static inline int64_t rt_win_pack_ring_rows(int64_t span, int64_t ay, int64_t yu) {
    int64_t r = 1;
    while (r < span + (2 * yu - 1) * ay)
        r *= 2;
    return r;
}
// Core cycles the CPU backend spends on one vector (lanes elements) of expression e, issued on the
// device's teus_per_unit vector pipes: one instruction per arithmetic operation, exp as the JIT's
// inline polynomial (RT_PERF_CPU_EXP_OPS, codegen/emit-llvm.c rt_l_expf), erf likewise
// (RT_PERF_CPU_ERF_OPS, rt_l_erff; unit/exp-ops counts both in the emitted IR), sigmoid as exp and three more, sqrt at
// the device's sqrt_cycles, and the functions left to libm (log, tanh) one element at a time at
// its libm_cycles (rt_hal_cpu_costs). Loads, stores and loop control are the loop model's. A division
// counts as one instruction: the backend divides by an invariant through its reciprocal.
// On a Zen 5 core (2 FMA pipes) softmax's four statements ran at 775 cycles per cached row of
// 1024; this gives 576 (18 instructions per vector), and bench-model's 512 x 1024 softmax on two
// cores is predicted at 35 us against 50 measured, where its flops alone gave 8.9.
double rt_perf_cpu_expr_cycles(const rt_device *dev, const rt_expr *e);
// Does e compute nothing itself (a read, a number, an index, a size, a dim or child reference)?
static inline bool rt_perf_expr_is_leaf(const rt_expr *e) {
    return e->kind == RT_EXPR_READ || e->kind == RT_EXPR_NUM || e->kind == RT_EXPR_INDEX ||
           e->kind == RT_EXPR_SIZE || e->kind == RT_EXPR_DIMREF || e->kind == RT_EXPR_CHILD;
}
#define RT_PERF_CPU_EXP_OPS 14.0
#define RT_PERF_CPU_ERF_OPS 35.0
// Is the operator warm on a CPU: do its tensors together fit in half of the last-level cache
// (level 1)? Then they are still there when it runs again, as in the profiler's repetitions or
// when it reads what the operator before it wrote, and its compulsory traffic comes from that
// cache, not from DRAM (cost.c). Measured on the Zen 4 VM: ReLU over 7 MiB in and 7 MiB out ran
// at 95-140 GB/s against a 26 GB/s DRAM triad, the L3 bandwidth rtcalib measures being 86 GB/s.
// rt_perf_model_build sets the model's warm from it.
bool rt_perf_cpu_warm(const rt_perf_model *m);
// The share of the operator that its cores' own caches between the last level and the L1
// (level 2, one per core) keep between runs: half of their capacity on all the device's units
// over the operator's bytes, at most 1; 0 without such a level. rt_perf_model_build sets the
// model's l2_share from it for a warm operator.
double rt_perf_cpu_l2_share(const rt_perf_model *m);
// The bandwidth (GB/s) at which the CPU's packed GEMM reads its operands' bytes once, on units
// cores (its roof), and in *level the level named for it: DRAM's for an operator that is not
// warm; for a warm one L3's, blended by time with L2's for the model's l2_share, named l2 where
// that share is half or more.
double rt_perf_cpu_roof_gbps(const rt_perf_model *m, double bytes, int64_t units, int32_t *level);
// Per work item: decomposing the item index into tile bases (a multiply-shift division by a
// constant per tiled variable) and the bounds of the tiles.
#define RT_PERF_CPU_ITEM_CYCLES 12.0
// Per iteration of a loop that does not run in vector lanes: its taken branch (increment,
// compare and the tile bounds issue beside the loop body's loads and stores).
#define RT_PERF_CPU_LOOP_CYCLES 1.0
// A vector loop whose trip count is only known at run time pays the vectorizer's trip-count
// tests and jumps (the device's vloop_entry_cycles, rt_hal_cpu_costs).
// Such a loop's main body takes this many vectors per iteration (LLVM's interleave for short
// bodies on x86); shorter remainders run at half width, the last lanes one at a time.
#define RT_PERF_CPU_VLOOP_INTERLEAVE 4
// Stores per cycle per core: the device's store_ports (rt_hal_cpu_costs).
// The widest interleave LLVM's vectorizer forms from one loop's accesses (its
// max-interleave-group-factor): the CPU backend packs an A panel of up to this many rows, read
// along k, with vector loads and shuffles; a taller one (mr = 12, 14) by gathering each k's rows.
#define RT_PERF_CPU_MAX_INTERLEAVE 8
// Cycles per element of a gather or scatter: the device's gather_cycles (rt_hal_cpu_costs).
// The longest k block of a packed GEMM. A 4-row A micro-panel of 1024 floats fills half of a
// 32 KiB L1; on a Zen 4 core kc = 1024 (4x64, nc = 64) ran 1024^3-4096^3 1.5-3% faster on one
// core than kc = 512 (half the round trips of C and the calls), and the same on two.
#define RT_PERF_CPU_MAX_KC 1024

#endif
