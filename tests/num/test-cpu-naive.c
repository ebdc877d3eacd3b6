// test-cpu-naive.c: the naive kernel (rt_lower_options.naive, the reference of the large ops
// that neither the interpreter nor the random-vector check covers) runs a contraction's
// reduction outside its output row (lower-cpu-naive.c): C's row along n innermost, under k.
// Each case is lowered naive for the host, JIT-compiled and run on its own buffers (outputs
// poisoned first): the loop order must be the one asked for, each element of a reordered
// contraction (or of a sum inside an '=' statement, through its row of sums in scratch and the
// epilogue pass) must be bitwise the chain of its terms in k order from the identity (or from
// the caller's value with +=), in the kernel's type, and every output must equal the interpreter's
// within the tolerance table. The orders that must stay plain (a k range depending on the
// column, an op whose reduction is already the unit-stride loop) keep it. Then the profile of
// a ragged contraction + GELU with lengths 0, 1 and primes (and of a tanh of a sum in one
// statement), its reference forced to the naive kernel, passes every candidate by
// "naive-kernel".
#include "test.h"
#include "num-host.h"
#include "cpu-case.h"

#include "emit.h"
#include "hal-cpu.h"
#include "interp.h"
#include "compare.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

// FFN1 of an encoder layer over a ragged batch: the contraction, then bias + GELU.
static const char *const ffn_spec =
    "size B = 7\nsize D = 37\nsize F = 53\n"
    "def ffn1(int32(B) len, float(b:B, len(b), D) X, float(D, F) W, float(F) bias) -> (G) {\n"
    " t(b, i, f) +=! X(b, i, m) * W(m, f)\n"
    " G(b, i, f) = 0.5 * (t(b, i, f) + bias(f)) * (1 + erf((t(b, i, f) + bias(f)) * "
    "0.70710678))\n}";
static const int32_t ffn_lens[7] = {0, 1, 13, 2, 31, 7, 1};

typedef struct naive_run {
    rt_arena *a;
    rt_op *op;
    rt_bindings *b;
    rt_kir_kernel *k;
    void **args;   // the kernel's buffers after its run
    double **init; // per tensor: its values before the run (the caller's, with +=)
} naive_run;

// The var names of the loops around the last store into buffer buf under blk, innermost first,
// as "f<m<i".
static bool store_loops(const rt_kir_phase *p, const rt_kir_block *blk, int32_t buf, char *out,
                        size_t n) {
    for (int32_t i = blk->n - 1; i >= 0; i--) {
        const rt_kir_node *nd = blk->nodes[i];
        if (nd->kind == RT_KIR_N_STORE && nd->buf == buf) {
            out[0] = 0;
            return true;
        }
        if (nd->kind == RT_KIR_N_LOOP && store_loops(p, &nd->body, buf, out, n)) {
            size_t len = strlen(out);
            snprintf(out + len, n - len, "%s%s", len ? "<" : "", p->vars[nd->var].name);
            return true;
        }
    }
    return false;
}

// The loops around the last store into tensor t in kernel k ("" when none).
static const char *loops_of(const naive_run *r, const char *tensor) {
    static char text[128];
    text[0] = 0;
    int32_t t = rt_op_tensor_index(r->op, tensor);
    for (int32_t i = 1; i < r->k->n_bufs; i++)
        if (r->k->bufs[i].role == RT_KIR_BUF_DATA && r->k->bufs[i].tensor == t)
            for (int32_t p = r->k->n_phases - 1; p >= 0; p--)
                if (store_loops(&r->k->phases[p], &r->k->phases[p].body, i, text, sizeof text))
                    return text;
    return text;
}

