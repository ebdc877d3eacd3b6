// test-vcheck.c: the random-vector check of a contraction (src/ref/vcheck.h) against the
// interpreter. For each covered shape -- plain, transposed operands and output, batched with the
// batch axis in every position, ragged M, N and K from length tensors with lengths 0, 1 and
// primes, triangular (an affine K range), '+=' onto start values, '=' with an implicit sum and a
// scale, extents 0 and 1 -- the interpreter's output (as double and as float) is accepted, and
// one element corrupted, set to NaN, left unwritten or transposed with another is rejected.
// Shapes it does not cover (an epilogue, a mask tying N to M, a gather) are refused with a
// reason, and the cost figures and the choice between the checks are those of the op.
#include "interp.h"
#include "vcheck.h"
#include "test.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static rt_arena *arena;

static rt_op *parse(const char *text) {
    rt_err err = {0};
    rt_op *op = NULL;
    if (rt_spec_parse(arena, text, "t.spec", NULL, 0, &op, &err) != RT_OK) {
        fprintf(stderr, "parse failed: %s\n", err.msg);
        RT_EXPECT(!"spec parses");
        return NULL;
    }
    return op;
}

typedef struct vc_case {
    const char *name;
    const char *spec;
    const char *lengths; // NAME or NULL
    int32_t lens[8];
    int32_t n_lens;
} vc_case;

// The check of out (double and float copies) with one element changed by how (0: none).
static bool check(const rt_vcheck *vc, const double *out, int64_t n, int how, int64_t e,
                  bool as_float, char *why, size_t size) {
    double *d = malloc((size_t)(n > 0 ? n : 1) * sizeof *d);
    float *f = malloc((size_t)(n > 0 ? n : 1) * sizeof *f);
    memcpy(d, out, (size_t)n * sizeof *d);
    double big = 1;
    for (int64_t i = 0; i < n; i++)
        big = isfinite(d[i]) ? fmax(big, 1 + fabs(d[i])) : big;
    if (how == 1)
        d[e] += big;
    else if (how == 2)
        d[e] = NAN;
    else if (how == 3) {
        // a transposed pair: e and the element after it swapped (when they differ)
        double t = d[e];
        d[e] = d[e + 1];
        d[e + 1] = t;
    }
    for (int64_t i = 0; i < n; i++)
        f[i] = (float)d[i];
    rt_vcheck_result r;
    rt_err err = {0};
    RT_EXPECT_EQ(rt_vcheck_output(vc, as_float ? (const void *)f : d,
                                  as_float ? RT_DTYPE_F32 : RT_DTYPE_F64, &r, &err),
                 RT_OK);
    rt_vcheck_explain(vc, &r, why, size);
    free(d);
    free(f);
    return r.accepted;
}

