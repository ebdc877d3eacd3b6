// test-cpu-ops.c: every example op the CPU backend lowers, on small random, ragged-tail, size-1
// and prime shapes (bound through rt_spec_load's --set bindings), built for the host CPU: the
// top-K candidates are JIT-compiled, run in isolated children and checked against the reference
// interpreter with the per-dtype tolerances of rtgen.c; every candidate must come out "ok".
// Then the winner runs in-process and its outputs are compared once more here.
#include "test.h"
#include "num-host.h"

#include "rtgen.h"
#include "compare.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

typedef struct ocase {
    const char *spec;  // examples/<spec>.spec, or the spec text itself when it has a '('
    const char *sets;  // "M=7,N=33" or ""
    const char *check; // expected reference (NULL: "interpreter")
} ocase;

static int32_t parse_sets(rt_arena *a, const char *text, rt_size_binding *out) {
    int32_t n = 0;
    char *s = rt_arena_strdup(a, text);
    for (char *tok = strtok(s, ","); tok && n < 8; tok = strtok(NULL, ",")) {
        char *eq = strchr(tok, '=');
        *eq = 0;
        out[n].name = tok;
        out[n].value = atoll(eq + 1);
        n++;
    }
    return n;
}

static void run_case(const rt_device *dev, const ocase *c, uint64_t seed) {
    rt_arena *a = rt_arena_new(1 << 20);
    rt_err err = {0};
    rt_size_binding sets[8];
    int32_t n_sets = parse_sets(a, c->sets, sets);
    char path[256];
    snprintf(path, sizeof path, "examples/%s.spec", c->spec);
    bool text = strchr(c->spec, '(') != NULL;
    rt_op *op = NULL;
    rt_perf_result *perf = NULL;
    rt_bindings *b = NULL;
    rt_cpu_report *rep = NULL;
    rt_perf_options popt = {.top_k = 3};
    // The interpreter is the oracle here up to 16M points (proj's 6M would take the vector check).
    rt_cpu_options copt = {
        .profile = true, .budget_ms = 2, .threads = 2, .interp_max_points = 1 << 24};
    if ((text ? rt_spec_parse(a, c->spec, "inline.spec", sets, n_sets, &op, &err)
              : rt_spec_load(a, path, sets, n_sets, &op, &err)) != RT_OK ||
        rt_perf_construct(a, op, dev, &popt, &perf, &err) != RT_OK ||
        rt_bindings_new(a, op, seed, &b, &err) != RT_OK ||
        rt_cpu_build_and_profile(a, op, dev, b, perf, &copt, &rep, &err) != RT_OK) {
        char msg[1024];
        rt_err_format(&err, "test", true, msg, sizeof msg);
        fprintf(stderr, "%s [%s] seed %llu: %s\n", c->spec, c->sets, (unsigned long long)seed, msg);
        RT_EXPECT(0);
        rt_arena_free(a);
        return;
    }
    RT_EXPECT(rep->n >= 1);
    for (int32_t i = 0; i < rep->n; i++) {
        const rt_cpu_cand *cd = &rep->cands[i];
        if (cd->status != RT_CPU_CAND_OK)
            fprintf(stderr, "%s [%s] seed %llu: candidate %d (%s): %s, max abs err %g, nmse %g\n",
                    c->spec, c->sets, (unsigned long long)seed, (int)i, cd->summary,
                    rt_cpu_cand_status_name(cd->status), cd->max_abs_err, cd->nmse);
        RT_EXPECT_EQ(cd->status, RT_CPU_CAND_OK);
        RT_EXPECT_STR(cd->check, c->check ? c->check : "interpreter");
    }
    RT_EXPECT(rep->winner >= 0);
    // The winner in-process: outputs into a second set of bindings, compared to the first.
    rt_bindings *b2 = NULL;
    if (rt_bindings_new(a, op, seed, &b2, &err) == RT_OK &&
        rt_cpu_run_winner(rep, b2, &err) == RT_OK) {
        for (int32_t t = 0; t < op->n_tensors; t++) {
            if (op->tensors[t].role != RT_ROLE_OUTPUT || c->check)
                continue;
            rt_compare_result cr;
            rt_compare_data(b->tensors[t].data, b2->tensors[t].data, b->tensors[t].layout.elems,
                            &cr);
            if (!rt_compare_accept(&cr, op->tensors[t].dtype))
                fprintf(stderr, "%s [%s]: winner output %s nmse %g, max err %g\n", c->spec, c->sets,
                        op->tensors[t].name, cr.nmse, cr.max_abs_err);
            RT_EXPECT(rt_compare_accept(&cr, op->tensors[t].dtype));
        }
    } else {
        fprintf(stderr, "%s: run winner: %s\n", c->spec, err.msg);
        RT_EXPECT(0);
    }
    rt_arena_free(a);
}