// Lowers spec naive, runs it on seeded inputs (lengths lens when not NULL), and the
// interpreter on the same bindings (r->b then holds its results).
static bool naive_run_new(const rt_device *dev, const char *spec, const int32_t *lens, int32_t n,
                          naive_run *r) {
    memset(r, 0, sizeof *r);
    r->a = rt_arena_new(1 << 20);
    rt_arena *a = r->a;
    rt_err err = {0};
    rt_lower_options lopt = {.naive = true};
    rt_cpu_jit *jit = NULL;
    void *mod = NULL;
    const char *ll = NULL;
    if (rt_spec_parse(a, spec, "naive.spec", NULL, 0, &r->op, &err) != RT_OK ||
        rt_bindings_new(a, r->op, 5, &r->b, &err) != RT_OK ||
        (lens && rt_bindings_set_lengths(r->b, "len", lens, n, &err) != RT_OK) ||
        rt_bindings_prepare(r->b, &err) != RT_OK ||
        rt_lower_cpu(a, r->op, dev, NULL, NULL, &lopt, &r->k, &err) != RT_OK ||
        rt_cpu_jit_new(a, dev, &jit, &err) != RT_OK) {
        fprintf(stderr, "%.40s: %s\n", spec, err.msg);
        RT_EXPECT(0);
        return false;
    }
    rt_kir_kernel *k = r->k;
    rt_llvm_target tg = {rt_cpu_jit_context(jit), rt_cpu_jit_target_machine(jit),
                         rt_cpu_jit_avx512(jit)};
    RT_EXPECT_EQ(rt_emit_llvm(a, k, &tg, true, &mod, &ll, &err), RT_OK);
    RT_EXPECT_EQ(rt_cpu_jit_add_module(jit, mod, &err), RT_OK);
    void *fn[16];
    int64_t items[16];
    RT_EXPECT(k->n_phases <= 16);
    for (int32_t i = 0; i < k->n_phases && i < 16; i++) {
        items[i] = k->phases[i].n_items;
        const char *name = rt_arena_printf(a, "%s_%s", k->name, k->phases[i].name);
        RT_EXPECT_EQ(rt_cpu_jit_lookup(jit, name, &fn[i], &err), RT_OK);
    }
    r->args = rt_arena_calloc(a, (size_t)k->n_bufs, sizeof *r->args);
    r->init = rt_arena_calloc(a, (size_t)r->op->n_tensors, sizeof *r->init);
    for (int32_t i = 1; i < k->n_bufs; i++) {
        const rt_kir_buf *bf = &k->bufs[i];
        const rt_tensor_data *td = &r->b->tensors[bf->tensor];
        if (bf->role == RT_KIR_BUF_START) {
            r->args[i] = td->layout.start[bf->dim];
            continue;
        }
        int64_t elems = td->layout.elems;
        r->init[bf->tensor] = rt_arena_calloc(a, (size_t)rt_at_least_one((size_t)elems), 8);
        memcpy(r->init[bf->tensor], td->data, (size_t)elems * sizeof(double));
        void *p = rt_arena_calloc(a, (size_t)rt_at_least_one((size_t)elems), 8);
        // Inputs and +='s caller values as given; what the kernel sets from scratch poisoned.
        bool poison =
            bf->written && r->op->stmts[r->op->tensors[bf->tensor].writer].op != RT_ASSIGN_ADD;
        for (int64_t e = 0; e < elems; e++) {
            double v = poison ? (double)NAN : td->data[e];
            if (bf->type == RT_KIR_F32)
                ((float *)p)[e] = (float)v;
            else if (bf->type == RT_KIR_I32)
                ((int32_t *)p)[e] = (int32_t)v;
            else
                ((double *)p)[e] = v;
        }
        r->args[i] = p;
    }
    rt_cpu_pool *pool = rt_cpu_pool_new(2);
    RT_EXPECT(pool != NULL);
    rt_cpu_launch l = {k->n_phases, (rt_cpu_phase_fn *)fn, items, r->args, k->scratch_bytes, NULL};
    RT_EXPECT(pool && rt_cpu_pool_run(pool, &l));
    if (pool)
        rt_cpu_pool_free(pool);
    if (rt_interp_run(r->op, r->b, &err) != RT_OK) {
        fprintf(stderr, "%.40s: interpreter: %s\n", spec, err.msg);
        RT_EXPECT(0);
        return false;
    }
    return true;
}

static const float *f32_of(const naive_run *r, const char *tensor) {
    int32_t t = rt_op_tensor_index(r->op, tensor);
    for (int32_t i = 1; i < r->k->n_bufs; i++)
        if (r->k->bufs[i].role == RT_KIR_BUF_DATA && r->k->bufs[i].tensor == t)
            return r->args[i];
    return NULL;
}

// Every f32 tensor the kernel writes equals the interpreter's within the tolerance table.
static void expect_interp(const naive_run *r, const char *what) {
    for (int32_t i = 1; i < r->k->n_bufs; i++) {
        const rt_kir_buf *bf = &r->k->bufs[i];
        if (bf->role != RT_KIR_BUF_DATA || !bf->written || bf->type != RT_KIR_F32)
            continue;
        const rt_tensor_data *td = &r->b->tensors[bf->tensor];
        rt_compare_result cr;
        rt_compare_begin(&cr);
        for (int64_t e = 0; e < td->layout.elems; e++)
            rt_compare_add(&cr, td->data[e], (double)((const float *)r->args[i])[e]);
        rt_compare_end(&cr);
        bool ok = rt_compare_accept(&cr, r->op->tensors[bf->tensor].dtype);
        if (!ok)
            fprintf(stderr, "%s: %s differs from the interpreter by %g (nmse %g)\n", what, bf->name,
                    cr.max_abs_err, cr.nmse);
        RT_EXPECT(ok);
    }
}

