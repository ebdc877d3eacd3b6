// bench-contract.c: issue 20's contraction benchmarks. Each case is a spec constructed, JIT-built
// and profiled through librtgen on the host device, and its winner is timed in this process
// against its peers in the same run, on 1 and 2 threads:
//   bmm     dense batched attention scores, K transposed (BERT-base 12 heads, -large 16, x 64;
//           seq 128/384/512, batch 8) vs oneDNN's matmul primitive with batch dims;
//   qkt, attn_v, ffn1   ragged over batches of 32 and 64 lengths sampled (seed 1) from the four
//           histograms of bench/data/ vs (a) oneDNN on the batch padded to its longest sequence,
//           (b) a loop of oneDNN calls, one per sequence, (c) rtgen's dense GEMM of the same FLOPs;
//   trmm    lower and upper, 1000 and 2048, vs OpenBLAS cblas_strmm and rtgen's dense GEMM of the
//           full square;
//   vgemm   8 matrices, dims multiples of 128 in [512, 1408], vs dnnl_sgemm once per matrix.
// Every line compares rtgen with one peer against issue 20's target (PASS/MISS), and gives
// rtgen's median rate as % of the FMA peak measured in this run. rtgen's output is compared with
// every peer's (max |rtgen - peer| / max |peer|): above BENCH_TOL the line reads WRONG, not PASS.
// Reported, never asserted (style.md section 6); --self-test runs tiny cases and checks only
// that the peers agree with rtgen and every line is graded (ctest, label unit).
//
// usage: bench-contract [--quick] [--ops=NAME,...] [--threads=1,2] [--top-k=N] [--budget-ms=MS]
//                       [--timeout-ms=MS] [--list] [--self-test]
#include "bench-util.h"
#include "rtgen.h"

#include <cblas.h>
#include <dnnl.h>
#include <math.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

void openblas_set_num_threads(int n);
char *openblas_get_config(void);

// ORDER CB_KIND: cb_kind_names, cb_kind_specs.
typedef enum cb_kind {
    CK_BMM,
    CK_QKT,
    CK_ATTNV,
    CK_FFN1,
    CK_TRMM_L,
    CK_TRMM_U,
    CK_VGEMM,
    CK_COUNT
} cb_kind;
static const char *const cb_kind_names[] = {"bmm",        "qkt",        "attn_v", "ffn1",
                                            "trmm_lower", "trmm_upper", "vgemm"};
static const char *const cb_kind_specs[] = {
    "bench/specs/bmm_qkt.spec",     "examples/qkt.spec",  "examples/attn_v.spec",
    "bench/specs/ragged_ffn1.spec", "examples/trmm.spec", "bench/specs/trmm_upper.spec",
    "examples/vgemm.spec"};
_Static_assert(sizeof cb_kind_names / sizeof *cb_kind_names == CK_COUNT, "one name per cb_kind");
_Static_assert(sizeof cb_kind_specs / sizeof *cb_kind_specs == CK_COUNT, "one spec per cb_kind");

#define CB_MAX_BATCH 64
#define CB_MAX_CASES 64
#define CB_SEED      1    // the length samples and rtgen's input data
#define BENCH_TOL    1e-4 // max |rtgen - peer| / max |peer| above which a line reads WRONG

// One case. d[] by kind: BMM {B, H, S, D}; QKT/ATTNV {B, H, D}; FFN1 {B, K, N}; TRMM {N, P};
// VGEMM {B, lo, hi, step}. Length tensors (ragged: len; vgemm: Ml, Nl, Kl) are sampled before
// rtgen runs, so that rtgen and every peer see the same batch.
typedef struct cb_case {
    cb_kind kind;
    char name[48];
    char set[96];     // --set bindings of the spec
    const char *hist; // ragged: the histogram, relative to the source root; else NULL
    int64_t d[4];
    bool quick;
} cb_case;

typedef struct cb_opts {
    bool quick, list, self_test;
    const char *ops;
    int threads[4], n_threads;
    int top_k;
    double budget_ms, timeout_ms;
} cb_opts;

static const char *const cb_hists[] = {"cola", "mrpc", "squad", "race"};

// The cases of a run (self_test: tiny shapes, seconds in all); returns their number.
static int cb_cases(bool self_test, cb_case *out) {
    int n = 0;
    if (self_test) {
        out[n++] = (cb_case){CK_BMM, "bmm_tiny", "B=2,H=3,M=24,D=8", NULL, {2, 3, 24, 8}, true};
        out[n++] =
            (cb_case){CK_QKT, "qkt_tiny", "B=5,H=2,D=8", "bench/data/cola.hist", {5, 2, 8}, true};
        out[n++] = (cb_case){CK_ATTNV,  "attn_v_tiny", "B=5,H=2,D=8", "bench/data/cola.hist",
                             {5, 2, 8}, true};
        out[n++] = (cb_case){CK_FFN1,     "ffn1_tiny", "B=5,K=16,N=24", "bench/data/cola.hist",
                             {5, 16, 24}, true};
        out[n++] = (cb_case){CK_TRMM_L, "trmm_lower_tiny", "N=37,P=19", NULL, {37, 19}, true};
        out[n++] = (cb_case){CK_TRMM_U, "trmm_upper_tiny", "N=37,P=19", NULL, {37, 19}, true};
        out[n++] = (cb_case){CK_VGEMM, "vgemm_tiny", "B=3", NULL, {3, 8, 40, 8}, true};
        return n;
    }
    const int heads[2] = {12, 16}, seqs[3] = {128, 384, 512};
    for (int h = 0; h < 2; h++)
        for (int s = 0; s < 3; s++) {
            cb_case *c = &out[n++];
            *c = (cb_case){CK_BMM, "", "", NULL, {8, heads[h], seqs[s], 64}, seqs[s] == 128};
            snprintf(c->name, sizeof c->name, "bmm_%s_s%d", h ? "large" : "base", seqs[s]);
            snprintf(c->set, sizeof c->set, "B=8,H=%d,M=%d,D=64", heads[h], seqs[s]);
        }
    const cb_kind ragged[3] = {CK_QKT, CK_ATTNV, CK_FFN1};
    static char hist_path[4][48];
    for (int r = 0; r < 3; r++)
        for (int h = 0; h < 4; h++)
            for (int bt = 32; bt <= 64; bt *= 2) {
                cb_case *c = &out[n++];
                snprintf(hist_path[h], sizeof hist_path[h], "bench/data/%s.hist", cb_hists[h]);
                bool ffn = ragged[r] == CK_FFN1;
                *c = (cb_case){ragged[r],
                               "",
                               "",
                               hist_path[h],
                               {bt, ffn ? 512 : 8, ffn ? 2048 : 64},
                               bt == 32 && (h == 0 || (h == 1 && !ffn))};
                snprintf(c->name, sizeof c->name, "%s_%s_b%d", cb_kind_names[ragged[r]],
                         cb_hists[h], bt);
                snprintf(c->set, sizeof c->set, ffn ? "B=%d,K=512,N=2048" : "B=%d,H=8,D=64", bt);
            }
    const int tri[2][2] = {{1000, 777}, {2048, 2048}};
    for (int u = 0; u < 2; u++)
        for (int s = 0; s < 2; s++) {
            cb_case *c = &out[n++];
            *c = (cb_case){u ? CK_TRMM_U : CK_TRMM_L, "", "", NULL, {tri[s][0], tri[s][1]}, s == 0};
            snprintf(c->name, sizeof c->name, "%s_%d", cb_kind_names[c->kind], tri[s][0]);
            snprintf(c->set, sizeof c->set, "N=%d,P=%d", tri[s][0], tri[s][1]);
        }
    out[n++] = (cb_case){CK_VGEMM, "vgemm_b8", "B=8", NULL, {8, 512, 1408, 128}, false};
    return n;
}

// ---------------------------------------------------------------------------------------------
// The batch: lengths of the ragged dims, sampled once per case
// ---------------------------------------------------------------------------------------------

typedef struct cb_batch {
    int32_t n_len;        // length tensors: 1 (len) or 3 (Ml, Nl, Kl); 0 for dense cases
    const char *names[3]; // their names in the spec
    int32_t len[3][CB_MAX_BATCH];
    int64_t b;    // batch (entries of each length tensor)
    int32_t lmax; // ragged: the longest sequence
} cb_batch;