// Plans and takes the reference on b as bound (start values included), then runs the
// interpreter on it and checks the vector check against the interpreter's output.
static void run_case(const vc_case *c) {
    rt_op *op = parse(c->spec);
    if (!op)
        return;
    rt_err err = {0};
    rt_bindings *b = NULL;
    RT_EXPECT_EQ(rt_bindings_new(arena, op, 7, &b, &err), RT_OK);
    if (c->lengths)
        RT_EXPECT_EQ(rt_bindings_set_lengths(b, c->lengths, c->lens, c->n_lens, &err), RT_OK);
    rt_vcheck *vc = NULL;
    const char *why = NULL;
    RT_EXPECT_EQ(rt_vcheck_plan(arena, op, b, &vc, &why, &err), RT_OK);
    if (!vc) {
        fprintf(stderr, "%s: not covered: %s\n", c->name, why ? why : "?");
        RT_EXPECT(!"covered");
        return;
    }
    RT_EXPECT_EQ(rt_vcheck_reference(vc, &err), RT_OK);
    int32_t t = op->outputs[0];
    // The '+=' case: the interpreter adds onto b's start values, as a kernel does.
    RT_EXPECT_EQ(rt_interp_run(op, b, &err), RT_OK);
    int64_t n = rt_tensor_elems(b, t);
    const double *ref = b->tensors[t].data;
    char line[512];
    for (int32_t fl = 0; fl < (op->tensors[t].dtype == RT_DTYPE_F32 ? 2 : 1); fl++) {
        bool ok = check(vc, ref, n, 0, 0, fl, line, sizeof line);
        if (!ok)
            fprintf(stderr, "%s (%s): the interpreter's output rejected: %s\n", c->name,
                    fl ? "float" : "double", line);
        RT_EXPECT(ok);
    }
    // Every element, corrupted or NaN, is caught (a few positions on larger outputs).
    int64_t step = n > 64 ? n / 17 : 1;
    for (int64_t e = 0; e < n; e += step) {
        for (int how = 1; how <= 2; how++) {
            bool fl = how == 1 && op->tensors[t].dtype == RT_DTYPE_F32;
            bool ok = check(vc, ref, n, how, e, fl, line, sizeof line);
            if (ok)
                fprintf(stderr, "%s: element %lld %s accepted\n", c->name, (long long)e,
                        how == 1 ? "corrupted" : "NaN");
            RT_EXPECT(!ok);
        }
    }
    // An element swapped with its neighbour where they differ.
    for (int64_t e = 0; e + 1 < n; e += step) {
        if (fabs(ref[e] - ref[e + 1]) < 0.1)
            continue;
        bool ok = check(vc, ref, n, 3, e, false, line, sizeof line);
        if (ok)
            fprintf(stderr, "%s: elements %lld and %lld swapped, accepted\n", c->name, (long long)e,
                    (long long)e + 1);
        RT_EXPECT(!ok);
        break;
    }
    printf("%s: %lld elements, interp %.0f points, ref %.0f, out %.0f\n", c->name, (long long)n,
           rt_vcheck_interp_points(vc), rt_vcheck_ref_points(vc), rt_vcheck_out_points(vc));
}

