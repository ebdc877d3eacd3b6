// test-gpu-opencl-run.h: the PoCL check shared by the test-gpu-opencl-*.c tests. For each case
// (an example spec with --set sizes, or an inline spec) and each of v100.ini and mi50.ini, the
// top-2 rPrograms rtgen constructs for that CUDA / HIP device are lowered, printed in the OpenCL
// dialect (--emit=opencl), run on PoCL (every phase, output buffers poisoned) and checked by
// rt_gpu_check_run: every output through the one acceptance rule against the reference
// interpreter, every input unchanged. RTGEN_DUMP_GPU=DIR keeps every emitted source.
#ifndef RT_TEST_GPU_OPENCL_RUN_H
#define RT_TEST_GPU_OPENCL_RUN_H

#include "test.h"

#include "run-gpu.h"
#include "interp.h"
#include "pocl-devices.h"

#include <stdio.h>
#include <string.h>

typedef struct gcase {
    const char *spec; // examples/<spec>.spec, or the spec text itself when it has a '('
    const char *sets; // "M=7,N=33" or ""
} gcase;

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

// n_vec_shared / n_vec_global: candidates reading register fragments from shared memory with
// vload4 / copying tiles from global memory with vload4 (the plan's 128-bit loads); n_split:
// candidates whose plan splits interior from edge blocks (the plan's "edge split").
// n_rows: phases in rows mode (gpu-plan.h: a row's threads sharing its reductions).
static int n_staged, n_runs, n_vec_shared, n_vec_global, n_split, n_rows;
// run_cases fails when fewer kernels than this are staged (set by a test before it).
static int min_staged;

static void run_case(rt_gpu_runtime *rt, const rt_device *ocl, const rt_device *dev, const gcase *c,
                     uint64_t seed) {
    rt_arena *a = rt_arena_new(1 << 20);
    rt_err err = {0};
    rt_size_binding sets[8];
    int32_t n_sets = parse_sets(a, c->sets, sets);
    char path[256];
    snprintf(path, sizeof path, "examples/%s.spec", c->spec);
    bool text = strchr(c->spec, '(') != NULL;
    rt_op *op = NULL;
    rt_perf_result *perf = NULL;
    rt_perf_options popt = {.top_k = 2};
    const char *what = text ? "inline" : c->spec;
    if ((text ? rt_spec_parse(a, c->spec, "inline.spec", sets, n_sets, &op, &err)
              : rt_spec_load(a, path, sets, n_sets, &op, &err)) != RT_OK ||
        rt_perf_construct(a, op, dev, &popt, &perf, &err) != RT_OK) {
        char msg[1024];
        rt_err_format(&err, "test", true, msg, sizeof msg);
        fprintf(stderr, "%s [%s] on %s: %s\n", what, c->sets, dev->path, msg);
        RT_EXPECT(0);
        rt_arena_free(a);
        return;
    }
    what = op->name;
    for (int32_t rank = 1; rank <= perf->n_cands; rank++) {
        rt_gpu_candidate cand;
        rt_bindings *b = NULL;
        rt_gpu_check chk;
        rt_err_clear(&err);
        rt_status st =
            rt_gpu_emit_candidate(a, perf, rank, RT_GPU_TARGET_OPENCL, NULL, &cand, &err);
        const char *dump = getenv("RTGEN_DUMP_GPU");
        if (st == RT_OK && dump) {
            char fn[512];
            snprintf(fn, sizeof fn, "%s/%s-%s-%d.cl", dump, what, strrchr(dev->path, '/') + 1,
                     (int)rank);
            FILE *f = fopen(fn, "w");
            if (f) {
                fputs(cand.source, f);
                fclose(f);
            }
        }
        if (st == RT_OK)
            st = rt_bindings_new(a, op, seed, &b, &err);
        if (st == RT_OK)
            st = rt_gpu_check_run(a, rt, ocl, &cand, b, &chk, &err);
        n_runs++;
        if (st != RT_OK) {
            char msg[1024];
            rt_err_format(&err, "test", true, msg, sizeof msg);
            fprintf(stderr, "%s [%s] on %s, rank %d: %s\n%s\n", what, c->sets, dev->path, (int)rank,
                    msg, err.log ? err.log : "");
            RT_EXPECT(0);
            continue;
        }
        for (int32_t i = 0; i < cand.kernel->n_phases; i++) {
            n_staged += cand.kernel->phases[i].staged;
            n_rows += strncmp(cand.kernel->phases[i].what, "rows:", 5) == 0;
        }
        n_vec_shared += strstr(cand.source, "= vload4(0, &sh_") != NULL;
        n_vec_global += strstr(cand.source, "= vload4(0, &t_") != NULL;
        n_split += strstr(cand.source, "; edge split: interior ") != NULL;
        bool ok = chk.n_outputs == op->n_outputs && chk.accepted;
        printf("%-14s %-28s %-10s rank %d: %d kernel(s) [%s], nmse %.2e, max rel %.2e%s\n", what,
               c->sets, strrchr(dev->path, '/') + 1, (int)rank, (int)cand.kernel->n_phases,
               cand.kernel->phases[0].what, chk.nmse, chk.max_rel_err, ok ? "" : "  MISMATCH");
        RT_EXPECT(ok);
    }
    rt_arena_free(a);
}

// Runs cases on PoCL for the v100 and mi50 tile programs; 77 when no OpenCL device matches.
static inline int run_cases(const char *name, const gcase *cases, size_t n_cases) {
    rt_device ocl, devs[2];
    rt_arena *a = rt_arena_new(1 << 16);
    rt_gpu_runtime *rt = NULL;
    int rc = pocl_open(a, &ocl, devs, &rt);
    if (rc != 0) {
        rt_arena_free(a);
        return rc;
    }
    for (int32_t d = 0; d < 2; d++)
        for (size_t i = 0; i < n_cases; i++)
            run_case(rt, &ocl, &devs[d], &cases[i], 1 + i);
    printf("%d runs, %d staged kernels, %d with 128-bit shared loads, %d with 128-bit copies\n",
           n_runs, n_staged, n_vec_shared, n_vec_global);
    RT_EXPECT(n_staged >= min_staged);
    rt_arena_free(a);
    return rt_test_finish(name);
}

#endif