// vgemm's dims: multiples of step in [lo, hi], from a 64-bit LCG seeded with CB_SEED.
static int32_t cb_vgemm_dim(uint64_t *s, const int64_t *d) {
    *s = *s * 6364136223846793005ULL + 1442695040888963407ULL;
    int64_t choices = (d[2] - d[1]) / d[3] + 1;
    return (int32_t)(d[1] + (int64_t)((*s >> 33) % (uint64_t)choices) * d[3]);
}

static bool cb_sample(rt_arena *a, const cb_case *c, cb_batch *bt, char *why, size_t n_why) {
    memset(bt, 0, sizeof *bt);
    rt_err err = {0};
    if (c->kind == CK_VGEMM) {
        bt->n_len = 3, bt->b = c->d[0];
        bt->names[0] = "Ml", bt->names[1] = "Nl", bt->names[2] = "Kl";
        uint64_t s = CB_SEED;
        for (int64_t i = 0; i < bt->b; i++)
            for (int k = 0; k < 3; k++)
                bt->len[k][i] = cb_vgemm_dim(&s, c->d);
        return true;
    }
    if (!c->hist)
        return true;
    bt->n_len = 1, bt->b = c->d[0], bt->names[0] = "len";
    char path[1024];
    snprintf(path, sizeof path, "%s/%s", RTGEN_SOURCE_DIR, c->hist);
    rt_lengths_file *f;
    if (rt_lengths_read(a, path, &f, &err) ||
        rt_lengths_take(f, "len", bt->b, CB_SEED, bt->len[0], &err)) {
        snprintf(why, n_why, "%.150s", err.msg);
        return false;
    }
    for (int64_t i = 0; i < bt->b; i++)
        bt->lmax = bt->len[0][i] > bt->lmax ? bt->len[0][i] : bt->lmax;
    return true;
}

// Useful FLOPs of case c on batch bt (2 per multiply-add; scales and epilogues not counted),
// and with pad the FLOPs of the same batch padded to its longest sequence.
static double cb_flops(const cb_case *c, const cb_batch *bt, bool pad) {
    const int64_t *d = c->d;
    double f = 0;
    switch (c->kind) {
    case CK_BMM:
        return 2.0 * (double)(d[0] * d[1]) * (double)(d[2] * d[2]) * (double)d[3];
    case CK_QKT:
    case CK_ATTNV:
    case CK_FFN1:
        for (int64_t b = 0; b < bt->b; b++) {
            double l = pad ? bt->lmax : bt->len[0][b];
            f += c->kind == CK_FFN1 ? 2.0 * l * (double)(d[1] * d[2])
                                    : 2.0 * (double)d[1] * l * l * (double)d[2];
        }
        return f;
    case CK_TRMM_L:
    case CK_TRMM_U:
        return (double)d[0] * (double)(d[0] + 1) * (double)d[1];
    case CK_VGEMM:
        for (int64_t b = 0; b < bt->b; b++)
            f += 2.0 * bt->len[0][b] * (double)bt->len[1][b] * bt->len[2][b];
        return f;
    case CK_COUNT:
        break;
    }
    return 0;
}

// ---------------------------------------------------------------------------------------------
// rtgen: construct, build and profile a spec, run its winner through a runner
// ---------------------------------------------------------------------------------------------

typedef struct cb_rt {
    rt_arena *a;
    const rt_op *op;
    rt_bindings *b;
    rt_cpu_report *rep;
    rt_cpu_runner *rn;
    const double *got; // the winner's output (the runner's first run), in b's layout
    int64_t out_elems;
    int32_t n_ok, n_cands, winner;
    char what[160]; // the winner's summary, or why there is none
} cb_rt;

static void cb_rt_run(void *ctx) {
    rt_err err = {0};
    rt_cpu_runner_run(((cb_rt *)ctx)->rn, &err);
}

static void cb_rt_free(cb_rt *r) {
    rt_cpu_runner_free(r->rn);
    rt_arena_free(r->a);
    memset(r, 0, sizeof *r);
}

static int cb_parse_sets(rt_arena *a, const char *text, rt_size_binding *out, int max) {
    int n = 0;
    for (const char *s = text; *s && n < max;) {
        const char *eq = strchr(s, '='), *end = strchr(s, ',');
        if (!eq)
            break;
        end = end ? end : s + strlen(s);
        if (!(out[n].name = rt_arena_strndup(a, s, (size_t)(eq - s))))
            break;
        out[n++].value = strtoll(eq + 1, NULL, 10);
        s = *end ? end + 1 : end;
    }
    return n;
}

// Binds bt's lengths into r->b and gives the model their distributions (as the CLI does).
static rt_status cb_bind_lengths(cb_rt *r, const cb_batch *bt, rt_perf_options *popt, rt_err *err) {
    rt_perf_length_dist *d;
    RT_ALLOC(r->a, d, bt->n_len > 0 ? bt->n_len : 1, err);
    for (int32_t k = 0; k < bt->n_len; k++) {
        RT_TRY(rt_bindings_set_lengths(r->b, bt->names[k], bt->len[k], bt->b, err));
        int32_t t = rt_op_tensor_index(r->op, bt->names[k]);
        int64_t *samples;
        RT_ALLOC(r->a, samples, bt->b, err);
        for (int64_t i = 0; i < bt->b; i++)
            samples[i] = bt->len[k][i];
        d[k].tensor = r->op->tensors[t].name;
        RT_TRY(rt_extent_dist_from_samples(r->a, samples, (int32_t)bt->b, r->op->tensors[t].loc,
                                           &d[k].dist, err));
    }
    popt->lengths = bt->n_len > 0 ? d : NULL;
    popt->n_lengths = bt->n_len;
    return RT_OK;
}

// Spec (relative to the source root) with --set bindings and bt's lengths (NULL: none),
// constructed for `threads` cores of dev, built, profiled, and its winner run once here.
static bool cb_rt_prepare(const char *spec, const char *set, const cb_batch *bt,
                          const rt_device *dev, int threads, const cb_opts *o, cb_rt *r) {
    memset(r, 0, sizeof *r);
    if (!(r->a = rt_arena_new(1 << 20)))
        return false;
    rt_err err = {0};
    rt_size_binding sets[12];
    int n_sets = cb_parse_sets(r->a, set, sets, 12);
    char path[1024];
    snprintf(path, sizeof path, "%s/%s", RTGEN_SOURCE_DIR, spec);
    rt_perf_options popt = {.top_k = o->top_k};
    rt_cpu_options copt = {.profile = true,
                           .threads = threads,
                           .budget_ms = o->budget_ms,
                           .timeout_ms = o->timeout_ms};
    rt_device dev_row = *dev; // constructed for the cores it runs on, as the peers block theirs
    if (threads > 0)
        rt_hal_device_on_units(&dev_row, threads); // the peaks scaled with the cores
    rt_op *op;
    rt_perf_result *perf;
    if (rt_spec_load(r->a, path, sets, n_sets, &op, &err) ||
        (r->op = op, rt_bindings_new(r->a, op, CB_SEED, &r->b, &err)) ||
        (bt && cb_bind_lengths(r, bt, &popt, &err)) ||
        rt_perf_construct(r->a, op, &dev_row, &popt, &perf, &err) ||
        rt_cpu_build_and_profile(r->a, op, &dev_row, r->b, perf, &copt, &r->rep, &err)) {
        snprintf(r->what, sizeof r->what, "rtgen failed: %.140s", err.msg);
        return false;
    }
    r->n_cands = r->rep->n;
    r->winner = r->rep->winner;
    for (int32_t i = 0; i < r->rep->n; i++)
        r->n_ok += r->rep->cands[i].status == RT_CPU_CAND_OK;
    if (r->winner < 0) {
        snprintf(r->what, sizeof r->what, "no correct candidate among %d", (int)r->rep->n);
        return false;
    }
    const rt_cpu_cand *w = &r->rep->cands[r->winner];
    snprintf(r->what, sizeof r->what, "%s", w->summary ? w->summary : w->name);
    if (rt_cpu_runner_new(r->rep, -1, r->b, &r->rn, &err) || rt_cpu_runner_run(r->rn, &err)) {
        snprintf(r->what, sizeof r->what, "run winner: %.140s", err.msg);
        return false;
    }
    rt_cpu_runner_outputs(r->rn, r->b);
    int32_t out_t = op->outputs[0];
    r->got = r->b->tensors[out_t].data;
    r->out_elems = r->b->tensors[out_t].layout.elems;
    return true;
}

static float *cb_alloc(int64_t n) {
    float *f = aligned_alloc(64, (size_t)((n + 15) / 16 * 16) * sizeof(float));
    if (f)
        memset(f, 0, (size_t)n * sizeof(float));
    return f;
}