static const vc_case cases[] = {
    {.name = "plain 7x5x11",
     .spec = "size M = 7\nsize N = 5\nsize K = 11\n"
             "def f(float(M, K) A, float(K, N) B) -> (C) { C(m, n) +=! A(m, k) * B(k, n) }"},
    {.name = "transposed A, B and C",
     .spec = "size M = 13\nsize N = 3\nsize K = 7\n"
             "def f(float(K, M) A, float(N, K) B) -> (C) { C(n, m) +=! A(k, m) * B(n, k) }"},
    {.name = "batch first, scaled",
     .spec = "size B = 3\nsize M = 5\nsize N = 7\nsize K = 2\n"
             "def f(float(B, M, K) A, float(B, K, N) Bt) -> (C) {\n"
             "  C(b, m, n) +=! A(b, m, k) * Bt(b, k, n) * 0.5 }"},
    {.name = "batch in the middle and last",
     .spec = "size B = 2\nsize M = 5\nsize N = 3\nsize K = 7\n"
             "def f(float(M, B, K) A, float(K, N, B) Bt) -> (C) {\n"
             "  C(n, b, m) +=! A(m, b, k) * Bt(k, n, b) }"},
    {.name = "ragged N (qkt), lengths 0 1 7 3",
     .spec =
         "size B = 4\nsize H = 2\nsize D = 5\n"
         "def f(int32(B) len, float(b:B, len(b), H, D) Q, float(b:B, len(b), H, D) K) -> (S) {\n"
         "  S(b, h, i, j) +=! Q(b, i, h, d) * K(b, j, h, d) * 0.125 }",
     .lengths = "len",
     .lens = {0, 1, 7, 3},
     .n_lens = 4},
    {.name = "ragged K (attn_v), lengths 3 0 1 5",
     .spec = "size B = 4\nsize H = 2\nsize D = 3\n"
             "def f(int32(B) len, float(b:B, H, i:len(b), len(b)) P, float(b:B, len(b), H, D) V) "
             "-> (O) "
             "{\n  O(b, i, h, d) +=! P(b, h, i, j) * V(b, j, h, d) }",
     .lengths = "len",
     .lens = {3, 0, 1, 5},
     .n_lens = 4},
    {.name = "ragged, output transposed (S(b, j, i)), lengths 4 0 1 3",
     .spec = "size B = 4\nsize D = 3\n"
             "def f(int32(B) len, float(b:B, len(b), D) Q, float(b:B, len(b), D) K) -> "
             "(float(b:B, len(b), len(b)) S) {\n"
             "  S(b, j, i) +=! Q(b, i, d) * K(b, j, d) }",
     .lengths = "len",
     .lens = {4, 0, 1, 3},
     .n_lens = 4},
    {.name = "ragged M (proj), lengths 2 0 5",
     .spec = "size B = 3\n"
             "def f(int32(B) len, float(b:B, len(b), 7) X, float(7, 3) W) -> (Y) {\n"
             "  Y(b, i, n) +=! X(b, i, k) * W(k, n) }",
     .lengths = "len",
     .lens = {2, 0, 5},
     .n_lens = 3},
    {.name = "triangular (trmm), prime",
     .spec = "size N = 7\nsize P = 5\n"
             "def f(float(i:N, i + 1) L, float(N, P) X) -> (Y) {\n"
             "  Y(i, p) +=! L(i, k) * X(k, p) }"},
    {.name = "'+=' onto the start values",
     .spec = "size M = 5\nsize N = 3\nsize K = 4\n"
             "def f(float(M, K) A, float(K, N) B) -> (float(M, N) C) {\n"
             "  C(m, n) += A(m, k) * B(k, n) }"},
    {.name = "'=' with an implicit sum",
     .spec = "size M = 3\nsize N = 4\nsize K = 5\n"
             "def f(float(M, K) A, float(K, N) B) -> (C) {\n"
             "  C(m, n) = -A(m, k) * B(k, n) * 2 }"},
    {.name = "conv, pad 0.5, stride 2 (M = n y x, N = f, K = c r s)",
     .spec = "def c(float(2, 3, 9, 7) I pad 0.5, float(5, 3, 3, 3) Wt) -> (float(2, 5, 4, 7) O) {\n"
             " O(n, f, y, x) += I(n, c, 2*y + r - 1, x + s - 1) * Wt(f, c, r, s)\n}"},
    {.name = "extents 1",
     .spec = "size M = 1\nsize N = 1\nsize K = 1\n"
             "def f(float(M, K) A, float(K, N) B) -> (C) { C(m, n) +=! A(m, k) * B(k, n) }"},
    {.name = "matrix-vector",
     .spec = "size M = 11\nsize K = 13\n"
             "def f(float(M, K) A, float(K) x) -> (y) { y(m) +=! A(m, k) * x(k) }"},
    {.name = "double",
     .spec = "size M = 6\nsize N = 5\nsize K = 9\n"
             "def f(double(M, K) A, double(K, N) B) -> (C) { C(m, n) +=! A(m, k) * B(k, n) }"},
};

