// kir.h: the kernel IR — what an rProgram becomes before any target prints it. A kernel is a
// list of phases run in order with a barrier between them; each phase is a loop over
// `n_items` independent work items (the scale-out level: cores on a CPU, blocks on a GPU) whose
// body is a tree of nodes: loops (serial / parallel / vectorized / unrolled), integer lets,
// scalar accumulators, stores, conditionals, tile copies between memory levels (packing) and a
// register-tile micro-kernel (BRGEMM-style broadcast + FMA over an mr x nr accumulator block).
//
// Pipeline position: perfmodel (rt_rprog) --lower-cpu.c--> rt_kir_kernel --emit-c.c /
// emit-llvm.c--> source text or an LLVM module. Everything lives in the caller's arena.
// Buffers are the flat storage of rt_layout (interp.h): one data array per tensor plus, for
// every ragged dim, its int64 start array, so kernels and the interpreter share data as is.
#ifndef RT_KIR_H
#define RT_KIR_H

#include "rt.h"
#include "spec.h"

// ORDER RT_KIR_TYPE: type names in kir.c.
typedef enum rt_kir_type {
    RT_KIR_I64, // indices, offsets, loop variables, comparisons (0/1)
    RT_KIR_I32, // length and gather tensors as stored
    RT_KIR_F32,
    RT_KIR_F64,
    RT_KIR_TYPE_COUNT
} rt_kir_type;

typedef enum rt_kir_ekind {
    RT_KIR_E_INT,    // ival (I64)
    RT_KIR_E_FLT,    // fval (F32/F64)
    RT_KIR_E_VAR,    // var: integer variable of the phase
    RT_KIR_E_FVAR,   // var: float local of the phase (accumulator)
    RT_KIR_E_LOAD,   // buf[args[0]], type = the buffer's element type
    RT_KIR_E_NEG,    // -args[0]
    RT_KIR_E_BIN,    // bop over args[0], args[1] (both of type, except comparisons)
    RT_KIR_E_CALL,   // fn over args[0] (args[1] for max/min)
    RT_KIR_E_SELECT, // args[0] (I64, nonzero = true) ? args[1] : args[2]
    RT_KIR_E_CAST,   // args[0] converted to type (float->int truncates toward zero)
    RT_KIR_EKIND_COUNT
} rt_kir_ekind;

// ORDER RT_KIR_BOP: spelling table in kir.c.
typedef enum rt_kir_bop {
    RT_KIR_ADD,
    RT_KIR_SUB,
    RT_KIR_MUL,
    RT_KIR_DIV, // float division; integer floor division (op-spec '/')
    RT_KIR_MOD, // float fmod; integer floor modulo
    RT_KIR_MIN,
    RT_KIR_MAX,
    RT_KIR_LT,
    RT_KIR_LE,
    RT_KIR_GT,
    RT_KIR_GE,
    RT_KIR_EQ,
    RT_KIR_NE, // -> I64 0/1
    RT_KIR_AND,
    RT_KIR_OR, // I64 0/1
    RT_KIR_UDIV,
    RT_KIR_UMOD, // I64 of non-negative operands: truncating (GPU index math)
    RT_KIR_BOP_COUNT
} rt_kir_bop;

typedef struct rt_kir_expr rt_kir_expr;
struct rt_kir_expr {
    rt_kir_ekind kind;
    rt_kir_type type;
    int64_t ival;
    double fval;
    int32_t var; // E_VAR / E_FVAR
    int32_t buf; // E_LOAD
    rt_kir_bop bop;
    rt_fn fn;
    rt_kir_expr *args[3];
};

typedef enum rt_kir_nkind {
    RT_KIR_N_LOOP,    // for var in [lo, hi) step 1
    RT_KIR_N_LET,     // integer var = value
    RT_KIR_N_FSET,    // float local var = value
    RT_KIR_N_STORE,   // buf[index] = value (converted to the buffer's type)
    RT_KIR_N_IF,      // if (cond) body else else_body
    RT_KIR_N_COPY,    // a tile copy between levels (packing): body does it, text names it
    RT_KIR_N_UKERNEL, // register-tile micro-kernel, see rt_kir_ukernel
    RT_KIR_N_BARRIER, // all work items of the level reach this point (GPU block level); var 1:
                      // their global memory accesses before it are visible after it too
    RT_KIR_N_COMMENT, // text only
    // A hint that the cache line of buf[index] will be read soon (CPU emitters; GPU emitters
    // print it as a comment). It never faults, even outside the buffer, and changes no result.
    RT_KIR_N_PREFETCH,
    // Four elements moved at once (GPU staging, lower-gpu.c; the CPU emitters never see it):
    // buf[index + i * stride] = src_buf[src_index + i * src_stride] for i < 4, both f32. A side
    // of stride 1 on a data or shared buffer is one 128-bit access (the lowering proves its
    // index a multiple of 4 and the buffer 16-byte aligned); a local buffer or another stride
    // is accessed element by element.
    RT_KIR_N_MOVE4,
    RT_KIR_NKIND_COUNT
} rt_kir_nkind;

