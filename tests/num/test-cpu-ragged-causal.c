// test-cpu-ragged-causal.c: causal (masked) attention on the per-entry packed GEMM
// (codegen/lower-cpu-rentry.c, rt_perf_gemm_rentry.tri): scores S(b, h, i, j) over j in
// 0:i + 1, stored packed lower-triangular (row i holds i + 1 entries), and attention x V
// reading that triangle as P. Lengths 0, 1, primes, all equal, one long plus many short (several
// row blocks, column blocks and k blocks in one entry), lengths bound at run time that differ
// from the planned ones, the shapes of examples/layers/{cora,bert}_encoder_causal.spec shrunk.
// Every top-K candidate must run the per-entry GEMM with its causal bounds and come out "ok"
// against the reference interpreter; the model must price the triangle (about half the
// full square's time for long rows).
#include "test.h"
#include "num-host.h"

#include "rtgen.h"

#include <stdio.h>
#include <string.h>

#define MAX_B 24

typedef struct ccase {
    const char *text;
    int32_t n;
    int32_t lens[MAX_B];
    int32_t planned[MAX_B]; // the model's distribution (all 0: the bound lengths)
} ccase;

static rt_status construct(rt_arena *a, const rt_device *dev, const char *text, const int32_t *lens,
                           int32_t n, rt_op **op, rt_perf_result **perf, rt_err *err) {
    rt_perf_options popt = {.top_k = 4};
    rt_perf_length_dist d;
    int64_t samples[MAX_B];
    for (int32_t i = 0; i < n; i++)
        samples[i] = lens[i];
    rt_status st = rt_spec_parse(a, text, "causal.spec", NULL, 0, op, err);
    d.tensor = "len";
    if (st == RT_OK)
        st = rt_extent_dist_from_samples(a, samples, n, (rt_loc){0}, &d.dist, err);
    popt.lengths = &d;
    popt.n_lengths = 1;
    return st == RT_OK ? rt_perf_construct(a, *op, dev, &popt, perf, err) : st;
}

static bool any_planned(const ccase *c) {
    for (int32_t i = 0; i < c->n; i++)
        if (c->planned[i] != 0)
            return true;
    return false;
}

static void run_case(const rt_device *dev, const ccase *c, uint64_t seed) {
    rt_arena *a = rt_arena_new(1 << 20);
    rt_err err = {0};
    rt_op *op = NULL;
    rt_perf_result *perf = NULL;
    rt_bindings *b = NULL;
    rt_cpu_report *rep = NULL;
    rt_cpu_options copt = {
        .profile = true, .budget_ms = 1, .threads = 2, .interp_max_points = (int64_t)1 << 27};
    rt_status st =
        construct(a, dev, c->text, any_planned(c) ? c->planned : c->lens, c->n, &op, &perf, &err);
    if (st == RT_OK)
        st = rt_bindings_new(a, op, seed, &b, &err);
    if (st == RT_OK)
        st = rt_bindings_set_lengths(b, "len", c->lens, c->n, &err);
    if (st == RT_OK)
        st = rt_cpu_build_and_profile(a, op, dev, b, perf, &copt, &rep, &err);
    if (st != RT_OK) {
        char msg[1024];
        rt_err_format(&err, "test", true, msg, sizeof msg);
        fprintf(stderr, "case %llu: %s\n%s\n", (unsigned long long)seed, msg, c->text);
        RT_EXPECT(0);
        rt_arena_free(a);
        return;
    }
    bool scores = strstr(c->text, "def scores") != NULL;
    RT_EXPECT(rep->n >= 1);
    for (int32_t i = 0; i < rep->n; i++) {
        const rt_cpu_cand *cd = &rep->cands[i];
        bool entry = strstr(cd->summary, "packed GEMM per entry") != NULL;
        // The causal bounds in the kernel: scores' column panels up to each row panel's last
        // row (jr_hi) and the masked store; attention x V's per-panel k steps (uk_kn) and P's
        // masked pack (row_khi).
        const char *src = cd->c_source ? cd->c_source : "";
        bool causal = scores ? strstr(src, "jr_hi") && strstr(src, "cval")
                             : strstr(src, "uk_kn") && strstr(src, "row_khi");
        if (cd->status != RT_CPU_CAND_OK || !entry || !causal)
            fprintf(stderr, "case %llu candidate %d (%s): %s (%s), max abs err %g\n%s\n",
                    (unsigned long long)seed, (int)i, cd->summary,
                    rt_cpu_cand_status_name(cd->status), cd->reason ? cd->reason : "",
                    cd->max_abs_err, c->text);
        RT_EXPECT_EQ(cd->status, RT_CPU_CAND_OK);
        RT_EXPECT_STR(cd->check, "interpreter");
        RT_EXPECT(entry);
        RT_EXPECT(causal);
    }
    rt_arena_free(a);
}

#define SCORES(B, H, D)                                                                            \
    "size B = " #B "\nsize H = " #H "\nsize D = " #D "\n"                                          \
    "def scores(int32(B) len, float(b:B, len(b), H, D) Q, float(b:B, len(b), H, D) K)\n"           \
    "    -> (float(b:B, H, i:len(b), i + 1) S) {\n"                                                \
    "    S(b, h, i, j) +=! Q(b, i, h, d) * K(b, j, h, d)   where j in 0:i + 1\n}"