// Candidates that lower to the same code share one compilation and one profile: candidate 0 is
// put in the ranking three times around another one; the copies must report the original's
// measurements and never become the winner in its place.
static void dedup_case(const rt_device *dev) {
    rt_arena *a = rt_arena_new(1 << 20);
    rt_err err = {0};
    rt_size_binding sets[3] = {{"M", 45}, {"N", 67}, {"K", 33}};
    rt_op *op = NULL;
    rt_perf_result *perf = NULL;
    rt_bindings *b = NULL;
    rt_cpu_report *rep = NULL;
    rt_perf_options popt = {.top_k = 4};
    rt_cpu_options copt = {.profile = true, .budget_ms = 2, .threads = 1};
    if (rt_spec_load(a, "examples/matmul.spec", sets, 3, &op, &err) != RT_OK ||
        rt_perf_construct(a, op, dev, &popt, &perf, &err) != RT_OK) {
        fprintf(stderr, "dedup: %s\n", err.msg);
        RT_EXPECT(0);
        rt_arena_free(a);
        return;
    }
    rt_rprog *c4 = rt_arena_calloc(a, 4, sizeof *c4);
    c4[0] = c4[1] = c4[3] = perf->cands[0];
    c4[2] = perf->cands[perf->n_cands - 1]; // may or may not lower like candidate 0
    perf->cands = c4;
    perf->n_cands = 4;
    RT_EXPECT_EQ(rt_bindings_new(a, op, 3, &b, &err), RT_OK);
    RT_EXPECT_EQ(rt_cpu_build_and_profile(a, op, dev, b, perf, &copt, &rep, &err), RT_OK);
    if (!rep) {
        rt_arena_free(a);
        return;
    }
    RT_EXPECT_EQ(rep->cands[0].same_as, -1);
    RT_EXPECT_EQ(rep->cands[1].same_as, 0);
    RT_EXPECT_EQ(rep->cands[3].same_as, 0);
    for (int32_t i = 0; i < 4; i++)
        RT_EXPECT_EQ(rep->cands[i].status, RT_CPU_CAND_OK);
    RT_EXPECT(rep->cands[1].median_ns == rep->cands[0].median_ns);
    RT_EXPECT(rep->cands[3].reps == rep->cands[0].reps);
    RT_EXPECT(rep->winner >= 0 && rep->cands[rep->winner].same_as < 0);
    RT_EXPECT(rep->cands[2].same_as == -1 || rep->cands[2].same_as == 0);
    // The copies keep their own names and sources.
    RT_EXPECT(strcmp(rep->cands[1].name, rep->cands[0].name) != 0);
    RT_EXPECT(strstr(rep->cands[3].ll_source, rep->cands[3].name) != NULL);
    rt_arena_free(a);
}

