// test-flops.c: rt_interp_flops, the useful arithmetic of an operator on its bound data (what a
// profile's GFLOP/s divide by): ragged rows from generated, listed and histogram lengths,
// squared ragged extents, a triangular range, a where-clause range, an elementwise epilogue's
// operations per point, an '=' with an implicit sum, several statements, a dense GEMM (2 M N K,
// as before), recursive statements over a tree, each against a count by hand from the bound
// lengths.
#include "test.h"

#include "interp.h"
#include "lengths.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

static rt_arena *arena;

static const rt_op *parse(const char *text) {
    rt_op *op = NULL;
    rt_err err = {0};
    if (rt_spec_parse(arena, text, "t.spec", NULL, 0, &op, &err) != RT_OK) {
        fprintf(stderr, "parse: %s\n%s\n", err.msg, text);
        return NULL;
    }
    return op;
}

// The bindings of op (seed), prepared; NULL after a message on failure.
static rt_bindings *bind(const rt_op *op, uint64_t seed) {
    rt_bindings *b = NULL;
    rt_err err = {0};
    if (!op || rt_bindings_new(arena, op, seed, &b, &err) != RT_OK)
        return NULL;
    return b;
}

static double flops(const rt_op *op, rt_bindings *b) {
    double f = -1.0;
    rt_err err = {0};
    if (!op || !b || rt_interp_flops(op, b, &f, &err) != RT_OK) {
        fprintf(stderr, "flops: %s\n", err.msg);
        return -1.0;
    }
    return f;
}

// Sum over the length tensor of f(len).
static double sum_len(rt_bindings *b, int32_t n, int32_t power) {
    rt_tensor_data *d = rt_bindings_data(b, "len");
    double s = 0;
    for (int32_t i = 0; d && i < n; i++)
        s += power == 2 ? d->data[i] * d->data[i] : d->data[i];
    return s;
}

#define PROJ                                                                                       \
    "size B = 32\ndef proj(int32(B) len, float(b:B, len(b), 512) X, float(512, 512) Wt) -> (Y) "   \
    "{\n Y(b, i, n) +=! X(b, i, k) * Wt(k, n)\n}\n"

static void test_ragged_rows(void) {
    const rt_op *op = parse(PROJ);
    rt_err err = {0};
    // Generated lengths (the default: uniform in [0, 16]), at two seeds.
    for (uint64_t seed = 1; seed <= 2; seed++) {
        rt_bindings *b = bind(op, seed);
        double f = flops(op, b);
        RT_EXPECT(sum_len(b, 32, 1) > 0);
        RT_EXPECT_EQ(f, 2.0 * sum_len(b, 32, 1) * 512 * 512);
    }
    // A plain list.
    rt_bindings *l = bind(op, 1);
    int32_t lens[32];
    double total = 0;
    for (int32_t i = 0; i < 32; i++)
        total += lens[i] = (i * 37) % 101;
    RT_EXPECT_EQ(rt_bindings_set_lengths(l, "len", lens, 32, &err), RT_OK);
    RT_EXPECT_EQ(flops(op, l), 2.0 * total * 512 * 512);
    // A histogram sampled 32 times (tests/data/cola.hist, as --lengths len=... --batch=32).
    rt_lengths_file *h = NULL;
    RT_EXPECT_EQ(rt_lengths_read(arena, "tests/data/cola.hist", &h, &err), RT_OK);
    rt_bindings *hb = bind(op, 3);
    RT_EXPECT_EQ(rt_bindings_set_lengths_file(hb, "len", h, 32, &err), RT_OK);
    double fh = flops(op, hb);
    RT_EXPECT(sum_len(hb, 32, 1) > 32 * 3);
    RT_EXPECT_EQ(fh, 2.0 * sum_len(hb, 32, 1) * 512 * 512);
}

static void test_qkt(void) {
    // Q K^T over two vloops of one length: len^2 points per (b, h), three operations each.
    const rt_op *op = parse(
        "size B = 9\nsize H = 3\nsize D = 5\n"
        "def qkt(int32(B) len, float(b:B, len(b), H, D) Q, float(b:B, len(b), H, D) K) -> (S) {\n"
        " S(b, h, i, j) +=! Q(b, i, h, d) * K(b, j, h, d) * 0.125\n}\n");
    rt_bindings *b = bind(op, 4);
    double f = flops(op, b);
    RT_EXPECT_EQ(f, 3.0 * sum_len(b, 9, 2) * 3 * 5);
    // The causal mask as a where-clause range: j in 0..i, (len (len + 1) / 2) rows per (b, h).
    const rt_op *m = parse(
        "size B = 9\nsize H = 3\nsize D = 5\n"
        "def mq(int32(B) len, float(b:B, len(b), H, D) Q, float(b:B, len(b), H, D) K) -> (S) {\n"
        " S(b, h, i, j) +=! Q(b, i, h, d) * K(b, j, h, d) * 0.125   where j in 0:i + 1\n}\n");
    rt_bindings *mb = bind(m, 4);
    double tri = 0;
    rt_tensor_data *len = NULL;
    double fm = flops(m, mb);
    len = rt_bindings_data(mb, "len");
    for (int32_t i = 0; len && i < 9; i++)
        tri += len->data[i] * (len->data[i] + 1) / 2;
    RT_EXPECT(tri > 0);
    RT_EXPECT_EQ(fm, 3.0 * tri * 3 * 5);
}