// C (rows x n) against the chain of its terms A(row, k) * B(k, col) in k order, k in [0, kend),
// from c0 (NULL: 0): the kernel's llvm.fmuladd is one fused operation where the host has FMA,
// a product and a sum otherwise; every element must be bitwise one of the two, all the same.
static void expect_chain(const char *what, const float *c, const double *c0, const double *A,
                         const double *B, int64_t rows, int64_t n, int64_t kk) {
    int64_t fused = 0, split = 0, total = rows * n;
    for (int64_t row = 0; row < rows; row++)
        for (int64_t col = 0; col < n; col++) {
            float f = c0 ? (float)c0[row * n + col] : 0.0f, s = f;
            for (int64_t k = 0; k < kk; k++) {
                float x = (float)A[row * kk + k], y = (float)B[k * n + col];
                f = fmaf(x, y, f);
                s = s + x * y;
            }
            float got = c[row * n + col];
            fused += memcmp(&got, &f, sizeof f) == 0;
            split += memcmp(&got, &s, sizeof s) == 0;
        }
    if (fused != total && split != total)
        fprintf(stderr,
                "%s: %lld of %lld elements are the fused k-order chain, %lld the split one\n", what,
                (long long)fused, (long long)total, (long long)split);
    RT_EXPECT(fused == total || split == total);
}

// FFN1 on a ragged batch: t's rows run f innermost under m; t bitwise the k-order chain (the
// token rows of X and t are packed in the same order), t and G the interpreter's.
static void ffn_case(const rt_device *dev) {
    naive_run r;
    if (naive_run_new(dev, ffn_spec, ffn_lens, 7, &r)) {
        RT_EXPECT_STR(loops_of(&r, "t"), "f_1<m<i"); // f_1: the row's second loop over f
        RT_EXPECT_STR(loops_of(&r, "G"), "f<i");
        int32_t x = rt_op_tensor_index(r.op, "X"), w = rt_op_tensor_index(r.op, "W");
        int64_t rows = r.b->tensors[x].layout.elems / 37;
        RT_EXPECT_EQ(rows, 55);
        expect_chain("ffn1 t", f32_of(&r, "t"), NULL, r.init[x], r.init[w], rows, 53, 37);
        expect_interp(&r, "ffn1");
    }
    rt_arena_free(r.a);
}

// A sum inside an '=' statement: its row accumulates in scratch, then the epilogue pass applies
// the rest of the right side along f. max(sum, -1e30) is the sum itself: bitwise the chain.
static void inner_sum_case(const rt_device *dev) {
    naive_run r;
    if (naive_run_new(dev,
                      "size B = 7\nsize D = 37\nsize F = 53\n"
                      "def ffs(int32(B) len, float(b:B, len(b), D) X, float(D, F) W) -> (G) {\n"
                      " G(b, i, f) = max(X(b, i, m) * W(m, f), -1e30)\n}",
                      ffn_lens, 7, &r)) {
        RT_EXPECT_STR(loops_of(&r, "G"), "f_2<i"); // the epilogue, after the zeroing and the row
        RT_EXPECT(r.k->scratch_bytes >= 53 * 4);   // each thread's row of sums
        int32_t x = rt_op_tensor_index(r.op, "X"), w = rt_op_tensor_index(r.op, "W");
        expect_chain("ffs G", f32_of(&r, "G"), NULL, r.init[x], r.init[w], 55, 53, 37);
        expect_interp(&r, "ffs");
    }
    rt_arena_free(r.a);
    if (naive_run_new(dev,
                      "def ts(float(9, 31) X, float(31, 41) W, float(41) s) -> (Y) {\n"
                      " Y(m, n) = tanh(X(m, k) * W(k, n)) * s(n)\n}",
                      NULL, 0, &r)) {
        RT_EXPECT_STR(loops_of(&r, "Y"), "n_2");
        expect_interp(&r, "ts");
    }
    rt_arena_free(r.a);
}