// A float copy of rtgen's input `name` (its layout: packed for ragged tensors).
static float *cb_input(cb_rt *r, const char *name, int64_t *n_out) {
    const rt_tensor_data *t = rt_bindings_data(r->b, name);
    if (!t)
        return NULL;
    float *f = cb_alloc(t->layout.elems);
    for (int64_t i = 0; f && i < t->layout.elems; i++)
        f[i] = (float)t->data[i];
    if (n_out)
        *n_out = t->layout.elems;
    return f;
}

// ---------------------------------------------------------------------------------------------
// Peers: oneDNN matmul calls (one, or one per sequence), dnnl_sgemm per matrix, cblas_strmm
// ---------------------------------------------------------------------------------------------

// One matmul: dims and strides of src, weights and dst (nd of 2-4), the user's pointers, an
// output scale (1: none) and, for FFN1, a (1, N) bias and a gelu_erf post-op.
typedef struct cb_mm {
    int nd;
    int64_t sd[4], ss[4], wd[4], ws[4], dd[4], ds[4];
    const float *src, *wei, *bias;
    float *dst;
    float scale;
    bool gelu;
} cb_mm;

#define CB_MAX_CALLS 64

// A sequence of oneDNN matmul calls, run back to back; calls of the same shape and strides
// share one primitive (created untimed, as a framework caches them).
typedef struct cb_dnnl {
    dnnl_stream_t strm;
    int n, n_prims;
    cb_mm key[CB_MAX_CALLS]; // the shape of each primitive (pointers unused)
    dnnl_primitive_t prims[CB_MAX_CALLS];
    int prim_of[CB_MAX_CALLS], nargs[CB_MAX_CALLS];
    dnnl_exec_arg_t args[CB_MAX_CALLS][4];
    char impl[96]; // the first primitive's impl_info_str (and "+N more" when they differ)
} cb_dnnl;

static void cb_dnnl_run(void *ctx) {
    cb_dnnl *d = ctx;
    for (int i = 0; i < d->n; i++)
        dnnl_primitive_execute(d->prims[d->prim_of[i]], d->strm, d->nargs[i], d->args[i]);
    dnnl_stream_wait(d->strm);
}

static void cb_dnnl_free(cb_dnnl *d) {
    for (int i = 0; i < d->n; i++)
        for (int k = 0; k < d->nargs[i]; k++)
            dnnl_memory_destroy(d->args[i][k].memory);
    for (int i = 0; i < d->n_prims; i++)
        dnnl_primitive_destroy(d->prims[i]);
    d->n = d->n_prims = 0;
}

static bool cb_same_shape(const cb_mm *a, const cb_mm *b) {
    size_t n = (size_t)a->nd * sizeof(int64_t);
    return a->nd == b->nd && !memcmp(a->sd, b->sd, n) && !memcmp(a->ss, b->ss, n) &&
           !memcmp(a->wd, b->wd, n) && !memcmp(a->ws, b->ws, n) && !memcmp(a->dd, b->dd, n) &&
           !memcmp(a->ds, b->ds, n) && a->scale == b->scale && a->gelu == b->gelu;
}

static bool cb_md(dnnl_memory_desc_t *md, int nd, const int64_t *dims, const int64_t *strides) {
    dnnl_dims_t dd, st;
    for (int i = 0; i < nd; i++)
        dd[i] = dims[i], st[i] = strides[i];
    return dnnl_memory_desc_init_by_strides(md, nd, dd, dnnl_f32, st) == dnnl_success;
}

static bool cb_dnnl_prim(dnnl_engine_t eng, const cb_mm *m, dnnl_primitive_t *out, char *impl,
                         size_t n_impl) {
    dnnl_memory_desc_t s, w, b, t;
    int64_t bd[2] = {1, m->dd[1]}, bs[2] = {m->dd[1], 1};
    if (!cb_md(&s, m->nd, m->sd, m->ss) || !cb_md(&w, m->nd, m->wd, m->ws) ||
        !cb_md(&t, m->nd, m->dd, m->ds) || (m->bias && !cb_md(&b, 2, bd, bs)))
        return false;
    dnnl_matmul_desc_t desc;
    dnnl_primitive_attr_t attr = NULL;
    dnnl_post_ops_t po = NULL;
    dnnl_primitive_desc_t pd = NULL;
    bool ok = dnnl_matmul_desc_init(&desc, &s, &w, m->bias ? &b : NULL, &t) == dnnl_success &&
              dnnl_primitive_attr_create(&attr) == dnnl_success;
    if (ok && m->scale != 1.0f)
        ok = dnnl_primitive_attr_set_output_scales(attr, 1, 0, &m->scale) == dnnl_success;
    if (ok && m->gelu)
        ok = dnnl_post_ops_create(&po) == dnnl_success &&
             dnnl_post_ops_append_eltwise(po, 1.0f, dnnl_eltwise_gelu_erf, 0, 0) == dnnl_success &&
             dnnl_primitive_attr_set_post_ops(attr, po) == dnnl_success;
    ok = ok && dnnl_primitive_desc_create(&pd, &desc, attr, eng, NULL) == dnnl_success;
    const char *str = NULL;
    if (ok && dnnl_primitive_desc_query(pd, dnnl_query_impl_info_str, 0, &str) == dnnl_success)
        snprintf(impl, n_impl, "%s", str ? str : "");
    ok = ok && dnnl_primitive_create(out, pd) == dnnl_success;
    if (pd)
        dnnl_primitive_desc_destroy(pd);
    if (po)
        dnnl_post_ops_destroy(po);
    if (attr)
        dnnl_primitive_attr_destroy(attr);
    return ok;
}

// Appends call m to d (a new primitive when no earlier call has its shape).
static bool cb_dnnl_add(cb_dnnl *d, dnnl_engine_t eng, const cb_mm *m) {
    if (d->n >= CB_MAX_CALLS)
        return false;
    int p = 0;
    while (p < d->n_prims && !cb_same_shape(&d->key[p], m))
        p++;
    if (p == d->n_prims) {
        char impl[96] = "";
        if (!cb_dnnl_prim(eng, m, &d->prims[p], impl, sizeof impl))
            return false;
        d->key[d->n_prims++] = *m;
        if (!d->impl[0])
            snprintf(d->impl, sizeof d->impl, "%s", impl);
        else if (!strstr(d->impl, impl))
            snprintf(d->impl + strlen(d->impl), sizeof d->impl - strlen(d->impl), "+%s", impl);
    }
    int i = d->n;
    d->prim_of[i] = p;
    d->nargs[i] = 0;
    dnnl_memory_desc_t md;
    int64_t bd[2] = {1, m->dd[1]}, bs[2] = {m->dd[1], 1};
    struct {
        int arg, nd;
        const int64_t *dims, *strides;
        const float *ptr;
    } a[4] = {{DNNL_ARG_SRC, m->nd, m->sd, m->ss, m->src},
              {DNNL_ARG_WEIGHTS, m->nd, m->wd, m->ws, m->wei},
              {DNNL_ARG_DST, m->nd, m->dd, m->ds, m->dst},
              {DNNL_ARG_BIAS, 2, bd, bs, m->bias}};
    for (int k = 0; k < 4; k++) {
        if (!a[k].ptr)
            continue;
        dnnl_memory_t mem;
        if (!cb_md(&md, a[k].nd, a[k].dims, a[k].strides) ||
            dnnl_memory_create(&mem, &md, eng, (void *)a[k].ptr) != dnnl_success)
            return false;
        d->args[i][d->nargs[i]++] = (dnnl_exec_arg_t){a[k].arg, mem};
    }
    d->n++;
    return true;
}

// dnnl_sgemm (row-major) once per matrix of a vgemm batch, each reading and writing its slice of
// rtgen's packed tensors.
typedef struct cb_sgemm {
    int n;
    int64_t m[CB_MAX_BATCH], nn[CB_MAX_BATCH], k[CB_MAX_BATCH];
    const float *a[CB_MAX_BATCH], *b[CB_MAX_BATCH];
    float *c[CB_MAX_BATCH];
} cb_sgemm;

static void cb_sgemm_run(void *ctx) {
    cb_sgemm *s = ctx;
    for (int i = 0; i < s->n; i++)
        dnnl_sgemm('N', 'N', s->m[i], s->nn[i], s->k[i], 1.0f, s->a[i], s->k[i], s->b[i], s->nn[i],
                   0.0f, s->c[i], s->nn[i]);
}