// K = 0 in one batch instance (a length 0): its C is all zero, which the check accepts, and a
// nonzero element there it rejects.
static void zero_k(void) {
    rt_op *op =
        parse("size B = 2\n"
              "def f(int32(B) kl, float(b:B, 3, kl(b)) A, float(b:B, kl(b), 2) Bt) -> (C) {\n"
              "  C(b, m, n) +=! A(b, m, k) * Bt(b, k, n) }");
    rt_err err = {0};
    rt_bindings *b = NULL;
    RT_EXPECT_EQ(rt_bindings_new(arena, op, 1, &b, &err), RT_OK);
    int32_t kl[2] = {0, 3};
    RT_EXPECT_EQ(rt_bindings_set_lengths(b, "kl", kl, 2, &err), RT_OK);
    rt_vcheck *vc = NULL;
    const char *why = NULL;
    RT_EXPECT_EQ(rt_vcheck_plan(arena, op, b, &vc, &why, &err), RT_OK);
    RT_EXPECT(vc != NULL);
    if (!vc)
        return;
    RT_EXPECT_EQ(rt_vcheck_reference(vc, &err), RT_OK);
    RT_EXPECT_EQ(rt_interp_run(op, b, &err), RT_OK);
    double c[12];
    memcpy(c, b->tensors[op->outputs[0]].data, sizeof c);
    for (int32_t i = 0; i < 6; i++)
        RT_EXPECT_EQ(c[i], 0.0);
    rt_vcheck_result r;
    RT_EXPECT_EQ(rt_vcheck_output(vc, c, RT_DTYPE_F64, &r, &err), RT_OK);
    RT_EXPECT(r.accepted);
    c[4] = 1e-3;
    RT_EXPECT_EQ(rt_vcheck_output(vc, c, RT_DTYPE_F64, &r, &err), RT_OK);
    RT_EXPECT(!r.accepted);
    RT_EXPECT_EQ(rt_vcheck_interp_points(vc), 3.0 * 2 * 3);
}

// A where-clause that leaves rows of C unwritten: they must hold 0 ('+=!'), exactly.
static void unreached(void) {
    rt_op *op = parse("size M = 5\nsize N = 3\nsize K = 4\n"
                      "def f(float(M, K) A, float(K, N) B) -> (C) {\n"
                      "  C(m, n) +=! A(m, k) * B(k, n) where m in 1:M }");
    rt_err err = {0};
    rt_bindings *b = NULL;
    RT_EXPECT_EQ(rt_bindings_new(arena, op, 3, &b, &err), RT_OK);
    rt_vcheck *vc = NULL;
    const char *why = NULL;
    RT_EXPECT_EQ(rt_vcheck_plan(arena, op, b, &vc, &why, &err), RT_OK);
    if (!vc) {
        fprintf(stderr, "where m in 1:M not covered: %s\n", why);
        RT_EXPECT(!"covered");
        return;
    }
    RT_EXPECT_EQ(rt_vcheck_reference(vc, &err), RT_OK);
    RT_EXPECT_EQ(rt_interp_run(op, b, &err), RT_OK);
    double c[15];
    memcpy(c, b->tensors[op->outputs[0]].data, sizeof c);
    rt_vcheck_result r;
    RT_EXPECT_EQ(rt_vcheck_output(vc, c, RT_DTYPE_F64, &r, &err), RT_OK);
    RT_EXPECT(r.accepted);
    c[1] = NAN; // row 0 is not written: the poison a kernel left there
    RT_EXPECT_EQ(rt_vcheck_output(vc, c, RT_DTYPE_F64, &r, &err), RT_OK);
    RT_EXPECT(!r.accepted);
    RT_EXPECT_EQ(r.unreached_bad, 1);
    char line[256];
    rt_vcheck_explain(vc, &r, line, sizeof line);
    RT_EXPECT(strstr(line, "C[1] is nan where the statement writes nothing") != NULL);
}

