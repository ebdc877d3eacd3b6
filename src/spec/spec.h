// spec.h: the op-spec front end and the tensor-expression IR it produces.
//
// Pipeline position: OP.spec --rt_spec_parse--> rt_op (checked, ranges inferred, axes fused)
// --> HAL/perfmodel/codegen and the reference interpreter. Everything lives in the caller's
// arena. The IR is the contract between the front end, the interpreter and the model:
//   - every tensor (parameter, output, temporary) is an rt_tensor with dims whose extents are
//     expressions over size symbols, names of outer dims (RT_EXPR_DIMREF) and length tensors;
//   - every statement has its index variables (rt_ivar) with half-open ranges [lo, hi) that are
//     expressions over size symbols, *outer* index variables (RT_EXPR_INDEX) and length-tensor
//     reads: a range that depends on another index variable makes the loop a vloop (ragged);
//   - the canonical form fuses adjacent axes (Roller §3.2) into rt_axis groups.
#ifndef RT_SPEC_H
#define RT_SPEC_H

#include "rt.h"

#define RT_MAX_DIMS 8 // tensor rank and affine terms

// ---------------------------------------------------------------------------------------------
// Expressions
// ---------------------------------------------------------------------------------------------

typedef enum rt_expr_kind {
    RT_EXPR_NUM,    // literal: num (is_int when written without '.', 'e')
    RT_EXPR_INDEX,  // index variable: var = index into the statement's vars[]
    RT_EXPR_SIZE,   // size symbol: sym = index into op->sizes[]
    RT_EXPR_DIMREF, // inside a dim extent only: dim = position of an outer dim of the same tensor
    RT_EXPR_READ,   // tensor read: tensor, args[0..n_args) index expressions
    RT_EXPR_UNARY,  // uop applied to args[0]
    RT_EXPR_BINARY, // bop applied to args[0], args[1]
    RT_EXPR_COND,   // args[0] ? args[1] : args[2]
    RT_EXPR_CALL,   // fn applied to args[0..n_args)
    RT_EXPR_CHILD,  // tree.child(args[0], child): node id of a child, -1 when absent
    RT_EXPR_SUM,    // sum of args[0] over the reduced index vars sum_vars[0..n_sum_vars) ('=' only)
    RT_EXPR_KIND_COUNT
} rt_expr_kind;

typedef enum rt_uop { RT_UOP_NEG, RT_UOP_NOT } rt_uop;

// ORDER RT_BOP: spelling table in spec-expr.c.
typedef enum rt_bop {
    RT_BOP_ADD,
    RT_BOP_SUB,
    RT_BOP_MUL,
    RT_BOP_DIV,
    RT_BOP_MOD,
    RT_BOP_LT,
    RT_BOP_LE,
    RT_BOP_GT,
    RT_BOP_GE,
    RT_BOP_EQ,
    RT_BOP_NE,
    RT_BOP_AND,
    RT_BOP_OR,
    RT_BOP_COUNT
} rt_bop;

// ORDER RT_FN: spelling and arity table in spec-expr.c.
typedef enum rt_fn {
    RT_FN_EXP,
    RT_FN_LOG,
    RT_FN_SQRT,
    RT_FN_RSQRT,
    RT_FN_TANH,
    RT_FN_SIGMOID,
    RT_FN_ERF,
    RT_FN_ABS,
    RT_FN_MAX,
    RT_FN_MIN,
    RT_FN_COUNT
} rt_fn;

typedef struct rt_expr rt_expr;
struct rt_expr {
    rt_expr_kind kind;
    rt_loc loc;     // first character of the construct, for messages
    bool is_int;    // integer-valued (indices, sizes, int literals, int tensor reads)
    double num;     // RT_EXPR_NUM
    int32_t var;    // RT_EXPR_INDEX
    int32_t sym;    // RT_EXPR_SIZE
    int32_t dim;    // RT_EXPR_DIMREF
    int32_t tensor; // RT_EXPR_READ: index into op->tensors
    int32_t tree;   // RT_EXPR_CHILD: index into op->trees
    int32_t child;  // RT_EXPR_CHILD: which child (0-based constant)
    rt_uop uop;
    rt_bop bop;
    rt_fn fn;
    int32_t n_args;
    rt_expr **args;
    int32_t n_sum_vars; // RT_EXPR_SUM
    int32_t *sum_vars;
};

