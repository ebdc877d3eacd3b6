// bench-layer.c: issue 21's layer benchmark. A transformer encoder layer (examples/layers/:
// CORA's 512 / 8 x 64 / 2048 and BERT-base's 768 / 12 x 64 / 3072, and their causal variants)
// on ragged batches of 32 and 64 lengths sampled (seed 1) from the four histograms of
// bench/data/, 1 and 2 threads:
//   rtgen   every def constructed, JIT-built and profiled through librtgen on the host device
//           (as `rtgen` on the layer does), the layer run by rt_layer_runner (layer.h): kernels
//           in order on the layer's buffers, one shared prelude;
//   (a)     the same layer on the batch padded to its longest sequence from oneDNN primitives, as
//           a framework runs it: matmul (with batch dims for the attention), binary add (the
//           padding / causal mask and the residuals), softmax, layer normalization, eltwise
//           GELU; the inputs are rtgen's, padded with zeros;
//   (b)     rtgen's own kernels on the padded batch: the same layer spec with every length set
//           to the longest, constructed and profiled likewise.
// Each row also prints its ceiling: the FMA peak measured on its threads after its turns
// (rt_bench_fma_peak_gflops), with rtgen's useful and (a)'s padded GFLOP/s as shares of it.
// rtgen's layer output Y is compared with (a)'s on every valid row of every row of the table
// (max |rtgen - a| / max |a|); above BL_TOL the line reads WRONG. Reported, never asserted
// (style.md section 6); --self-test runs a tiny layer and checks only that rtgen's layer agrees
// with the interpreter and with (a), and that a line is graded (ctest, label unit).
//
// usage: bench-layer [--layers=cora,bert,cora_causal,bert_causal] [--data=cola,mrpc,squad,race]
//                    [--batch=32,64] [--threads=1,2] [--top-k=N] [--budget-ms=MS] [--no-dense]
//                    [--all] [--self-test]
#include "bench-util.h"
#include "layer.h"
#include "rtgen.h"

#include <dnnl.h>
#include <math.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define BL_SEED      1
#define BL_TOL       1e-4 // max |rtgen - a| / max |a| of Y above which a line reads WRONG
#define BL_MAX_BATCH 64
#define BL_MAX_OPS   11
#define BL_MAX_LIST  4
#define BL_ROUNDS    5
#define BL_SETTLE_MS 20
#define BL_OP_REPS   7    // the per-op table: whole-layer runs, each op timed inside them
#define BL_SLOW_NS   20e9 // a row's share of the turns (and of the per-op runs) when it is slow

typedef struct bl_config {
    const char *name, *spec;
    int64_t m, h, d, f; // d_model, heads, head dim, FFN width
    bool causal;
} bl_config;

static const bl_config bl_configs[] = {
    {"cora", "examples/layers/cora_encoder.spec", 512, 8, 64, 2048, false},
    {"bert", "examples/layers/bert_encoder.spec", 768, 12, 64, 3072, false},
    {"cora_causal", "examples/layers/cora_encoder_causal.spec", 512, 8, 64, 2048, true},
    {"bert_causal", "examples/layers/bert_encoder_causal.spec", 768, 12, 64, 3072, true},
};
static const char *const bl_hists[] = {"cola", "mrpc", "squad", "race"};

typedef struct bl_opts {
    const char *layers[BL_MAX_LIST], *data[BL_MAX_LIST];
    int n_layers, n_data;
    int batch[BL_MAX_LIST], n_batch, threads[BL_MAX_LIST], n_threads;
    int top_k;
    double budget_ms;
    double profile_ms; // each candidate's profile (it only picks the winner)
    bool dense, self_test;
} bl_opts;

// ---------------------------------------------------------------------------------------------
// rtgen: the layer constructed, profiled and bound (rt_layer_runner)
// ---------------------------------------------------------------------------------------------

typedef struct bl_rt {
    rt_arena *a;
    rt_layer *l;
    rt_layer_bindings *lb;
    rt_cpu_report *cpu[BL_MAX_OPS];
    rt_layer_runner *rn;
    double prelude_ns, first_ns; // the prelude; the layer's first (untimed) run
    char why[200];
} bl_rt;

static void bl_rt_run(void *ctx) {
    rt_err err = {0};
    rt_layer_runner_run(((bl_rt *)ctx)->rn, -1, &err);
}

static void bl_rt_free(bl_rt *r) {
    if (r->rn)
        rt_layer_runner_free(r->rn);
    if (r->a)
        rt_arena_free(r->a);
    memset(r, 0, sizeof *r);
}

// The model's view of the lengths of def k (as the CLI gives it): their sampled distribution.
static rt_status bl_length_dist(rt_arena *a, const rt_op *op, const int32_t *len, int64_t b,
                                rt_perf_options *popt, rt_err *err) {
    int32_t t = rt_op_tensor_index(op, "len");
    if (t < 0)
        return RT_OK;
    rt_perf_length_dist *d;
    int64_t *samples;
    RT_ALLOC(a, d, 1, err);
    RT_ALLOC(a, samples, b, err);
    for (int64_t i = 0; i < b; i++)
        samples[i] = len[i];
    d->tensor = op->tensors[t].name;
    RT_TRY(rt_extent_dist_from_samples(a, samples, (int32_t)b, op->tensors[t].loc, &d->dist, err));
    popt->lengths = d;
    popt->n_lengths = 1;
    return RT_OK;
}

// Def k profiled as `rtgen` profiles a layer's def: on bindings of its own in a scratch arena
// (rt_layer_bindings_def), released with its profiling data, so that the row holds one def's
// doubles at a time besides the layer's buffers (every def prepared at once, a BERT layer on
// RACE b64 held two copies of every intermediate and ran out of memory beside its peers).
static rt_status bl_profile_def(bl_rt *r, int32_t k, const rt_device *dev,
                                const rt_perf_result *perf, const rt_cpu_options *copt,
                                rt_err *err) {
    rt_arena *s = rt_arena_new(1 << 16);
    if (!s)
        return rt_fail(err, RT_ERR_NOMEM, RT_NOLOC, "out of memory");
    rt_bindings *b = NULL;
    rt_status st = rt_layer_bindings_def(s, r->lb, k, &b, err);
    if (st == RT_OK)
        st = rt_cpu_build_and_profile(r->a, r->l->ops[k], dev, b, perf, copt, &r->cpu[k], err);
    rt_arena_free(s);
    return st;
}

