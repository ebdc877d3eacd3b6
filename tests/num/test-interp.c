// test-interp.c: the reference interpreter against hand-computed results. Small specs are
// parsed from strings, bound to hand-chosen inputs (and lengths, trees) and run; the outputs
// are checked element by element. Covers dense ops (matmul, conv with padding and stride,
// pooling, softmax, reduce_mean, relu), ragged ones (packed storage with a zero length, the
// triangular trmm, ragged softmax), recursion over a tree (TreeRNN), extents 1 and primes,
// integer floor division, gathers out of range, the seeded generator and the comparison helper.
#include "interp.h"
#include "compare.h"
#include "test.h"

static rt_arena *arena;

static rt_op *parse_set(const char *text, const rt_size_binding *set, int32_t n_set) {
    rt_err err = {0};
    rt_op *op = NULL;
    if (rt_spec_parse(arena, text, "t.spec", set, n_set, &op, &err) != RT_OK) {
        char line[1024];
        rt_err_format(&err, "test-interp", true, line, sizeof line);
        fprintf(stderr, "parse failed: %s\n", line);
        RT_EXPECT(!"spec parses");
        return NULL;
    }
    return op;
}

static rt_op *parse(const char *text) {
    return parse_set(text, NULL, 0);
}

static rt_bindings *bind(rt_op *op, uint64_t seed) {
    rt_err err = {0};
    rt_bindings *b = NULL;
    RT_EXPECT_EQ(rt_bindings_new(arena, op, seed, &b, &err), RT_OK);
    return b;
}

static void set_data(rt_bindings *b, const char *name, const double *v, int64_t n) {
    rt_err err = {0};
    rt_status st = rt_bindings_set_data(b, name, v, n, &err);
    if (st != RT_OK)
        fprintf(stderr, "set_data %s: %s\n", name, err.msg);
    RT_EXPECT_EQ(st, RT_OK);
}

static void set_lengths(rt_bindings *b, const char *name, const int32_t *v, int64_t n) {
    rt_err err = {0};
    rt_status st = rt_bindings_set_lengths(b, name, v, n, &err);
    if (st != RT_OK)
        fprintf(stderr, "set_lengths %s: %s\n", name, err.msg);
    RT_EXPECT_EQ(st, RT_OK);
}

static bool run(rt_op *op, rt_bindings *b) {
    rt_err err = {0};
    rt_status st = rt_interp_run(op, b, &err);
    if (st != RT_OK) {
        char line[1024];
        rt_err_format(&err, "test-interp", true, line, sizeof line);
        fprintf(stderr, "run failed: %s\n", line);
    }
    RT_EXPECT_EQ(st, RT_OK);
    return st == RT_OK;
}

// Checks the n stored values of tensor name against want.
static void expect_data(rt_bindings *b, const char *name, const double *want, int64_t n,
                        double tol) {
    rt_tensor_data *d = rt_bindings_data(b, name);
    RT_EXPECT(d != NULL);
    if (!d)
        return;
    RT_EXPECT_EQ(d->layout.elems, n);
    if (d->layout.elems != n)
        return;
    for (int64_t i = 0; i < n; i++) {
        if (!(fabs(d->data[i] - want[i]) <= tol))
            fprintf(stderr, "  %s[%lld]: got %.9g, want %.9g\n", name, (long long)i, d->data[i],
                    want[i]);
        RT_EXPECT_NEAR(d->data[i], want[i], tol);
    }
}

#define COUNT(a) ((int64_t)(sizeof(a) / sizeof((a)[0])))

static void test_matmul(void) {
    rt_op *op = parse("size M = 2\nsize N = 2\nsize K = 3\n"
                      "def matmul(float(M, K) A, float(K, N) B) -> (C) {\n"
                      "    C(m, n) +=! A(m, k) * B(k, n)\n"
                      "}\n");
    if (!op)
        return;
    rt_bindings *b = bind(op, 1);
    const double a[] = {1, 2, 3, 4, 5, 6}, bb[] = {7, 8, 9, 10, 11, 12};
    set_data(b, "A", a, 6);
    set_data(b, "B", bb, 6);
    if (!run(op, b))
        return;
    const double c[] = {58, 64, 139, 154};
    expect_data(b, "C", c, 4, 0.0);
}

// '+=' accumulates into the caller's values; size 1 everywhere.
static void test_accumulate_size1(void) {
    rt_op *op = parse("def acc(float(1, 1) A, float(1, 1) B) -> (float(1, 1) C) {\n"
                      "    C(m, n) += A(m, k) * B(k, n)\n"
                      "}\n");
    if (!op)
        return;
    rt_bindings *b = bind(op, 1);
    const double a[] = {3}, bb[] = {-2}, c0[] = {10};
    set_data(b, "A", a, 1);
    set_data(b, "B", bb, 1);
    set_data(b, "C", c0, 1);
    if (!run(op, b))
        return;
    const double c[] = {4};
    expect_data(b, "C", c, 1, 0.0);
}

// Prime extents 7 x 5 x 3 against a direct triple loop.
static void test_matmul_primes(void) {
    rt_op *op = parse("def mm(float(7, 3) A, float(3, 5) B) -> (C) {\n"
                      "    C(m, n) +=! A(m, k) * B(k, n)\n"
                      "}\n");
    if (!op)
        return;
    rt_bindings *b = bind(op, 1);
    double a[21], bb[15], c[35];
    for (int m = 0; m < 7; m++)
        for (int k = 0; k < 3; k++)
            a[m * 3 + k] = m - k;
    for (int k = 0; k < 3; k++)
        for (int n = 0; n < 5; n++)
            bb[k * 5 + n] = k + 2 * n;
    for (int m = 0; m < 7; m++)
        for (int n = 0; n < 5; n++) {
            c[m * 5 + n] = 0;
            for (int k = 0; k < 3; k++)
                c[m * 5 + n] += (m - k) * (k + 2 * n);
        }
    set_data(b, "A", a, 21);
    set_data(b, "B", bb, 15);
    if (!run(op, b))
        return;
    expect_data(b, "C", c, 35, 0.0);
}

