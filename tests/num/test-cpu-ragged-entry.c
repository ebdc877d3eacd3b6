// test-cpu-ragged-entry.c: contractions over a ragged batch whose every entry is its own GEMM
// (codegen/lower-cpu-rentry.c) on the packed micro-kernel: attention scores Q.K^T over
// len(b) x len(b) per batch entry and head (K read as (b, j, h, d), the 0.125 scale), attention
// x V (the reduction over j = len(b)) and the variable-size batched GEMM (M, N, K per entry from
// three length tensors). Lengths 0, 1, primes, all equal, one long plus many short; lengths
// bound at run time that differ from the planned ones; '+=' onto an output. Every top-K
// candidate must run the per-entry GEMM and come out "ok" against the reference interpreter.
#include "test.h"
#include "num-host.h"

#include "rtgen.h"

#include <stdio.h>
#include <string.h>

#define MAX_B 40
#define MAX_L 3

typedef struct ecase {
    const char *text;
    int32_t n;                     // batch (every length tensor's extent)
    int32_t n_len;                 // length tensors, named as in names[]
    int32_t lens[MAX_L][MAX_B];    // bound at run time
    int32_t planned[MAX_L][MAX_B]; // the model's distribution (all 0: the bound lengths)
    int32_t v_in_place;            // attn_v: 1 V read in place, -1 packed, 0 either
} ecase;

static const char *const names[2][MAX_L] = {{"len"}, {"Ml", "Nl", "Kl"}};

static bool any_planned(const ecase *c, int32_t t) {
    for (int32_t i = 0; i < c->n; i++)
        if (c->planned[t][i] != 0)
            return true;
    return false;
}