// The layer of config c on lengths len[0..b), every def constructed for `threads` cores of dev
// and profiled on that many threads, bound into a layer runner.
static rt_status bl_rt_build(const bl_config *c, const int32_t *len, int64_t b, int threads,
                             const rt_device *dev, const bl_opts *o, bl_rt *r, rt_err *err) {
    char path[1024];
    snprintf(path, sizeof path, "%s/%s", RTGEN_SOURCE_DIR, c->spec);
    rt_size_binding sets[5] = {{"B", b}, {"M", c->m}, {"H", c->h}, {"D", c->d}, {"F", c->f}};
    RT_TRY(rt_spec_load_layer(r->a, path, sets, 5, &r->l, err));
    if (r->l->n_ops > BL_MAX_OPS)
        return rt_fail(err, RT_ERR_USAGE, RT_NOLOC, "%s: more than %d defs", path, BL_MAX_OPS);
    RT_TRY(rt_layer_bindings_new(r->a, r->l, BL_SEED, &r->lb, err));
    RT_TRY(rt_bindings_set_lengths(r->lb->ops[0], "len", len, b, err));
    RT_TRY(rt_layer_bindings_prepare_inputs(r->lb, err));
    rt_device dev_row = *dev; // constructed for the cores it runs on, as oneDNN blocks for its
    if (threads > 0)
        rt_hal_device_on_units(&dev_row, threads); // the peaks scaled with the cores
    for (int32_t k = 0; k < r->l->n_ops; k++) {
        const rt_op *op = r->l->ops[k];
        rt_perf_options popt = {.top_k = o->top_k};
        rt_cpu_options copt = {
            .profile = true, .threads = threads, .budget_ms = o->profile_ms, .timeout_ms = 60000};
        rt_perf_result *perf;
        RT_TRY(bl_length_dist(r->a, op, len, b, &popt, err));
        RT_TRY(rt_perf_construct(r->a, op, &dev_row, &popt, &perf, err));
        RT_TRY(bl_profile_def(r, k, &dev_row, perf, &copt, err));
        const rt_cpu_cand *c0 = &r->cpu[k]->cands[0];
        if (r->cpu[k]->winner < 0)
            return rt_fail(err, RT_ERR_BACKEND, RT_NOLOC,
                           "def %s: no candidate passed its check (the first: %s, %s)", op->name,
                           rt_cpu_cand_status_name(c0->status), c0->reason ? c0->reason : "");
    }
    RT_TRY(rt_layer_runner_new(r->a, r->l, r->cpu, r->lb, &r->rn, err));
    r->prelude_ns = rt_layer_runner_report(r->rn)->prelude_ns;
    double t0 = rt_bench_now_ns();
    RT_TRY(rt_layer_runner_run(r->rn, -1, err));
    r->first_ns = rt_bench_now_ns() - t0;
    return RT_OK;
}

static bool bl_rt_prepare(const bl_config *c, const int32_t *len, int64_t b, int threads,
                          const rt_device *dev, const bl_opts *o, bl_rt *r) {
    memset(r, 0, sizeof *r);
    rt_err err = {0};
    if (!(r->a = rt_arena_new(1 << 20)))
        return false;
    if (bl_rt_build(c, len, b, threads, dev, o, r, &err) != RT_OK) {
        snprintf(r->why, sizeof r->why, "rtgen failed: %.170s", err.msg);
        return false;
    }
    return true;
}

static const float *bl_rt_tensor(bl_rt *r, const char *name) {
    return rt_layer_runner_data(r->rn, name, NULL);
}

// ---------------------------------------------------------------------------------------------
// Peer (a): the padded layer from oneDNN primitives
// ---------------------------------------------------------------------------------------------

#define BL_MAX_STEPS 16
#define BL_MAX_BUFS  24

typedef struct bl_step {
    dnnl_primitive_t prim;
    int nargs, stage; // stage: the rtgen def it stands for (the per-op table)
    dnnl_exec_arg_t args[5];
} bl_step;

typedef struct bl_dnnl {
    dnnl_engine_t eng;
    dnnl_stream_t strm;
    int64_t b, l, m, hd, h, d, f;
    int n_steps, n_bufs;
    bl_step steps[BL_MAX_STEPS];
    float *bufs[BL_MAX_BUFS];
    float *x, *y; // the padded input and output (b, l, m)
    char impl[160];
    bool ok;
} bl_dnnl;

static float *bl_alloc(bl_dnnl *p, int64_t n) {
    if (p->n_bufs >= BL_MAX_BUFS)
        return NULL;
    float *f = aligned_alloc(64, (size_t)((n + 15) / 16 * 16) * sizeof(float));
    if (f)
        memset(f, 0, (size_t)n * sizeof(float));
    return p->bufs[p->n_bufs++] = f;
}

static bool bl_md(dnnl_memory_desc_t *md, int nd, const int64_t *dims, const int64_t *strides) {
    dnnl_dims_t dd, st;
    for (int i = 0; i < nd; i++)
        dd[i] = dims[i], st[i] = strides[i];
    return dnnl_memory_desc_init_by_strides(md, nd, dd, dnnl_f32, st) == dnnl_success;
}

// Plain row-major descriptor of nd dims.
static bool bl_md_plain(dnnl_memory_desc_t *md, int nd, const int64_t *dims) {
    int64_t st[4];
    st[nd - 1] = 1;
    for (int i = nd - 2; i >= 0; i--)
        st[i] = st[i + 1] * dims[i + 1];
    return bl_md(md, nd, dims, st);
}