static void test_conv2d(void) {
    rt_op *op = parse("def conv2d(float(1, 1, 4, 4) I pad 0, float(1, 1, 3, 3) Wt)"
                      " -> (float(1, 1, 2, 2) O) {\n"
                      "    O(n, f, y, x) +=! I(n, c, 2*y + r - 1, 2*x + s - 1) * Wt(f, c, r, s)\n"
                      "}\n");
    if (!op)
        return;
    rt_bindings *b = bind(op, 1);
    double in[16], w[9];
    for (int i = 0; i < 16; i++)
        in[i] = i + 1;
    for (int i = 0; i < 9; i++)
        w[i] = i + 1;
    set_data(b, "I", in, 16);
    set_data(b, "Wt", w, 9);
    if (!run(op, b))
        return;
    // O[0][0] = 1*5 + 2*6 + 5*8 + 6*9; O[0][1] = (2,3,4).(4,5,6) + (6,7,8).(7,8,9);
    // O[1][0] = (5,6).(2,3) + (9,10).(5,6) + (13,14).(8,9); O[1][1] = full 3x3 window.
    const double o[] = {111, 217, 363, 573};
    expect_data(b, "O", o, 4, 0.0);
}

static void test_avgpool(void) {
    rt_op *op =
        parse("def avgpool(float(1, 1, 5, 5) I) -> (float(1, 1, 2, 2) O) {\n"
              "    O(n, c, y, x) +=! I(n, c, 2*y + r, 2*x + s) / 9   where r in 0:3, s in 0:3\n"
              "}\n");
    if (!op)
        return;
    rt_bindings *b = bind(op, 1);
    double in[25];
    for (int i = 0; i < 25; i++)
        in[i] = i; // I[h][w] = 5h + w: a window's mean is its centre
    set_data(b, "I", in, 25);
    if (!run(op, b))
        return;
    const double o[] = {6, 8, 16, 18};
    expect_data(b, "O", o, 4, 1e-6);
}

static void test_softmax(void) {
    rt_op *op = parse("def softmax(float(2, 3) X) -> (Y) {\n"
                      "    mx(n)   max=! X(n, d)\n"
                      "    e(n, d) = exp(X(n, d) - mx(n))\n"
                      "    s(n)    +=! e(n, d)\n"
                      "    Y(n, d) = e(n, d) / s(n)\n"
                      "}\n");
    if (!op)
        return;
    rt_bindings *b = bind(op, 1);
    const double x[] = {1, 2, 3, -7, -7, -7};
    set_data(b, "X", x, 6);
    if (!run(op, b))
        return;
    // Row 0: (e^-2, e^-1, 1) / (1 + e^-1 + e^-2); row 1: uniform.
    const double y[] = {
        0.09003057317038046, 0.24472847105479764, 0.6652409557748218, 1.0 / 3, 1.0 / 3, 1.0 / 3};
    expect_data(b, "Y", y, 6, 1e-6);
    const double mx[] = {3, -7}, s[] = {1.5032147244080551, 3};
    expect_data(b, "mx", mx, 2, 0.0);
    expect_data(b, "s", s, 2, 1e-6);
}

static void test_reduce_mean_relu(void) {
    rt_op *op = parse("def reduce_mean(float(2, 2, 4) I) -> (O) {\n"
                      "    O(b, r) +=! I(b, r, l) / 4\n"
                      "}\n");
    if (op) {
        rt_bindings *b = bind(op, 1);
        double in[16];
        for (int i = 0; i < 16; i++)
            in[i] = i * i;
        set_data(b, "I", in, 16);
        if (run(op, b)) {
            // mean of i^2 over i = 4r..4r+3
            const double o[] = {3.5, 31.5, 91.5, 183.5};
            expect_data(b, "O", o, 4, 1e-6);
        }
    }
    op = parse("def relu(float(1, 5) I) -> (O) {\n"
               "    O(n, c) = max(I(n, c), 0)\n"
               "}\n");
    if (op) {
        rt_bindings *b = bind(op, 1);
        const double in[] = {-1, 0.5, -0.25, 2, 0};
        set_data(b, "I", in, 5);
        if (run(op, b)) {
            const double o[] = {0, 0.5, 0, 2, 0};
            expect_data(b, "O", o, 5, 0.0);
        }
    }
}