// Integer-linear form sum(coef[i] * index var[i]) + c0 over one statement's index vars, with
// size symbols folded to their bound values. Floor division/modulo are not linear.
typedef struct rt_affine {
    int32_t n_terms;
    int32_t var[RT_MAX_DIMS];
    int64_t coef[RT_MAX_DIMS];
    int64_t c0;
} rt_affine;

// ---------------------------------------------------------------------------------------------
// Declarations
// ---------------------------------------------------------------------------------------------

typedef struct rt_size {
    const char *name;
    rt_loc loc;
    int64_t value;   // valid when bound
    bool bound;      // false: bound at run time (a tree's node count)
    bool overridden; // value came from --set
} rt_size;

typedef struct rt_dim {
    const char *name; // "b" in b:B, NULL when unnamed
    rt_loc loc;
    rt_expr *extent; // over sizes, RT_EXPR_DIMREF to outer dims, reads of length tensors
    bool ragged;     // extent depends on an outer dim
} rt_dim;

typedef enum rt_role {
    RT_ROLE_INPUT,  // a parameter
    RT_ROLE_OUTPUT, // listed in outputs
    RT_ROLE_TEMP,   // written and read, not an output
    RT_ROLE_COUNT
} rt_role;

typedef struct rt_tensor {
    const char *name;
    rt_loc loc;
    rt_dtype dtype;
    rt_role role;
    int32_t n_dims;
    rt_dim dims[RT_MAX_DIMS];
    bool has_pad; // 'pad VALUE': out-of-extent reads return pad_value
    double pad_value;
    bool is_length;   // an int32 tensor used in a ragged extent
    bool is_index;    // an integer tensor read in an index position (gather)
    bool ragged;      // some dim is ragged: packed storage, no padding between slices
    bool shape_given; // output/temp shape written in the spec rather than inferred
    int32_t writer;   // first statement writing it; -1 for inputs
} rt_tensor;

typedef struct rt_tree {
    const char *name;
    rt_loc loc;
    int32_t n_sym;        // size symbol holding the node count (bound at run time)
    int32_t max_children; // C in tree(N, C)
} rt_tree;

// ---------------------------------------------------------------------------------------------
// Statements
// ---------------------------------------------------------------------------------------------

typedef enum rt_assign {
    RT_ASSIGN_SET,      // =
    RT_ASSIGN_ADD_INIT, // +=!  start from 0
    RT_ASSIGN_ADD,      // +=   accumulate into the caller's values
    RT_ASSIGN_MUL_INIT, // *=!  start from 1
    RT_ASSIGN_MAX_INIT, // max=! start from -inf
    RT_ASSIGN_MIN_INIT, // min=! start from +inf
    RT_ASSIGN_COUNT
} rt_assign;

typedef struct rt_ivar {
    const char *name;
    rt_loc loc;       // first use
    bool is_reduce;   // absent from the left side
    rt_expr *lo, *hi; // half-open [lo, hi): sizes, outer index vars, length-tensor reads
    bool ragged;      // lo or hi depends on another index var (a vloop)
    bool from_where;  // range given by a where-clause
} rt_ivar;

typedef struct rt_pred {
    rt_loc loc;
    const char *fn; // "leaf"
    int32_t tree;   // tree it asks about
    int32_t var;    // index var it is applied to
    bool negate;    // '!leaf(n)'
} rt_pred;

// A group of adjacent index vars fused into one loop by the canonicalizing axis fusion.
typedef struct rt_axis {
    const char *name; // member names joined with '.', e.g. "n.c.h.w"
    int32_t n_members;
    int32_t members[RT_MAX_DIMS]; // var indices, outer to inner
    bool is_reduce;
    bool ragged;    // some member's range depends on another member or an outer var
    int64_t extent; // product of member extents when dense; for ragged: -1
} rt_axis;