// Appends a step: the primitive of pd (destroyed here) with args (memory made on the user's
// pointers), standing for def `stage`.
static bool bl_add(bl_dnnl *p, dnnl_primitive_desc_t pd, int stage, int nargs, const int *arg,
                   const dnnl_memory_desc_t *mds, float *const *ptrs) {
    if (!pd || p->n_steps >= BL_MAX_STEPS)
        return false;
    bl_step *s = &p->steps[p->n_steps];
    const char *str = NULL;
    if (dnnl_primitive_desc_query(pd, dnnl_query_impl_info_str, 0, &str) == dnnl_success && str &&
        !strstr(p->impl, str) && strlen(p->impl) + strlen(str) + 2 < sizeof p->impl)
        snprintf(p->impl + strlen(p->impl), sizeof p->impl - strlen(p->impl), "%s%s",
                 p->impl[0] ? "," : "", str);
    bool ok = dnnl_primitive_create(&s->prim, pd) == dnnl_success;
    dnnl_primitive_desc_destroy(pd);
    for (int k = 0; ok && k < nargs; k++) {
        dnnl_memory_t mem;
        ok = dnnl_memory_create(&mem, &mds[k], p->eng, ptrs[k]) == dnnl_success;
        if (ok)
            s->args[s->nargs++] = (dnnl_exec_arg_t){arg[k], mem};
    }
    s->stage = stage;
    p->n_steps += ok;
    return ok;
}

// dst = src . wei (+ bias) * scale, src/wei/dst of nd dims with the given strides.
static bool bl_matmul(bl_dnnl *p, int stage, int nd, const int64_t *sd, const int64_t *ss,
                      float *src, const int64_t *wd, const int64_t *ws, float *wei,
                      const int64_t *dd, const int64_t *ds, float *dst, float *bias, float scale) {
    dnnl_memory_desc_t md[4];
    int64_t bd[2] = {1, dd[nd - 1]}, bs[2] = {dd[nd - 1], 1};
    if (!bl_md(&md[0], nd, sd, ss) || !bl_md(&md[1], nd, wd, ws) || !bl_md(&md[2], nd, dd, ds) ||
        (bias && !bl_md(&md[3], 2, bd, bs)))
        return false;
    dnnl_matmul_desc_t desc;
    dnnl_primitive_attr_t attr = NULL;
    dnnl_primitive_desc_t pd = NULL;
    bool ok = dnnl_matmul_desc_init(&desc, &md[0], &md[1], bias ? &md[3] : NULL, &md[2]) ==
                  dnnl_success &&
              dnnl_primitive_attr_create(&attr) == dnnl_success;
    if (ok && scale != 1.0f)
        ok = dnnl_primitive_attr_set_output_scales(attr, 1, 0, &scale) == dnnl_success;
    ok = ok && dnnl_primitive_desc_create(&pd, &desc, attr, p->eng, NULL) == dnnl_success;
    if (attr)
        dnnl_primitive_attr_destroy(attr);
    int args[4] = {DNNL_ARG_SRC, DNNL_ARG_WEIGHTS, DNNL_ARG_DST, DNNL_ARG_BIAS};
    float *ptrs[4] = {src, wei, dst, bias};
    return ok && bl_add(p, pd, stage, bias ? 4 : 3, args, md, ptrs);
}

// Row-major 2-D product (rows, k) . (k, n) (+ bias (n)).
static bool bl_linear(bl_dnnl *p, int stage, int64_t rows, int64_t k, int64_t n, float *src,
                      float *wei, float *dst, float *bias) {
    int64_t sd[2] = {rows, k}, ss[2] = {k, 1}, wd[2] = {k, n}, ws[2] = {n, 1}, dd[2] = {rows, n},
            ds[2] = {n, 1};
    return bl_matmul(p, stage, 2, sd, ss, src, wd, ws, wei, dd, ds, dst, bias, 1.0f);
}

// dst = a + b (b broadcast over its dims of extent 1), 4-D plain.
static bool bl_binary_add(bl_dnnl *p, int stage, const int64_t *ad, float *a, const int64_t *bd,
                          float *b, float *dst) {
    dnnl_memory_desc_t md[3];
    dnnl_binary_desc_t desc;
    dnnl_primitive_desc_t pd = NULL;
    if (!bl_md_plain(&md[0], 4, ad) || !bl_md_plain(&md[1], 4, bd) || !bl_md_plain(&md[2], 4, ad) ||
        dnnl_binary_desc_init(&desc, dnnl_binary_add, &md[0], &md[1], &md[2]) != dnnl_success ||
        dnnl_primitive_desc_create(&pd, &desc, NULL, p->eng, NULL) != dnnl_success)
        return false;
    int args[3] = {DNNL_ARG_SRC_0, DNNL_ARG_SRC_1, DNNL_ARG_DST};
    float *ptrs[3] = {a, b, dst};
    return bl_add(p, pd, stage, 3, args, md, ptrs);
}

// Layer normalization over the last dim of (rows, m) with gain g and shift s, eps 1e-5.
static bool bl_layernorm(bl_dnnl *p, int stage, int64_t rows, int64_t m, float *src, float *g,
                         float *s, float *dst) {
    int64_t dd[2] = {rows, m}, gd[1] = {m};
    dnnl_memory_desc_t md[4];
    dnnl_layer_normalization_desc_t desc;
    dnnl_primitive_desc_t pd = NULL;
    if (!bl_md_plain(&md[0], 2, dd) || !bl_md_plain(&md[1], 2, dd) || !bl_md_plain(&md[2], 1, gd) ||
        !bl_md_plain(&md[3], 1, gd) ||
        dnnl_layer_normalization_forward_desc_init(&desc, dnnl_forward_inference, &md[0], NULL,
                                                   1e-5f, dnnl_use_scale | dnnl_use_shift) !=
            dnnl_success ||
        dnnl_primitive_desc_create(&pd, &desc, NULL, p->eng, NULL) != dnnl_success)
        return false;
    int args[4] = {DNNL_ARG_SRC, DNNL_ARG_DST, DNNL_ARG_SCALE, DNNL_ARG_SHIFT};
    float *ptrs[4] = {src, dst, g, s};
    return bl_add(p, pd, stage, 4, args, md, ptrs);
}