// += accumulates into the caller's values: each element's chain starts from its own.
static void acc_case(const rt_device *dev) {
    naive_run r;
    if (naive_run_new(dev,
                      "def acc(float(5, 29) A, float(29, 67) B) -> (float(5, 67) C) {\n"
                      " C(m, n) += A(m, k) * B(k, n)\n}",
                      NULL, 0, &r)) {
        RT_EXPECT_STR(loops_of(&r, "C"), "n<k");
        int32_t ta = rt_op_tensor_index(r.op, "A"), tb = rt_op_tensor_index(r.op, "B"),
                tc = rt_op_tensor_index(r.op, "C");
        expect_chain("acc C", f32_of(&r, "C"), r.init[tc], r.init[ta], r.init[tb], 5, 67, 29);
        expect_interp(&r, "acc");
    }
    rt_arena_free(r.a);
}

// The plain nest's reduction loop is serial: each S(i, j) is the chain of Q(i, d) * K(j, d) in d
// order, bitwise (a vectorized loop would split it into lane partial sums).
static void qk_chain(const naive_run *r) {
    int32_t q = rt_op_tensor_index(r->op, "Q"), k = rt_op_tensor_index(r->op, "K");
    double kt[67 * 17];
    for (int32_t j = 0; j < 17; j++)
        for (int32_t d = 0; d < 67; d++)
            kt[d * 17 + j] = r->init[k][j * 67 + d];
    expect_chain("qk S", f32_of(r, "S"), NULL, r->init[q], kt, 13, 17, 67);
}

// A triangular B: k's range depends on i (an outer kept var) — reordered; on the column —
// plain (the column loop cannot go inside k's); a contraction whose k is already unit-stride
// in both reads (Q.K^T) or gains nothing in a row (a sum broadcast along j) — plain.
static void order_cases(const rt_device *dev) {
    static const struct {
        const char *name, *text, *out, *loops;
    } cases[] = {
        {"trmm",
         "def trmm(float(i:23, i + 1) L, float(23, 31) X) -> (Y) {\n"
         " Y(i, p) +=! L(i, k) * X(k, p)\n}",
         "Y", "p_1<k"},
        {"upper",
         "def upper(float(11, 19) A, float(19, 19) B) -> (float(11, 19) C) {\n"
         " C(i, j) +=! A(i, k) * B(k, j) where k in 0:j+1\n}",
         "C", "j"},
        {"qk",
         "def qk(float(13, 67) Q, float(17, 67) K) -> (S) {\n S(i, j) +=! Q(i, d) * K(j, d)\n}",
         "S", "j"},
        {"bsum", "def bsum(float(7, 29) A) -> (float(7, 5) C) {\n C(i, j) +=! A(i, k)\n}", "C",
         "j"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        naive_run r;
        if (naive_run_new(dev, cases[i].text, NULL, 0, &r)) {
            RT_EXPECT_STR(loops_of(&r, cases[i].out), cases[i].loops);
            expect_interp(&r, cases[i].name);
            if (strcmp(cases[i].name, "qk") == 0)
                qk_chain(&r);
        }
        rt_arena_free(r.a);
    }
}

// The profile's reference forced to the naive kernel (an interpreter limit of one point; the
// GELU epilogue keeps the random-vector check off): every candidate passes by it.
static void profile_case(const rt_device *dev, const char *spec) {
    rt_arena *a = rt_arena_new(1 << 20);
    cpu_case c = {.text = spec,
                  .file = "naive.spec",
                  .top_k = 2,
                  .seed = 3,
                  .interp_max_points = 1,
                  .lens = ffn_lens,
                  .n_lens = 7};
    if (cpu_case_build(a, dev, &c))
        for (int32_t i = 0; i < c.rep->n; i++)
            cpu_case_expect(&c, i, true, "naive-kernel");
    rt_arena_free(a);
}

int main(void) {
    rt_device dev;
    if (!rt_num_host(&dev))
        return 77;
    ffn_case(&dev);
    inner_sum_case(&dev);
    acc_case(&dev);
    order_cases(&dev);
    profile_case(&dev, ffn_spec);
    profile_case(&dev,
                 "size B = 7\nsize D = 37\nsize F = 53\n"
                 "def ffs(int32(B) len, float(b:B, len(b), D) X, float(D, F) W, float(F) s) -> "
                 "(G) {\n G(b, i, f) = tanh(X(b, i, m) * W(m, f)) * s(f)\n}");
    return rt_test_finish("test-cpu-naive");
}