// Packed ragged storage with lengths {2, 0, 3}: rows of X and Y follow one another.
static void test_ragged_proj(void) {
    rt_op *op = parse("size B = 3\n"
                      "def proj(int32(B) len, float(b:B, len(b), 2) X, float(2, 2) Wt) -> (Y) {\n"
                      "    Y(b, i, n) +=! X(b, i, k) * Wt(k, n)\n"
                      "}\n");
    if (!op)
        return;
    rt_bindings *b = bind(op, 1);
    const int32_t len[] = {2, 0, 3};
    set_lengths(b, "len", len, 3);
    const double x[] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10}, w[] = {1, 0, 1, 1};
    set_data(b, "X", x, 10);
    set_data(b, "Wt", w, 4);
    if (!run(op, b))
        return;
    // Y row = (x0 + x1, x1)
    const double y[] = {3, 2, 7, 4, 11, 6, 15, 8, 19, 10};
    expect_data(b, "Y", y, 10, 0.0);
    int32_t xi = rt_op_tensor_index(op, "X");
    RT_EXPECT_EQ(rt_tensor_elems(b, xi), 10);
    int64_t off = -1;
    const int64_t at[] = {2, 1, 0}, in_empty[] = {1, 0, 0}, past[] = {0, 2, 0};
    RT_EXPECT(rt_tensor_offset(b, xi, at, &off));
    RT_EXPECT_EQ(off, 6);
    RT_EXPECT(!rt_tensor_offset(b, xi, in_empty, &off));
    RT_EXPECT(!rt_tensor_offset(b, xi, past, &off));
    const rt_layout *l = &rt_bindings_data(b, "X")->layout;
    RT_EXPECT_EQ(l->n_rows[1], 3);
    RT_EXPECT_EQ(l->n_rows[2], 5);
    RT_EXPECT(l->start[1] != NULL && l->start[0] == NULL && l->start[2] == NULL);
    if (l->start[1]) {
        RT_EXPECT_EQ(l->start[1][0], 0);
        RT_EXPECT_EQ(l->start[1][1], 2);
        RT_EXPECT_EQ(l->start[1][2], 2);
        RT_EXPECT_EQ(l->start[1][3], 5);
    }
}

// Lower-triangular L stored packed: k runs to the diagonal.
static void test_trmm(void) {
    rt_op *op = parse("size N = 3\nsize P = 2\n"
                      "def trmm(float(i:N, i + 1) L, float(N, P) X) -> (Y) {\n"
                      "    Y(i, p) +=! L(i, k) * X(k, p)\n"
                      "}\n");
    if (!op)
        return;
    rt_bindings *b = bind(op, 1);
    const double l[] = {1, 2, 3, 4, 5, 6}, x[] = {1, 2, 3, 4, 5, 6};
    set_data(b, "L", l, 6);
    set_data(b, "X", x, 6);
    if (!run(op, b))
        return;
    // Y0 = 1*(1,2); Y1 = 2*(1,2) + 3*(3,4); Y2 = 4*(1,2) + 5*(3,4) + 6*(5,6)
    const double y[] = {1, 2, 11, 16, 49, 64};
    expect_data(b, "Y", y, 6, 0.0);
}

// Two-level ragged storage (i and j both run to len(b)), with an empty batch entry.
static void test_ragged_softmax(void) {
    rt_op *op = parse("size B = 3\nsize H = 1\n"
                      "def ragged_softmax(int32(B) len, float(b:B, H, i:len(b), len(b)) S)"
                      " -> (P) {\n"
                      "    mx(b, h, i)    max=! S(b, h, i, j)\n"
                      "    e(b, h, i, j)  = exp(S(b, h, i, j) - mx(b, h, i))\n"
                      "    z(b, h, i)     +=! e(b, h, i, j)\n"
                      "    P(b, h, i, j)  = e(b, h, i, j) / z(b, h, i)\n"
                      "}\n");
    if (!op)
        return;
    rt_bindings *b = bind(op, 1);
    const int32_t len[] = {2, 0, 1};
    set_lengths(b, "len", len, 3);
    const double s[] = {0, 1.0986122886681098 /* ln 3 */, 1, 1, 5};
    set_data(b, "S", s, 5);
    if (!run(op, b))
        return;
    const double p[] = {0.25, 0.75, 0.5, 0.5, 1};
    expect_data(b, "P", p, 5, 1e-6);
    const double z[] = {4.0 / 3, 2, 1}; // e row 0 = (1/3, 1)
    expect_data(b, "z", z, 3, 1e-6);
}

static const char *treernn_spec =
    "size V = 4\nsize H = 2\n"
    "def treernn(tree(N, 2) T, int32(N) word, float(V, H) Emb, float(H, H) Wl, float(H, H) Wr)"
    " -> (float(N, H) h) {\n"
    "    h(n, i) = Emb(word(n), i)                                     where leaf(n)\n"
    "    h(n, i) = tanh(Wl(i, j) * h(T.child(n, 0), j)\n"
    "                 + Wr(i, j) * h(T.child(n, 1), j))                where !leaf(n)\n"
    "}\n";

static bool bind_tree(rt_bindings *b, const char *text) {
    rt_err err = {0};
    rt_tree_data *t = NULL;
    RT_EXPECT_EQ(rt_tree_parse(arena, text, "t.tree", 2, &t, &err), RT_OK);
    if (!t)
        return false;
    rt_status st = rt_bindings_set_tree(b, "T", t, &err);
    if (st != RT_OK)
        fprintf(stderr, "set_tree: %s\n", err.msg);
    RT_EXPECT_EQ(st, RT_OK);
    return st == RT_OK;
}

static void test_treernn(void) {
    rt_op *op = parse(treernn_spec);
    if (!op)
        return;
    const double emb[] = {0, 0, 0.5, -0.5, 1, 2, 0.1, 0.2};
    const double wl[] = {1, 0, 0, 1}, wr[] = {0.5, 0, 0, -1};

    // Root 0 over leaves 1 and 2: h1 = Emb[1], h2 = Emb[2],
    // h0 = tanh(Wl h1 + Wr h2) = tanh(0.5 + 0.5, -0.5 - 2).
    rt_bindings *b = bind(op, 1);
    if (!bind_tree(b, "0 1 2\n1 -\n2 -\n"))
        return;
    const double word[] = {3, 1, 2};
    set_data(b, "word", word, 3);
    set_data(b, "Emb", emb, 8);
    set_data(b, "Wl", wl, 4);
    set_data(b, "Wr", wr, 4);
    if (run(op, b)) {
        const double h[] = {0.7615941559557649, -0.9866142981514303, 0.5, -0.5, 1, 2};
        expect_data(b, "h", h, 6, 1e-6);
    }

    // A missing child reads as 0: h0 = tanh(Wl h1).
    b = bind(op, 1);
    if (!bind_tree(b, "0 1\n1\n"))
        return;
    const double word2[] = {0, 1};
    set_data(b, "word", word2, 2);
    set_data(b, "Emb", emb, 8);
    set_data(b, "Wl", wl, 4);
    set_data(b, "Wr", wr, 4);
    if (run(op, b)) {
        const double h[] = {0.46211715726000974, -0.46211715726000974, 0.5, -0.5};
        expect_data(b, "h", h, 4, 1e-6);
    }
}

