// test-spec-check.c: the op-spec checker — range inference (conv halo, triangular narrowing,
// where-ranges, pad intersection), bounds with floor division and modulo, integer tensors in
// integer contexts only, accumulation types, output-shape inference, axis fusion, the error
// cases of tests/err/spec/ (message and location, through rt_spec_load), out-of-memory at
// every allocation, and a small mutation sweep that must never crash.
#include "spec-int.h"
#include "test.h"

#include <dirent.h>

static rt_op *parse(rt_arena *a, const char *text, rt_err *err) {
    rt_op *op = NULL;
    rt_err_clear(err);
    if (rt_spec_parse(a, text, "x.spec", NULL, 0, &op, err) != RT_OK) {
        return NULL;
    }
    return op;
}

static rt_op *load(rt_arena *a, const char *path) {
    rt_op *op = NULL;
    rt_err err = {0};
    if (rt_spec_load(a, path, NULL, 0, &op, &err) != RT_OK) {
        fprintf(stderr, "%s: %d:%d: %s\n", path, err.where.line, err.where.col, err.msg);
        RT_EXPECT(!"parses");
        return NULL;
    }
    return op;
}

// Index of op's tensor called name (-1: none).
static int32_t rt_op_tensor_index_spec(const rt_op *op, const char *name) {
    for (int32_t t = 0; t < op->n_tensors; t++)
        if (!strcmp(op->tensors[t].name, name))
            return t;
    return -1;
}

static const char *text(rt_arena *a, const rt_op *op, const rt_stmt *st, const rt_tensor *t,
                        const rt_expr *e) {
    rt_buf b;
    rt_buf_init(&b, a);
    rt_expr_print(op, st, t, e, &b);
    return b.data;
}

static int32_t var(const rt_stmt *st, const char *name) {
    for (int32_t v = 0; v < st->n_vars; v++)
        if (!strcmp(st->vars[v].name, name))
            return v;
    return -1;
}

static int64_t extent_of(const rt_op *op, const rt_stmt *st, const char *name) {
    const rt_ivar *iv = &st->vars[var(st, name)];
    int64_t lo, hi;
    if (!rt_expr_const_int(op, iv->lo, &lo) || !rt_expr_const_int(op, iv->hi, &hi))
        return -1;
    return hi - lo;
}

static void test_conv_halo(void) {
    rt_arena *a = rt_arena_new(1 << 16);
    rt_op *op = load(a, "examples/conv2d.spec");
    if (op) {
        const rt_stmt *st = &op->stmts[0];
        RT_EXPECT_EQ(extent_of(op, st, "y"), 29); // from the given output shape
        RT_EXPECT_EQ(extent_of(op, st, "c"), 128);
        RT_EXPECT_EQ(extent_of(op, st, "r"), 3); // from Wt, not from the padded I
        RT_EXPECT(!st->vars[var(st, "r")].from_where);
    }
    // avgpool: r, s from where-ranges; 2*y + r stays inside 21 without pad
    op = load(a, "examples/avgpool.spec");
    if (op) {
        const rt_stmt *st = &op->stmts[0];
        RT_EXPECT(st->vars[var(st, "r")].from_where);
        RT_EXPECT_EQ(extent_of(op, st, "s"), 3);
    }
    // one more output row makes 2*y + r reach 21: out of extent without pad
    rt_err err;
    RT_EXPECT(!parse(a,
                     "def p(float(4, 21) I) -> (float(4, 11) O) {\n"
                     "  O(n, y) +=! I(n, 2*y + r) where r in 0:3\n}\n",
                     &err));
    RT_EXPECT_STR(err.msg, "I(n, 2*y + r) can read outside I's extent; declare 'I pad 0' or add "
                           "a where-range");
    RT_EXPECT_EQ(err.where.line, 2);
    RT_EXPECT_EQ(err.where.col, 15);
    rt_arena_free(a);
}

