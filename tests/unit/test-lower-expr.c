// test-lower-expr.c: the shared expression translator of the CPU and GPU lowerings
// (codegen/lower-expr.c) on a parsed statement: a sum's loops in the pre-block with the innermost
// loop kind from the backend's ops, the backend's read hook (after the arity check), offsets
// through 32-bit start arrays, and the errors (unbound index, wrong arity, unsupported
// expressions naming the backend, out-of-range reduction vars).
#include "test.h"

#include "lower-expr.h"

#include <string.h>

static const char *const spec_text = "def t(float(4, 3) X) -> (Y) {\n"
                                     "    Y(n) = 2 * X(n, d)\n"
                                     "}\n";

typedef struct fixture {
    rt_op *op;
    rt_kir_kernel *k;
    rt_kir_phase *ph;
    int32_t data_buf[2];
    int32_t start_buf[2][RT_MAX_DIMS];
    int64_t extent[2][RT_MAX_DIMS];
    int32_t var_of[8];
    rt_err err;
} fixture;

static int32_t hook_calls;

// A read hook answering every read with the constant 7 of the tensor's type.
static rt_status read_seven(rt_lx *x, const rt_expr *e, rt_kir_expr **out) {
    (void)e;
    hook_calls++;
    *out = rt_kir_flt(x->a, RT_KIR_F32, 7.0);
    return RT_OK;
}

static const struct rt_lx_ops ops_vector = {.backend = "TEST",
                                            .sum_inner_loop = RT_KIR_LOOP_VECTOR};
static const struct rt_lx_ops ops_serial_hook = {
    .backend = "TEST", .sum_inner_loop = RT_KIR_LOOP_SERIAL, .read = read_seven};

static bool fixture_init(rt_arena *a, fixture *f) {
    memset(f, 0, sizeof *f);
    if (rt_spec_parse(a, spec_text, "t.spec", NULL, 0, &f->op, &f->err) != RT_OK) {
        fprintf(stderr, "parse: %s\n", f->err.msg);
        return false;
    }
    f->k = rt_kir_kernel_new(a, "t");
    f->ph = rt_kir_add_phase(a, f->k, "test", 1);
    for (int32_t t = 0; t < 2; t++) {
        f->data_buf[t] = rt_kir_add_buf(a, f->k, t ? "Y" : "X", RT_KIR_BUF_DATA, RT_KIR_F32, t, -1);
        for (int32_t d = 0; d < RT_MAX_DIMS; d++)
            f->start_buf[t][d] = -1;
    }
    f->extent[0][0] = 4;
    f->extent[0][1] = 3;
    f->extent[1][0] = 4;
    for (int32_t v = 0; v < 8; v++)
        f->var_of[v] = -1;
    f->var_of[0] = rt_kir_add_var(a, f->ph, "n", RT_KIR_I64);
    return true;
}

static rt_lx fixture_ctx(rt_arena *a, fixture *f, const struct rt_lx_ops *ops) {
    rt_err_clear(&f->err);
    return (rt_lx){.ops = ops,
                   .a = a,
                   .op = f->op,
                   .k = f->k,
                   .ph = f->ph,
                   .s = &f->op->stmts[0],
                   .var_of = f->var_of,
                   .ct = RT_KIR_F32,
                   .pre = &f->ph->body,
                   .data_buf = f->data_buf,
                   .start_buf = f->start_buf,
                   .extent = f->extent,
                   .err = &f->err};
}

static const rt_expr *find_kind(const rt_expr *e, rt_expr_kind kind) {
    if (!e || e->kind == kind)
        return e;
    for (int32_t i = 0; i < e->n_args; i++) {
        const rt_expr *r = find_kind(e->args[i], kind);
        if (r)
            return r;
    }
    return NULL;
}

// The implicit sum over d: accumulator zeroed and its loop in the pre-block, the loop kind of the
// innermost sum loop taken from the ops, the value a reference to the accumulator.
static void test_sum(rt_arena *a, const struct rt_lx_ops *ops, rt_kir_loop_kind want) {
    fixture f;
    RT_EXPECT(fixture_init(a, &f));
    if (!f.op)
        return;
    rt_lx x = fixture_ctx(a, &f, ops);
    const rt_stmt *s = &f.op->stmts[0];
    const rt_expr *sum = find_kind(s->rhs, RT_EXPR_SUM);
    RT_EXPECT(sum != NULL);
    if (!sum)
        return;
    hook_calls = 0;
    rt_kir_expr *v = NULL;
    RT_EXPECT_EQ(rt_lx_num(&x, s->rhs, &v), RT_OK);
    RT_EXPECT(!x.oom);
    RT_EXPECT(x.pre == &f.ph->body); // restored after the sum
    RT_EXPECT_EQ(hook_calls, ops->read ? 1 : 0);
    RT_EXPECT(v && v->type == RT_KIR_F32);
    rt_kir_block *b = &f.ph->body;
    RT_EXPECT_EQ(b->n, 2);
    if (b->n != 2)
        return;
    RT_EXPECT_EQ(b->nodes[0]->kind, RT_KIR_N_FSET);
    RT_EXPECT_EQ(b->nodes[1]->kind, RT_KIR_N_LOOP);
    RT_EXPECT_EQ(b->nodes[1]->loop_kind, want);
    int64_t lo = -1, hi = -1;
    RT_EXPECT(rt_kir_is_int(b->nodes[1]->lo, &lo) && rt_kir_is_int(b->nodes[1]->hi, &hi));
    RT_EXPECT_EQ(lo, 0);
    RT_EXPECT_EQ(hi, 3);
    int32_t d = sum->sum_vars[0];
    RT_EXPECT(f.var_of[d] >= 0); // the sum binds its var
    RT_EXPECT_EQ(b->nodes[1]->var, f.var_of[d]);
    rt_kir_block *body = &b->nodes[1]->body;
    RT_EXPECT_EQ(body->n, 1);
    if (body->n == 1) {
        RT_EXPECT_EQ(body->nodes[0]->kind, RT_KIR_N_FSET);
        RT_EXPECT_EQ(body->nodes[0]->var, b->nodes[0]->var);
    }
}