// Three levels with H = 1, children listed after their parent in the file: the level order
// must still compute children first. h1 = tanh(h3 + h4), h0 = tanh(h1 + h2).
static void test_treernn_levels(void) {
    const rt_size_binding set[] = {{"H", 1}};
    rt_op *op = parse_set(treernn_spec, set, 1);
    if (!op)
        return;
    rt_bindings *b = bind(op, 1);
    if (!bind_tree(b, "0 1 2\n1 3 4\n2\n3\n4\n"))
        return;
    const double word[] = {0, 0, 1, 2, 3}, emb[] = {0.1, 0.2, 0.3, 0.4}, one[] = {1};
    set_data(b, "word", word, 5);
    set_data(b, "Emb", emb, 4);
    set_data(b, "Wl", one, 1);
    set_data(b, "Wr", one, 1);
    if (!run(op, b))
        return;
    const double h[] = {0.6664715214874796, 0.6043677771171636, 0.2, 0.3, 0.4};
    expect_data(b, "h", h, 5, 1e-6);
}

// A gather index past the table is an error at the read, not a crash.
static void test_gather_out_of_range(void) {
    rt_op *op = parse(treernn_spec);
    if (!op)
        return;
    rt_bindings *b = bind(op, 1);
    if (!bind_tree(b, "0 1 2\n1\n2\n"))
        return;
    const double word[] = {0, 1, 7};
    set_data(b, "word", word, 3);
    rt_err err = {0};
    RT_EXPECT_EQ(rt_interp_run(op, b, &err), RT_ERR_SPEC);
    RT_EXPECT_STR(err.msg, "Emb(word(n), i) reads row 7 outside Emb's extent 4");
    RT_EXPECT_STR(err.where.file, "t.spec");
    RT_EXPECT_EQ(err.where.line, 4);
    RT_EXPECT_EQ(err.where.col, 15);
}

// Integer floor division and modulo (negative numerators round down), comparisons and ?:.
static void test_int_and_cond(void) {
    // 'pad 0' only because the checker's bound of i / 2 is conservative: every read is inside.
    rt_op *op = parse("def fd(float(4) I pad 0, float(8) Z) -> (O) {\n"
                      "    O(i) = I(i / 2) + (i - 3) / 2 + 10 * (i % 3)"
                      " + (Z(i) > 0 ? Z(i) : 0.5 * Z(i))\n"
                      "}\n");
    if (!op)
        return;
    rt_bindings *b = bind(op, 1);
    const double in[] = {100, 200, 300, 400}, z[] = {1, -2, 0, 4, -8, 0.5, 2, -1};
    set_data(b, "I", in, 4);
    set_data(b, "Z", z, 8);
    if (!run(op, b))
        return;
    double o[8];
    const int floor_half[] = {-2, -1, -1, 0, 0, 1, 1, 2}; // floor((i - 3) / 2)
    for (int i = 0; i < 8; i++)
        o[i] = in[i / 2] + floor_half[i] + 10 * (i % 3) + (z[i] > 0 ? z[i] : 0.5 * z[i]);
    expect_data(b, "O", o, 8, 0.0);
}

// Product and min reductions, and rounding of stores to half precision.
static void test_other_reductions(void) {
    rt_op *op = parse("def red(float(2, 3) X) -> (P, Q) {\n"
                      "    P(n) *=! X(n, d)\n"
                      "    Q(n) min=! X(n, d)\n"
                      "}\n");
    if (op) {
        rt_bindings *b = bind(op, 1);
        const double x[] = {1, -2, 3, 0.5, 4, 0.25};
        set_data(b, "X", x, 6);
        if (run(op, b)) {
            const double p[] = {-6, 0.5}, q[] = {-2, 0.25};
            expect_data(b, "P", p, 2, 0.0);
            expect_data(b, "Q", q, 2, 0.0);
        }
    }
    op = parse("def h(half(3) X) -> (half(3) Y) {\n"
               "    Y(i) = X(i) * 3\n"
               "}\n");
    if (op) {
        rt_bindings *b = bind(op, 1);
        // 1 + 2^-10 is a half; times 3 = 3 + 3*2^-10 rounds to 3 + 2^-8 (ulp at 2..4 is 2^-9,
        // 3*2^-10 = 1.5 ulp, ties to even). 0.1 is stored as the half 1638 * 2^-14; times 3 =
        // 1228.5 * 2^-12 (ulp at 0.25..0.5) ties to even 1228 * 2^-12 = 0.2998046875.
        const double x[] = {1 + 0x1p-10, 0.1, 2048};
        set_data(b, "X", x, 3);
        if (run(op, b)) {
            const double y[] = {3 + 0x1p-8, 0.2998046875, 6144};
            expect_data(b, "Y", y, 3, 0.0);
        }
    }
}