// OpenBLAS cblas_strmm works in place (B := op(A) B): each call first copies X into B, and the
// copy's own median time (cb_strmm_copy, timed apart) is subtracted from the call's.
typedef struct cb_strmm {
    int n, p;
    bool upper;
    float *a; // the full n x n matrix, the other triangle zero
    const float *x;
    float *b;
} cb_strmm;

static void cb_strmm_copy(void *ctx) {
    cb_strmm *s = ctx;
    memcpy(s->b, s->x, (size_t)s->n * (size_t)s->p * sizeof(float));
}

static void cb_strmm_run(void *ctx) {
    cb_strmm *s = ctx;
    cb_strmm_copy(ctx);
    cblas_strmm(CblasRowMajor, CblasLeft, s->upper ? CblasUpper : CblasLower, CblasNoTrans,
                CblasNonUnit, s->n, s->p, 1.0f, s->a, s->n, s->b, s->p);
}

// The output of the padded oneDNN call (rows of lmax per sequence) moved to rtgen's packed
// layout, for the error check. QKT: (B, H, lmax, lmax) to (b, h, len, len); ATTNV and FFN1:
// (B, lmax, w) to (b, len, w), w = H * D or N.
typedef struct cb_unpad {
    cb_kind kind;
    const cb_batch *bt;
    int64_t h, w;
    const float *pad;
    float *out;
} cb_unpad;

static void cb_unpad_run(void *ctx) {
    cb_unpad *u = ctx;
    int64_t lm = u->bt->lmax, pos = 0;
    for (int64_t b = 0; b < u->bt->b; b++) {
        int64_t l = u->bt->len[0][b];
        if (u->kind == CK_QKT) {
            for (int64_t h = 0; h < u->h; h++)
                for (int64_t i = 0; i < l; i++)
                    for (int64_t j = 0; j < l; j++)
                        u->out[pos++] = u->pad[((b * u->h + h) * lm + i) * lm + j];
        } else {
            memcpy(u->out + pos, u->pad + b * lm * u->w, (size_t)(l * u->w) * sizeof(float));
            pos += l * u->w;
        }
    }
}

// How a line grades rtgen against its peer. ORDER CB_METRIC: cb_metric_names.
typedef enum cb_metric {
    CM_SPEEDUP, // peer's median time / rtgen's
    CM_RATE,    // rtgen's useful GFLOP/s / the peer's GFLOP/s on its own FLOPs (rtgen's dense GEMM)
    CM_PEAK,    // rtgen's GFLOP/s / the FMA peak measured after the row
    CM_COUNT
} cb_metric;
static const char *const cb_metric_names[] = {"speedup", "rate", "of-fma"};
_Static_assert(sizeof cb_metric_names / sizeof *cb_metric_names == CM_COUNT, "one per metric");

typedef struct cb_peer {
    char label[48], impl[96];
    void (*run)(void *ctx); // NULL: a line with no peer (CM_PEAK)
    void *ctx;
    bool alone;                 // OpenBLAS: timed on its own after the turns (its threads spin)
    double flops;               // the FLOPs its rate is of (0: the case's useful FLOPs)
    float *out;                 // its output in rtgen's layout (NULL: not compared)
    void (*collect)(void *ctx); // fills out from its own output after a run (NULL: none needed)
    void *cctx;
    void (*sub)(void *ctx); // a part of each call timed apart and subtracted (NULL: none)
    cb_metric metric;
    double target;
    rt_bench_stats st;
    double sub_ns, err;
} cb_peer;

#define CB_MAX_PEERS 4
#define CB_MAX_MEM   12

// One case on one thread count.
typedef struct cb_row {
    const cb_case *c;
    int threads;
    cb_batch bt;
    cb_rt rt, dense;
    cb_peer peer[CB_MAX_PEERS];
    int n_peer;
    cb_dnnl dn[2];
    cb_sgemm sg;
    cb_strmm tr;
    cb_unpad up;
    void *mem[CB_MAX_MEM];
    int n_mem;
    double useful, padded; // FLOPs
    rt_bench_stats st;     // rtgen's
    double fma_gflops;     // measured right after the row's timing
    bool ok;
    char what[200];
} cb_row;

static float *cb_keep(cb_row *r, float *p) {
    if (p && r->n_mem < CB_MAX_MEM)
        r->mem[r->n_mem++] = p;
    else if (p) {
        free(p);
        p = NULL;
    }
    return p;
}

static cb_peer *cb_add_peer(cb_row *r, const char *label, cb_metric m, double target) {
    cb_peer *p = &r->peer[r->n_peer++];
    memset(p, 0, sizeof *p);
    snprintf(p->label, sizeof p->label, "%s", label);
    p->metric = m;
    p->target = target;
    return p;
}

// Exclusive prefix sums over the batch: tok[b] (tokens before sequence b) and sq[b] (elements of
// the (H, len, len) blocks before b).
static void cb_offsets(const cb_batch *bt, int64_t h, int64_t *tok, int64_t *sq) {
    tok[0] = sq[0] = 0;
    for (int64_t b = 0; b < bt->b; b++) {
        int64_t l = bt->len[0][b];
        tok[b + 1] = tok[b] + l;
        sq[b + 1] = sq[b] + h * l * l;
    }
}

static bool cb_peers_bmm(cb_row *r, dnnl_engine_t eng, dnnl_stream_t strm) {
    const int64_t *d = r->c->d;
    int64_t B = d[0], H = d[1], S = d[2], D = d[3];
    float *q = cb_keep(r, cb_input(&r->rt, "Q", NULL)),
          *k = cb_keep(r, cb_input(&r->rt, "K", NULL));
    float *out = cb_keep(r, cb_alloc(r->rt.out_elems));
    if (!q || !k || !out || r->rt.out_elems != B * H * S * S)
        return false;
    // K(b, h, j, d) read as the (D, S) weights of each (b, h): K transposed by its strides.
    cb_mm m = {.nd = 4,
               .sd = {B, H, S, D},
               .ss = {H * S * D, S * D, D, 1},
               .wd = {B, H, D, S},
               .ws = {H * S * D, S * D, 1, D},
               .dd = {B, H, S, S},
               .ds = {H * S * S, S * S, S, 1},
               .src = q,
               .wei = k,
               .dst = out,
               .scale = 1.0f};
    r->dn[0].strm = strm;
    if (!cb_dnnl_add(&r->dn[0], eng, &m))
        return false;
    cb_peer *p = cb_add_peer(r, "oneDNN matmul, batch dims", CM_SPEEDUP, 1.0);
    p->run = cb_dnnl_run, p->ctx = &r->dn[0], p->out = out;
    snprintf(p->impl, sizeof p->impl, "%s", r->dn[0].impl);
    cb_add_peer(r, "FMA peak (measured)", CM_PEAK, 0.8);
    return true;
}

// Rows of w floats per token, sequence b's at tok[b], copied to lmax rows per sequence.
static float *cb_pad_rows(const float *src, const cb_batch *bt, const int64_t *tok, int64_t w) {
    float *p = cb_alloc(bt->b * bt->lmax * w);
    for (int64_t b = 0; p && b < bt->b; b++)
        memcpy(p + b * bt->lmax * w, src + tok[b] * w,
               (size_t)((tok[b + 1] - tok[b]) * w) * sizeof(float));
    return p;
}

// (h, len, len) blocks of sequence b at sq[b], copied to (H, lmax, lmax) blocks.
static float *cb_pad_blocks(const float *src, const cb_batch *bt, const int64_t *sq, int64_t h) {
    int64_t lm = bt->lmax;
    float *p = cb_alloc(bt->b * h * lm * lm);
    for (int64_t b = 0; p && b < bt->b; b++) {
        int64_t l = bt->len[0][b];
        for (int64_t k = 0; k < h; k++)
            for (int64_t i = 0; i < l; i++)
                memcpy(p + ((b * h + k) * lm + i) * lm, src + sq[b] + (k * l + i) * l,
                       (size_t)l * sizeof(float));
    }
    return p;
}