int main(void) {
    rt_device dev;
    if (!rt_num_host(&dev))
        return 77;
    static const ocase cases[] = {
        {"matmul", "M=64,N=64,K=64", NULL},
        {"matmul", "M=37,N=53,K=29", NULL}, // primes: edge tiles everywhere
        {"matmul", "M=1,N=1,K=1", NULL},
        {"matmul", "M=97,N=131,K=1", NULL},
        // The Roller-sized examples with small literal shapes (odd tails, size-1 dims).
        {"def relu(float(3, 7, 5, 19) I) -> (O) {\n O(n, c, h, w) = max(I(n, c, h, w), 0)\n}", "",
         NULL},
        {"def reduce_mean(float(3, 5, 67) I) -> (O) {\n O(b, r) +=! I(b, r, l) / 67\n}", "", NULL},
        {"def softmax(float(13, 37) X) -> (Y) {\n mx(n) max=! X(n, d)\n"
         " e(n, d) = exp(X(n, d) - mx(n))\n s(n) +=! e(n, d)\n Y(n, d) = e(n, d) / s(n)\n}",
         "", NULL},
        {"def softmax1(float(1, 1) X) -> (Y) {\n mx(n) max=! X(n, d)\n"
         " e(n, d) = exp(X(n, d) - mx(n))\n s(n) +=! e(n, d)\n Y(n, d) = e(n, d) / s(n)\n}",
         "", NULL},
        // A 3-D temporary kept as a per-thread row, and one read after its group (kept in memory).
        {"def rownorm(float(5, 3, 7) X) -> (Y) {\n mx(n) max=! X(n, c, d)\n"
         " e(n, c, d) = exp(X(n, c, d) - mx(n))\n s(n) +=! e(n, c, d)\n"
         " Y(n, c, d) = e(n, c, d) / s(n)\n}",
         "", NULL},
        {"def rowsum(float(5, 7) X) -> (Y, Z) {\n mx(n) max=! X(n, d)\n"
         " e(n, d) = exp(X(n, d) - mx(n))\n s(n) +=! e(n, d)\n Y(n, d) = e(n, d) / s(n)\n"
         " Z(d) +=! e(n, d)\n}",
         "", NULL},
        {"def avgpool(float(2, 3, 11, 9) I) -> (float(2, 3, 5, 4) O) {\n"
         " O(n, c, y, x) +=! I(n, c, 2*y + r, 2*x + s) / 9   where r in 0:3, s in 0:3\n}",
         "", NULL},
        {"def dwconv(float(2, 3, 11, 9) I pad 0, float(3, 5, 5) Wt) -> (float(2, 3, 6, 5) O) {\n"
         " O(n, c, y, x) +=! I(n, c, 2*y + r - 2, 2*x + s - 2) * Wt(c, r, s)\n}",
         "", NULL},
        {"size M = 23\nsize N = 19\nsize K = 31\n"
         "def acc(float(M, K) A, float(K, N) B) -> (float(M, N) C) {\n"
         " C(m, n) += A(m, k) * B(k, n)\n}",
         "", NULL},
        {"linear_gelu", "M=17", "naive-kernel"}, // too large to interpret: the naive kernel
        {"size M = 19\ndef linear_gelu(float(M, 40) X, float(40, 70) Wt, float(70) bias) -> (Y) {\n"
         " t(m, n) +=! X(m, k) * Wt(k, n)\n"
         " Y(m, n) = 0.5 * (t(m, n) + bias(n)) * (1 + erf((t(m, n) + bias(n)) * 0.70710678))\n}",
         "", NULL},
        {"conv2d", "N=2,C=3,H=9,W=7,F=5,OH=4,OW=3", NULL},
        {"vgemm", "B=3", NULL},
        {"trmm", "N=19,P=23", NULL},
        {"qkt", "B=3,H=2,D=5", NULL},
        {"masked_qkt", "B=3,H=2,D=5", NULL},
        {"ragged_softmax", "B=3,H=2", NULL},
        {"attn_v", "B=3,H=2,D=7", NULL},
        {"proj", "B=3", NULL},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++)
        run_case(&dev, &cases[i], 1 + i);
    dedup_case(&dev);
    return rt_test_finish("test-cpu-ops");
}