// The seeded generator: reproducible, within the documented ranges, gathers inside the table.
static void test_generator(void) {
    rt_op *op = parse(treernn_spec);
    rt_op *op2 = parse("size B = 5\n"
                       "def proj(int32(B) len, float(b:B, len(b), 3) X, float(3, 3) Wt) -> (Y) {\n"
                       "    Y(b, i, n) +=! X(b, i, k) * Wt(k, n)\n"
                       "}\n");
    if (!op || !op2)
        return;
    rt_err err = {0};
    rt_bindings *a = bind(op, 42), *b = bind(op, 42), *c = bind(op, 43);
    RT_EXPECT_EQ(rt_bindings_prepare(a, &err), RT_OK);
    RT_EXPECT_EQ(rt_bindings_prepare(b, &err), RT_OK);
    RT_EXPECT_EQ(rt_bindings_prepare(c, &err), RT_OK);
    RT_EXPECT_EQ(a->trees[0]->n_nodes, 15); // N unbound: the default
    rt_tensor_data *ea = rt_bindings_data(a, "Emb"), *eb = rt_bindings_data(b, "Emb"),
                   *ec = rt_bindings_data(c, "Emb"), *wa = rt_bindings_data(a, "word");
    RT_EXPECT_EQ(ea->layout.elems, 8);
    RT_EXPECT(memcmp(ea->data, eb->data, 8 * sizeof(double)) == 0);
    RT_EXPECT(memcmp(ea->data, ec->data, 8 * sizeof(double)) != 0);
    int bad = 0;
    for (int i = 0; i < 8; i++)
        bad += !(ea->data[i] >= -1 && ea->data[i] < 1) || ea->data[i] != (double)(float)ea->data[i];
    for (int64_t i = 0; i < wa->layout.elems; i++)
        bad += !(wa->data[i] >= 0 && wa->data[i] < 4 && wa->data[i] == floor(wa->data[i]));
    RT_EXPECT_EQ(bad, 0);
    RT_EXPECT_EQ(wa->layout.elems, 15);
    RT_EXPECT(run(op, a));

    // Lengths in [0, max_length], and the layout follows them.
    rt_bindings *r = bind(op2, 5);
    r->max_length = 3;
    RT_EXPECT_EQ(rt_bindings_prepare(r, &err), RT_OK);
    rt_tensor_data *len = rt_bindings_data(r, "len"), *x = rt_bindings_data(r, "X");
    int64_t total = 0;
    for (int i = 0; i < 5; i++) {
        RT_EXPECT(len->data[i] >= 0 && len->data[i] <= 3);
        total += (int64_t)len->data[i];
    }
    RT_EXPECT_EQ(x->layout.elems, total * 3);
    RT_EXPECT(run(op2, r));

    // Lengths from a histogram file, sampled with the bindings' seed.
    rt_lengths_file *f = NULL;
    RT_EXPECT_EQ(rt_lengths_parse(arena, "4 1\n9 1\n", "h.hist", &f, &err), RT_OK);
    rt_bindings *h1 = bind(op2, 5), *h2 = bind(op2, 5);
    RT_EXPECT_EQ(rt_bindings_set_lengths_file(h1, "len", f, 0, &err), RT_OK);
    RT_EXPECT_EQ(rt_bindings_set_lengths_file(h2, "len", f, 5, &err), RT_OK);
    RT_EXPECT_EQ(rt_bindings_prepare(h1, &err), RT_OK);
    RT_EXPECT_EQ(rt_bindings_prepare(h2, &err), RT_OK);
    len = rt_bindings_data(h1, "len");
    for (int i = 0; i < 5; i++)
        RT_EXPECT(len->data[i] == 4 || len->data[i] == 9);
    RT_EXPECT(memcmp(len->data, rt_bindings_data(h2, "len")->data, 5 * sizeof(double)) == 0);
    rt_bindings *h3 = bind(op2, 5);
    RT_EXPECT_EQ(rt_bindings_set_lengths_file(h3, "len", f, 6, &err), RT_ERR_USAGE);

    // Binding errors.
    rt_err_clear(&err);
    const int32_t neg[] = {1, -1, 0, 0, 0};
    rt_bindings *e = bind(op2, 5);
    RT_EXPECT_EQ(rt_bindings_set_lengths(e, "len", neg, 5, &err), RT_ERR_SPEC);
    rt_err_clear(&err);
    RT_EXPECT_EQ(rt_bindings_set_lengths(e, "len", neg, 2, &err), RT_ERR_SPEC);
    RT_EXPECT_STR(err.msg, "expected 5 lengths for 'len' (got 2)");
    rt_err_clear(&err);
    RT_EXPECT_EQ(rt_bindings_set_lengths(e, "X", neg, 5, &err), RT_ERR_USAGE);
    rt_err_clear(&err);
    const double one[] = {1};
    RT_EXPECT_EQ(rt_bindings_set_data(e, "Wt", one, 1, &err), RT_ERR_USAGE);
    RT_EXPECT_STR(err.msg, "expected 9 values for 'Wt' (got 1)");
    rt_err_clear(&err);
    RT_EXPECT_EQ(rt_bindings_set_data(e, "nope", one, 1, &err), RT_ERR_USAGE);
}

static void test_compare(void) {
    const double ref[] = {1, -2, 0, 4}, got[] = {1, -2.5, 1e-9, 4};
    rt_compare_result r;
    rt_compare_data(ref, got, 4, &r);
    RT_EXPECT_EQ(r.n_elems, 4);
    RT_EXPECT_NEAR(r.max_abs_err, 0.5, 1e-15);
    RT_EXPECT_EQ(r.worst_index, 1);
    RT_EXPECT_NEAR(r.max_rel_err, 0.25, 1e-15); // 1e-9 / max(0, 1e-6) = 1e-3 is smaller
    RT_EXPECT_NEAR(r.nmse, (0.25 + 1e-18) / 21.0, 1e-15);
    RT_EXPECT_EQ(r.n_nonfinite, 0);

    const double same[] = {1, -2, 0, 4};
    rt_compare_data(ref, same, 4, &r);
    RT_EXPECT(r.max_abs_err == 0 && r.nmse == 0 && r.worst_index == -1);

    const double nref[] = {(double)NAN, HUGE_VAL, 1}, ngot[] = {(double)NAN, HUGE_VAL, (double)NAN};
    rt_compare_data(nref, ngot, 3, &r);
    RT_EXPECT_EQ(r.n_nonfinite, 1);
    RT_EXPECT_EQ(r.worst_index, 2);
    RT_EXPECT(isinf(r.max_abs_err) && isinf(r.nmse));
}