typedef enum rt_kir_loop_kind {
    RT_KIR_LOOP_SERIAL,
    RT_KIR_LOOP_PARALLEL, // iterations independent, spread over units
    RT_KIR_LOOP_VECTOR,   // iterations independent enough to run in SIMD lanes (reductions ok)
    RT_KIR_LOOP_UNROLL,   // small constant trip count, unroll fully
    RT_KIR_LOOP_KIND_COUNT
} rt_kir_loop_kind;

// C[c_off + i*ldc + j] (=|+=) sum_k A[a_off + k*mr + i] * B[b_off + k*nr + j] for i < m_valid,
// j < n_valid, k < kc. A and B are packed panels in the phase's scratch (float elements), zero
// beyond the valid rows/columns, 64-byte aligned when a_off/b_off are multiples of 16.
// accumulate: I64, nonzero adds to C, zero overwrites it. nr is a multiple of vl, the floats of
// one vector register of the target (the device's lanes): the emitters keep mr x nr / vl vector
// accumulators, at most RT_KIR_UK_MAX_ACC, and nr / vl <= RT_KIR_UK_MAX_NV B vectors.
//
// Fused epilogue (epi non-empty): where epi_last is nonzero (the last k block), each valid element
// (i, j) of the tile, instead of being stored to C, binds its final value ((accumulate ? C : 0)
// + the sum) to the F32 var epi_acc and epi_row = epi_row0 + i, epi_col = epi_col0 + j (I64
// vars), then runs the block epi (the elementwise statement fused after the GEMM, which stores
// its own output); C receives the final value too only when epi_keep_c. Emitters run the j
// elements in vector lanes. Where epi_last is zero the store is the plain one above.
#define RT_KIR_UK_MAX_ACC 32
#define RT_KIR_UK_MAX_NV  4
typedef struct rt_kir_ukernel {
    int32_t mr, nr, vl;
    rt_kir_expr *kc, *a_off, *b_off;
    int32_t c_buf;
    rt_kir_expr *c_off;
    int64_t ldc;
    rt_kir_expr *ldc_rt; // I64 row stride of C known at run time (a ragged GEMM's); NULL: ldc
    rt_kir_expr *m_valid, *n_valid, *accumulate;
    // B's panel layout: 0 (or nr) one nr-wide row per k step; else b_sub-wide sub-panels (nr a
    // multiple of b_sub, b_sub of vl), each kc x b_sub, one after the other: a transposed B packs
    // as independent 8-wide panels (8x8 transposes) instead of one 16-wide gather per k step.
    int32_t b_sub;
    // A read in place (a_ld > 0 or a_ld_rt; packed panels in scratch otherwise): element (i, k)
    // at a_buf[a_off + min(i, m_valid - 1) * a_ld + k], rows contiguous along k (a batched
    // GEMM's A of one k block, not worth a pack); rows past m_valid repeat the last valid one.
    // a_ld_rt: the I64 row stride known at run time instead (a ragged entry's row, its length).
    int64_t a_ld;
    rt_kir_expr *a_ld_rt;
    int32_t a_buf;
    // A read in place: the I64 offset from the tile's row 0 to the rows the next call reads
    // (the next row panel's), whose lines the k loop prefetches (for L2), one row per k step in
    // turn: the row k mod rows, at column k (all mr of them must exist). 0 at run time: no
    // whole next panel, and the hint touches the tile's row 0 at column k; NULL: no such hint.
    rt_kir_expr *a_pf_next;
    // B read in place (b_ld > 0; packed panels in scratch when 0): element (k, j) at
    // b_buf[b_off + k * b_ld + j], rows contiguous along j and every column of the tile valid
    // (the producer guarantees n_valid == nr); b_sub is 0. A per-entry GEMM whose B rows are
    // whole vectors (attention x V's V as (b, j, h, d)): its pack bought nothing.
    int64_t b_ld;
    int32_t b_buf;
    // Streaming (non-temporal) stores of full tiles that overwrite C, for GEMMs with a single
    // k block whose C is far larger than the caches (C is written once and never read back).
    bool stream;
    // No prefetch for writing of the C tile before the k loop (the plan's re_warm: C's lines
    // are in the last-level cache); else every line of its rows is prefetched.
    bool no_pf_c;
    // Row tails (the plan's rt_perf_cpu_gemm.row_tail_acc, > 0): a tile of m_valid < mr rows
    // runs a micro-kernel of t = rt_perf_cpu_tail_rows(mr, m_valid) rows, its k steps split
    // over rt_perf_cpu_tail_sets(mr, nr / vl, t, tail_acc) accumulator sets; 0: mr rows always
    // (either way A's rows past m_valid repeat the last valid one, their results dropped).
    int32_t tail_acc;
    struct rt_kir_block *epi; // NULL or empty: no epilogue
    int32_t epi_acc, epi_row, epi_col;
    rt_kir_expr *epi_row0, *epi_col0, *epi_last;
    bool epi_keep_c;
    // Where the epilogue stores, for a prefetch of the tile (for writing) on the last k block:
    // element (i, j) at epi_pf_buf[epi_pf_off + i*epi_pf_ld + j]; epi_pf_buf < 0: not affine.
    int32_t epi_pf_buf;
    rt_kir_expr *epi_pf_off;
    int64_t epi_pf_ld;
} rt_kir_ukernel;