static bool bl_softmax(bl_dnnl *p, int stage, const int64_t *dims, float *x) {
    dnnl_memory_desc_t md[2];
    dnnl_softmax_desc_t desc;
    dnnl_primitive_desc_t pd = NULL;
    if (!bl_md_plain(&md[0], 4, dims) || !bl_md_plain(&md[1], 4, dims) ||
        dnnl_softmax_forward_desc_init(&desc, dnnl_forward_inference, &md[0], 3) != dnnl_success ||
        dnnl_primitive_desc_create(&pd, &desc, NULL, p->eng, NULL) != dnnl_success)
        return false;
    int args[2] = {DNNL_ARG_SRC, DNNL_ARG_DST};
    float *ptrs[2] = {x, x};
    return bl_add(p, pd, stage, 2, args, md, ptrs);
}

static bool bl_gelu(bl_dnnl *p, int stage, int64_t rows, int64_t n, float *x) {
    int64_t dd[2] = {rows, n};
    dnnl_memory_desc_t md[2];
    dnnl_eltwise_desc_t desc;
    dnnl_primitive_desc_t pd = NULL;
    if (!bl_md_plain(&md[0], 2, dd) || !bl_md_plain(&md[1], 2, dd) ||
        dnnl_eltwise_forward_desc_init(&desc, dnnl_forward_inference, dnnl_eltwise_gelu_erf, &md[0],
                                       0, 0) != dnnl_success ||
        dnnl_primitive_desc_create(&pd, &desc, NULL, p->eng, NULL) != dnnl_success)
        return false;
    int args[2] = {DNNL_ARG_SRC, DNNL_ARG_DST};
    float *ptrs[2] = {x, x};
    return bl_add(p, pd, stage, 2, args, md, ptrs);
}

static float *bl_copy(bl_dnnl *p, const float *src, int64_t n) {
    float *f = src ? bl_alloc(p, n) : NULL;
    if (f)
        memcpy(f, src, (size_t)n * sizeof(float));
    return f;
}

// The padding (and causal) mask added to the scores: 0 where key j is attended, -1e9 where it
// is padding (j >= len(b)) or, causal, after the query (j > i). (b, 1, 1, l) or (b, 1, l, l).
static float *bl_mask(bl_dnnl *p, const int32_t *len, bool causal) {
    int64_t rows = causal ? p->l : 1;
    float *mk = bl_alloc(p, p->b * rows * p->l);
    for (int64_t b = 0; mk && b < p->b; b++)
        for (int64_t i = 0; i < rows; i++)
            for (int64_t j = 0; j < p->l; j++)
                mk[(b * rows + i) * p->l + j] = j >= len[b] || (causal && j > i) ? -1e9f : 0.0f;
    return mk;
}

// The eleven defs of examples/layers/*_encoder*.spec as primitives on the padded batch of rt's
// inputs. Stage k is rtgen's def k (q_proj ... ln2).
static bool bl_dnnl_build(bl_dnnl *p, bl_rt *rt, const bl_config *c, const int32_t *len) {
    int64_t b = p->b, l = p->l, m = c->m, hd = c->h * c->d, h = c->h, d = c->d, f = c->f;
    int64_t bl = b * l;
    p->m = m, p->hd = hd, p->h = h, p->d = d, p->f = f;
    const char *wn[] = {"Wq", "Wk", "Wv", "Wo", "W1", "b1", "W2", "b2", "g1", "be1", "g2", "be2"};
    const int64_t wsz[] = {m * hd, m * hd, m * hd, hd * m, m * f, f, f * m, m, m, m, m, m};
    float *w[12];
    for (int i = 0; i < 12; i++)
        if (!(w[i] = bl_copy(p, bl_rt_tensor(rt, wn[i]), wsz[i])))
            return false;
    const float *x = bl_rt_tensor(rt, "X");
    float *q = bl_alloc(p, bl * hd), *k = bl_alloc(p, bl * hd), *v = bl_alloc(p, bl * hd);
    float *s = bl_alloc(p, b * h * l * l), *mk = bl_mask(p, len, c->causal);
    float *at = bl_alloc(p, bl * hd), *o = bl_alloc(p, bl * m), *y1 = bl_alloc(p, bl * m);
    float *t = bl_alloc(p, bl * f), *o2 = bl_alloc(p, bl * m);
    p->x = bl_alloc(p, bl * m), p->y = bl_alloc(p, bl * m);
    if (!x || !q || !k || !v || !s || !mk || !at || !o || !y1 || !t || !o2 || !p->x || !p->y)
        return false;
    for (int64_t bb = 0, row = 0; bb < b; row += len[bb++])
        memcpy(p->x + bb * l * m, x + row * m, (size_t)(len[bb] * m) * sizeof(float));
    // Q (b, l, h, d) read as (b, h, l, d), K as (b, h, d, l), A written as (b, l, h, d).
    int64_t qd[4] = {b, h, l, d}, qs[4] = {l * hd, d, hd, 1}, kd[4] = {b, h, d, l},
            ks[4] = {l * hd, d, 1, hd}, sd[4] = {b, h, l, l}, ss[4] = {h * l * l, l * l, l, 1};
    int64_t md4[4] = {1, 1, bl, m}, mkd[4] = {b, 1, c->causal ? l : 1, l};
    return bl_linear(p, 0, bl, m, hd, p->x, w[0], q, NULL) &&
           bl_linear(p, 1, bl, m, hd, p->x, w[1], k, NULL) &&
           bl_linear(p, 2, bl, m, hd, p->x, w[2], v, NULL) &&
           bl_matmul(p, 3, 4, qd, qs, q, kd, ks, k, sd, ss, s, NULL, 1.0f / sqrtf((float)d)) &&
           bl_binary_add(p, 4, sd, s, mkd, mk, s) && bl_softmax(p, 4, sd, s) &&
           bl_matmul(p, 5, 4, sd, ss, s, qd, qs, v, qd, qs, at, NULL, 1.0f) &&
           bl_linear(p, 6, bl, hd, m, at, w[3], o, NULL) &&
           bl_binary_add(p, 7, md4, o, md4, p->x, o) &&
           bl_layernorm(p, 7, bl, m, o, w[8], w[9], y1) &&
           bl_linear(p, 8, bl, m, f, y1, w[4], t, w[5]) && bl_gelu(p, 8, bl, f, t) &&
           bl_linear(p, 9, bl, f, m, t, w[6], o2, w[7]) &&
           bl_binary_add(p, 10, md4, o2, md4, y1, o2) &&
           bl_layernorm(p, 10, bl, m, o2, w[10], w[11], p->y);
}