// The one acceptance rule: both error bounds must hold, a NaN never passes, integers are exact.
static void test_accept(void) {
    enum { N = 100000 };
    double *ref = malloc(N * sizeof *ref), *got = malloc(N * sizeof *got);
    if (!ref || !got) {
        RT_EXPECT(0);
        free(ref);
        free(got);
        return;
    }
    for (int i = 0; i < N; i++)
        ref[i] = got[i] = (double)(i % 17) - 8.0; // max |ref| = 8
    rt_compare_result r;
    rt_compare_data(ref, got, N, &r);
    RT_EXPECT(rt_compare_accept(&r, RT_DTYPE_F32) && rt_compare_accept(&r, RT_DTYPE_I32));
    RT_EXPECT_NEAR(r.ref_max_abs, 8.0, 0);
    // One badly wrong element of 100000: the NMSE stays below its bound (0.0025 / 2.4e6 = 1e-9),
    // the max error does not. An NMSE-or-max-error rule would accept it.
    got[777] += 0.05;
    rt_compare_data(ref, got, N, &r);
    RT_EXPECT(r.nmse <= rt_tolerance_of(RT_DTYPE_F32)->nmse_tol);
    RT_EXPECT(!rt_compare_accept(&r, RT_DTYPE_F32));
    // Every element off by 8e-4 (within 1e-3 x (1 + 8)): the max error passes, the NMSE
    // (6.4e-7 / 24 = 2.7e-8) not.
    for (int i = 0; i < N; i++)
        got[i] = ref[i] + 8e-4;
    rt_compare_data(ref, got, N, &r);
    RT_EXPECT(r.max_abs_err <= rt_tolerance_of(RT_DTYPE_F32)->abs_tol * (1 + r.ref_max_abs));
    RT_EXPECT(!rt_compare_accept(&r, RT_DTYPE_F32));
    // Within float rounding: accepted as f32, refused as f64 and as an integer type.
    for (int i = 0; i < N; i++)
        got[i] = ref[i] * (1 + 1e-7);
    rt_compare_data(ref, got, N, &r);
    RT_EXPECT(rt_compare_accept(&r, RT_DTYPE_F32));
    RT_EXPECT(!rt_compare_accept(&r, RT_DTYPE_F64) && !rt_compare_accept(&r, RT_DTYPE_I32));
    // A single NaN (or an all-NaN output) is refused whatever the other elements are.
    memcpy(got, ref, N * sizeof *got);
    got[5] = (double)NAN;
    rt_compare_data(ref, got, N, &r);
    RT_EXPECT(!rt_compare_accept(&r, RT_DTYPE_F32));
    for (int i = 0; i < N; i++)
        got[i] = (double)NAN;
    rt_compare_data(ref, got, N, &r);
    RT_EXPECT(!rt_compare_accept(&r, RT_DTYPE_F32) && !rt_compare_accept(&r, RT_DTYPE_BF16));
    // Streaming gives the same measures as the array form.
    rt_compare_result s;
    rt_compare_begin(&s);
    for (int i = 0; i < N; i++)
        rt_compare_add(&s, ref[i], got[i]);
    rt_compare_end(&s);
    RT_EXPECT(s.n_elems == r.n_elems && s.n_nonfinite == r.n_nonfinite &&
              s.worst_index == r.worst_index);
    free(ref);
    free(got);
}

// A 64^3 matmul on seeded inputs, checked with the random-vector identity C t = A (B t).
static void test_matmul_64(void) {
    rt_op *op = parse("def mm(float(64, 64) A, float(64, 64) B) -> (double(64, 64) C) {\n"
                      "    C(m, n) +=! A(m, k) * B(k, n)\n"
                      "}\n");
    if (!op)
        return;
    rt_bindings *b = bind(op, 9);
    if (!run(op, b))
        return;
    const double *A = rt_bindings_data(b, "A")->data, *B = rt_bindings_data(b, "B")->data;
    const double *C = rt_bindings_data(b, "C")->data;
    double t[64], bt[64], ct[64], abt[64];
    for (int i = 0; i < 64; i++)
        t[i] = (i % 7) - 3;
    for (int i = 0; i < 64; i++) {
        bt[i] = ct[i] = 0;
        for (int j = 0; j < 64; j++) {
            bt[i] += B[i * 64 + j] * t[j];
            ct[i] += C[i * 64 + j] * t[j];
        }
    }
    for (int i = 0; i < 64; i++) {
        abt[i] = 0;
        for (int j = 0; j < 64; j++)
            abt[i] += A[i * 64 + j] * bt[j];
    }
    rt_compare_result r;
    rt_compare_data(abt, ct, 64, &r);
    RT_EXPECT(r.max_abs_err < 1e-9);
}