// cold: every plan as the model makes it for an operator that is not warm (rt_perf_cpu_warm:
// its tensors exceed half the last-level cache), its re_warm cleared.
static void run_case(const rt_device *dev, const ecase *c, uint64_t seed, bool cold) {
    rt_arena *a = rt_arena_new(1 << 20);
    rt_err err = {0};
    rt_op *op = NULL;
    rt_perf_result *perf = NULL;
    rt_bindings *b = NULL;
    rt_cpu_report *rep = NULL;
    rt_perf_options popt = {.top_k = 4};
    rt_cpu_options copt = {
        .profile = true, .budget_ms = 1, .threads = 2, .interp_max_points = (int64_t)1 << 27};
    const char *const *nm = names[c->n_len == 1 ? 0 : 1];
    rt_perf_length_dist d[MAX_L];
    rt_status st = rt_spec_parse(a, c->text, "entry.spec", NULL, 0, &op, &err);
    for (int32_t t = 0; t < c->n_len && st == RT_OK; t++) {
        int64_t samples[MAX_B];
        bool planned = any_planned(c, t);
        for (int32_t i = 0; i < c->n; i++)
            samples[i] = planned ? c->planned[t][i] : c->lens[t][i];
        d[t].tensor = nm[t];
        st = rt_extent_dist_from_samples(a, samples, c->n, (rt_loc){0}, &d[t].dist, &err);
    }
    popt.lengths = d;
    popt.n_lengths = c->n_len;
    if (st == RT_OK)
        st = rt_perf_construct(a, op, dev, &popt, &perf, &err);
    for (int32_t i = 0; cold && st == RT_OK && i < perf->n_cands; i++)
        perf->cands[i].cpu.gemm.re_warm = false;
    if (st == RT_OK)
        st = rt_bindings_new(a, op, seed, &b, &err);
    for (int32_t t = 0; t < c->n_len && st == RT_OK; t++)
        st = rt_bindings_set_lengths(b, nm[t], c->lens[t], c->n, &err);
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
    RT_EXPECT(rep->n >= 1);
    for (int32_t i = 0; i < rep->n; i++) {
        const rt_cpu_cand *cd = &rep->cands[i];
        bool entry = strstr(cd->summary, "packed GEMM per entry") != NULL;
        if (cd->status != RT_CPU_CAND_OK || !entry)
            fprintf(stderr, "case %llu candidate %d (%s): %s, max abs err %g\n%s\n",
                    (unsigned long long)seed, (int)i, cd->summary,
                    rt_cpu_cand_status_name(cd->status), cd->max_abs_err, c->text);
        RT_EXPECT_EQ(cd->status, RT_CPU_CAND_OK);
        RT_EXPECT_STR(cd->check, "interpreter");
        RT_EXPECT(entry);
        // Attention's small entries: the rows of the next entry's Q and K are prefetched while
        // one runs (lower-cpu-rentry.c rt_re_next_fits), unless the operator is warm (the
        // plan's re_warm: its lines are in the last-level cache).
        if (strstr(c->text, "def qkt"))
            RT_EXPECT(cd->c_source && (strstr(cd->c_source, "__builtin_prefetch(&t_Q[") &&
                                       strstr(cd->c_source, "__builtin_prefetch(&t_K[")) == cold);
        // A's rows along k: the micro-kernel reads them in place (perfmodel re_a_in_place), the
        // scale folded into B's pack, at a constant stride (Q's H x D) or the entry's, read at
        // run time (P's rows len(b) apart, vgemm's A Kl(b)), unless the entries are at least
        // RT_PERF_RENTRY_A_PACK_COLS wide on average (as planned): then A is packed.
        const char *ua = strstr(c->text, "Q(b, i, h, d)")   ? "const float *ua = t_Q +"
                         : strstr(c->text, "P(b, h, i, j)") ? "const float *ua = t_P +"
                                                            : "const float *ua = t_A +";
        int32_t tn = c->n_len == 1 ? 0 : 1; // N's length tensor (qkt's len, vgemm's Nl)
        double mean_pn = 0;
        for (int32_t e = 0; e < c->n; e++)
            mean_pn += (double)(any_planned(c, tn) ? c->planned[tn][e] : c->lens[tn][e]) / c->n;
        bool a_in = perf->cands[cd->rank].cpu.gemm.re_a_in_place;
        // (attention x V's N is D, at most 64 here)
        RT_EXPECT(a_in == (strstr(c->text, "def attn_v") || mean_pn < RT_PERF_RENTRY_A_PACK_COLS));
        RT_EXPECT((strstr(cd->c_source, ua) != NULL) == a_in);
        RT_EXPECT((strstr(cd->c_source, "A block of the entry -> scratch") == NULL) == a_in);
        RT_EXPECT((strstr(cd->c_source, "* ulda + uk]") != NULL) ==
                  (a_in && strstr(ua, "t_Q") == NULL));
        // Long entries (two of them beyond half of any L2) prefetch the next row panel's rows of
        // A while one runs, in the micro-kernel's k loop (kir.h a_pf_next); short ones do not.
        int32_t lmax = 0;
        for (int32_t e = 0; e < c->n; e++)
            lmax = c->lens[0][e] > lmax ? c->lens[0][e] : lmax;
        if (lmax >= 700 || lmax <= 32)
            RT_EXPECT((strstr(cd->c_source, "__builtin_prefetch(&ua[upf + (upf ? uk % ") != NULL) ==
                      (lmax >= 700));
        // B's rows read in place where the plan says so (perfmodel re_b_in_place: V's rows of
        // nr-divisible D, a k block's rows within L1's ways at their stride), with no B pack;
        // packed otherwise. Short sentences over H = 8, D = 64 (rows 2 KiB apart) are read in
        // place on an L1 of 64 sets of at least 8 ways (2 x 8 rows >= 13). (num/test-layer-emit
        // compiles and runs such C: CORA's encoder layer's attention x V.)
        bool b_in = perf->cands[cd->rank].cpu.gemm.re_b_in_place;
        RT_EXPECT((strstr(cd->c_source, "const float *ub = t_V +") != NULL) == b_in);
        bool b_packed = strstr(cd->c_source, "B columns of the entry") ||
                        strstr(cd->c_source, "B rows of the entry");
        RT_EXPECT(b_packed == !b_in);
        const rt_mem_level *l1 = &dev->level[dev->n_levels - 2];
        if (c->v_in_place > 0 && l1->ways >= 8 && l1->capacity_bytes / (64 * l1->ways) == 64) {
            if (!b_in)
                fprintf(stderr, "case %llu candidate %d (%s): V packed\n", (unsigned long long)seed,
                        (int)i, cd->summary);
            RT_EXPECT(b_in);
        }
        if (!strstr(c->text, "def attn_v") || c->v_in_place < 0)
            RT_EXPECT(!b_in);
        // These small batches are warm (rt_perf_cpu_warm): the micro-kernels do not prefetch
        // their C tiles for writing (the plan's re_warm, kir.h no_pf_c); cold, they do.
        RT_EXPECT(cd->ll_source && (strstr(cd->ll_source, " warm\n") != NULL) == !cold &&
                  (strstr(cd->ll_source, "i32 1, i32 3, i32 1)") != NULL) == cold);
        // K's k contiguous on 16-lane vectors: each 16 rows of its panels are packed by 16 x 16
        // transposes (rt_perf_cpu_b_t16).
        int mr = 0, nr = 0;
        const char *uk = strstr(cd->summary, "micro-kernel ");
        // The LLVM emitter's transposes prefetch the next 16 rows' lines (kir.h rt_kir_tpack):
        // a warm plan has no other read prefetch.
        if (uk && sscanf(uk, "micro-kernel %dx%d", &mr, &nr) == 2 && strstr(c->text, "K(b, j")) {
            bool t16 = dev->lanes == 16 && nr % 16 == 0;
            RT_EXPECT((strstr(cd->c_source, "16 x 16 transposes") != NULL) == t16);
            if (t16 && !cold)
                RT_EXPECT(strstr(cd->ll_source, "i32 0, i32 3, i32 1)") != NULL);
        }
        // Entries one vector wide on average (as planned) take a micro-kernel of one vector of
        // columns (rt_perf_cpu_rentry_block); the longer ones a wider one.
        double mean_n = 0;
        for (int32_t e = 0; e < c->n; e++)
            mean_n += (double)(any_planned(c, 0) ? c->planned[0][e] : c->lens[0][e]) / c->n;
        if (strstr(c->text, "def qkt") && dev->lanes == 16 && !(mean_n <= 16 ? nr == 16 : nr > 16))
            fprintf(stderr, "case %llu: mean N %.1f, micro-kernel %dx%d\n",
                    (unsigned long long)seed, mean_n, mr, nr);
        if (strstr(c->text, "def qkt") && dev->lanes == 16)
            RT_EXPECT(mean_n <= 16 ? nr == 16 : nr > 16);
    }
    rt_arena_free(a);
}