// The padded call (m) and the per-sequence calls of a ragged case. QKT: Q and K (b, len, H, D)
// as (H, len, D) and (H, D, len) by strides, S (b, H, len, len). ATTNV: P (b, H, len, len), V
// and O (b, len, H, D) as (H, len, D). FFN1: X (b, len, K) x Wt (K, N) + bias, gelu_erf.
static void cb_ragged_mm(cb_kind kind, int64_t bb, int64_t l, int64_t h, int64_t dk, int64_t n,
                         cb_mm *m) {
    int64_t w = h * dk; // QKT/ATTNV: a token's row (H * D)
    *m = (cb_mm){.nd = 4, .scale = 1.0f};
    if (kind == CK_QKT) {
        int64_t sd[4] = {bb, h, l, dk}, ss[4] = {l * w, dk, w, 1};
        int64_t wd[4] = {bb, h, dk, l}, ws[4] = {l * w, dk, 1, w};
        int64_t dd[4] = {bb, h, l, l}, ds[4] = {h * l * l, l * l, l, 1};
        memcpy(m->sd, sd, sizeof sd), memcpy(m->ss, ss, sizeof ss), memcpy(m->wd, wd, sizeof wd);
        memcpy(m->ws, ws, sizeof ws), memcpy(m->dd, dd, sizeof dd), memcpy(m->ds, ds, sizeof ds);
        m->scale = 0.125f;
    } else if (kind == CK_ATTNV) {
        int64_t sd[4] = {bb, h, l, l}, ss[4] = {h * l * l, l * l, l, 1};
        int64_t wd[4] = {bb, h, l, dk}, ws[4] = {l * w, dk, w, 1};
        memcpy(m->sd, sd, sizeof sd), memcpy(m->ss, ss, sizeof ss), memcpy(m->wd, wd, sizeof wd);
        memcpy(m->ws, ws, sizeof ws), memcpy(m->dd, wd, sizeof wd), memcpy(m->ds, ws, sizeof ws);
    } else { // FFN1: h is K
        int64_t sd[2] = {bb * l, h}, ss[2] = {h, 1}, wd[2] = {h, n}, ws[2] = {n, 1};
        int64_t dd[2] = {bb * l, n};
        m->nd = 2;
        memcpy(m->sd, sd, sizeof sd), memcpy(m->ss, ss, sizeof ss), memcpy(m->wd, wd, sizeof wd);
        memcpy(m->ws, ws, sizeof ws), memcpy(m->dd, dd, sizeof dd), memcpy(m->ds, ws, sizeof ws);
        m->gelu = true;
    }
    if (m->nd == 4 && bb == 1) { // one sequence: drop the batch dim
        m->nd = 3;
        memmove(m->sd, m->sd + 1, 3 * sizeof(int64_t)),
            memmove(m->ss, m->ss + 1, 3 * sizeof(int64_t));
        memmove(m->wd, m->wd + 1, 3 * sizeof(int64_t)),
            memmove(m->ws, m->ws + 1, 3 * sizeof(int64_t));
        memmove(m->dd, m->dd + 1, 3 * sizeof(int64_t)),
            memmove(m->ds, m->ds + 1, 3 * sizeof(int64_t));
    }
}

static bool cb_peers_ragged(cb_row *r, dnnl_engine_t eng, dnnl_stream_t strm) {
    const cb_case *c = r->c;
    const cb_batch *bt = &r->bt;
    bool ffn = c->kind == CK_FFN1, qkt = c->kind == CK_QKT;
    int64_t h = ffn ? c->d[1] : c->d[1], dk = ffn ? 1 : c->d[2], n = ffn ? c->d[2] : 0;
    int64_t tok[CB_MAX_BATCH + 1], sq[CB_MAX_BATCH + 1], lm = bt->lmax;
    cb_offsets(bt, ffn ? 0 : h, tok, sq);
    const char *nm[3] = {qkt ? "Q" : ffn ? "X" : "P", qkt ? "K" : ffn ? "Wt" : "V", "bias"};
    float *in[3] = {NULL, NULL, NULL};
    for (int i = 0; i < (ffn ? 3 : 2); i++)
        if (!(in[i] = cb_keep(r, cb_input(&r->rt, nm[i], NULL))))
            return false;
    int64_t w = ffn ? h : h * dk; // a token's row of the row-layout inputs
    int64_t w_out = ffn ? n : h * dk;
    int64_t expect = ffn ? tok[bt->b] * n : qkt ? sq[bt->b] : tok[bt->b] * w;
    float *out_loop = cb_keep(r, cb_alloc(r->rt.out_elems));
    float *out_pad = cb_keep(r, cb_alloc(r->rt.out_elems));
    if (!out_loop || !out_pad || r->rt.out_elems != expect)
        return false;
    // The batch padded to its longest sequence (zeros beyond each length), copied untimed.
    float *p0 = cb_keep(r, c->kind == CK_ATTNV ? cb_pad_blocks(in[0], bt, sq, h)
                                               : cb_pad_rows(in[0], bt, tok, w));
    float *p1 = qkt                   ? cb_keep(r, cb_pad_rows(in[1], bt, tok, w))
                : c->kind == CK_ATTNV ? cb_keep(r, cb_pad_rows(in[1], bt, tok, w))
                                      : in[1];
    float *pout = cb_keep(r, cb_alloc(qkt ? bt->b * h * lm * lm : bt->b * lm * w_out));
    if (!p0 || !p1 || !pout)
        return false;
    cb_mm m;
    cb_ragged_mm(c->kind, bt->b, lm, h, dk, n, &m);
    m.src = p0, m.wei = p1, m.dst = pout, m.bias = ffn ? in[2] : NULL;
    r->dn[0].strm = r->dn[1].strm = strm;
    if (!cb_dnnl_add(&r->dn[0], eng, &m))
        return false;
    for (int64_t b = 0; b < bt->b; b++) {
        int64_t l = bt->len[0][b];
        if (l == 0)
            continue;
        cb_ragged_mm(c->kind, 1, l, h, dk, n, &m);
        m.bias = ffn ? in[2] : NULL;
        m.src = c->kind == CK_ATTNV ? in[0] + sq[b] : in[0] + tok[b] * w;
        m.wei = ffn ? in[1] : in[1] + tok[b] * w;
        m.dst = qkt ? out_loop + sq[b] : out_loop + tok[b] * w_out;
        if (!cb_dnnl_add(&r->dn[1], eng, &m))
            return false;
    }
    r->up = (cb_unpad){c->kind, bt, h, w_out, pout, out_pad};
    char label[48];
    snprintf(label, sizeof label, "oneDNN padded (pad x%.2f)", r->padded / r->useful);
    cb_peer *p = cb_add_peer(r, label, CM_SPEEDUP, 0.8 * r->padded / r->useful);
    p->run = cb_dnnl_run, p->ctx = &r->dn[0], p->out = out_pad;
    p->collect = cb_unpad_run, p->cctx = &r->up;
    snprintf(p->impl, sizeof p->impl, "%s", r->dn[0].impl);
    snprintf(label, sizeof label, "oneDNN loop (%d calls)", r->dn[1].n);
    p = cb_add_peer(r, label, CM_SPEEDUP, 1.2);
    p->run = cb_dnnl_run, p->ctx = &r->dn[1], p->out = out_loop;
    snprintf(p->impl, sizeof p->impl, "%d primitives: %.70s", r->dn[1].n_prims, r->dn[1].impl);
    return true;
}

static bool cb_peers_trmm(cb_row *r) {
    bool upper = r->c->kind == CK_TRMM_U;
    int64_t n = r->c->d[0], pc = r->c->d[1];
    float *t = cb_keep(r, cb_input(&r->rt, upper ? "U" : "L", NULL));
    float *x = cb_keep(r, cb_input(&r->rt, "X", NULL));
    float *a = cb_keep(r, cb_alloc(n * n)), *out = cb_keep(r, cb_alloc(r->rt.out_elems));
    if (!t || !x || !a || !out || r->rt.out_elems != n * pc)
        return false;
    // The packed triangle (row i: L(i, 0..i), or U(i, i..n-1)) into a full n x n matrix.
    for (int64_t i = 0, pos = 0; i < n; i++)
        for (int64_t k = upper ? i : 0; k < (upper ? n : i + 1); k++)
            a[i * n + k] = t[pos++];
    r->tr = (cb_strmm){(int)n, (int)pc, upper, a, x, out};
    cb_peer *p = cb_add_peer(r, "OpenBLAS cblas_strmm", CM_SPEEDUP, 1.0);
    p->run = cb_strmm_run, p->ctx = &r->tr, p->out = out, p->alone = true;
    p->sub = cb_strmm_copy;
    snprintf(p->impl, sizeof p->impl, "%s (minus its copy of X)", openblas_get_config());
    return true;
}

