// cpu-case.h: the common path of the CPU backend's numerical tests. One spec is parsed, its top
// K constructed for the host, bound to random inputs (and, for ragged specs, a length tensor
// "len"), built, profiled and checked in the child against the reference interpreter; then
// each test asks of every candidate what its own lowering must show (cpu_case_expect).
#ifndef RT_CPU_CASE_H
#define RT_CPU_CASE_H

#include "test.h"

#include "rtgen.h"

#include <stdio.h>
#include <string.h>

typedef struct cpu_case {
    const char *text;          // the spec
    const char *file;          // its name in messages
    int32_t top_k;             // candidates built and checked
    uint64_t seed;             // of the random inputs
    int64_t interp_max_points; // the largest op the interpreter checks (0: the default)
    const int32_t *lens;       // ragged: the lengths bound to "len" (NULL: not ragged)
    const int32_t *planned;    // the lengths the model plans for (NULL: the bound ones)
    int32_t n_lens;            // the batch
    rt_op *op;                 // out: the parsed spec
    rt_bindings *b;            // out: the inputs and outputs of the check
    rt_cpu_report *rep;        // out: every candidate's status
} cpu_case;

// Runs the case in arena a. False, after the error and the spec on stderr and one failed
// expectation, when a step fails; true with c->op, c->b and c->rep set otherwise.
static inline bool cpu_case_build(rt_arena *a, const rt_device *dev, cpu_case *c) {
    rt_err err = {0};
    rt_perf_result *perf = NULL;
    rt_perf_options popt = {.top_k = c->top_k};
    rt_cpu_options copt = {
        .profile = true, .budget_ms = 1, .threads = 2, .interp_max_points = c->interp_max_points};
    rt_perf_length_dist d = {.tensor = "len"};
    bool ok = rt_spec_parse(a, c->text, c->file, NULL, 0, &c->op, &err) == RT_OK;
    if (ok && c->lens) {
        int64_t samples[256];
        ok = c->n_lens <= 256;
        for (int32_t i = 0; ok && i < c->n_lens; i++)
            samples[i] = c->planned ? c->planned[i] : c->lens[i];
        ok = ok && rt_extent_dist_from_samples(a, samples, c->n_lens, (rt_loc){0}, &d.dist, &err) ==
                       RT_OK;
        popt.lengths = &d;
        popt.n_lengths = 1;
    }
    ok = ok && rt_perf_construct(a, c->op, dev, &popt, &perf, &err) == RT_OK &&
         rt_bindings_new(a, c->op, c->seed, &c->b, &err) == RT_OK &&
         (!c->lens || rt_bindings_set_lengths(c->b, "len", c->lens, c->n_lens, &err) == RT_OK) &&
         rt_cpu_build_and_profile(a, c->op, dev, c->b, perf, &copt, &c->rep, &err) == RT_OK;
    if (!ok) {
        char msg[1024];
        rt_err_format(&err, "test", true, msg, sizeof msg);
        fprintf(stderr, "case %llu: %s\n%s\n", (unsigned long long)c->seed, msg, c->text);
        RT_EXPECT(0);
        return false;
    }
    RT_EXPECT(c->rep->n >= 1);
    return true;
}

// Candidate i must be "ok" by the check named `check` and have taken the lowering the test
// asked for (`path_ok`, its own reading of the candidate); printed when not.
static inline void cpu_case_expect(const cpu_case *c, int32_t i, bool path_ok, const char *check) {
    const rt_cpu_cand *cd = &c->rep->cands[i];
    if (cd->status != RT_CPU_CAND_OK || !path_ok || strcmp(cd->check, check) != 0)
        fprintf(
            stderr, "case %llu candidate %d (%s): %s by %s, path %s, max abs err %g, nmse %g\n%s\n",
            (unsigned long long)c->seed, (int)i, cd->summary, rt_cpu_cand_status_name(cd->status),
            cd->check, path_ok ? "as asked" : "NOT as asked", cd->max_abs_err, cd->nmse, c->text);
    RT_EXPECT_EQ(cd->status, RT_CPU_CAND_OK);
    RT_EXPECT_STR(cd->check, check);
    RT_EXPECT(path_ok);
}

#endif