// A transposing pack (COPY): dst[dst0 + kk * dst_ld + r] = alpha * src[base + r * s_row + kk]
// for r < rows, 0 for rows <= r < 16, kk < kcur: 16 rows contiguous along k become 16-wide
// k-major rows (a k-contiguous B into its nr-wide panel, dst_ld = nr). The COPY's body does the
// same element by element (the C emitter prints it); the LLVM emitter runs blocks of 16 k steps
// as 16 masked vector loads, a 16 x 16 transpose in registers and 16 vector stores, and
// prefetches the same line of the next 16 rows (the next call's, at base + 16 s_row).
typedef struct rt_kir_tpack {
    int32_t src, dst;          // f32 buffers
    rt_kir_expr *base, *s_row; // I64: the source's element (0, 0) and its row step
    rt_kir_expr *rows, *kcur;  // I64: valid rows (at most 16), k steps
    rt_kir_expr *dst0;         // I64: the destination's element (k 0, row 0)
    int64_t dst_ld;            // elements between k steps (a multiple of 16)
    double alpha;
} rt_kir_tpack;

typedef struct rt_kir_node rt_kir_node;
typedef struct rt_kir_block {
    int32_t n, cap;
    rt_kir_node **nodes;
} rt_kir_block;

struct rt_kir_node {
    rt_kir_nkind kind;
    int32_t var;                // LOOP, LET, FSET
    rt_kir_expr *lo, *hi;       // LOOP
    rt_kir_loop_kind loop_kind; // LOOP
    rt_kir_expr *value;         // LET, FSET, STORE
    int32_t buf;                // STORE, PREFETCH
    rt_kir_expr *index;         // STORE, PREFETCH
    // STORE of an f32 buffer alone in a vector loop, at a unit stride: a non-temporal store where
    // the emitter can (a large output written once; the LLVM emitter, on 64-byte aligned rows).
    bool stream;
    rt_kir_expr *cond;          // IF
    rt_kir_ukernel uk;          // UKERNEL
    const char *text;           // COPY, COMMENT (one line)
    const rt_kir_tpack *tpack;  // COPY: a transposing pack (NULL: the body only)
    int32_t src_buf;            // MOVE4: source (buf, index: destination)
    rt_kir_expr *src_index;     // MOVE4
    int64_t stride, src_stride; // MOVE4: element steps of the destination and the source
    rt_kir_block body, else_body;
};

typedef enum rt_kir_buf_role {
    RT_KIR_BUF_DATA,    // elements of a tensor
    RT_KIR_BUF_START,   // start array of a ragged dim (I64)
    RT_KIR_BUF_SCRATCH, // per-thread scratch of the phase (F32), buffer 0 of no tensor
    RT_KIR_BUF_SHARED,  // GPU: array of `elems` shared by the threads of a block (lower-gpu.c)
    RT_KIR_BUF_LOCAL,   // GPU: per-thread array of `elems` (register tile, lower-gpu.c)
    RT_KIR_BUF_TREE,    // an array of a tree parameter's linearization (I32, rt_kir_tree_field)
} rt_kir_buf_role;