#define ATTNV(B, H, D)                                                                             \
    "size B = " #B "\nsize H = " #H "\nsize D = " #D "\n"                                          \
    "def attn_v(int32(B) len, float(b:B, H, i:len(b), i + 1) P, float(b:B, len(b), H, D) V)"       \
    " -> (A) {\n"                                                                                  \
    "    A(b, i, h, d) +=! P(b, h, i, j) * V(b, j, h, d)   where j in 0:i + 1\n}"
#define FULL_SCORES(B, H, D)                                                                       \
    "size B = " #B "\nsize H = " #H "\nsize D = " #D "\n"                                          \
    "def scores(int32(B) len, float(b:B, len(b), H, D) Q, float(b:B, len(b), H, D) K) -> (S) {\n"  \
    "    S(b, h, i, j) +=! Q(b, i, h, d) * K(b, j, h, d)\n}"
#define FULL_ATTNV(B, H, D)                                                                        \
    "size B = " #B "\nsize H = " #H "\nsize D = " #D "\n"                                          \
    "def attn_v(int32(B) len, float(b:B, H, i:len(b), len(b)) P, float(b:B, len(b), H, D) V)"      \
    " -> (A) {\n    A(b, i, h, d) +=! P(b, h, i, j) * V(b, j, h, d)\n}"

// The model prices the triangle: on long rows the causal op's predicted time is well under
// the full square's (about half the multiply-adds), and above a quarter of it.
static void check_model(const rt_device *dev, const char *causal, const char *full) {
    rt_arena *a = rt_arena_new(1 << 20);
    rt_err err = {0};
    rt_op *op_c = NULL, *op_f = NULL;
    rt_perf_result *pc = NULL, *pf = NULL;
    static const int32_t lens[8] = {512, 480, 500, 512, 470, 509, 490, 512};
    rt_status st = construct(a, dev, causal, lens, 8, &op_c, &pc, &err);
    if (st == RT_OK)
        st = construct(a, dev, full, lens, 8, &op_f, &pf, &err);
    RT_EXPECT_EQ(st, RT_OK);
    if (st == RT_OK) {
        RT_EXPECT(pc->n_cands >= 1 && pf->n_cands >= 1);
        double tc = pc->cands[0].predicted_ns, tf = pf->cands[0].predicted_ns;
        if (!(tc < 0.7 * tf && tc > 0.25 * tf))
            fprintf(stderr, "model: causal %.0f ns, full %.0f ns\n%s\n", tc, tf, causal);
        RT_EXPECT(tc < 0.7 * tf);
        RT_EXPECT(tc > 0.25 * tf);
    }
    rt_arena_free(a);
}

int main(void) {
    rt_device dev;
    if (!rt_num_host(&dev))
        return 77;
    static const ccase cases[] = {
        // Lengths 0, 1 and primes; a prime head size.
        {SCORES(8, 3, 37), 8, {5, 0, 1, 13, 7, 3, 0, 31}, {0}},
        {ATTNV(8, 3, 29), 8, {5, 0, 1, 13, 7, 3, 0, 31}, {0}},
        // All equal, a multiple of the micro-kernels.
        {SCORES(4, 2, 64), 4, {48, 48, 48, 48}, {0}},
        {ATTNV(4, 2, 64), 4, {48, 48, 48, 48}, {0}},
        // One long plus many short: several row blocks (units of unequal cost split between the
        // threads), column blocks and, for attention x V, k blocks, with rows of a prime length.
        {SCORES(12, 2, 16), 12, {401, 1, 2, 1, 3, 0, 1, 2, 5, 1, 1, 1}, {0}},
        {ATTNV(12, 2, 16), 12, {701, 1, 2, 1, 3, 0, 1, 2, 5, 1, 1, 1}, {0}},
        // Bound lengths longer and shorter than planned.
        {SCORES(4, 2, 8), 4, {90, 0, 61, 2}, {1, 2, 1, 1}},
        {ATTNV(4, 2, 8), 4, {90, 0, 61, 2}, {1, 2, 1, 1}},
        // The causal layers' attention (examples/layers/cora_encoder_causal.spec: 8 heads x 64;
        // bert_encoder_causal.spec: 12 x 64) on small ragged batches.
        {SCORES(6, 8, 64), 6, {37, 1, 64, 19, 0, 101}, {0}},
        {ATTNV(6, 8, 64), 6, {37, 1, 64, 19, 0, 101}, {0}},
        {SCORES(4, 12, 64), 4, {23, 70, 2, 41}, {0}},
        {ATTNV(4, 12, 64), 4, {23, 70, 2, 41}, {0}},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++)
        run_case(&dev, &cases[i], 1 + i);
    check_model(&dev, SCORES(8, 8, 64), FULL_SCORES(8, 8, 64));
    check_model(&dev, ATTNV(8, 8, 64), FULL_ATTNV(8, 8, 64));
    return rt_test_finish("test-cpu-ragged-causal");
}