typedef struct rt_stmt {
    rt_loc loc;
    int32_t out; // tensor written
    int32_t n_lhs;
    int32_t lhs_vars[RT_MAX_DIMS]; // var index per LHS position
    rt_assign op;
    rt_expr *rhs;
    int32_t n_vars; // LHS vars first (in LHS order), then reduced vars (first appearance)
    rt_ivar *vars;
    int32_t n_loops; // loop nest outer->inner: LHS vars, then reduced vars unless op is '='
    int32_t *loops;  // ('=' statements reduce inside RT_EXPR_SUM nodes instead)
    int32_t n_preds;
    rt_pred *preds;
    bool recursive; // reads its own output at a tree child (CORTEX)
    int32_t n_axes; // canonical form after axis fusion, over loops[]
    rt_axis *axes;
    bool reduces;       // accumulates: an op other than '=', or '=' with implicit sums
    rt_dtype acc_dtype; // type it accumulates in: float for half/bfloat16 outputs of a
                        // reduction (op-spec "mixed precision"), else the output's type
} rt_stmt;

// ---------------------------------------------------------------------------------------------
// Directives: '@name(args)'. Arguments are identifiers, integers, or key=integer pairs.
// ---------------------------------------------------------------------------------------------

typedef struct rt_darg {
    rt_loc loc;
    const char *ident; // NULL for a plain integer
    bool has_value;    // key=value
    int64_t value;
} rt_darg;

typedef struct rt_directive {
    const char *name; // "pad_loop", "pad_storage", "bulk_pad", "split", "order", "tile"
    rt_loc loc;
    int32_t n_args;
    rt_darg *args;
} rt_directive;

// ---------------------------------------------------------------------------------------------
// The operator
// ---------------------------------------------------------------------------------------------

typedef struct rt_op {
    const char *name; // def NAME
    const char *file; // path as given, used in every rt_loc
    rt_loc loc;
    int32_t n_sizes;
    rt_size *sizes;
    int32_t n_tensors; // parameters in order, then inferred outputs, then temporaries
    rt_tensor *tensors;
    int32_t n_trees;
    rt_tree *trees;
    int32_t n_outputs;
    int32_t *outputs; // tensor indices in the order of the outputs list
    int32_t n_stmts;
    rt_stmt *stmts;
    int32_t n_directives;
    rt_directive *directives;
} rt_op;

// A --set NAME=VALUE binding. loc points at the option's text for messages.
typedef struct rt_size_binding {
    const char *name;
    int64_t value;
} rt_size_binding;

// Parses, checks and canonicalizes one op-spec. path is used in messages. The --set bindings
// override 'size' defaults; a binding for an unknown size is an RT_ERR_USAGE error.
rt_status rt_spec_parse(rt_arena *a, const char *text, const char *path, const rt_size_binding *set,
                        int32_t n_set, rt_op **out, rt_err *err);
// Reads path and calls rt_spec_parse.
rt_status rt_spec_load(rt_arena *a, const char *path, const rt_size_binding *set, int32_t n_set,
                       rt_op **out, rt_err *err);

// ---------------------------------------------------------------------------------------------
// Layers: a file of several defs (spec-layer.c)
// ---------------------------------------------------------------------------------------------

// One tensor of a layer: a layer input (a parameter of some def that no earlier def outputs:
// every def naming it shares it) or an output of one def (read by later defs of the layer,
// which then own it as an intermediate, or not: a layer output).
typedef struct rt_layer_tensor {
    const char *name;
    int32_t op, tensor; // where it is made: the producing def and its output's tensor index, or,
                        // for a layer input, the first def that declares it and its parameter
    bool is_input;      // a layer input
    bool is_output;     // an output of a def that no later def reads (the layer's result)
} rt_layer_tensor;

typedef struct rt_layer {
    const char *name; // the file's name without directory and '.spec'
    const char *file;
    int32_t n_ops; // the defs in file order: each a complete op, checked on its own
    rt_op **ops;
    int32_t n_tensors; // layer inputs and def outputs, in order of first appearance
    rt_layer_tensor *tensors;
    int32_t **tensor_of; // [op][tensor of op]: index into tensors, -1 for a temporary
} rt_layer;