// ORDER RT_KIR_TREE_FIELD: the arrays of a tree parameter a kernel reads, as rt_tree_data
// (interp.h) holds them: the host linearizes the tree (CORTEX), kernels only index.
typedef enum rt_kir_tree_field {
    RT_KIR_TREE_CHILD,       // [n_nodes * C]: child c of node n at n * C + c, -1 when absent
    RT_KIR_TREE_ORDER,       // [n_nodes]: node ids level by level, leaves (level 0) first
    RT_KIR_TREE_LEVEL_BEGIN, // [n_levels + 1]: level h is order[begin[h] .. begin[h + 1])
    RT_KIR_TREE_N_LEVELS,    // [1]: n_levels (the height of the tallest node + 1)
    RT_KIR_TREE_FIELD_COUNT
} rt_kir_tree_field;

typedef struct rt_kir_buf {
    const char *name; // C identifier
    rt_kir_buf_role role;
    rt_kir_type type;
    int32_t tensor; // DATA/START: tensor index; TREE: the tree parameter; -1 for scratch
    int32_t dim;    // START: the ragged dim; TREE: the rt_kir_tree_field
    bool written;
    int64_t elems; // SHARED / LOCAL: array length in elements
    bool align16;  // SHARED: declared 16-byte aligned (128-bit accesses, RT_KIR_N_MOVE4)
} rt_kir_buf;

// Level-by-level phases (CORTEX's linearized recursion): with `on`, the phase runs once per
// level h of tree parameter `tree`, for h in [first, last) (last < 0: through the tree's last
// level, read from its N_LEVELS buffer count_buf), in order, each repetition complete (a
// barrier) before the next: children before parents. In repetition h the work items are the
// positions begin[h] .. begin[h + 1] of the tree's level order (begin: its LEVEL_BEGIN buffer
// begin_buf), so that item k is node order[k]; level 0 holds exactly the leaves. CPU phases
// take their item range from the runner; a GPU phase's launch for level h gets h as a scalar
// argument bound to level_var (-1 on CPU phases) and computes its positions from begin.
typedef struct rt_kir_levels {
    bool on;
    int32_t tree;
    int32_t first, last;
    int32_t begin_buf, count_buf;
    int32_t level_var;
} rt_kir_levels;

typedef struct rt_kir_var {
    const char *name;
    rt_kir_type type;
} rt_kir_var;

typedef struct rt_kir_phase {
    const char *name; // function name suffix ("p0")
    const char *what; // one-line description for the listing
    int64_t n_items;  // parallel work items (>= 1); by level: the tree's nodes (all levels)
    int32_t item_var; // integer var holding the item index
    int32_t n_vars, cap_vars;
    rt_kir_var *vars;
    rt_kir_block body;
    int64_t scratch_bytes; // per thread
    // GPU phases (lower-gpu.c): n_items is the block count along grid x and item_var the block
    // index along x; threads > 0 marks a GPU phase.
    int32_t threads;      // threads per block; 0 = CPU phase
    int32_t thread_var;   // var bound to the thread index in the block
    int32_t grid_var[2];  // vars bound to the block index along grid y and z (-1: unused)
    rt_kir_levels levels; // off: the items are 0 .. n_items once
} rt_kir_phase;

// What a contraction kernel computes, for checks that need no reference run (the random-vector
// check C*t ~ alpha*A*(B*t)): flat strides of A (am, ak), B (bk, bn) and C (cm, unit along n).
typedef struct rt_kir_contraction {
    bool valid;
    int32_t ta, tb, tc; // tensors
    int64_t M, N, K;
    int64_t am, ak, bk, bn, cm;
    double alpha;
    bool accumulate; // '+=': C starts from the caller's values
} rt_kir_contraction;

typedef struct rt_kir_kernel {
    const char *name;   // C identifier: rt_<op>_<tile>
    const char *header; // multi-line comment text (no comment markers)
    int32_t n_bufs, cap_bufs;
    rt_kir_buf *bufs; // bufs[0] is the scratch buffer
    int32_t n_phases, cap_phases;
    rt_kir_phase *phases;
    int64_t scratch_bytes;   // max over phases
    double flops;            // useful arithmetic of one run (for GFLOP/s)
    double bytes;            // compulsory DRAM traffic of one run (for GB/s)
    bool compute_bound;      // report GFLOP/s rather than GB/s
    rt_kir_contraction gemm; // valid when the kernel is one packed contraction
    bool masked_edge;        // micro-kernel edge tiles store their cut vectors masked, straight
                             // from the registers (the model's rt_perf_cpu_uk_rules.masked_edge)
} rt_kir_kernel;

// Construction. Each returns NULL when out of memory, which the builders in lower-cpu.c check
// once through rt_kir_ok(). Integer constructors fold constants (x*1, x+0, c1 op c2).
rt_kir_kernel *rt_kir_kernel_new(rt_arena *a, const char *name);
int32_t rt_kir_add_buf(rt_arena *a, rt_kir_kernel *k, const char *name, rt_kir_buf_role role,
                       rt_kir_type type, int32_t tensor, int32_t dim); // -1 when out of memory