static bool cb_peers_vgemm(cb_row *r) {
    float *a = cb_keep(r, cb_input(&r->rt, "A", NULL)),
          *b = cb_keep(r, cb_input(&r->rt, "Bt", NULL));
    float *out = cb_keep(r, cb_alloc(r->rt.out_elems));
    if (!a || !b || !out)
        return false;
    cb_sgemm *s = &r->sg;
    int64_t ao = 0, bo = 0, co = 0;
    s->n = (int)r->bt.b;
    for (int i = 0; i < s->n; i++) {
        s->m[i] = r->bt.len[0][i], s->nn[i] = r->bt.len[1][i], s->k[i] = r->bt.len[2][i];
        s->a[i] = a + ao, s->b[i] = b + bo, s->c[i] = out + co;
        ao += s->m[i] * s->k[i], bo += s->k[i] * s->nn[i], co += s->m[i] * s->nn[i];
    }
    if (co != r->rt.out_elems)
        return false;
    cb_peer *p = cb_add_peer(r, "dnnl_sgemm per matrix", CM_SPEEDUP, 1.0);
    p->run = cb_sgemm_run, p->ctx = s, p->out = out;
    snprintf(p->impl, sizeof p->impl, "dnnl_sgemm x%d", s->n);
    return true;
}

// rtgen's dense GEMM the case is held against: ragged QKT (K = D) and ATTNV (N = D) against a
// GEMM of the same FLOPs with that dim kept and the other two equal (multiples of 16); FFN1
// against the same linear + bias + GELU on the batch's tokens as one dense matrix; trmm against
// the full square (M = N, N = P, K = N).
static void cb_dense(cb_row *r, const rt_device *dev, const cb_opts *o) {
    const cb_case *c = r->c;
    char set[96];
    const char *spec = "examples/matmul.spec";
    int64_t m, n, k;
    if (c->kind == CK_TRMM_L || c->kind == CK_TRMM_U) {
        m = k = c->d[0], n = c->d[1];
    } else if (c->kind == CK_FFN1) {
        m = 0;
        for (int64_t b = 0; b < r->bt.b; b++)
            m += r->bt.len[0][b];
        k = c->d[1], n = c->d[2], spec = "bench/specs/linear_gelu.spec";
    } else {
        int64_t s = (int64_t)(sqrt(r->useful / (2.0 * (double)c->d[2])) / 16 + 0.5) * 16;
        s = s < 16 ? 16 : s;
        m = s, n = c->kind == CK_QKT ? s : c->d[2], k = c->kind == CK_QKT ? c->d[2] : s;
    }
    snprintf(set, sizeof set, "M=%lld,N=%lld,K=%lld", (long long)m, (long long)n, (long long)k);
    bool tri = c->kind == CK_TRMM_L || c->kind == CK_TRMM_U;
    char label[48];
    snprintf(label, sizeof label, "rtgen dense %lldx%lldx%lld", (long long)m, (long long)n,
             (long long)k);
    cb_peer *p = cb_add_peer(r, label, tri ? CM_SPEEDUP : CM_RATE, tri ? 1.6 : 0.8);
    p->flops = 2.0 * (double)m * (double)n * (double)k;
    if (!cb_rt_prepare(spec, set, NULL, dev, r->threads, o, &r->dense)) {
        snprintf(p->impl, sizeof p->impl, "%.90s", r->dense.what);
        return;
    }
    p->run = cb_rt_run, p->ctx = &r->dense;
    snprintf(p->impl, sizeof p->impl, "rtgen #%d %d/%d: %.60s", (int)r->dense.winner,
             (int)r->dense.n_ok, (int)r->dense.n_cands, r->dense.what);
}

// ---------------------------------------------------------------------------------------------
// One case on one thread count
// ---------------------------------------------------------------------------------------------

// Max |got - ref| / max |ref| (normwise: elementwise errors blow up at a GEMM's zeros); NaN
// propagates.
static double cb_err(const double *got, const float *ref, int64_t n) {
    double max_diff = 0, max_ref = 0;
    for (int64_t i = 0; i < n; i++) {
        double diff = fabs(got[i] - (double)ref[i]);
        if (!(diff <= max_diff))
            max_diff = diff;
        max_ref = fmax(max_ref, fabs((double)ref[i]));
    }
    return max_diff / fmax(max_ref, 1e-30);
}

static void cb_row_free(cb_row *r) {
    cb_rt_free(&r->rt);
    cb_rt_free(&r->dense);
    cb_dnnl_free(&r->dn[0]);
    cb_dnnl_free(&r->dn[1]);
    for (int i = 0; i < r->n_mem; i++)
        free(r->mem[i]);
    r->n_mem = 0;
}

#define CB_ROUNDS    5
#define CB_SETTLE_MS 20
#define CB_SLOW_NS   20e9 // rtgen's share of the turns when its winner is slow

// Runs every peer once (its output checked against rtgen's), then times rtgen and the peers that
// share OpenMP's threads in turns (rt_bench_time_turns), then OpenBLAS alone, then measures the
// FMA peak on the row's threads.
static void cb_time_row(cb_row *r, const cb_opts *o) {
    void (*fns[CB_MAX_PEERS + 1])(void *) = {cb_rt_run};
    void *ctxs[CB_MAX_PEERS + 1] = {&r->rt};
    int turn_of[CB_MAX_PEERS], n = 1;
    for (int i = 0; i < r->n_peer; i++) {
        cb_peer *p = &r->peer[i];
        turn_of[i] = -1;
        if (!p->run)
            continue;
        p->run(p->ctx);
        if (p->collect)
            p->collect(p->cctx);
        if (p->out)
            p->err = cb_err(r->rt.got, p->out, r->rt.out_elems);
        if (!p->alone)
            turn_of[i] = n, fns[n] = p->run, ctxs[n++] = p->ctx;
    }
    // A winner of seconds per call (today's ragged FFN on long sequences) gets fewer rounds, at
    // least one: each round calls every contender at least twice (warm-up and timed).
    double slow_ns = r->rt.rep->cands[r->rt.winner].median_ns;
    int rounds = slow_ns * 2 * CB_ROUNDS <= CB_SLOW_NS ? CB_ROUNDS
                                                       : (int)fmax(1, CB_SLOW_NS / (2 * slow_ns));
    rt_bench_stats st[CB_MAX_PEERS + 1] = {{0}};
    rt_bench_time_turns(n, fns, ctxs, o->budget_ms, rounds, CB_SETTLE_MS, st);
    r->st = st[0];
    for (int i = 0; i < r->n_peer; i++) {
        cb_peer *p = &r->peer[i];
        if (turn_of[i] > 0)
            p->st = st[turn_of[i]];
        if (!p->run || !p->alone)
            continue;
        usleep(CB_SETTLE_MS * 1000);
        rt_bench_time(p->run, p->ctx, o->budget_ms, &p->st);
        if (p->sub) {
            rt_bench_stats s;
            rt_bench_time(p->sub, p->ctx, o->budget_ms / 4, &s);
            p->sub_ns = s.median_ns;
            p->st.min_ns = fmax(p->st.min_ns - s.median_ns, 1);
            p->st.median_ns = fmax(p->st.median_ns - s.median_ns, 1);
        }
    }
    r->fma_gflops = rt_bench_fma_peak_gflops(r->threads);
}

static void cb_run_row(const cb_case *c, int threads, const rt_device *dev, const cb_opts *o,
                       dnnl_engine_t eng, dnnl_stream_t strm, cb_row *r) {
    memset(r, 0, sizeof *r);
    r->c = c;
    r->threads = threads;
    omp_set_num_threads(threads);
    openblas_set_num_threads(threads);
    rt_arena *a = rt_arena_new(1 << 16);
    bool ok = a && cb_sample(a, c, &r->bt, r->what, sizeof r->what);
    rt_arena_free(a);
    if (!ok)
        return;
    r->useful = cb_flops(c, &r->bt, false);
    r->padded = cb_flops(c, &r->bt, true);
    if (!cb_rt_prepare(cb_kind_specs[c->kind], c->set, r->bt.n_len ? &r->bt : NULL, dev, threads, o,
                       &r->rt)) {
        snprintf(r->what, sizeof r->what, "%s", r->rt.what);
        return;
    }
    switch (c->kind) {
    case CK_BMM:
        ok = cb_peers_bmm(r, eng, strm);
        break;
    case CK_QKT:
    case CK_ATTNV:
    case CK_FFN1:
        ok = cb_peers_ragged(r, eng, strm);
        break;
    case CK_TRMM_L:
    case CK_TRMM_U:
        ok = cb_peers_trmm(r);
        break;
    case CK_VGEMM:
        ok = cb_peers_vgemm(r);
        break;
    case CK_COUNT:
        ok = false;
        break;
    }
    if (!ok) {
        snprintf(r->what, sizeof r->what,
                 "a peer could not be set up (out of memory, or "
                 "rtgen's output is not the layout expected)");
        return;
    }
    if (c->kind == CK_QKT || c->kind == CK_ATTNV || c->kind == CK_FFN1 || c->kind == CK_TRMM_L ||
        c->kind == CK_TRMM_U)
        cb_dense(r, dev, o);
    cb_time_row(r, o);
    r->ok = true;
}