static void bl_dnnl_free(bl_dnnl *p) {
    for (int i = 0; i < p->n_steps; i++) {
        for (int k = 0; k < p->steps[i].nargs; k++)
            dnnl_memory_destroy(p->steps[i].args[k].memory);
        dnnl_primitive_destroy(p->steps[i].prim);
    }
    for (int i = 0; i < p->n_bufs; i++)
        free(p->bufs[i]);
    p->n_steps = p->n_bufs = 0;
}

static void bl_dnnl_run(void *ctx) {
    bl_dnnl *p = ctx;
    for (int i = 0; i < p->n_steps; i++)
        dnnl_primitive_execute(p->steps[i].prim, p->strm, p->steps[i].nargs, p->steps[i].args);
    dnnl_stream_wait(p->strm);
}

// max |rtgen's Y - (a)'s Y| / max |(a)'s Y| over the valid rows.
static double bl_err(const float *got, const bl_dnnl *p, const int32_t *len) {
    double e = 0, mx = 0;
    for (int64_t b = 0, row = 0; b < p->b; row += len[b++])
        for (int64_t i = 0; i < len[b]; i++)
            for (int64_t n = 0; n < p->m; n++) {
                double want = p->y[(b * p->l + i) * p->m + n], g = got[(row + i) * p->m + n];
                e = isfinite(g) ? fmax(e, fabs(g - want)) : (double)INFINITY;
                mx = fmax(mx, fabs(want));
            }
    return mx > 0 ? e / mx : e;
}

// ---------------------------------------------------------------------------------------------
// A row: one layer, dataset, batch and thread count
// ---------------------------------------------------------------------------------------------

typedef struct bl_row {
    const bl_config *c;
    const char *data;
    int64_t b;
    int threads;
    int32_t len[BL_MAX_BATCH], lmax;
    double useful, padded; // FLOPs (2 per multiply-add of the contractions)
    bl_rt rt, dense;
    bl_dnnl dn;
    bool have_rt, have_dn, have_dense;
    double err;
    rt_bench_stats st_rt, st_dn, st_dense;
    double op_rt[BL_MAX_OPS], op_dn[BL_MAX_OPS];
    int rounds, op_reps; // of the turns, of the per-op runs
    double fma_gflops;   // the FMA peak on the row's threads, measured after its turns
    char why[220];
} bl_row;

// FLOPs of the layer's contractions on lengths len (each padded to lmax when lmax > 0).
static double bl_flops(const bl_config *c, const int32_t *len, int64_t b, int32_t lmax) {
    double hd = (double)(c->h * c->d), m = (double)c->m, f = (double)c->f, sum = 0;
    for (int64_t i = 0; i < b; i++) {
        double n = lmax > 0 ? lmax : len[i];
        double pairs = c->causal && lmax == 0 ? n * (n + 1) / 2 : n * n; // (a) computes all
        sum += 2 * n * m * hd * 4 + 2 * n * m * f * 2 + 2 * pairs * hd * 2;
    }
    return sum;
}

static bool bl_sample(const char *hist, int64_t b, int32_t *len, char *why, size_t n_why) {
    rt_arena *a = rt_arena_new(1 << 16);
    rt_err err = {0};
    char path[1024];
    snprintf(path, sizeof path, "%s/bench/data/%s.hist", RTGEN_SOURCE_DIR, hist);
    rt_lengths_file *f;
    bool ok = a && !rt_lengths_read(a, path, &f, &err) &&
              !rt_lengths_take(f, "len", b, BL_SEED, len, &err);
    if (!ok)
        snprintf(why, n_why, "%.200s", a ? err.msg : "out of memory");
    rt_arena_free(a);
    return ok;
}

// The per-op table: BL_OP_REPS whole-layer runs of rtgen and (a) alternating, each def (and
// (a)'s primitives standing for it) timed inside the run; the medians.
static void bl_time_ops(bl_row *r, int reps) {
    int n_ops = r->rt.l->n_ops;
    double rt[BL_MAX_OPS][BL_OP_REPS], dn[BL_MAX_OPS][BL_OP_REPS];
    rt_err err = {0};
    for (int rep = 0; rep < reps; rep++) {
        double t = rt_bench_now_ns();
        for (int k = 0; k < n_ops; k++) {
            rt_layer_runner_run(r->rt.rn, k, &err);
            double now = rt_bench_now_ns();
            rt[k][rep] = now - t, t = now;
        }
        usleep(BL_SETTLE_MS * 1000);
        for (int k = 0; k < n_ops; k++)
            dn[k][rep] = 0;
        t = rt_bench_now_ns();
        for (int i = 0; i < r->dn.n_steps; i++) {
            bl_step *s = &r->dn.steps[i];
            dnnl_primitive_execute(s->prim, r->dn.strm, s->nargs, s->args);
            dnnl_stream_wait(r->dn.strm);
            double now = rt_bench_now_ns();
            dn[s->stage][rep] += now - t, t = now;
        }
        usleep(BL_SETTLE_MS * 1000);
    }
    for (int k = 0; k < n_ops; k++) {
        r->op_rt[k] = rt_bench_median(rt[k], reps);
        r->op_dn[k] = rt_bench_median(dn[k], reps);
    }
}