static void test_trmm_narrowing(void) {
    rt_arena *a = rt_arena_new(1 << 16);
    rt_op *op = load(a, "examples/trmm.spec");
    if (op) {
        const rt_stmt *st = &op->stmts[0];
        const rt_ivar *k = &st->vars[var(st, "k")];
        RT_EXPECT(k->is_reduce);
        RT_EXPECT(k->ragged);
        RT_EXPECT_STR(text(a, op, st, NULL, k->hi), "i + 1");
        RT_EXPECT_EQ(extent_of(op, st, "p"), 2048);
        RT_EXPECT(!st->vars[var(st, "i")].ragged);
    }
    // a triangle wider than the dense operand cannot narrow it
    rt_err err;
    RT_EXPECT(!parse(a,
                     "size N = 8\ndef t(float(i:N, i + 2) L, float(N, 4) X) -> (Y) {\n"
                     "  Y(i, p) +=! L(i, k) * X(k, p)\n}\n",
                     &err));
    RT_EXPECT_STR(err.msg, "index 'k' ranges over i + 2 in L(i, k) but 8 in X(k, p)");
    RT_EXPECT_EQ(err.where.col, 25);
    rt_arena_free(a);
}

static void test_masked_where(void) {
    rt_arena *a = rt_arena_new(1 << 16);
    rt_op *op = load(a, "examples/masked_qkt.spec");
    if (op) {
        const rt_stmt *st = &op->stmts[0];
        const rt_ivar *j = &st->vars[var(st, "j")];
        RT_EXPECT(j->from_where);
        RT_EXPECT(j->ragged);
        RT_EXPECT_STR(text(a, op, st, NULL, j->hi), "i + 1");
        RT_EXPECT_STR(text(a, op, st, NULL, st->vars[var(st, "i")].hi), "len(b)");
    }
    // j in 0:i + 2 can pass len(b)
    rt_err err;
    RT_EXPECT(!parse(a,
                     "size B = 2\ndef m(int32(B) len, float(b:B, len(b)) Q) -> (S) {\n"
                     "  S(b, i, j) = Q(b, i) * Q(b, j) where j in 0:i + 2\n}\n",
                     &err));
    RT_EXPECT_STR(err.msg,
                  "where-range of 'j' exceeds the extent in Q(b, j) (expected within 0:len(b), "
                  "got 0:i + 2)");
    rt_arena_free(a);
}

// "" when text checks, else "L:C: message".
static const char *verdict(rt_arena *a, const char *src) {
    rt_err err;
    if (parse(a, src, &err))
        return "";
    return rt_arena_printf(a, "%d:%d: %s", err.where.line, err.where.col, err.msg);
}