static void test_triangular(void) {
    // k runs to the diagonal: sum over i of (i + 1) points per column, two operations each.
    const rt_op *op = parse("size N = 50\nsize P = 7\n"
                            "def trmm(float(i:N, i + 1) L, float(N, P) X) -> (Y) {\n"
                            " Y(i, p) +=! L(i, k) * X(k, p)\n}\n");
    RT_EXPECT_EQ(flops(op, bind(op, 1)), 2.0 * 7 * (50 * 51 / 2));
}

static void test_epilogue(void) {
    // Bias + GELU per token element: 0.5 * (h + b) * (1 + erf((h + b) * c)) is 7 operations.
    const rt_op *op =
        parse("size B = 6\nsize F = 11\n"
              "def g(int32(B) len, float(b:B, len(b), F) H, float(F) bias1) -> (G) {\n"
              " G(b, i, n) = 0.5 * (H(b, i, n) + bias1(n)) * (1 + erf((H(b, i, n) + bias1(n)) * "
              "0.70710678))\n}\n");
    rt_bindings *b = bind(op, 2);
    RT_EXPECT_EQ(flops(op, b), 7.0 * sum_len(b, 6, 1) * 11);
    // A GEMM and its fused epilogue, each statement with its own operations per point.
    const rt_op *ffn = parse(
        "size B = 6\ndef f(int32(B) len, float(b:B, len(b), 13) X, float(13, 17) W, float(17) "
        "bias) -> (Y) {\n t(b, i, n) +=! X(b, i, k) * W(k, n)\n"
        " Y(b, i, n) = max(t(b, i, n) + bias(n), 0)\n}\n");
    rt_bindings *fb = bind(ffn, 5);
    RT_EXPECT_EQ(flops(ffn, fb), sum_len(fb, 6, 1) * 17 * (2.0 * 13 + 2.0));
}

static void test_dense(void) {
    // A dense GEMM: 2 M N K, what the plan's FLOPs were.
    const rt_op *op = parse("def mm(float(64, 32) A, float(32, 48) B) -> (C) {\n"
                            " C(i, j) +=! A(i, k) * B(k, j)\n}\n");
    RT_EXPECT_EQ(flops(op, bind(op, 1)), 2.0 * 64 * 48 * 32);
    // Softmax's four statements: max, exp(x - m) (2), sum, divide; a copy counts its store.
    const rt_op *sm = parse("def softmax(float(40, 24) X) -> (Y) {\n"
                            " mx(n) max=! X(n, d)\n e(n, d) = exp(X(n, d) - mx(n))\n"
                            " s(n) +=! e(n, d)\n Y(n, d) = e(n, d) / s(n)\n}\n");
    RT_EXPECT_EQ(flops(sm, bind(sm, 1)), 40.0 * 24 * (1 + 2 + 1 + 1));
    const rt_op *cp = parse("def cp(float(9, 8) X) -> (Y) {\n Y(i, j) = X(i, j)\n}\n");
    RT_EXPECT_EQ(flops(cp, bind(cp, 1)), 9.0 * 8);
    // 4096^3 is counted, not iterated, and no tensor's data is laid out for it.
    const rt_op *big = parse("def mm(float(4096, 4096) A, float(4096, 4096) B) -> (C) {\n"
                             " C(i, j) +=! A(i, k) * B(k, j)\n}\n");
    rt_bindings *bb = bind(big, 1);
    RT_EXPECT_EQ(flops(big, bb), 2.0 * 4096 * 4096 * 4096);
    RT_EXPECT(bb && !bb->tensors[0].laid_out && !bb->prepared);
}

static void test_tree(void) {
    // Leaves copy a row (one operation per point); inner nodes: tanh once per (n, i) of the
    // implicit sum over j of (Wl h + Wr h) / sqrt(H), per j two multiplies, an add, a divide, a
    // sqrt and the sum's add (the parser sums the whole argument of tanh).
    const rt_op *op =
        parse("size V = 10\nsize H = 6\n"
              "def t(tree(N, 2) T, int32(N) word, float(V, H) Emb, float(H, H) Wl, float(H, H) Wr)"
              " -> (float(N, H) h) {\n"
              " h(n, i) = Emb(word(n), i) where leaf(n)\n"
              " h(n, i) = tanh((Wl(i, j) * h(T.child(n, 0), j) + Wr(i, j) * h(T.child(n, 1), j)) "
              "/ sqrt(H)) where !leaf(n)\n}\n");
    rt_bindings *b = bind(op, 7);
    double f = flops(op, b);
    const rt_tree_data *t = b ? b->trees[0] : NULL;
    int32_t leaves = 0;
    for (int32_t n = 0; t && n < t->n_nodes; n++)
        leaves += t->n_children[n] == 0;
    RT_EXPECT(t && leaves > 0 && leaves < t->n_nodes);
    if (t)
        RT_EXPECT_EQ(f, 6.0 * leaves + 6.0 * (t->n_nodes - leaves) * (1 + 6 * 6));
}

int main(void) {
    arena = rt_arena_new(1 << 20);
    test_ragged_rows();
    test_qkt();
    test_triangular();
    test_epilogue();
    test_dense();
    test_tree();
    rt_arena_free(arena);
    return rt_test_finish("test-flops");
}