static void bl_time_row(bl_row *r, const bl_opts *o) {
    void (*fns[3])(void *) = {bl_rt_run, bl_dnnl_run, bl_rt_run};
    void *ctxs[3] = {&r->rt, &r->dn, &r->dense};
    rt_bench_stats st[3] = {{0}};
    int n = r->have_dense ? 3 : 2;
    // A layer of seconds per call gets fewer rounds and per-op repetitions (at least one): each
    // round calls every contender at least twice (warm-up and timed).
    double slow_ns = fmax(r->rt.first_ns, r->have_dense ? r->dense.first_ns : 0);
    int rounds = (int)fmin(BL_ROUNDS, fmax(1, BL_SLOW_NS / (2 * n * slow_ns)));
    r->rounds = rounds;
    r->op_reps = (int)fmin(BL_OP_REPS, fmax(1, BL_SLOW_NS / (2 * r->rt.first_ns)));
    rt_bench_time_turns(n, fns, ctxs, o->budget_ms, rounds, BL_SETTLE_MS, st);
    r->st_rt = st[0], r->st_dn = st[1];
    if (r->have_dense)
        r->st_dense = st[2];
    bl_time_ops(r, r->op_reps);
    r->fma_gflops = rt_bench_fma_peak_gflops(r->threads);
}

static void bl_run_row(bl_row *r, const rt_device *dev, const bl_opts *o, dnnl_engine_t eng,
                       dnnl_stream_t strm, bool timed) {
    if (!bl_sample(r->data, r->b, r->len, r->why, sizeof r->why))
        return;
    for (int64_t i = 0; i < r->b; i++)
        r->lmax = r->len[i] > r->lmax ? r->len[i] : r->lmax;
    r->useful = bl_flops(r->c, r->len, r->b, 0);
    r->padded = bl_flops(r->c, r->len, r->b, r->lmax);
    omp_set_num_threads(r->threads);
    if (!(r->have_rt = bl_rt_prepare(r->c, r->len, r->b, r->threads, dev, o, &r->rt))) {
        snprintf(r->why, sizeof r->why, "%s", r->rt.why);
        return;
    }
    r->dn.eng = eng, r->dn.strm = strm, r->dn.b = r->b, r->dn.l = r->lmax;
    if (!(r->have_dn = bl_dnnl_build(&r->dn, &r->rt, r->c, r->len))) {
        snprintf(r->why, sizeof r->why, "oneDNN: a primitive could not be created");
        return;
    }
    bl_dnnl_run(&r->dn);
    r->err = bl_err(bl_rt_tensor(&r->rt, "Y"), &r->dn, r->len);
    if (o->dense) {
        int32_t pad[BL_MAX_BATCH];
        for (int64_t i = 0; i < r->b; i++)
            pad[i] = r->lmax;
        r->have_dense = bl_rt_prepare(r->c, pad, r->b, r->threads, dev, o, &r->dense);
    }
    if (timed)
        bl_time_row(r, o);
}

static void bl_row_free(bl_row *r) {
    bl_rt_free(&r->rt);
    bl_rt_free(&r->dense);
    bl_dnnl_free(&r->dn);
}

// The target over (a): 80% of the ideal speedup (padded / useful FLOPs), at least 1.0x
// where the ideal is below 1.25.
static double bl_target(const bl_row *r) {
    double ideal = r->padded / r->useful;
    return ideal < 1.25 ? 1.0 : 0.8 * ideal;
}

static const char bl_head[] = "%-12s %-6s %3s %3s %6s %9s %9s %9s %9s %6s %6s %-5s %6s %6s %-4s "
                              "%7s %8s\n";

static void bl_print_header(void) {
    printf(bl_head, "layer", "data", "B", "thr", "ideal", "rt_min_ms", "rt_med_ms", "a_med_ms",
           "b_med_ms", "x_a", "target", "grade", "x_b", "prel%", "<=2%", "padovh%", "err_a");
}

static const char *bl_grade(const bl_row *r) {
    if (!(r->err <= BL_TOL))
        return "WRONG";
    return r->st_dn.median_ns / r->st_rt.median_ns >= bl_target(r) ? "PASS" : "MISS";
}