// Floor division and modulo by a positive constant in index expressions: interval bounds,
// multiplication by constants of either sign, nesting; the invalid variants are still rejected.
static void test_div_mod_bounds(void) {
    rt_arena *a = rt_arena_new(1 << 16);
    // i / 2 over 0:8 stays in 0:4; over 0:9 it reaches 4
    RT_EXPECT_STR(verdict(a, "def u(float(4) I) -> (O) {\n  O(i) = I(i / 2) where i in 0:8\n}\n"),
                  "");
    RT_EXPECT_STR(verdict(a, "def u(float(4) I) -> (O) {\n  O(i) = I(i / 2) where i in 0:9\n}\n"),
                  "2:10: I(i/2) can read outside I's extent; declare 'I pad 0' or add a "
                  "where-range");
    // the range comes from the output's given shape
    RT_EXPECT_STR(verdict(a, "def u(float(4) I) -> (float(8) O) {\n  O(i) = I(i / 2)\n}\n"), "");
    RT_EXPECT_STR(verdict(a, "def u(float(4) I) -> (float(9) O) {\n  O(i) = I(i / 2)\n}\n"),
                  "2:10: I(i/2) can read outside I's extent; declare 'I pad 0' or add a "
                  "where-range");
    // x % 3 is in 0:3 whatever x is; % 4 is not
    const char *mod3 = "def m(float(3) X, float(100) Y) -> (O) {\n  O(i) = Y(i) * X(i % 3)\n}\n";
    RT_EXPECT_STR(verdict(a, mod3), "");
    RT_EXPECT_STR(verdict(a, "def m(float(3) X, float(100) Y) -> (O) {\n"
                             "  O(i) = Y(i) * X(i % 4)\n}\n"),
                  "2:17: X(i%4) can read outside X's extent; declare 'X pad 0' or add a "
                  "where-range");
    // within one period the interval is tighter: (i + 3) % 8 over 0:4 is 3..6
    RT_EXPECT_STR(verdict(a, "def m(float(4) X, float(4) Y) -> (O) {\n"
                             "  O(i) = Y(i) * X((i + 3) % 8 - 3)\n}\n"),
                  "");
    // ...but (i + 3) % 8 over 0:6 wraps to 0, and 0 - 3 < 0
    RT_EXPECT_STR(verdict(a, "def m(float(4) X, float(6) Y) -> (O) {\n"
                             "  O(i) = Y(i) * X((i + 3) % 8 - 3)\n}\n"),
                  "2:17: X((i + 3) % 8 - 3) can read outside X's extent; declare 'X pad 0' or "
                  "add a where-range");
    // negative multipliers and floor semantics: -(-i / 5) is ceil(i / 5), 2 for i = 9
    RT_EXPECT_STR(verdict(a, "def m(float(3) X, float(10) Y) -> (O) {\n"
                             "  O(i) = Y(i) * X(-(-i / 5)) * X((i / 4) * -1 + 4 - 2)\n}\n"),
                  "");
    RT_EXPECT_STR(verdict(a, "def m(float(3) X, float(10) Y) -> (O) {\n"
                             "  O(i) = Y(i) * X(-(-i / 4))\n}\n"),
                  "2:17: X(-(-i / 4)) can read outside X's extent; declare 'X pad 0' or add a "
                  "where-range");
    RT_EXPECT_STR(verdict(a, "def m(float(3) X, float(10) Y) -> (O) {\n"
                             "  O(i) = Y(i) * X(3 * (i / 4) - 4)\n}\n"),
                  "2:17: X(3 * (i/4) - 4) can read outside X's extent; declare 'X pad 0' or add "
                  "a where-range");
    // nesting, several index variables, size symbols as divisors
    RT_EXPECT_STR(verdict(a, "size D = 5\ndef m(float(2, 3) X, float(10, 7) Y) -> (O) {\n"
                             "  O(i, j) = Y(i, j) * X((i / D) % 2, (i % 6) / 2 + j / 7)\n}\n"),
                  "");
    RT_EXPECT_STR(verdict(a, "def m(float(3) X, float(10, 7) Y) -> (O) {\n"
                             "  O(i, j) = Y(i, j) * X((i + j) / 5)\n}\n"),
                  "2:23: X((i + j) / 5) can read outside X's extent; declare 'X pad 0' or add a "
                  "where-range");
    // a modulo chain deeper than the interval recursion still has its [0, d-1] bound
    RT_EXPECT_STR(verdict(a, "def m(float(2) X, float(10) Y) -> (O) {\n  O(i) = Y(i) * "
                             "X((((((((((((((((i % 9) % 8) % 7) % 6) % 5) % 5) % 5) % 5) % 5) "
                             "% 5) % 5) % 5) % 5) % 4) % 3) % 2)\n}\n"),
                  "");
    // a tree of 2^11 modulo atoms over the same operand: bounded work, and still proved
    char *e = rt_arena_strdup(a, "i");
    for (int k = 0; e && k < 11; k++)
        e = rt_arena_printf(a, "(%s) %% 5 + (%s) %% 3", e, e);
    RT_EXPECT(e != NULL);
    if (e)
        RT_EXPECT_STR(verdict(a, rt_arena_printf(a,
                                                 "def m(float(7) X, float(10) Y) -> (O) {\n"
                                                 "  O(i) = Y(i) * X(%s)\n}\n",
                                                 e)),
                      "");
    // division by zero, a negative or a non-constant divisor proves nothing
    RT_EXPECT_STR(verdict(a, "def m(float(3) X, float(10) Y) -> (O) {\n"
                             "  O(i) = Y(i) * X(i % -3)\n}\n"),
                  "2:17: X(i % -3) can read outside X's extent; declare 'X pad 0' or add a "
                  "where-range");
    RT_EXPECT_STR(verdict(a, "def m(float(3) X, float(10, 3) Y) -> (O) {\n"
                             "  O(i, j) = Y(i, j) * X(i % (j + 1))\n}\n"),
                  "2:23: X(i % (j + 1)) can read outside X's extent; declare 'X pad 0' or add "
                  "a where-range");
    rt_arena_free(a);
}

