// test-gpu-work-list: the work list of a ragged GPU phase (gpu-plan.h work_list, built by
// gpu-launch.c rt_gpu_work_list) against an oracle that walks every element of the tiling
// statement's output domain: the list holds exactly the blocks holding an element (each once),
// in longest-first order of the oracle's block work (the most reduction iterations of any of
// its elements), and the launch has one block per entry. qkt, causal masked_qkt (grid z's
// range reads grid y's var), attn_v (ragged reduction) and vgemm (three length tensors) on the v100 and mi50 plans (top 2), with lengths holding 0, 1,
// primes, all equal, and one long among many short; the old grid's block count is printed
// beside the list's.
#include "test.h"

#include "run-gpu.h"
#include "gpu-plan.h"
#include "spec-eval.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct oracle {
    rt_bindings *b;
    const rt_stmt *s;
    int64_t vals[64];
} oracle;

static rt_status leaf(rt_spec_eval *se, const rt_expr *e, int64_t *out) {
    oracle *o = se->ctx;
    int64_t idx[RT_MAX_DIMS], off;
    switch (e->kind) {
    case RT_EXPR_SIZE:
        *out = o->b->sizes[e->sym];
        return RT_OK;
    case RT_EXPR_INDEX:
        *out = o->vals[e->var];
        return RT_OK;
    case RT_EXPR_READ:
        for (int32_t i = 0; i < e->n_args; i++)
            RT_TRY(rt_spec_eval_int(se, e->args[i], &idx[i]));
        if (!rt_tensor_offset(o->b, e->tensor, idx, &off))
            break;
        *out = (int64_t)o->b->tensors[e->tensor].data[off];
        return RT_OK;
    default:
        break;
    }
    return rt_fail(se->err, RT_ERR_SPEC, e->loc, "oracle: unknown leaf");
}

static int64_t eval(oracle *o, const rt_expr *e) {
    rt_err err = {0};
    rt_spec_eval se = {.op = o->b->op, .stmt = o->s, .err = &err, .ctx = o, .leaf = leaf};
    int64_t v = 0;
    RT_EXPECT_EQ(rt_spec_eval_int(&se, e, &v), RT_OK);
    return v;
}

// The oracle's blocks: per block (x item, y, z) of the padded grid, the most reduction
// iterations of an element in it, -1 for a block holding no element.
typedef struct blocks {
    const rt_gpu_phase_plan *pl;
    int64_t nx, ny, nz; // the padded grid
    double *work;       // [nx * ny * nz]
} blocks;

static void walk(oracle *o, blocks *bl, int32_t v) {
    const rt_stmt *s = o->s;
    const rt_gpu_phase_plan *pl = bl->pl;
    if (v < s->n_lhs) {
        int64_t lo = eval(o, s->vars[v].lo), hi = eval(o, s->vars[v].hi);
        for (int64_t x = lo; x < hi; x++) {
            o->vals[v] = x;
            walk(o, bl, v + 1);
        }
        return;
    }
    double work = 1;
    for (int32_t r = 0; r < s->n_vars; r++)
        if (s->vars[r].is_reduce) {
            int64_t lo = eval(o, s->vars[r].lo), hi = eval(o, s->vars[r].hi);
            work *= (double)(hi > lo ? hi - lo : 0);
        }
    int64_t item = 0, y = 0, z = 0;
    for (int32_t d = 0; d < pl->n_dims; d++) {
        const rt_gpu_dim *g = &pl->dims[d];
        if (g->grid > 0) {
            int64_t blk = o->vals[g->members[0]] / g->T1;
            *(g->grid == 1 ? &y : &z) = blk;
            continue;
        }
        int64_t lin = 0;
        for (int32_t k = 0; k < g->n_members; k++)
            lin = lin * g->mext[k] + (o->vals[g->members[k]] - g->mlo[k]);
        item = item * g->nb + lin / g->T1;
    }
    RT_EXPECT(item < bl->nx && y < bl->ny && z < bl->nz);
    double *w = &bl->work[(item * bl->ny + y) * bl->nz + z];
    *w = work > *w ? work : *w;
}