// An error pattern the first vector cannot see (C(0,0) and C(0,1) moved along (t1, -t0) of the
// first vector): the second vector sees it.
static void blind(void) {
    rt_op *op =
        parse("size M = 7\nsize N = 5\nsize K = 11\n"
              "def f(float(M, K) A, float(K, N) B) -> (C) { C(m, n) +=! A(m, k) * B(k, n) }");
    rt_err err = {0};
    rt_bindings *b = NULL;
    RT_EXPECT_EQ(rt_bindings_new(arena, op, 5, &b, &err), RT_OK);
    rt_vcheck *vc = NULL;
    const char *why = NULL;
    RT_EXPECT_EQ(rt_vcheck_plan(arena, op, b, &vc, &why, &err), RT_OK);
    if (!vc)
        return;
    RT_EXPECT_EQ(rt_vcheck_reference(vc, &err), RT_OK);
    RT_EXPECT_EQ(rt_interp_run(op, b, &err), RT_OK);
    double c[35], t[2];
    memcpy(c, b->tensors[op->outputs[0]].data, sizeof c);
    rt_vcheck_vector(0, 0, 2, t);
    c[0] += 3 * t[1];
    c[1] -= 3 * t[0];
    rt_vcheck_result r;
    RT_EXPECT_EQ(rt_vcheck_output(vc, c, RT_DTYPE_F64, &r, &err), RT_OK);
    RT_EXPECT(!r.accepted);
    RT_EXPECT_EQ(r.worst_vector, 1);
    RT_EXPECT_EQ(r.worst_row, 0);
}

static void not_covered(const char *spec, const char *want) {
    rt_op *op = parse(spec);
    const char *why = NULL;
    RT_EXPECT(!rt_vcheck_covers(op, &why));
    RT_EXPECT(why && strstr(why, want));
    rt_err err = {0};
    rt_bindings *b = NULL;
    RT_EXPECT_EQ(rt_bindings_new(arena, op, 1, &b, &err), RT_OK);
    rt_vcheck *vc = (rt_vcheck *)1;
    RT_EXPECT_EQ(rt_vcheck_plan(arena, op, b, &vc, &why, &err), RT_OK);
    RT_EXPECT(vc == NULL);
}

// The choice: the interpreter for small ops, the vector check once the interpreter's points
// pass the limit and the vector check is much cheaper.
static void choice(void) {
    rt_op *op =
        parse("size M = 256\nsize N = 256\nsize K = 256\n"
              "def f(float(M, K) A, float(K, N) B) -> (C) { C(m, n) +=! A(m, k) * B(k, n) }");
    rt_err err = {0};
    rt_bindings *b = NULL;
    RT_EXPECT_EQ(rt_bindings_new(arena, op, 1, &b, &err), RT_OK);
    rt_vcheck *vc = NULL;
    const char *why = NULL;
    RT_EXPECT_EQ(rt_vcheck_plan(arena, op, b, &vc, &why, &err), RT_OK);
    RT_EXPECT_EQ(rt_vcheck_interp_points(vc), 256.0 * 256 * 256);
    RT_EXPECT(rt_vcheck_preferred(vc, 0));        // 16.8M points > 4M
    RT_EXPECT(!rt_vcheck_preferred(vc, 1 << 25)); // below a higher limit
    RT_EXPECT(!rt_vcheck_preferred(NULL, 0));
}

int main(void) {
    arena = rt_arena_new(1 << 20);
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++)
        run_case(&cases[i]);
    zero_k();
    unreached();
    blind();
    choice();
    not_covered("size M = 4\n"
                "def f(float(M, 8) X, float(8, 4) W, float(4) bias) -> (Y) {\n"
                "  t(m, n) +=! X(m, k) * W(k, n)\n  Y(m, n) = t(m, n) + bias(n) }",
                "not one statement");
    not_covered("size B = 2\nsize D = 3\n"
                "def f(int32(B) len, float(b:B, len(b), D) Q, float(b:B, len(b), D) K) -> (S) {\n"
                "  S(b, i, j) +=! Q(b, i, d) * K(b, j, d) where j in 0:i + 1 }",
                "ties N to M");
    not_covered("size V = 10\nsize N = 4\n"
                "def f(int32(N) word, float(V, 8) E, float(8) w) -> (Y) {\n"
                "  Y(n) +=! E(word(n), k) * w(k) }",
                "not affine");
    not_covered("size M = 4\n"
                "def f(float(M, 8) X) -> (Y) { Y(m) +=! exp(X(m, k)) }",
                "scaled product of two reads");
    rt_arena_free(arena);
    return rt_test_finish("test-vcheck");
}