// Integer tensors are read only in integer contexts (indices, comparisons, integer outputs).
static void test_int_reads(void) {
    rt_arena *a = rt_arena_new(1 << 16);
    const char *head = "def g(int32(8) word, int8(8) q, float(8) X) -> ";
    struct {
        const char *out, *stmt, *want;
    } cases[] = {
        {"(Y)", "Y(n) = X(word(n) % 8)", ""},
        {"(Y)", "Y(n) = X(n) * (word(n) > 2 ? 1 : 0)", ""},
        {"(Y)", "Y(n) = (word(n) == 0 && !(q(n) < 3)) ? 1.5 : X(n)", ""},
        {"(Y)", "Y(n) = X(abs(word(n) - 4) % 8)", ""},
        {"(int32(8) O)", "O(n) = word(n) * 2 + max(q(n), 1) + (X(n) > 0 ? word(n) : -word(n))", ""},
        {"(Y)", "Y(n) = X(n) * word(n)",
         "2:17: int32 tensor 'word' read in a float context; integer tensors may only be used "
         "as indices, lengths or in comparisons"},
        {"(Y)", "Y(n) = -q(n)",
         "2:11: int8 tensor 'q' read in a float context; integer tensors may only be used as "
         "indices, lengths or in comparisons"},
        {"(Y)", "Y(n) = X(n) + max(word(n), 1)",
         "2:21: int32 tensor 'word' read in a float context; integer tensors may only be used "
         "as indices, lengths or in comparisons"},
        {"(Y)", "Y(n) = word(n) > 1 ? word(n) : X(n)",
         "2:24: int32 tensor 'word' read in a float context; integer tensors may only be used "
         "as indices, lengths or in comparisons"},
        {"(int32(8) O)", "O(n) = exp(word(n))",
         "2:14: int32 tensor 'word' read in a float context; integer tensors may only be used "
         "as indices, lengths or in comparisons"},
        {"(Y)", "t(n) = word(n) + 1\n  Y(n) = X(t(n))",
         "2:10: int32 tensor 'word' read in a float context; integer tensors may only be used "
         "as indices, lengths or in comparisons"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        const char *src =
            rt_arena_printf(a, "%s%s {\n  %s\n}\n", head, cases[i].out, cases[i].stmt);
        RT_EXPECT_STR(verdict(a, src), cases[i].want);
    }
    rt_arena_free(a);
}

// Mixed precision: reductions into half/bfloat16 accumulate in float, others in the output type.
static void test_acc_dtype(void) {
    rt_arena *a = rt_arena_new(1 << 16);
    struct {
        const char *src;
        bool reduces;
        rt_dtype acc;
        const char *line; // expected stmt line of rt_op_print
    } cases[] = {
        {"def h(half(8, 8) A, half(8, 8) B) -> (half(8, 8) C) {\n  C(m, n) +=! A(m, k) * B(k, "
         "n)\n}",
         true, RT_DTYPE_F32, "stmt 1: C(m, n) +=! A(m, k) * B(k, n); accumulates in float\n"},
        {"def h(half(8, 8) A) -> (half(8, 8) C) {\n  C(m, n) = A(m, n) * 2\n}", false, RT_DTYPE_F16,
         "stmt 1: C(m, n) = A(m, n) * 2\n"},
        {"def h(bfloat16(8, 8) A) -> (bfloat16(8) C) {\n  C(m) max=! A(m, k)\n}", true,
         RT_DTYPE_F32, "stmt 1: C(m) max=! A(m, k); accumulates in float\n"},
        {"def h(half(8, 8) A, half(8) x) -> (half(8) y) {\n  y(m) = tanh(A(m, k) * x(k))\n}", true,
         RT_DTYPE_F32, "stmt 1: y(m) = tanh(A(m, k) * x(k)); accumulates in float\n"},
        {"def h(double(8, 8) A) -> (C) {\n  C(m) +=! A(m, k)\n}", true, RT_DTYPE_F64,
         "stmt 1: C(m) +=! A(m, k); accumulates in double\n"},
        {"def h(int8(8, 8) A) -> (int32(8) C) {\n  C(m) +=! A(m, k) * A(k, m)\n}", true,
         RT_DTYPE_I32, "stmt 1: C(m) +=! A(m, k) * A(k, m); accumulates in int32\n"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        rt_err err;
        rt_op *op = parse(a, cases[i].src, &err);
        RT_EXPECT(op != NULL);
        if (!op) {
            fprintf(stderr, "case %zu: %s\n", i, err.msg);
            continue;
        }
        RT_EXPECT_EQ(op->stmts[0].reduces, cases[i].reduces);
        RT_EXPECT_EQ(op->stmts[0].acc_dtype, cases[i].acc);
        rt_buf b;
        rt_buf_init(&b, a);
        rt_op_print(op, &b);
        RT_EXPECT(b.data && strstr(b.data, cases[i].line) != NULL);
    }
    rt_arena_free(a);
}

static void test_pad_intersection(void) {
    rt_arena *a = rt_arena_new(1 << 16);
    rt_err err;
    // the padded tensor is larger: the other extent wins, no conflict
    rt_op *op = parse(a,
                      "def f(float(10) P pad 0, float(8) A) -> (C) {\n"
                      "  C(i) = P(i) + A(i)\n}\n",
                      &err);
    RT_EXPECT(op != NULL);
    if (op)
        RT_EXPECT_EQ(extent_of(op, &op->stmts[0], "i"), 8);
    // only padded tensors: the intersection
    op = parse(a,
               "def f(float(10) P pad 0, float(6) Q pad 1.5) -> (C) {\n"
               "  C(i) = P(i) + Q(i)\n}\n",
               &err);
    RT_EXPECT(op != NULL);
    if (op) {
        RT_EXPECT_EQ(extent_of(op, &op->stmts[0], "i"), 6);
        RT_EXPECT_NEAR(op->tensors[1].pad_value, 1.5, 0);
    }
    // without pad the same shapes conflict
    RT_EXPECT(
        !parse(a, "def f(float(10) P, float(6) Q) -> (C) {\n  C(i) = P(i) + Q(i)\n}\n", &err));
    RT_EXPECT_STR(err.msg, "index 'i' ranges over 10 in P(i) but 6 in Q(i)");
    rt_arena_free(a);
}

static void test_shape_inference(void) {
    rt_arena *a = rt_arena_new(1 << 16);
    rt_op *op = load(a, "examples/qkt.spec");
    if (op) {
        const rt_tensor *S = &op->tensors[op->outputs[0]];
        RT_EXPECT_STR(S->name, "S");
        RT_EXPECT_EQ(S->n_dims, 4);
        RT_EXPECT(S->ragged);
        RT_EXPECT(!S->shape_given);
        RT_EXPECT_STR(text(a, op, NULL, S, S->dims[0].extent), "B");
        RT_EXPECT_STR(text(a, op, NULL, S, S->dims[1].extent), "H");
        RT_EXPECT_STR(text(a, op, NULL, S, S->dims[2].extent), "len(b)");
        RT_EXPECT_STR(text(a, op, NULL, S, S->dims[3].extent), "len(b)");
        RT_EXPECT_EQ(S->dims[2].extent->args[0]->kind, RT_EXPR_DIMREF);
        RT_EXPECT_EQ(S->dims[2].extent->args[0]->dim, 0);
        RT_EXPECT(S->dims[3].ragged);
        RT_EXPECT(!S->dims[1].ragged);
        RT_EXPECT_EQ(S->dtype, RT_DTYPE_F32);
    }
    // ragged temporaries of the ragged softmax are inferred from earlier statements
    op = load(a, "examples/ragged_softmax.spec");
    if (op) {
        const rt_tensor *mx = &op->tensors[3];
        RT_EXPECT_STR(mx->name, "mx");
        RT_EXPECT_EQ(mx->n_dims, 3);
        RT_EXPECT(mx->ragged);
        RT_EXPECT_EQ(op->stmts[3].vars[3].is_reduce, false);
    }
    // a double input makes an inferred temporary double
    rt_err err;
    op = parse(a, "def f(double(4) A) -> (C) {\n  t(i) = A(i) * 2\n  C(i) = t(i)\n}\n", &err);
    RT_EXPECT(op != NULL);
    if (op) {
        RT_EXPECT_EQ(op->tensors[2].role, RT_ROLE_TEMP);
        RT_EXPECT_EQ(op->tensors[2].dtype, RT_DTYPE_F64);
    }
    // a given output shape must agree with the inferred ranges
    RT_EXPECT(!parse(a, "def f(float(8) A) -> (float(4) C) {\n  C(i) = A(i)\n}\n", &err));
    RT_EXPECT_STR(err.msg, "index 'i' ranges over 4 in C(i) but 8 in A(i)");
    rt_arena_free(a);
}

static void test_axis_fusion(void) {
    rt_arena *a = rt_arena_new(1 << 16);
    rt_op *op = load(a, "examples/relu.spec");
    if (op) {
        const rt_stmt *st = &op->stmts[0];
        RT_EXPECT_EQ(st->n_axes, 1);
        RT_EXPECT_STR(st->axes[0].name, "n.c.h.w");
        RT_EXPECT_EQ(st->axes[0].n_members, 4);
        RT_EXPECT_EQ(st->axes[0].extent, 128LL * 1008 * 42 * 42);
        RT_EXPECT(!st->axes[0].ragged);
    }
    op = load(a, "examples/reduce_mean.spec");
    if (op) {
        const rt_stmt *st = &op->stmts[0];
        RT_EXPECT_EQ(st->n_axes, 2);
        RT_EXPECT_STR(st->axes[0].name, "b.r");
        RT_EXPECT_EQ(st->axes[0].extent, 65536);
        RT_EXPECT(!st->axes[0].is_reduce);
        RT_EXPECT_STR(st->axes[1].name, "l");
        RT_EXPECT(st->axes[1].is_reduce);
        RT_EXPECT_EQ(st->axes[1].extent, 1024);
    }
    op = load(a, "examples/matmul.spec");
    if (op) {
        const rt_stmt *st = &op->stmts[0];
        RT_EXPECT_EQ(st->n_axes, 3);
        RT_EXPECT_STR(st->axes[0].name, "m");
        RT_EXPECT_STR(st->axes[1].name, "n");
        RT_EXPECT_STR(st->axes[2].name, "k");
    }
    op = load(a, "examples/proj.spec");
    if (op) {
        const rt_stmt *st = &op->stmts[0];
        RT_EXPECT_EQ(st->n_axes, 3);
        RT_EXPECT_STR(st->axes[0].name, "b.i");
        RT_EXPECT(st->axes[0].ragged);
        RT_EXPECT_EQ(st->axes[0].extent, -1);
        RT_EXPECT_STR(st->axes[1].name, "n");
        RT_EXPECT_EQ(st->axes[1].extent, 512);
    }
    // conv: 2*y + r uses y and r in a non-plain argument, nothing fuses
    op = load(a, "examples/conv2d.spec");
    if (op)
        RT_EXPECT_EQ(op->stmts[0].n_axes, 7);
    // a ragged dependency on a var outside the group blocks fusion (qkt: i, j depend on b)
    op = load(a, "examples/qkt.spec");
    if (op)
        RT_EXPECT_EQ(op->stmts[0].n_axes, 5);
    rt_arena_free(a);
}

// Every tests/err/spec case fails with its expected "LINE:COL: error: MSG".
static void test_error_cases(void) {
    DIR *d = opendir("tests/err/spec");
    RT_EXPECT(d != NULL);
    int n = 0;
    for (struct dirent *e; d && (e = readdir(d));) {
        size_t len = strlen(e->d_name);
        if (len < 6 || strcmp(e->d_name + len - 5, ".spec"))
            continue;
        char path[512], want[600], got[700];
        snprintf(path, sizeof path, "tests/err/spec/%s", e->d_name);
        FILE *f = fopen(path, "r");
        if (!f || !fgets(want, sizeof want, f)) {
            RT_EXPECT(!"readable error case");
            if (f)
                fclose(f);
            continue;
        }
        fclose(f);
        want[strcspn(want, "\n")] = '\0';
        rt_arena *a = rt_arena_new(1 << 16);
        rt_layer *l = NULL;
        rt_err err = {0};
        // Through the layer parser (what rtgen runs), which must fail a file of one def exactly
        // as rt_spec_load does.
        rt_status st = rt_spec_load_layer(a, path, NULL, 0, &l, &err);
        snprintf(got, sizeof got, "# expect: %d:%d: error: %s", err.where.line, err.where.col,
                 err.msg);
        if (st == RT_OK || strcmp(got, want) != 0)
            fprintf(stderr, "%s:\n  got  %s\n  want %s\n", path, got, want);
        RT_EXPECT(st == RT_ERR_SYNTAX || st == RT_ERR_SPEC);
        RT_EXPECT(strcmp(got, want) == 0);
        if (strncmp(e->d_name, "layer-", 6) != 0) {
            rt_op *op = NULL;
            rt_err err1 = {0};
            RT_EXPECT_EQ(rt_spec_load(a, path, NULL, 0, &op, &err1), st);
            RT_EXPECT_STR(err1.msg, err.msg);
            RT_EXPECT_EQ(err1.where.line, err.where.line);
            RT_EXPECT_EQ(err1.where.col, err.where.col);
        }
        rt_arena_free(a);
        n++;
    }
    if (d)
        closedir(d);
    RT_EXPECT(n >= 28);
}

// A layer (examples/layers/ffn.spec): three ops, linked by name. The shared length tensor and
// the weights are layer inputs, H and G intermediates (not layer outputs), Y the layer's output;
// each def's parameter points at the layer tensor its producer made; a size and a literal of
// the same value are the same extent; a file of one def is a layer of one op.
static void test_layer_link(void) {
    rt_arena *a = rt_arena_new(1 << 16);
    rt_layer *l = NULL;
    rt_err err = {0};
    RT_EXPECT_EQ(rt_spec_load_layer(a, "examples/layers/ffn.spec", NULL, 0, &l, &err), RT_OK);
    if (l) {
        RT_EXPECT_STR(l->name, "ffn");
        RT_EXPECT_EQ(l->n_ops, 3);
        RT_EXPECT_EQ(l->n_tensors, 8);
        static const char *names[] = {"len", "X", "W1", "H", "bias1", "G", "W2", "Y"};
        static const bool input[] = {1, 1, 1, 0, 1, 0, 1, 0}, output[] = {0, 0, 0, 0, 0, 0, 0, 1};
        for (int32_t i = 0; i < l->n_tensors && i < 8; i++) {
            RT_EXPECT_STR(l->tensors[i].name, names[i]);
            RT_EXPECT_EQ(l->tensors[i].is_input, input[i]);
            RT_EXPECT_EQ(l->tensors[i].is_output, output[i]);
        }
        // bias_gelu's H and len, ffn2's G: the layer tensors made by ffn1 and bias_gelu.
        const rt_op *g = l->ops[1], *f2 = l->ops[2];
        RT_EXPECT_EQ(l->tensor_of[1][rt_op_tensor_index_spec(g, "H")], 3);
        RT_EXPECT_EQ(l->tensor_of[1][rt_op_tensor_index_spec(g, "len")], 0);
        RT_EXPECT_EQ(l->tensor_of[2][rt_op_tensor_index_spec(f2, "G")], 5);
        RT_EXPECT_EQ(l->tensors[3].op, 0);
        RT_EXPECT_EQ(l->tensors[5].op, 1);
    }
    const char *same = "size M = 16\n"
                       "def p(float(M, 4) X) -> (H) {\n  H(m, n) = X(m, n) * 2\n}\n"
                       "def q(float(16, 4) H) -> (G) {\n  G(m, n) = H(m, n) + 1\n}\n";
    RT_EXPECT_EQ(rt_spec_parse_layer(a, same, "same.spec", NULL, 0, &l, &err), RT_OK);
    if (l)
        RT_EXPECT(l->tensors[1].is_output == false && l->tensors[2].is_output);
    RT_EXPECT_EQ(rt_spec_load_layer(a, "examples/matmul.spec", NULL, 0, &l, &err), RT_OK);
    if (l)
        RT_EXPECT(l->n_ops == 1 && l->n_tensors == 3 && l->tensors[2].is_output);
    rt_arena_free(a);
}

// Every allocation failure becomes RT_ERR_NOMEM, never a crash.
static void test_nomem(void) {
    char *src = NULL;
    rt_arena *t = rt_arena_new(1 << 16);
    size_t len;
    rt_err err = {0};
    RT_EXPECT_EQ(rt_read_file(t, "examples/treernn.spec", &src, &len, &err), RT_OK);
    int ok_at = -1;
    for (int n = 0; src && n < 4000; n++) {
        rt_arena *a = rt_arena_new(4096);
        rt_arena_fail_after(a, n);
        rt_op *op = NULL;
        rt_err_clear(&err);
        rt_status st = rt_spec_parse(a, src, "t.spec", NULL, 0, &op, &err);
        if (st == RT_OK) {
            ok_at = n;
            rt_arena_free(a);
            break;
        }
        RT_EXPECT_EQ(st, RT_ERR_NOMEM);
        rt_arena_free(a);
    }
    RT_EXPECT(ok_at > 0);
    rt_arena_free(t);
}

// Mutations of every example (deleted, duplicated and replaced characters) parse or fail with
// a located message; the sanitizer build turns any crash or UB into a failure.
static void test_mutations(void) {
    static const char *files[] = {"examples/conv2d.spec", "examples/treernn.spec",
                                  "examples/masked_qkt.spec", "examples/vgemm.spec"};
    static const char repl[] = "()+,:*0i-!.@#\n";
    unsigned seed = 12345;
    int failed_located = 0, total = 0;
    for (size_t f = 0; f < sizeof files / sizeof files[0]; f++) {
        rt_arena *t = rt_arena_new(1 << 16);
        char *src;
        size_t len;
        rt_err err = {0};
        if (rt_read_file(t, files[f], &src, &len, &err) != RT_OK) {
            RT_EXPECT(!"readable");
            rt_arena_free(t);
            continue;
        }
        char *buf = malloc(len * 2 + 2);
        for (int iter = 0; iter < 300 && buf; iter++) {
            seed = seed * 1103515245u + 12345u;
            size_t at = (seed >> 8) % len;
            memcpy(buf, src, len + 1);
            switch (iter % 3) {
            case 0:
                memmove(buf + at, buf + at + 1, len - at);
                break;
            case 1:
                buf[at] = repl[(seed >> 20) % (sizeof repl - 1)];
                break;
            default:
                memmove(buf + at + 1, buf + at, len - at + 1);
                break;
            }
            rt_arena *a = rt_arena_new(1 << 16);
            rt_op *op = NULL;
            rt_err_clear(&err);
            if (rt_spec_parse(a, buf, "m.spec", NULL, 0, &op, &err) != RT_OK) {
                failed_located += err.where.line > 0 && err.where.col > 0 && err.msg[0] != '\0';
                total++;
            } else {
                rt_buf b;
                rt_buf_init(&b, a);
                rt_op_print(op, &b);
            }
            rt_arena_free(a);
        }
        free(buf);
        rt_arena_free(t);
    }
    RT_EXPECT(total > 100);
    RT_EXPECT_EQ(failed_located, total);
}

int main(void) {
    test_conv_halo();
    test_trmm_narrowing();
    test_masked_where();
    test_div_mod_bounds();
    test_int_reads();
    test_acc_dtype();
    test_pad_intersection();
    test_shape_inference();
    test_axis_fusion();
    test_error_cases();
    test_layer_link();
    test_nomem();
    test_mutations();
    return rt_test_finish("test-spec-check");
}