// The row's line, then its per-op table (rtgen's def against the primitives standing for it).
static void bl_print_row(const bl_row *r, int counts[4]) {
    if (!r->have_rt || !r->have_dn) {
        printf("%-12s %-6s %3lld %3d  n/a: %s\n", r->c->name, r->data, (long long)r->b, r->threads,
               r->why);
        counts[3]++;
        return;
    }
    double rt = r->st_rt.median_ns, prel = 100 * r->rt.prelude_ns / (r->rt.prelude_ns + rt);
    char f[12][24] = {{0}};
    snprintf(f[0], 24, "%lld", (long long)r->b);
    snprintf(f[1], 24, "%d", r->threads);
    snprintf(f[2], 24, "%.2f", r->padded / r->useful);
    snprintf(f[3], 24, "%.2f", r->st_rt.min_ns * 1e-6);
    snprintf(f[4], 24, "%.2f", rt * 1e-6);
    snprintf(f[5], 24, "%.2f", r->st_dn.median_ns * 1e-6);
    snprintf(f[6], 24, "%.2f", r->st_dn.median_ns / rt);
    snprintf(f[7], 24, "%.2f", bl_target(r));
    snprintf(f[8], 24, "%.2f", prel);
    snprintf(f[9], 24, "%.1e", r->err);
    snprintf(f[10], 24, "n/a"), snprintf(f[11], 24, "n/a");
    char bmed[24] = "n/a";
    if (r->have_dense) {
        snprintf(bmed, 24, "%.2f", r->st_dense.median_ns * 1e-6);
        snprintf(f[10], 24, "%.2f", r->st_dense.median_ns / rt);
        // rtgen's time per useful FLOP over its own dense time per padded FLOP, minus 1.
        snprintf(f[11], 24, "%.1f",
                 100 * (rt / r->useful / (r->st_dense.median_ns / r->padded) - 1));
    }
    const char *g = bl_grade(r);
    counts[g[0] == 'P' ? 0 : g[0] == 'M' ? 1 : 2]++;
    printf(bl_head, r->c->name, r->data, f[0], f[1], f[2], f[3], f[4], f[5], bmed, f[6], f[7], g,
           f[10], f[8], prel <= 2 ? "ok" : "over", f[11], f[9]);
    if (!r->have_dense && r->dense.why[0])
        printf("  (b) n/a: %s\n", r->dense.why);
    printf("  %-10s %10s %10s %7s  %s\n", "op", "rt_us", "a_us", "a/rt", "rtgen kernel");
    for (int k = 0; k < r->rt.l->n_ops; k++) {
        const rt_cpu_report *c = r->rt.cpu[k];
        const rt_cpu_cand *w = &c->cands[c->winner];
        printf("  %-10s %10.1f %10.1f %7.2f  %s\n", r->rt.l->ops[k]->name, r->op_rt[k] * 1e-3,
               r->op_dn[k] * 1e-3, r->op_dn[k] / r->op_rt[k], w->summary ? w->summary : w->name);
    }
    printf("  prelude %.1f us (%d start arrays); %d rounds of turns, per-op medians of %d runs; "
           "oneDNN: %s\n",
           r->rt.prelude_ns * 1e-3, (int)rt_layer_runner_report(r->rt.rn)->n_prelude, r->rounds,
           r->op_reps, r->dn.impl);
    if (r->fma_gflops > 0) // the ceiling: rtgen's useful rate against the FMA peak
        printf("  ceiling: FMA peak %.1f GFLOP/s on %d thread(s), measured after the row; rtgen "
               "%.1f useful GFLOP/s (%.1f %% of it), (a) %.1f padded GFLOP/s (%.1f %%)\n",
               r->fma_gflops, r->threads, r->useful / rt, 100 * r->useful / rt / r->fma_gflops,
               r->padded / r->st_dn.median_ns,
               100 * r->padded / r->st_dn.median_ns / r->fma_gflops);
}

// ---------------------------------------------------------------------------------------------
// Self-test: a tiny layer (d_model 32, 2 heads of 16, FFN 64, 5 sequences of cola) untimed
// ---------------------------------------------------------------------------------------------

static int bl_fails;

static void bl_expect(bool ok, const char *what, const char *name) {
    if (!ok) {
        fprintf(stderr, "bench-layer self-test: %s: %s\n", name, what);
        bl_fails++;
    }
}

// rtgen's layer checked against the interpreter (rt_layer_run) and against (a); the line graded.
static void bl_self_case(const bl_config *c, const rt_device *dev, const bl_opts *o,
                         dnnl_engine_t eng, dnnl_stream_t strm) {
    static bl_row r;
    memset(&r, 0, sizeof r);
    r.c = c, r.data = "cola", r.b = 5, r.threads = o->threads[0];
    bl_run_row(&r, dev, o, eng, strm, false);
    bl_expect(r.have_rt && r.have_dn, r.why, c->name);
    if (r.have_rt && r.have_dn) {
        bl_expect(r.err <= BL_TOL, "rtgen's Y differs from oneDNN's padded layer", c->name);
        bl_expect(strcmp(bl_grade(&r), "WRONG") != 0 && bl_target(&r) >= 1.0,
                  "the line has no grade", c->name);
        bl_expect(r.useful > 0 && r.padded >= r.useful, "FLOP counts", c->name);
        // The interpreter's check of the whole layer on a runner of its own.
        rt_err err = {0};
        rt_layer_options lopt = {.budget_ms = 1, .seed = BL_SEED, .check = true};
        rt_layer_report *rep = NULL;
        rt_status st = rt_layer_run(r.rt.a, r.rt.l, r.rt.cpu, r.rt.lb, &lopt, &rep, &err);
        bl_expect(st == RT_OK, err.msg, c->name);
        bl_expect(st != RT_OK || (rep->checked && rep->correct),
                  st == RT_OK && rep->why ? rep->why : "layer check", c->name);
        printf("%s: err vs oneDNN %.2e, interpreter %s, ideal %.2f\n", c->name, r.err,
               st == RT_OK && rep->correct ? "ok" : "WRONG", r.padded / r.useful);
    }
    bl_row_free(&r);
}

static int bl_self_test(const rt_device *dev, bl_opts *o, dnnl_engine_t eng, dnnl_stream_t strm) {
    static const bl_config tiny[] = {
        {"tiny", "examples/layers/cora_encoder.spec", 32, 2, 16, 64, false},
        {"tiny_causal", "examples/layers/cora_encoder_causal.spec", 32, 2, 16, 64, true},
    };
    // No (b): its construction (eleven more kernels JIT-compiled) would be a third of the time.
    o->top_k = 1, o->profile_ms = 1, o->dense = false;
    for (size_t i = 0; i < sizeof tiny / sizeof tiny[0]; i++)
        bl_self_case(&tiny[i], dev, o, eng, strm);
    printf("bench-layer self-test: %s\n", bl_fails ? "FAILED" : "ok");
    return bl_fails ? 1 : 0;
}

// ---------------------------------------------------------------------------------------------
// Options and main
// ---------------------------------------------------------------------------------------------

static bool bl_parse_list(const char *s, const char **out, int *n, const char *const *known,
                          int n_known) {
    *n = 0;
    for (const char *t = s; *t;) {
        const char *end = strchr(t, ',');
        size_t len = end ? (size_t)(end - t) : strlen(t);
        int k = 0;
        while (k < n_known && !(strlen(known[k]) == len && !strncmp(known[k], t, len)))
            k++;
        if (k == n_known || *n >= BL_MAX_LIST)
            return false;
        out[(*n)++] = known[k];
        t += len + (end != NULL);
    }
    return *n > 0;
}