// The CLI's one-call loaders: files bound by name, errors in the option form.
static void test_loaders(void) {
    rt_op *op = parse(treernn_spec);
    rt_op *op2 = parse("size B = 3\n"
                       "def proj(int32(B) len, float(b:B, len(b), 2) X, float(2, 2) Wt) -> (Y) {\n"
                       "    Y(b, i, n) +=! X(b, i, k) * Wt(k, n)\n"
                       "}\n");
    if (!op || !op2)
        return;
    rt_err err = {0};
    char line[1024];
    rt_bindings *b = bind(op2, 1);
    RT_EXPECT_EQ(rt_bindings_load_lengths(b, "len", "tests/data/lens-203.txt", 0, &err), RT_OK);
    RT_EXPECT(run(op2, b));
    RT_EXPECT_EQ(rt_bindings_data(b, "X")->layout.elems, 10);

    b = bind(op2, 1);
    RT_EXPECT_EQ(rt_bindings_load_lengths(b, "len", "tests/data/lens-bad.txt", 0, &err),
                 RT_ERR_SYNTAX);
    rt_err_format(&err, "rtgen", false, line, sizeof line);
    RT_EXPECT_STR(line, "rtgen: error: --lengths len=tests/data/lens-bad.txt:7: expected a "
                        "non-negative integer, got \"12a\"");
    rt_err_clear(&err);
    RT_EXPECT_EQ(rt_bindings_load_lengths(b, "nope", "tests/data/lens-203.txt", 0, &err),
                 RT_ERR_USAGE);
    RT_EXPECT_STR(err.msg, "--lengths nope=tests/data/lens-203.txt: 'nope' is not a length "
                           "tensor of proj");
    rt_err_clear(&err);
    RT_EXPECT_EQ(rt_bindings_load_lengths(b, "len", "tests/data/cola.hist", 4, &err), RT_ERR_USAGE);
    RT_EXPECT_STR(err.msg, "--lengths len=tests/data/cola.hist: --batch=4 does not match the 3 "
                           "entries of 'len'");

    b = bind(op, 1);
    rt_err_clear(&err);
    RT_EXPECT_EQ(rt_bindings_load_tree(b, "T", "tests/data/tree-small.tree", &err), RT_OK);
    RT_EXPECT_EQ(rt_bindings_data(b, "word")->layout.elems, 0); // laid out at prepare
    RT_EXPECT(run(op, b));
    RT_EXPECT_EQ(rt_bindings_data(b, "h")->layout.elems, 3 * 2);
    b = bind(op, 1);
    RT_EXPECT_EQ(rt_bindings_load_tree(b, "T", "tests/data/tree-cycle.tree", &err), RT_ERR_SYNTAX);
    rt_err_format(&err, "rtgen", false, line, sizeof line);
    RT_EXPECT_STR(line, "rtgen: error: --tree T=tests/data/tree-cycle.tree:4: child 1 of node 2 "
                        "closes a cycle");
}

// The --interpret summary, and integer division by zero as an error at the division.
static void test_summary_and_div0(void) {
    rt_op *op = parse("size M = 2\nsize N = 2\nsize K = 3\n"
                      "def matmul(float(M, K) A, float(K, N) B) -> (C) {\n"
                      "    C(m, n) +=! A(m, k) * B(k, n)\n"
                      "}\n");
    if (op) {
        rt_bindings *b = bind(op, 1);
        const double a[] = {1, 2, 3, 4, 5, 6}, bb[] = {7, 8, 9, 10, 11, 12};
        set_data(b, "A", a, 6);
        set_data(b, "B", bb, 6);
        if (run(op, b)) {
            rt_buf out;
            rt_buf_init(&out, arena);
            rt_bindings_print_outputs(b, &out);
            RT_EXPECT_STR(out.data,
                          "C float elems=4 sum=415 min=58 max=154 first: 58 64 139 154\n");
        }
    }
    op = parse("def d0(float(4) I) -> (O) {\n"
               "    O(i) = I(i) + 12 / (i - 2)\n"
               "}\n");
    if (op) {
        rt_bindings *b = bind(op, 1);
        rt_err err = {0};
        RT_EXPECT_EQ(rt_interp_run(op, b, &err), RT_ERR_SPEC);
        RT_EXPECT(strstr(err.msg, "integer division by zero") == err.msg);
        RT_EXPECT_EQ(err.where.line, 2);
        RT_EXPECT_EQ(err.where.col, 19);
    }
}

// Every allocation failure of binding, generation and interpretation comes back as
// RT_ERR_NOMEM, never as a crash (the arena fails from the n-th allocation on).
static void test_nomem(void) {
    rt_op *ops[2] = {parse(treernn_spec),
                     parse("size B = 3\nsize H = 2\n"
                           "def ragged_softmax(int32(B) len, float(b:B, H, i:len(b), len(b)) S)"
                           " -> (P) {\n"
                           "    mx(b, h, i)    max=! S(b, h, i, j)\n"
                           "    e(b, h, i, j)  = exp(S(b, h, i, j) - mx(b, h, i))\n"
                           "    z(b, h, i)     +=! e(b, h, i, j)\n"
                           "    P(b, h, i, j)  = e(b, h, i, j) / z(b, h, i)\n"
                           "}\n")};
    for (int k = 0; k < 2; k++) {
        if (!ops[k])
            continue;
        bool ok_seen = false;
        int bad = 0;
        for (long n = 0; n < 2000 && !ok_seen; n++) {
            rt_arena *a = rt_arena_new(1 << 10);
            rt_arena_fail_after(a, n);
            rt_err err = {0};
            rt_bindings *b = NULL;
            rt_status st = rt_bindings_new(a, ops[k], 1, &b, &err);
            if (st == RT_OK)
                st = rt_interp_run(ops[k], b, &err);
            bad += st != RT_OK && st != RT_ERR_NOMEM;
            ok_seen = st == RT_OK;
            rt_arena_free(a);
        }
        RT_EXPECT_EQ(bad, 0);
        RT_EXPECT(ok_seen);
    }
}