static int n_lists, n_phases_checked;

static void check_case(rt_arena *a, const rt_op *op, const rt_gpu_kernel *k, const char *what,
                       const int32_t *const *lens, int64_t n) {
    rt_err err = {0};
    rt_bindings *b = NULL;
    RT_EXPECT_EQ(rt_bindings_new(a, op, 7, &b, &err), RT_OK);
    for (int32_t t = 0; t < op->n_tensors; t++)
        if (op->tensors[t].is_length)
            RT_EXPECT_EQ(rt_bindings_set_lengths(b, op->tensors[t].name, lens[0], n, &err), RT_OK);
    RT_EXPECT_EQ(rt_bindings_prepare(b, &err), RT_OK);
    for (int32_t p = 0; p < k->n_phases; p++) {
        const rt_gpu_phase *gp = &k->phases[p];
        if (!gp->work)
            continue;
        const rt_gpu_phase_plan *pl = gp->work;
        oracle o = {.b = b, .s = &op->stmts[pl->tstmt]};
        blocks bl = {.pl = pl, .nx = gp->grid_x, .ny = 1, .nz = 1};
        int64_t maxlen = 0;
        for (int64_t i = 0; i < n; i++)
            maxlen = lens[0][i] > maxlen ? lens[0][i] : maxlen;
        for (int32_t d = 0; d < pl->n_dims; d++)
            if (pl->dims[d].grid > 0)
                *(pl->dims[d].grid == 1 ? &bl.ny : &bl.nz) =
                    maxlen / pl->dims[d].T1 + 1; // every extent here is at most maxlen
        int64_t nb = bl.nx * bl.ny * bl.nz, padded = bl.nx;
        for (int32_t d = 0; d < pl->n_dims; d++)
            if (pl->dims[d].grid > 0)
                padded *= maxlen > 0 ? (maxlen + pl->dims[d].T1 - 1) / pl->dims[d].T1 : 1;
        bl.work = malloc((size_t)nb * sizeof *bl.work);
        for (int64_t i = 0; i < nb; i++)
            bl.work[i] = -1;
        walk(&o, &bl, 0);
        int64_t want = 0;
        for (int64_t i = 0; i < nb; i++)
            want += bl.work[i] >= 0;
        int32_t *w = NULL;
        int64_t n_ints = 0, count = -1;
        RT_EXPECT_EQ(rt_gpu_work_list(a, k, p, b, &w, &n_ints, &err), RT_OK);
        RT_EXPECT_EQ(rt_gpu_work_count(k, p, b, &count, &err), RT_OK);
        rt_gpu_launch L;
        RT_EXPECT_EQ(rt_gpu_phase_launch(k, p, b, &L, &err), RT_OK);
        RT_EXPECT_EQ(w[0], want);
        RT_EXPECT_EQ(count, want);
        RT_EXPECT_EQ(n_ints, 1 + 3 * want);
        RT_EXPECT_EQ((int64_t)L.grid[0], want > 0 ? want : 1);
        RT_EXPECT(L.grid[1] == 1 && L.grid[2] == 1);
        double prev = 1e300;
        bool ordered = true, exact = true;
        for (int64_t e = 0; e < w[0] && e < want; e++) {
            int64_t x = w[1 + 3 * e], y = w[2 + 3 * e], z = w[3 + 3 * e];
            if (x < 0 || x >= bl.nx || y < 0 || y >= bl.ny || z < 0 || z >= bl.nz) {
                exact = false;
                continue;
            }
            double *bw = &bl.work[(x * bl.ny + y) * bl.nz + z];
            exact = exact && *bw >= 0; // non-empty, and not listed before
            ordered = ordered && *bw <= prev;
            prev = *bw >= 0 ? *bw : prev;
            *bw = -2;
        }
        RT_EXPECT(exact);
        RT_EXPECT(ordered);
        printf("%-40s phase %d: %lld blocks listed (padded grid: %lld)%s%s\n", what, (int)p,
               (long long)w[0], (long long)padded, exact ? "" : "  NOT THE NON-EMPTY BLOCKS",
               ordered ? "" : "  NOT LONGEST FIRST");
        free(bl.work);
        n_lists++;
    }
}