static bool bl_parse_ints(const char *s, int *out, int *n, int lo, int hi) {
    *n = 0;
    for (const char *t = s; *t && *n < BL_MAX_LIST;) {
        char *end;
        long v = strtol(t, &end, 10);
        if (end == t || v < lo || v > hi || (*end && *end != ','))
            return false;
        out[(*n)++] = (int)v;
        t = *end == ',' ? end + 1 : end;
    }
    return *n > 0;
}

static bool bl_parse_args(int argc, char **argv, bl_opts *o) {
    static const char *layer_names[] = {"cora", "bert", "cora_causal", "bert_causal"};
    // The default run (a few minutes): CORA's layer on MRPC, batch 32, 1 and 2 threads.
    *o = (bl_opts){.layers = {"cora"},
                   .n_layers = 1,
                   .data = {"mrpc"},
                   .n_data = 1,
                   .batch = {32},
                   .n_batch = 1,
                   .threads = {1, 2},
                   .n_threads = 2,
                   .top_k = 2,
                   .budget_ms = 300,
                   .dense = true};
    for (int i = 1; i < argc; i++) {
        const char *s = argv[i];
        if (!strcmp(s, "--self-test"))
            o->self_test = true;
        else if (!strcmp(s, "--no-dense"))
            o->dense = false;
        else if (!strcmp(s, "--all")) {
            bl_parse_list("cora,bert", o->layers, &o->n_layers, layer_names, 4);
            bl_parse_list("cola,mrpc,squad,race", o->data, &o->n_data, bl_hists, 4);
            o->batch[0] = 32, o->batch[1] = 64, o->n_batch = 2;
        } else if (!strncmp(s, "--layers=", 9)) {
            if (!bl_parse_list(s + 9, o->layers, &o->n_layers, layer_names, 4))
                return false;
        } else if (!strncmp(s, "--data=", 7)) {
            if (!bl_parse_list(s + 7, o->data, &o->n_data, bl_hists, 4))
                return false;
        } else if (!strncmp(s, "--batch=", 8)) {
            if (!bl_parse_ints(s + 8, o->batch, &o->n_batch, 1, BL_MAX_BATCH))
                return false;
        } else if (!strncmp(s, "--threads=", 10)) {
            if (!bl_parse_ints(s + 10, o->threads, &o->n_threads, 1, 64))
                return false;
        } else if (!strncmp(s, "--top-k=", 8)) {
            if ((o->top_k = atoi(s + 8)) < 1 || o->top_k > 64)
                return false;
        } else if (!strncmp(s, "--budget-ms=", 12)) {
            if (!((o->budget_ms = atof(s + 12)) > 0 && o->budget_ms < 60000))
                return false;
        } else
            return false;
    }
    return true;
}

static void bl_usage(void) {
    fprintf(stderr,
            "usage: bench-layer [--layers=cora,bert,cora_causal,bert_causal]\n"
            "                   [--data=cola,mrpc,squad,race] [--batch=32,64] [--threads=1,2]\n"
            "                   [--top-k=N] [--budget-ms=MS] [--no-dense] [--all] [--self-test]\n"
            "default: --layers=cora --data=mrpc --batch=32 --threads=1,2 --top-k=2;\n"
            "--all: --layers=cora,bert --data=cola,mrpc,squad,race --batch=32,64\n");
}

static const bl_config *bl_config_of(const char *name) {
    for (size_t i = 0; i < sizeof bl_configs / sizeof bl_configs[0]; i++)
        if (!strcmp(bl_configs[i].name, name))
            return &bl_configs[i];
    return NULL;
}

int main(int argc, char **argv) {
    bl_opts o;
    if (!bl_parse_args(argc, argv, &o)) {
        bl_usage();
        return 2;
    }
    rt_device dev;
    rt_err err = {0};
    dnnl_engine_t eng;
    dnnl_stream_t strm;
    if (rt_hal_host_device(&dev, &err) != RT_OK) {
        fprintf(stderr, "bench-layer: error: host device: %s\n", err.msg);
        return 1;
    }
    if (dnnl_engine_create(&eng, dnnl_cpu, 0) != dnnl_success ||
        dnnl_stream_create(&strm, eng, dnnl_stream_default_flags) != dnnl_success) {
        fprintf(stderr, "bench-layer: error: cannot create the oneDNN CPU engine\n");
        return 1;
    }
    int rc = 0;
    if (o.self_test) {
        rc = bl_self_test(&dev, &o, eng, strm);
    } else {
        printf("device: %s (%s), %d cores; rtgen top-%d per def; times: median of up to %d "
               "rounds of turns against (a) and (b), %.0f ms each; err_a: max |rtgen - a| / max "
               "|a| of Y (WRONG "
               "above %.0e)\n",
               dev.name, dev.path, (int)dev.units, o.top_k, BL_ROUNDS, o.budget_ms, BL_TOL);
        bl_print_header();
        int counts[4] = {0};
        for (int t = 0; t < o.n_threads; t++)
            for (int li = 0; li < o.n_layers; li++)
                for (int di = 0; di < o.n_data; di++)
                    for (int bi = 0; bi < o.n_batch; bi++) {
                        static bl_row r;
                        memset(&r, 0, sizeof r);
                        r.c = bl_config_of(o.layers[li]), r.data = o.data[di];
                        r.b = o.batch[bi], r.threads = o.threads[t];
                        bl_run_row(&r, &dev, &o, eng, strm, true);
                        bl_print_row(&r, counts);
                        fflush(stdout);
                        bl_row_free(&r);
                        usleep(200000);
                    }
        printf("\n%d PASS, %d MISS, %d WRONG, %d n/a (rows)\n", counts[0], counts[1], counts[2],
               counts[3]);
    }
    dnnl_stream_destroy(strm);
    dnnl_engine_destroy(eng);
    return rc;
}