// ---------------------------------------------------------------------------------------------
// The table
// ---------------------------------------------------------------------------------------------

// Line p of row r: x (by p's metric) and the verdict: PASS or MISS against p's target, WRONG when
// rtgen's output differs from any peer's beyond BENCH_TOL (so a wrong kernel posts no PASS),
// n/a when the peer did not run.
static const char *cb_grade(const cb_row *r, const cb_peer *p, double *x) {
    double rt = r->useful / r->st.median_ns;
    *x = NAN;
    if (p->metric == CM_PEAK)
        *x = r->fma_gflops > 0 ? rt / r->fma_gflops : (double)NAN;
    else if (p->run && p->st.median_ns > 0 && p->metric == CM_SPEEDUP)
        *x = p->st.median_ns / r->st.median_ns;
    else if (p->run && p->st.median_ns > 0)
        *x = rt / ((p->flops > 0 ? p->flops : r->useful) / p->st.median_ns);
    for (int i = 0; i < r->n_peer; i++)
        if (r->peer[i].run && r->peer[i].out && !(r->peer[i].err <= BENCH_TOL))
            return "WRONG";
    return isnan(*x) ? "n/a" : *x >= p->target ? "PASS" : "MISS";
}

static void cb_shape(const cb_row *r, char *buf, size_t n) {
    const int64_t *d = r->c->d;
    long long b = (long long)r->bt.b;
    switch (r->c->kind) {
    case CK_BMM:
        snprintf(buf, n, "%lldx%lld s%lld d%lld", (long long)d[0], (long long)d[1], (long long)d[2],
                 (long long)d[3]);
        return;
    case CK_QKT:
    case CK_ATTNV:
    case CK_FFN1: {
        double sum = 0;
        for (int64_t i = 0; i < r->bt.b; i++)
            sum += r->bt.len[0][i];
        snprintf(buf, n, "b%lld len %.0f/%d %s%lld %s%lld", b, sum / (double)r->bt.b,
                 (int)r->bt.lmax, r->c->kind == CK_FFN1 ? "k" : "h", (long long)d[1],
                 r->c->kind == CK_FFN1 ? "n" : "d", (long long)d[2]);
        return;
    }
    case CK_TRMM_L:
    case CK_TRMM_U:
        snprintf(buf, n, "%lldx%lld . %lldx%lld", (long long)d[0], (long long)d[0], (long long)d[0],
                 (long long)d[1]);
        return;
    case CK_VGEMM:
        snprintf(buf, n, "b%lld dims %lld..%lld", b, (long long)d[1], (long long)d[2]);
        return;
    case CK_COUNT:
        break;
    }
    snprintf(buf, n, "?");
}

static const char cb_fmt_head[] = "%-18s %-27s %3s %8s %8s  %-28s %9s %6s %7s %-7s %6s %8s  %s\n";

static void cb_print_header(void) {
    printf(cb_fmt_head, "case", "shape", "thr", "rt GF/s", "rt best", "vs", "peer GF/s", "x",
           "target", "verdict", "%fma", "err", "peer's implementation");
}

// The lines of row r (one per peer) into buf; counts[] gets PASS, MISS, WRONG, n/a.
static void cb_format_row(const cb_row *r, char *buf, size_t n, int counts[4]) {
    char shape[64];
    cb_shape(r, shape, sizeof shape);
    size_t len = 0;
    if (!r->ok) {
        snprintf(buf, n, "%-18s %-24s %3d  -- %s\n", r->c->name, shape, r->threads, r->what);
        counts[3]++;
        return;
    }
    double rt = r->useful / r->st.median_ns, rt_best = r->useful / r->st.min_ns;
    for (int i = 0; i < r->n_peer && len < n; i++) {
        const cb_peer *p = &r->peer[i];
        double x;
        const char *v = cb_grade(r, p, &x);
        counts[strcmp(v, "PASS") == 0 ? 0 : strcmp(v, "MISS") == 0 ? 1 : v[0] == 'W' ? 2 : 3]++;
        char pg[16] = "-", xs[16] = "-", tg[16], pct[16] = "-", err[16] = "-";
        if (p->run && p->st.median_ns > 0)
            snprintf(pg, sizeof pg, "%.1f",
                     (p->flops > 0 ? p->flops : r->useful) / p->st.median_ns);
        if (p->metric == CM_PEAK)
            snprintf(pg, sizeof pg, "%.1f", r->fma_gflops);
        if (!isnan(x))
            snprintf(xs, sizeof xs, "%.2f", x);
        snprintf(tg, sizeof tg, ">=%.2f", p->target);
        if (r->fma_gflops > 0)
            snprintf(pct, sizeof pct, "%.1f", 100.0 * rt / r->fma_gflops);
        if (p->out && p->run)
            snprintf(err, sizeof err, "%.1e", p->err);
        char thr[8] = "", rs[16] = "", rb[16] = ""; // the row's own figures: first line only
        if (i == 0) {
            snprintf(thr, sizeof thr, "%d", r->threads);
            snprintf(rs, sizeof rs, "%.1f", rt);
            snprintf(rb, sizeof rb, "%.1f", rt_best);
        }
        len += (size_t)snprintf(buf + len, n - len, cb_fmt_head, i ? "" : r->c->name,
                                i ? "" : shape, thr, rs, rb, p->label, pg, xs, tg, v, pct, err,
                                p->metric == CM_PEAK ? "fma loop, this run" : p->impl);
    }
    if (len < n)
        snprintf(buf + len, n - len, "%-18s rtgen winner #%d (%d/%d correct): %s\n", "",
                 (int)r->rt.winner, (int)r->rt.n_ok, (int)r->rt.n_cands, r->rt.what);
}

// ---------------------------------------------------------------------------------------------
// --self-test: tiny cases through the whole path; checks that every peer agrees with rtgen (the
// layouts the peers read and write are rtgen's) and every line is graded. Asserts no timing.
// ---------------------------------------------------------------------------------------------

static int cb_fails;

static void cb_expect(bool ok, const char *what, const char *name) {
    if (!ok) {
        fprintf(stderr, "bench-contract: self-test: %s: %s\n", name, what);
        cb_fails++;
    }
}

// The four histograms load, and a sample is the same for the same seed and lies in its bins.
static void cb_check_data(void) {
    rt_arena *a = rt_arena_new(1 << 16);
    for (int h = 0; a && h < 4; h++) {
        char path[1024];
        snprintf(path, sizeof path, "%s/bench/data/%s.hist", RTGEN_SOURCE_DIR, cb_hists[h]);
        rt_lengths_file *f;
        rt_err err = {0};
        int32_t x[CB_MAX_BATCH], y[CB_MAX_BATCH];
        bool ok = !rt_lengths_read(a, path, &f, &err) && f->is_histogram &&
                  !rt_lengths_take(f, "len", CB_MAX_BATCH, CB_SEED, x, &err) &&
                  !rt_lengths_take(f, "len", CB_MAX_BATCH, CB_SEED, y, &err);
        cb_expect(ok, ok ? "" : err.msg, cb_hists[h]);
        if (!ok)
            continue;
        cb_expect(memcmp(x, y, sizeof x) == 0, "two samples with one seed differ", cb_hists[h]);
        for (int i = 0; i < CB_MAX_BATCH; i++) {
            bool in = false;
            for (int64_t k = 0; k < f->n; k++)
                in = in || f->values[k] == x[i];
            cb_expect(in, "a sampled length is no bin of the histogram", cb_hists[h]);
        }
    }
    rt_arena_free(a);
}