#define QKT(B, H, D)                                                                               \
    "size B = " #B "\nsize H = " #H "\nsize D = " #D "\n"                                          \
    "def qkt(int32(B) len, float(b:B, len(b), H, D) Q, float(b:B, len(b), H, D) K) -> (S) {\n"     \
    "    S(b, h, i, j) +=! Q(b, i, h, d) * K(b, j, h, d) * 0.125\n}"
#define ATTNV(B, H, D)                                                                             \
    "size B = " #B "\nsize H = " #H "\nsize D = " #D "\n"                                          \
    "def attn_v(int32(B) len, float(b:B, H, i:len(b), len(b)) P, float(b:B, len(b), H, D) V) "     \
    "-> (O) {\n    O(b, i, h, d) +=! P(b, h, i, j) * V(b, j, h, d)\n}"
#define VGEMM(B)                                                                                   \
    "size B = " #B "\n"                                                                            \
    "def vgemm(int32(B) Ml, int32(B) Nl, int32(B) Kl,\n"                                           \
    "          float(b:B, Ml(b), Kl(b)) A, float(b:B, Kl(b), Nl(b)) Bt) -> (C) {\n"                \
    "    C(b, m, n) +=! A(b, m, k) * Bt(b, k, n)\n}"

int main(void) {
    rt_device dev;
    if (!rt_num_host(&dev))
        return 77;
    static const ecase cases[] = {
        // qkt: lengths 0, 1 and primes; a prime head size.
        {QKT(8, 3, 37), 8, 1, {{5, 0, 1, 13, 7, 3, 0, 31}}, {{0}}, 0},
        // K's transposed pack into 8-row sub-panels (kir.h b_sub): a prime head size above kc's
        // vector steps (a tail of k lanes), lengths whose last 16-wide panel has a cut 8-row
        // sub-panel (29), one valid row (17), none in its second half (8), several column
        // blocks (113), and 0 and 1.
        {QKT(6, 2, 67), 6, 1, {{17, 29, 0, 1, 113, 8}}, {{0}}, 0},
        // All equal, a multiple of the micro-kernel.
        {QKT(4, 2, 64), 4, 1, {{48, 48, 48, 48}}, {{0}}, 0},
        // One long plus many short: several row and column blocks in one entry.
        {QKT(12, 2, 16), 12, 1, {{401, 1, 2, 1, 3, 0, 1, 2, 5, 1, 1, 1}}, {{0}}, 0},
        // Bound lengths longer and shorter than planned.
        {QKT(4, 2, 8), 4, 1, {{90, 0, 61, 2}}, {{1, 2, 1, 1}}, 0},
        // attn_v: the reduction over len(b), primes, 0 and 1.
        {ATTNV(8, 3, 29), 8, 1, {{5, 0, 1, 13, 7, 3, 0, 31}}, {{0}}, 0},
        // A long reduction (several k blocks) beside short ones.
        {ATTNV(6, 2, 16), 6, 1, {{700, 1, 0, 2, 3, 1}}, {{0}}, 0},
        // V read in place (BERT's heads, short sentences: 0, 1, primes); then longer ones
        // whose rows, 2 KiB apart, would not stay in L1: V packed.
        {ATTNV(6, 8, 64), 6, 1, {{5, 0, 1, 13, 11, 2}}, {{0}}, 1},
        {ATTNV(4, 8, 64), 4, 1, {{97, 3, 0, 41}}, {{0}}, -1},
        // vgemm: M, N, K of their own per entry, zeros anywhere (K = 0: C must be zeroed).
        {VGEMM(6),
         6,
         3,
         {{7, 0, 13, 1, 20, 5}, {11, 4, 0, 1, 33, 6}, {3, 9, 5, 1, 0, 300}},
         {{0}, {0}, {0}},
         0},
        // All equal.
        {VGEMM(3), 3, 3, {{32, 32, 32}, {48, 48, 48}, {16, 16, 16}}, {{0}, {0}, {0}}, 0},
        // B packed once per entry, k block and run of columns, and reused by every row block
        // of the entry a thread owns: an entry of several row blocks (split between the 2
        // threads) and k blocks (of equal depth) beside small ones, bound where the plan
        // expected narrow entries (several runs of B's columns).
        {VGEMM(3),
         3,
         3,
         {{200, 7, 1}, {120, 1, 13}, {400, 3, 0}},
         {{40, 7, 1}, {9, 1, 3}, {50, 3, 1}},
         0},
        // Wide entries (N 529-700, as planned): A packed, not read in place (a prime M, K of
        // 3 and 0 rows).
        {VGEMM(3), 3, 3, {{5, 0, 17}, {600, 700, 529}, {3, 40, 11}}, {{0}, {0}, {0}}, 0},
        // Heads inside the sequences (runs of 7 equal-cost entries that the work items' cost
        // ranges cut), an empty sequence's run, primes; then the heads outside (runs of one).
        {QKT(5, 7, 64), 5, 1, {{1, 0, 23, 2, 11}}, {{0}}, 0},
        {"size B = 5\ndef f(int32(B) len, float(b:B, len(b), 3, 64) Q, float(b:B, len(b), 3, 64) K)"
         " -> (float(h:3, b:B, len(b), len(b)) S) {\n"
         "    S(h, b, i, j) +=! Q(b, i, h, d) * K(b, j, h, d)\n}",
         5,
         1,
         {{13, 1, 0, 29, 17}},
         {{0}},
         0},
        // '+=' onto the caller's output.
        {"size B = 4\ndef f(int32(B) len, float(b:B, len(b), 2, 17) Q, float(b:B, len(b), 2, 17) K)"
         " -> (float(b:B, 2, len(b), len(b)) S) {\n"
         "    S(b, h, i, j) += Q(b, i, h, d) * K(b, j, h, d)\n}",
         4,
         1,
         {{3, 0, 19, 1}},
         {{0}},
         0},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++)
        run_case(&dev, &cases[i], 1 + i, false);
    // The first two again as plans of an operator that is not warm (software prefetches).
    for (size_t i = 0; i < 2; i++)
        run_case(&dev, &cases[i], 1 + i, true);
    return rt_test_finish("test-cpu-ragged-entry");
}