int main(void) {
    static const int32_t zero[] = {0, 0, 0, 0, 0, 0, 0};
    static const int32_t ones[] = {1, 0, 1, 1, 0, 1, 1};
    static const int32_t primes[] = {2, 3, 5, 7, 61, 127, 131};
    static const int32_t equal[] = {100, 100, 100, 100, 100, 100, 100};
    static const int32_t skew[] = {3, 1, 2, 257, 1, 2, 3};
    static const int32_t mixed[] = {0, 137, 1, 19, 0, 64, 65};
    static const struct {
        const char *name;
        const int32_t *len;
    } sets[] = {{"zero", zero},   {"ones", ones},     {"primes", primes},
                {"equal", equal}, {"one long", skew}, {"mixed", mixed}};
    static const struct {
        const char *spec, *sets;
    } specs[] = {{"qkt", "B=7,H=2,D=5"},
                 {"masked_qkt", "B=7,H=2,D=5"},
                 {"attn_v", "B=7,H=2,D=3"},
                 {"vgemm", "B=7"}};
    static const char *devs[] = {"devices/v100.ini", "devices/mi50.ini"};
    for (size_t d = 0; d < sizeof devs / sizeof *devs; d++) {
        rt_device dev;
        rt_err err = {0};
        RT_EXPECT_EQ(rt_hal_load_device(devs[d], &dev, &err), RT_OK);
        for (size_t s = 0; s < sizeof specs / sizeof *specs; s++) {
            rt_arena *a = rt_arena_new(1 << 20);
            rt_size_binding sz[3];
            int32_t nsz = 0;
            char *text = rt_arena_strdup(a, specs[s].sets);
            for (char *tok = strtok(text, ","); tok; tok = strtok(NULL, ",")) {
                char *eq = strchr(tok, '=');
                *eq = 0;
                sz[nsz++] = (rt_size_binding){.name = tok, .value = atoll(eq + 1)};
            }
            char path[128];
            snprintf(path, sizeof path, "examples/%s.spec", specs[s].spec);
            rt_op *op = NULL;
            rt_perf_result *perf = NULL;
            rt_perf_options popt = {.top_k = 2};
            RT_EXPECT_EQ(rt_spec_load(a, path, sz, nsz, &op, &err), RT_OK);
            RT_EXPECT_EQ(rt_perf_construct(a, op, &dev, &popt, &perf, &err), RT_OK);
            for (int32_t rank = 1; perf && rank <= perf->n_cands; rank++) {
                rt_gpu_candidate c;
                RT_EXPECT_EQ(
                    rt_gpu_emit_candidate(a, perf, rank, RT_GPU_TARGET_OPENCL, NULL, &c, &err),
                    RT_OK);
                bool any = false;
                for (int32_t p = 0; p < c.kernel->n_phases; p++)
                    any = any || c.kernel->phases[p].work != NULL;
                RT_EXPECT(any); // every ragged contraction here runs a work list
                RT_EXPECT(strstr(c.source, "runs a work list") != NULL);
                n_phases_checked += any;
                for (size_t l = 0; l < sizeof sets / sizeof *sets; l++) {
                    char what[128];
                    snprintf(what, sizeof what, "%s %s rank %d %s", specs[s].spec,
                             strrchr(devs[d], '/') + 1, (int)rank, sets[l].name);
                    const int32_t *lens[1] = {sets[l].len};
                    check_case(a, op, c.kernel, what, lens, 7);
                }
            }
            rt_arena_free(a);
        }
    }
    RT_EXPECT(n_lists >= 80);
    return rt_test_finish("test-gpu-work-list");
}