static int cb_self_test(const rt_device *dev, const cb_opts *o, dnnl_engine_t eng,
                        dnnl_stream_t strm) {
    cb_check_data();
    if (__builtin_cpu_supports("fma") && __builtin_cpu_supports("avx2"))
        cb_expect(rt_bench_fma_peak_gflops(1) > 0, "no FMA peak on a CPU with AVX2 and FMA",
                  "host");
    static cb_case cases[CB_MAX_CASES];
    int n = cb_cases(true, cases), counts[4] = {0};
    bool kinds[CK_COUNT] = {false};
    cb_print_header();
    for (int i = 0; i < n; i++) {
        static cb_row r;
        static char buf[8192];
        cb_run_row(&cases[i], o->threads[0], dev, o, eng, strm, &r);
        kinds[cases[i].kind] = true;
        cb_format_row(&r, buf, sizeof buf, counts);
        fputs(buf, stdout);
        cb_expect(r.ok, r.what, cases[i].name);
        for (int k = 0; r.ok && k < r.n_peer; k++) {
            const cb_peer *p = &r.peer[k];
            double x;
            const char *v = cb_grade(&r, p, &x);
            cb_expect(p->metric == CM_PEAK || p->run, "a peer did not run", p->label);
            cb_expect(!p->out || p->err <= BENCH_TOL, "the peer's output differs from rtgen's",
                      p->label);
            cb_expect(p->target > 0 && (!strcmp(v, "PASS") || !strcmp(v, "MISS")),
                      "a line without a target or verdict", p->label);
        }
        cb_row_free(&r);
    }
    for (int k = 0; k < CK_COUNT; k++)
        cb_expect(kinds[k], "no self-test case", cb_kind_names[k]);
    if (cb_fails) {
        fprintf(stderr, "bench-contract: self-test: %d failure%s\n", cb_fails,
                cb_fails > 1 ? "s" : "");
        return 1;
    }
    printf("bench-contract: self-test passed (%d cases, every peer agrees with rtgen)\n", n);
    return 0;
}

// ---------------------------------------------------------------------------------------------
// Options and main
// ---------------------------------------------------------------------------------------------

static bool cb_selected(const cb_case *c, const cb_opts *o) {
    if (!o->ops)
        return !o->quick || c->quick;
    for (const char *s = o->ops; *s;) {
        const char *end = strchr(s, ',');
        size_t n = end ? (size_t)(end - s) : strlen(s);
        if (n > 0 && strncmp(c->name, s, n) == 0)
            return true;
        if (!end)
            break;
        s = end + 1;
    }
    return false;
}

static bool cb_parse_threads(const char *s, cb_opts *o) {
    o->n_threads = 0;
    for (const char *t = s; *t && o->n_threads < 4;) {
        char *end;
        long v = strtol(t, &end, 10);
        if (end == t || v < 1 || v > 64 || (*end && *end != ','))
            return false;
        o->threads[o->n_threads++] = (int)v;
        t = *end == ',' ? end + 1 : end;
    }
    return o->n_threads > 0;
}

static bool cb_parse_args(int argc, char **argv, cb_opts *o) {
    *o = (cb_opts){.threads = {1, 2}, .n_threads = 2, .top_k = 4, .timeout_ms = 60000};
    for (int i = 1; i < argc; i++) {
        const char *s = argv[i];
        if (strcmp(s, "--quick") == 0)
            o->quick = true;
        else if (strcmp(s, "--list") == 0)
            o->list = true;
        else if (strcmp(s, "--self-test") == 0)
            o->self_test = true;
        else if (strncmp(s, "--ops=", 6) == 0)
            o->ops = s + 6;
        else if (strncmp(s, "--top-k=", 8) == 0 && (o->top_k = atoi(s + 8)) >= 1 && o->top_k <= 64)
            continue;
        else if (strncmp(s, "--budget-ms=", 12) == 0 &&
                 ((o->budget_ms = atof(s + 12)) > 0 && o->budget_ms < 60000))
            continue;
        else if (strncmp(s, "--timeout-ms=", 13) == 0 &&
                 ((o->timeout_ms = atof(s + 13)) > 0 && o->timeout_ms <= 3600000))
            continue;
        else if (!(strncmp(s, "--threads=", 10) == 0 && cb_parse_threads(s + 10, o)))
            return false;
    }
    if (o->budget_ms == 0)
        o->budget_ms = o->self_test ? 2 : o->quick ? 60 : 200;
    if (o->self_test)
        o->top_k = o->top_k < 2 ? o->top_k : 2;
    return true;
}

static void cb_print_intro(const rt_device *dev, const cb_opts *o) {
    char label[64];
    rt_hal_figure_label(dev->compute_source, "f32_gflops", label, sizeof label);
    printf("device: %s (%s); ceilings: FP32 peak %.1f GFLOP/s (%s), all %d cores\n", dev->name,
           dev->path, rt_hal_peak_gflops(dev, RT_DTYPE_F32, false), label, (int)dev->units);
    printf("OpenBLAS: %s; oneDNN %d.%d.%d\n", openblas_get_config(), dnnl_version()->major,
           dnnl_version()->minor, dnnl_version()->patch);
    printf("rtgen: top-%d per case, %.0f ms per candidate, a candidate killed after %.0f s; the "
           "winner and the peers take %d turns of %.0f ms in all each\n",
           o->top_k, o->budget_ms, o->timeout_ms / 1e3, CB_ROUNDS, o->budget_ms);
    printf("%%fma: rtgen's median GFLOP/s against the fma-%s peak measured after each row on its "
           "threads (12 FMA chains per thread); GF/s: useful FLOPs (2 per multiply-add) over the "
           "median time, except rtgen dense (its own FLOPs); x: speedup = peer time / rtgen "
           "time, rate = rtgen GF/s / peer GF/s, of-fma = rtgen GF/s / peak; err = max|rtgen - "
           "peer| / max|peer|, WRONG above %.0e\n\n",
           rt_bench_fma_isa() ? rt_bench_fma_isa() : "none", BENCH_TOL);
}

static void cb_usage(void) {
    static cb_case cases[CB_MAX_CASES];
    int n = cb_cases(false, cases);
    fprintf(stderr, "usage: bench-contract [--quick] [--ops=NAME,...] [--threads=1,2] "
                    "[--top-k=N] [--budget-ms=MS]\n"
                    "                      [--timeout-ms=MS] [--list] [--self-test]\ncases:");
    for (int i = 0; i < n; i++)
        fprintf(stderr, " %s", cases[i].name);
    fprintf(stderr, "\n");
}

int main(int argc, char **argv) {
    if (!getenv("OPENBLAS_CORETYPE") && __builtin_cpu_supports("avx512f")) {
        setenv("OPENBLAS_CORETYPE", "SkylakeX", 1); // as bench-ops: read when OpenBLAS loads
        execv("/proc/self/exe", argv);
    }
    cb_opts o;
    if (!cb_parse_args(argc, argv, &o)) {
        cb_usage();
        return 2;
    }
    static cb_case cases[CB_MAX_CASES];
    int n = cb_cases(false, cases);
    if (o.list) {
        for (int i = 0; i < n; i++)
            if (cb_selected(&cases[i], &o))
                printf("%s %s %s %s\n", cases[i].name, cb_kind_specs[cases[i].kind], cases[i].set,
                       cases[i].hist ? cases[i].hist : "-");
        return 0;
    }
    rt_device dev;
    rt_err err = {0};
    dnnl_engine_t eng;
    dnnl_stream_t strm;
    if (rt_hal_host_device(&dev, &err) != RT_OK) {
        fprintf(stderr, "bench-contract: error: host device: %s\n", err.msg);
        return 1;
    }
    if (dnnl_engine_create(&eng, dnnl_cpu, 0) != dnnl_success ||
        dnnl_stream_create(&strm, eng, dnnl_stream_default_flags) != dnnl_success) {
        fprintf(stderr, "bench-contract: error: cannot create the oneDNN CPU engine\n");
        return 1;
    }
    int rc = 0;
    if (o.self_test) {
        rc = cb_self_test(&dev, &o, eng, strm);
    } else {
        cb_print_intro(&dev, &o);
        cb_print_header();
        int counts[4][4] = {{0}};
        for (int t = 0; t < o.n_threads; t++)
            for (int i = 0; i < n; i++) {
                static cb_row r;
                static char buf[8192];
                if (!cb_selected(&cases[i], &o))
                    continue;
                cb_run_row(&cases[i], o.threads[t], &dev, &o, eng, strm, &r);
                cb_format_row(&r, buf, sizeof buf, counts[t]);
                fputs(buf, stdout);
                fflush(stdout);
                cb_row_free(&r);
                usleep(200000); // the peers' spinning threads go to sleep before the next row
            }
        printf("\n");
        for (int t = 0; t < o.n_threads; t++)
            printf("%d thread%s: %d PASS, %d MISS, %d WRONG, %d n/a (lines)\n", o.threads[t],
                   o.threads[t] > 1 ? "s" : "", counts[t][0], counts[t][1], counts[t][2],
                   counts[t][3]);
    }
    dnnl_stream_destroy(strm);
    dnnl_engine_destroy(eng);
    return rc;
}