rt_kir_phase *rt_kir_add_phase(rt_arena *a, rt_kir_kernel *k, const char *what, int64_t n_items);
int32_t rt_kir_add_var(rt_arena *a, rt_kir_phase *p, const char *name, rt_kir_type type);
rt_kir_expr *rt_kir_int(rt_arena *a, int64_t v);
rt_kir_expr *rt_kir_flt(rt_arena *a, rt_kir_type t, double v);
rt_kir_expr *rt_kir_var_ref(rt_arena *a, const rt_kir_phase *p, int32_t var);
rt_kir_expr *rt_kir_load(rt_arena *a, const rt_kir_kernel *k, int32_t buf, rt_kir_expr *index);
rt_kir_expr *rt_kir_bin(rt_arena *a, rt_kir_bop op, rt_kir_expr *x, rt_kir_expr *y);
rt_kir_expr *rt_kir_neg(rt_arena *a, rt_kir_expr *x);
rt_kir_expr *rt_kir_call(rt_arena *a, rt_fn fn, rt_kir_expr *x, rt_kir_expr *y);
rt_kir_expr *rt_kir_select(rt_arena *a, rt_kir_expr *c, rt_kir_expr *x, rt_kir_expr *y);
rt_kir_expr *rt_kir_cast(rt_arena *a, rt_kir_type t, rt_kir_expr *x);
// Nodes are appended to a block; NULL when out of memory.
rt_kir_node *rt_kir_append(rt_arena *a, rt_kir_block *b, rt_kir_nkind kind);
rt_kir_node *rt_kir_loop(rt_arena *a, rt_kir_block *b, int32_t var, rt_kir_expr *lo,
                         rt_kir_expr *hi, rt_kir_loop_kind kind);

bool rt_kir_is_int(const rt_kir_expr *e, int64_t *out); // constant integer?
// Does micro-kernel u read A in place (a constant or a run-time row stride)?
static inline bool rt_kir_uk_a_in_place(const rt_kir_ukernel *u) {
    return u->a_ld > 0 || u->a_ld_rt;
}
// Does micro-kernel u read B in place (rows b_ld apart)?
static inline bool rt_kir_uk_b_in_place(const rt_kir_ukernel *u) {
    return u->b_ld > 0;
}
bool rt_kir_type_is_float(rt_kir_type t);
const char *rt_kir_type_name(rt_kir_type t);  // "i64", "f32", ...
const char *rt_kir_type_ctype(rt_kir_type t); // "int64_t", "float", ...
const char *rt_kir_bop_name(rt_kir_bop op);   // C spelling for the infix ones ("+", "<")
const char *rt_kir_loop_kind_name(rt_kir_loop_kind k);
const char *rt_kir_tree_field_name(rt_kir_tree_field f); // "child", "order", ...
// The host array a TREE buffer of field f holds is rt_run_tree_array's (src/run/run.h).

// Rewrites a float division x / y inside a vectorized loop, where y is invariant in that loop
// (no variable it reads is set in the loop, no buffer it loads is stored there), into x * r with
// r = 1 / y set once before the loop (when the loop runs at all): one division per row instead
// of one per element (softmax's e / s, a mean's x / n). The product is within about 1.5 ulp of
// the quotient, except for divisors under 2^-126 (f32) in magnitude, whose reciprocal overflows
// to inf. Returns false when out of memory (the kernel is then unusable).
bool rt_kir_hoist_reciprocals(rt_arena *a, rt_kir_kernel *k);

// Fuses each vector loop with the vector loops after it over the same range where that keeps
// every value (rt_kir_can_fuse in kir.c): flat bodies of LETs, FSETs and plain stores, the
// second loop reading what the first stores only at the element stored in the same iteration,
// the LETs and FSETs between them moved before the first. Softmax's exp and sum passes over a
// row become one (the sum reads each e as it is stored). Returns false when out of memory.
bool rt_kir_fuse_loops(rt_arena *a, rt_kir_kernel *k);

// Checks the structural invariants every emitter relies on (types of operands, variables and
// buffers in range, ukernel shape). Errors: RT_ERR_BACKEND naming the offending node.
rt_status rt_kir_validate(const rt_kir_kernel *k, rt_err *err);

// k's header (spec, device, plan, rTiles, predicted time), one comment line per line, each
// prefixed with `prefix` ("// " in C, "; " in LLVM IR), appended to b.
void rt_kir_header_comment(const rt_kir_kernel *k, const char *prefix, rt_buf *b);

#endif