static void test_offset(rt_arena *a) {
    fixture f;
    RT_EXPECT(fixture_init(a, &f));
    if (!f.op)
        return;
    // Dense: (i * 3 + j) with the in-extent condition.
    rt_lx x = fixture_ctx(a, &f, &ops_vector);
    rt_kir_expr *idx[2] = {rt_kir_int(a, 2), rt_kir_int(a, 1)};
    rt_kir_expr *valid = NULL;
    int64_t c = -1;
    RT_EXPECT(rt_kir_is_int(rt_lx_offset(&x, 0, idx, &valid), &c));
    RT_EXPECT_EQ(c, 7);
    RT_EXPECT(rt_kir_is_int(valid, &c));
    RT_EXPECT_EQ(c, 1);
    idx[1] = rt_kir_int(a, 3);
    RT_EXPECT(rt_lx_offset(&x, 0, idx, &valid) != NULL);
    RT_EXPECT(rt_kir_is_int(valid, &c));
    RT_EXPECT_EQ(c, 0);
    // Ragged dim 1 with an i32 start array: start[i] widened to i64, plus j.
    f.start_buf[0][1] = rt_kir_add_buf(a, f.k, "X_start1", RT_KIR_BUF_START, RT_KIR_I32, 0, 1);
    f.extent[0][1] = -1;
    idx[0] = rt_kir_var_ref(a, f.ph, f.var_of[0]);
    idx[1] = rt_kir_int(a, 1);
    rt_kir_expr *off = rt_lx_offset(&x, 0, idx, NULL);
    RT_EXPECT(off && off->kind == RT_KIR_E_BIN && off->bop == RT_KIR_ADD);
    if (off && off->kind == RT_KIR_E_BIN) {
        rt_kir_expr *st = off->args[0];
        RT_EXPECT(st->kind == RT_KIR_E_CAST && st->type == RT_KIR_I64);
        RT_EXPECT(st->args[0]->kind == RT_KIR_E_LOAD && st->args[0]->buf == f.start_buf[0][1]);
    }
    RT_EXPECT(!x.oom);
}

static void test_errors(rt_arena *a) {
    fixture f;
    RT_EXPECT(fixture_init(a, &f));
    if (!f.op)
        return;
    const rt_stmt *s = &f.op->stmts[0];
    const rt_expr *rd = find_kind(s->rhs, RT_EXPR_READ);
    RT_EXPECT(rd != NULL);
    if (!rd)
        return;
    rt_kir_expr *v = NULL;
    // An index variable without a phase variable.
    rt_lx x = fixture_ctx(a, &f, &ops_vector);
    f.var_of[0] = -1;
    RT_EXPECT_EQ(rt_lx_read(&x, rd, &v), RT_ERR_SPEC);
    RT_EXPECT_STR(f.err.msg, "index variable outside its loop");
    RT_EXPECT_EQ(f.err.where.line, 2);
    // A read with the wrong number of indices never reaches the hook.
    rt_expr one = *rd;
    one.n_args = 1;
    x = fixture_ctx(a, &f, &ops_serial_hook);
    hook_calls = 0;
    RT_EXPECT_EQ(rt_lx_read(&x, &one, &v), RT_ERR_SPEC);
    RT_EXPECT_STR(f.err.msg, "X takes 2 indices (got 1)");
    RT_EXPECT_EQ(hook_calls, 0);
    // Unsupported expressions name the backend.
    rt_expr child = {.kind = RT_EXPR_CHILD, .loc = rd->loc, .is_int = true};
    x = fixture_ctx(a, &f, &ops_serial_hook);
    RT_EXPECT_EQ(rt_lx_num(&x, &child, &v), RT_ERR_BACKEND);
    RT_EXPECT_STR(f.err.msg,
                  "a tree child outside a level-by-level statement is not supported by the TEST "
                  "backend");
    // A sum over a var the statement does not have.
    int32_t bad_var = 5;
    rt_expr sum = {.kind = RT_EXPR_SUM, .loc = rd->loc, .n_args = 1, .n_sum_vars = 1};
    rt_expr *arg = &child;
    sum.args = &arg;
    sum.sum_vars = &bad_var;
    x = fixture_ctx(a, &f, &ops_vector);
    RT_EXPECT_EQ(rt_lx_num(&x, &sum, &v), RT_ERR_SPEC);
    RT_EXPECT_STR(f.err.msg, "reduction over an unknown index");
}

int main(void) {
    rt_arena *a = rt_arena_new(1 << 16);
    RT_EXPECT(a != NULL);
    if (!a)
        return rt_test_finish("test-lower-expr");
    test_sum(a, &ops_vector, RT_KIR_LOOP_VECTOR);
    test_sum(a, &ops_serial_hook, RT_KIR_LOOP_SERIAL);
    test_offset(a);
    test_errors(a);
    rt_arena_free(a);
    return rt_test_finish("test-lower-expr");
}