// Parses a file of one or more defs sharing the 'size' lines at its head:
//   file := { size_decl } def { def }
// Each def is parsed and checked exactly as a file of one def would be (a file of one def gives
// the same op and the same errors as rt_spec_parse). Then the chain is checked
// (rt_spec_layer_link). Errors: those of rt_spec_parse, and RT_ERR_SPEC for the chain.
rt_status rt_spec_parse_layer(rt_arena *a, const char *text, const char *path,
                              const rt_size_binding *set, int32_t n_set, rt_layer **out,
                              rt_err *err);
// Reads path and calls rt_spec_parse_layer.
rt_status rt_spec_load_layer(rt_arena *a, const char *path, const rt_size_binding *set,
                             int32_t n_set, rt_layer **out, rt_err *err);
// Links the defs of l by name and checks the chain, each error at the parameter or output that
// breaks it: a parameter that names an output of a later def (used before its definition), an
// output that an earlier def already outputs or reads as a layer input, and a parameter whose
// dtype, rank or dim extents (size values, ragged extents: the same length tensor read at the
// same outer dims) differ from the output it names or from the layer input's first declaration.
// Tree parameters are not allowed in a layer of several defs. Fills l's tensors and tensor_of.
rt_status rt_spec_layer_link(rt_arena *a, rt_layer *l, rt_err *err);
// Whether extent a of op oa and extent b of op ob are the same: equal values where both are
// constant (literals, bound sizes), else the same expression with length tensors named alike.
bool rt_layer_extent_equal(const rt_op *oa, const rt_expr *a, const rt_op *ob, const rt_expr *b);

// Expression helpers (spec-expr.c).
const char *rt_bop_name(rt_bop op);
const char *rt_fn_name(rt_fn fn);
const char *rt_assign_name(rt_assign op);
// Prints e in op-spec syntax. stmt may be NULL outside statements; tensor names dims DIMREFs.
void rt_expr_print(const rt_op *op, const rt_stmt *stmt, const rt_tensor *tensor, const rt_expr *e,
                   rt_buf *out);
// Linear form of e over stmt's index vars; false when e is not affine (or uses unbound sizes).
bool rt_expr_affine(const rt_op *op, const rt_expr *e, rt_affine *out);
// Value of an expression made only of literals and bound sizes; false otherwise.
bool rt_expr_const_int(const rt_op *op, const rt_expr *e, int64_t *out);
// A product of reads and numeric constants (divisions by a nonzero constant included): its
// reads, at most 2, appended to reads[*n], the constants multiplied into *alpha. A contraction's
// rhs, as the packed GEMM's detections (codegen and perfmodel) take it.
bool rt_expr_product_factors(const rt_expr *e, const rt_expr **reads, int32_t *n, double *alpha);
bool rt_expr_equal(const rt_expr *a, const rt_expr *b);
// Whether e reads a dimension of a tensor (a DIMREF: a ragged extent's length).
bool rt_expr_mentions_dimref(const rt_expr *e);
// Whether e reads outer dim `dim` of its tensor (any outer dim when dim < 0).
bool rt_expr_mentions_dim(const rt_expr *e, int32_t dim);
// True when e mentions index var v (anywhere, including inside reads and conditions).
bool rt_expr_uses_var(const rt_expr *e, int32_t v);
// The value an accumulator of op starts from: 1 for *=!, -inf for max=!, +inf for min=!, else 0.
double rt_assign_identity(rt_assign op);
// Whether e is max, min or abs of integer arguments only (an integer result).
bool rt_expr_int_call(const rt_expr *e);

// Prints the canonical IR (sizes, tensors with storage, statements with loops, ranges, which
// are ragged, and fused axes) as text (spec-print.c).
void rt_op_print(const rt_op *op, rt_buf *out);
// The same IR as a jansson json_t * (returned as void * so that this header does not need
// jansson.h); the caller owns it and releases it with json_decref (spec-json.c).
void *rt_op_to_json(const rt_op *op);

#endif