// The shipped examples at small sizes, on seeded inputs: every one runs, outputs are finite,
// masked_qkt (stored triangular) agrees with qkt where j <= i (same seed, so the same lengths
// and inputs), and vgemm
// (three different length tensors) agrees with a direct loop over its packed operands.
typedef struct example_case {
    const char *path;
    rt_size_binding set[8];
    int32_t n_set;
} example_case;

static rt_bindings *run_example(const example_case *c, uint64_t seed) {
    rt_err err = {0};
    rt_op *op = NULL;
    if (rt_spec_load(arena, c->path, c->set, c->n_set, &op, &err) != RT_OK) {
        fprintf(stderr, "%s: %s\n", c->path, err.msg);
        RT_EXPECT(!"example parses");
        return NULL;
    }
    rt_bindings *b = bind(op, seed);
    b->max_length = 5;
    if (!run(op, b))
        return NULL;
    int bad = 0;
    for (int32_t k = 0; k < op->n_outputs; k++) {
        const rt_tensor_data *d = &b->tensors[op->outputs[k]];
        for (int64_t i = 0; i < d->layout.elems; i++)
            bad += !isfinite(d->data[i]);
    }
    if (bad)
        fprintf(stderr, "%s: %d non-finite outputs\n", c->path, bad);
    RT_EXPECT_EQ(bad, 0);
    return b;
}

static double at(rt_bindings *b, const char *name, int64_t i0, int64_t i1, int64_t i2, int64_t i3) {
    int32_t t = rt_op_tensor_index(b->op, name);
    const int64_t idx[] = {i0, i1, i2, i3};
    int64_t off = 0;
    RT_EXPECT(t >= 0 && rt_tensor_offset(b, t, idx, &off));
    return t >= 0 ? b->tensors[t].data[off] : 0.0;
}

static void test_examples(void) {
    static const example_case cases[] = {
        {"examples/matmul.spec", {{"M", 5}, {"N", 3}, {"K", 7}}, 3},
        {"examples/conv2d.spec",
         {{"N", 1}, {"C", 2}, {"H", 7}, {"W", 7}, {"F", 3}, {"OH", 4}, {"OW", 4}},
         7},
        {"examples/trmm.spec", {{"N", 5}, {"P", 3}}, 2},
        {"examples/attn_v.spec", {{"B", 3}, {"H", 2}, {"D", 4}}, 3},
        {"examples/ragged_softmax.spec", {{"B", 3}, {"H", 2}}, 2},
        {"examples/treernn.spec", {{"V", 11}, {"H", 3}}, 2},
        {"examples/proj.spec", {{"B", 2}}, 1},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        run_example(&cases[i], 3);

    const example_case qkt = {"examples/qkt.spec", {{"B", 4}, {"H", 2}, {"D", 3}}, 3};
    const example_case masked = {"examples/masked_qkt.spec", {{"B", 4}, {"H", 2}, {"D", 3}}, 3};
    rt_bindings *q = run_example(&qkt, 11), *m = run_example(&masked, 11);
    if (q && m) {
        const rt_tensor_data *len = rt_bindings_data(q, "len");
        int bad = 0, checked = 0;
        for (int64_t b = 0; b < 4; b++)
            for (int64_t h = 0; h < 2; h++)
                for (int64_t i = 0; i < (int64_t)len->data[b]; i++)
                    for (int64_t j = 0; j < (int64_t)len->data[b]; j++) {
                        // masked S is stored packed-triangular: j runs to i + 1
                        const int64_t idx[] = {b, h, i, j};
                        int64_t off;
                        if (j > i) {
                            bad += rt_tensor_offset(m, m->op->outputs[0], idx, &off);
                            continue;
                        }
                        bad += at(m, "S", b, h, i, j) != at(q, "S", b, h, i, j);
                        checked++;
                    }
        RT_EXPECT_EQ(bad, 0);
        RT_EXPECT(checked > 0);
    }

    const example_case vg = {"examples/vgemm.spec", {{"B", 4}}, 1};
    rt_bindings *v = run_example(&vg, 5);
    if (v) {
        const double *ml = rt_bindings_data(v, "Ml")->data, *nl = rt_bindings_data(v, "Nl")->data,
                     *kl = rt_bindings_data(v, "Kl")->data;
        int bad = 0;
        int64_t elems = 0;
        for (int64_t b = 0; b < 4; b++)
            for (int64_t i = 0; i < (int64_t)ml[b]; i++)
                for (int64_t j = 0; j < (int64_t)nl[b]; j++) {
                    double want = 0;
                    for (int64_t k = 0; k < (int64_t)kl[b]; k++)
                        want += at(v, "A", b, i, k, 0) * at(v, "Bt", b, k, j, 0);
                    bad += fabs(at(v, "C", b, i, j, 0) - want) > 1e-5;
                    elems++;
                }
        RT_EXPECT_EQ(bad, 0);
        RT_EXPECT_EQ(rt_bindings_data(v, "C")->layout.elems, elems);
    }
}

int main(void) {
    arena = rt_arena_new(1 << 20);
    test_matmul();
    test_accumulate_size1();
    test_matmul_primes();
    test_conv2d();
    test_avgpool();
    test_softmax();
    test_reduce_mean_relu();
    test_ragged_proj();
    test_trmm();
    test_ragged_softmax();
    test_treernn();
    test_treernn_levels();
    test_gather_out_of_range();
    test_int_and_cond();
    test_other_reductions();
    test_generator();
    test_compare();
    test_accept();
    test_matmul_64();
    test_examples();
    test_loaders();
    test_summary_and_div0();
    test_nomem();
    rt_arena_free(arena);
    return rt_test_finish("test-interp");
}
