// test-kir.c: the kernel IR on its own — constant folding, validation, and hand-built kernels
// (a vectorized elementwise loop with integer floor division, a packed micro-kernel GEMM with
// edge tiles and accumulation) run through both emitters: the LLVM JIT of hal-cpu.c and the
// emitted C compiled by the system cc, each checked against a plain C loop.
#include "test.h"

#include "emit.h"
#include "hal-cpu.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

// k fails validation with a message containing msg, or (msg NULL) passes it.
static void expect_validate(const rt_kir_kernel *k, const char *msg) {
    rt_err err = {0};
    RT_EXPECT_EQ(rt_kir_validate(k, &err), msg ? RT_ERR_BACKEND : RT_OK);
    if (msg && !strstr(err.msg, msg))
        fprintf(stderr, "expected \"%s\" in: %s\n", msg, err.msg);
    RT_EXPECT(!msg || strstr(err.msg, msg) != NULL);
}

static void test_fold(rt_arena *a) {
    rt_kir_expr *x = rt_kir_bin(a, RT_KIR_ADD, rt_kir_int(a, 3), rt_kir_int(a, 4));
    int64_t v = 0;
    RT_EXPECT(rt_kir_is_int(x, &v));
    RT_EXPECT_EQ(v, 7);
    RT_EXPECT(rt_kir_is_int(rt_kir_bin(a, RT_KIR_DIV, rt_kir_int(a, -7), rt_kir_int(a, 2)), &v));
    RT_EXPECT_EQ(v, -4);
    RT_EXPECT(rt_kir_is_int(rt_kir_bin(a, RT_KIR_MOD, rt_kir_int(a, -7), rt_kir_int(a, 2)), &v));
    RT_EXPECT_EQ(v, 1);
    rt_kir_kernel *k = rt_kir_kernel_new(a, "fold");
    rt_kir_phase *p = rt_kir_add_phase(a, k, "test", 4);
    int32_t i = rt_kir_add_var(a, p, "i", RT_KIR_I64);
    int32_t i2 = rt_kir_add_var(a, p, "i", RT_KIR_I64);
    RT_EXPECT_STR(p->vars[i2].name, "i_1");
    rt_kir_expr *vi = rt_kir_var_ref(a, p, i);
    RT_EXPECT(rt_kir_bin(a, RT_KIR_MUL, vi, rt_kir_int(a, 1)) == vi);
    RT_EXPECT(rt_kir_bin(a, RT_KIR_ADD, rt_kir_int(a, 0), vi) == vi);
    // A store of an i64 value into an f32 buffer does not validate.
    int32_t out = rt_kir_add_buf(a, k, "out", RT_KIR_BUF_DATA, RT_KIR_F32, 0, -1);
    rt_kir_node *st = rt_kir_append(a, &p->body, RT_KIR_N_STORE);
    st->buf = out;
    st->index = vi;
    st->value = vi;
    expect_validate(k, "store of another type");
    st->value = rt_kir_cast(a, RT_KIR_F32, vi);
    expect_validate(k, NULL);
    // A prefetch names a buffer of the kernel.
    rt_kir_node *pf = rt_kir_append(a, &p->body, RT_KIR_N_PREFETCH);
    pf->buf = 7;
    pf->index = vi;
    expect_validate(k, "prefetch of an unknown buffer");
    pf->buf = out;
    expect_validate(k, NULL);
    // Streaming stores are for f32 buffers.
    int32_t iout = rt_kir_add_buf(a, k, "iout", RT_KIR_BUF_DATA, RT_KIR_I64, 1, -1);
    rt_kir_node *si = rt_kir_append(a, &p->body, RT_KIR_N_STORE);
    si->buf = iout;
    si->index = vi;
    si->value = vi;
    si->stream = true;
    expect_validate(k, "streaming store to a buffer that is not f32");
    si->stream = false;
    expect_validate(k, NULL);
}

// rt_kir_hoist_reciprocals: in a vector loop storing O[i] = A[i] / S[item] + A[i] / A[i] +
// A[i] / O[item], only the first divisor is invariant (A[i] reads the loop variable, O is
// stored in the loop). It becomes A[i] * rcp with rcp = 1 / S[item] set before the loop: in an
// IF (lo < hi) where the trip count is unknown, directly where it is constant and non-zero, and
// not at all where the loop never runs.
static void test_hoist(rt_arena *a) {
    rt_kir_kernel *k = rt_kir_kernel_new(a, "hoist");
    int32_t ba = rt_kir_add_buf(a, k, "A", RT_KIR_BUF_DATA, RT_KIR_F32, 0, -1);
    int32_t bs = rt_kir_add_buf(a, k, "S", RT_KIR_BUF_DATA, RT_KIR_F32, 1, -1);
    int32_t bo = rt_kir_add_buf(a, k, "O", RT_KIR_BUF_DATA, RT_KIR_F32, 2, -1);
    k->bufs[bo].written = true;
    rt_kir_phase *p = rt_kir_add_phase(a, k, "rows", 4);
    rt_kir_expr *item = rt_kir_var_ref(a, p, p->item_var);
    rt_kir_expr *his[3] = {rt_kir_bin(a, RT_KIR_MUL, item, rt_kir_int(a, 3)), rt_kir_int(a, 8),
                           rt_kir_int(a, 0)};
    for (int32_t c = 0; c < 3; c++) {
        int32_t i = rt_kir_add_var(a, p, "i", RT_KIR_I64);
        rt_kir_node *loop =
            rt_kir_loop(a, &p->body, i, rt_kir_int(a, 0), his[c], RT_KIR_LOOP_VECTOR);
        rt_kir_expr *vi = rt_kir_var_ref(a, p, i), *x = rt_kir_load(a, k, ba, vi);
        rt_kir_expr *v = rt_kir_bin(a, RT_KIR_DIV, x, rt_kir_load(a, k, bs, item));
        v = rt_kir_bin(a, RT_KIR_ADD, v, rt_kir_bin(a, RT_KIR_DIV, x, x));
        v = rt_kir_bin(a, RT_KIR_ADD, v, rt_kir_bin(a, RT_KIR_DIV, x, rt_kir_load(a, k, bo, item)));
        rt_kir_node *st = rt_kir_append(a, &loop->body, RT_KIR_N_STORE);
        st->buf = bo;
        st->index = vi;
        st->value = v;
    }
    RT_EXPECT(rt_kir_hoist_reciprocals(a, k));
    rt_err err = {0};
    RT_EXPECT_EQ(rt_kir_validate(k, &err), RT_OK);
    // IF, loop 0, FSET, loop 1, loop 2.
    RT_EXPECT_EQ(p->body.n, 5);
    if (p->body.n != 5)
        return;
    rt_kir_node *guard = p->body.nodes[0], *set = p->body.nodes[2];
    RT_EXPECT_EQ(guard->kind, RT_KIR_N_IF);
    RT_EXPECT_EQ(guard->body.n, 1);
    RT_EXPECT_EQ(set->kind, RT_KIR_N_FSET);
    RT_EXPECT_EQ(p->body.nodes[4]->kind, RT_KIR_N_LOOP);
    for (int32_t c = 0; c < 3; c++) {
        rt_kir_node *loop = p->body.nodes[c == 0 ? 1 : c == 1 ? 3 : 4];
        const rt_kir_expr *v = loop->body.nodes[0]->value; // ((q0 + q1) + q2)
        const rt_kir_expr *q0 = v->args[0]->args[0], *q1 = v->args[0]->args[1], *q2 = v->args[1];
        RT_EXPECT_EQ(q0->bop, c < 2 ? RT_KIR_MUL : RT_KIR_DIV);
        if (c < 2) {
            rt_kir_node *fs = c == 0 ? guard->body.nodes[0] : set;
            RT_EXPECT_EQ(q0->args[1]->kind, RT_KIR_E_FVAR);
            RT_EXPECT_EQ(q0->args[1]->var, fs->var);
            RT_EXPECT_EQ(fs->value->bop, RT_KIR_DIV);
            RT_EXPECT_EQ(fs->value->args[1]->buf, bs);
        }
        RT_EXPECT_EQ(q1->bop, RT_KIR_DIV);
        RT_EXPECT_EQ(q2->bop, RT_KIR_DIV);
    }
}

// out[i] = a[i] * 2 + (float)floordiv(i - 5, 3) + max(a[i], 0), i in [0, n), 4 items.
static rt_kir_kernel *build_elementwise(rt_arena *a, int64_t n) {
    rt_kir_kernel *k = rt_kir_kernel_new(a, "t_elem");
    int32_t in = rt_kir_add_buf(a, k, "A", RT_KIR_BUF_DATA, RT_KIR_F32, 0, -1);
    int32_t out = rt_kir_add_buf(a, k, "O", RT_KIR_BUF_DATA, RT_KIR_F32, 1, -1);
    k->bufs[out].written = true;
    rt_kir_phase *p = rt_kir_add_phase(a, k, "elementwise", 4);
    int32_t i = rt_kir_add_var(a, p, "i", RT_KIR_I64);
    int64_t chunk = (n + 3) / 4;
    rt_kir_expr *item = rt_kir_var_ref(a, p, p->item_var);
    rt_kir_expr *lo = rt_kir_bin(a, RT_KIR_MUL, item, rt_kir_int(a, chunk));
    rt_kir_expr *hi = rt_kir_bin(a, RT_KIR_MIN, rt_kir_bin(a, RT_KIR_ADD, lo, rt_kir_int(a, chunk)),
                                 rt_kir_int(a, n));
    rt_kir_node *loop = rt_kir_loop(a, &p->body, i, lo, hi, RT_KIR_LOOP_VECTOR);
    rt_kir_expr *vi = rt_kir_var_ref(a, p, i);
    rt_kir_expr *x = rt_kir_load(a, k, in, vi);
    rt_kir_expr *fd =
        rt_kir_cast(a, RT_KIR_F32,
                    rt_kir_bin(a, RT_KIR_DIV, rt_kir_bin(a, RT_KIR_SUB, vi, rt_kir_int(a, 5)),
                               rt_kir_int(a, 3)));
    rt_kir_expr *v =
        rt_kir_bin(a, RT_KIR_ADD, rt_kir_bin(a, RT_KIR_MUL, x, rt_kir_flt(a, RT_KIR_F32, 2.0)), fd);
    v = rt_kir_bin(a, RT_KIR_ADD, v, rt_kir_call(a, RT_FN_MAX, x, rt_kir_flt(a, RT_KIR_F32, 0.0)));
    // A hint 256 elements ahead: past the end of A for the last ones, which must not fault.
    rt_kir_node *pf = rt_kir_append(a, &loop->body, RT_KIR_N_PREFETCH);
    pf->buf = in;
    pf->index = rt_kir_bin(a, RT_KIR_ADD, vi, rt_kir_int(a, 256));
    rt_kir_node *st = rt_kir_append(a, &loop->body, RT_KIR_N_STORE);
    st->buf = out;
    st->index = vi;
    st->value = v;
    return k;
}

// C(MxN) = A(MxK) * B(KxN) with A, B packed by copy loops into scratch and one micro-kernel
// per mr x nr tile (edge tiles included); then the same product is accumulated on top. With
// a_in_place, the micro-kernels read A's rows where they are (kir.h a_ld) and prefetch the next
// row panel's where a whole one follows (a_pf_next).
static rt_kir_kernel *build_gemm(rt_arena *a, int64_t m, int64_t n, int64_t kk, int32_t mr,
                                 int32_t nr, int32_t vl, bool a_in_place) {
    rt_kir_kernel *k = rt_kir_kernel_new(
        a, rt_arena_printf(a, "t_gemm_%lldx%lldx%lld_%dx%dv%d%s", (long long)m, (long long)n,
                           (long long)kk, (int)mr, (int)nr, (int)vl, a_in_place ? "_a" : ""));
    int32_t ba = rt_kir_add_buf(a, k, "A", RT_KIR_BUF_DATA, RT_KIR_F32, 0, -1);
    int32_t bb = rt_kir_add_buf(a, k, "B", RT_KIR_BUF_DATA, RT_KIR_F32, 1, -1);
    int32_t bc = rt_kir_add_buf(a, k, "C", RT_KIR_BUF_DATA, RT_KIR_F32, 2, -1);
    k->bufs[bc].written = true;
    int64_t mt = (m + mr - 1) / mr, nt = (n + nr - 1) / nr;
    rt_kir_phase *p = rt_kir_add_phase(a, k, "gemm", mt * nt);
    k->scratch_bytes = p->scratch_bytes = (int64_t)(mr + nr) * kk * 4;
    int32_t vk = rt_kir_add_var(a, p, "k", RT_KIR_I64), vr = rt_kir_add_var(a, p, "r", RT_KIR_I64);
    int32_t vi0 = rt_kir_add_var(a, p, "i0", RT_KIR_I64);
    int32_t vj0 = rt_kir_add_var(a, p, "j0", RT_KIR_I64);
    rt_kir_expr *item = rt_kir_var_ref(a, p, p->item_var);
    rt_kir_node *n1 = rt_kir_append(a, &p->body, RT_KIR_N_LET);
    n1->var = vi0;
    n1->value = rt_kir_bin(a, RT_KIR_MUL, rt_kir_bin(a, RT_KIR_DIV, item, rt_kir_int(a, nt)),
                           rt_kir_int(a, mr));
    rt_kir_node *n2 = rt_kir_append(a, &p->body, RT_KIR_N_LET);
    n2->var = vj0;
    n2->value = rt_kir_bin(a, RT_KIR_MUL, rt_kir_bin(a, RT_KIR_MOD, item, rt_kir_int(a, nt)),
                           rt_kir_int(a, nr));
    rt_kir_expr *i0 = rt_kir_var_ref(a, p, vi0), *j0 = rt_kir_var_ref(a, p, vj0);
    rt_kir_expr *mv = rt_kir_bin(a, RT_KIR_MIN, rt_kir_int(a, mr),
                                 rt_kir_bin(a, RT_KIR_SUB, rt_kir_int(a, m), i0));
    rt_kir_expr *nv = rt_kir_bin(a, RT_KIR_MIN, rt_kir_int(a, nr),
                                 rt_kir_bin(a, RT_KIR_SUB, rt_kir_int(a, n), j0));
    for (int which = a_in_place ? 1 : 0; which < 2; which++) {
        int32_t w = which ? nr : mr;
        rt_kir_node *copy = rt_kir_append(a, &p->body, RT_KIR_N_COPY);
        copy->text = which ? "B panel" : "A panel";
        rt_kir_node *lk = rt_kir_loop(a, &copy->body, vk, rt_kir_int(a, 0), rt_kir_int(a, kk),
                                      RT_KIR_LOOP_SERIAL);
        rt_kir_node *lr =
            rt_kir_loop(a, &lk->body, vr, rt_kir_int(a, 0), rt_kir_int(a, w), RT_KIR_LOOP_VECTOR);
        rt_kir_expr *r = rt_kir_var_ref(a, p, vr), *kv = rt_kir_var_ref(a, p, vk);
        rt_kir_node *iff = rt_kir_append(a, &lr->body, RT_KIR_N_IF);
        iff->cond = rt_kir_bin(a, RT_KIR_LT, r, which ? nv : mv);
        rt_kir_expr *dst =
            rt_kir_bin(a, RT_KIR_ADD, rt_kir_bin(a, RT_KIR_MUL, kv, rt_kir_int(a, w)), r);
        if (which)
            dst = rt_kir_bin(a, RT_KIR_ADD, dst, rt_kir_int(a, (int64_t)mr * kk));
        rt_kir_expr *src =
            which ? rt_kir_bin(a, RT_KIR_ADD, rt_kir_bin(a, RT_KIR_MUL, kv, rt_kir_int(a, n)),
                               rt_kir_bin(a, RT_KIR_ADD, j0, r))
                  : rt_kir_bin(a, RT_KIR_ADD,
                               rt_kir_bin(a, RT_KIR_MUL, rt_kir_bin(a, RT_KIR_ADD, i0, r),
                                          rt_kir_int(a, kk)),
                               kv);
        rt_kir_node *s1 = rt_kir_append(a, &iff->body, RT_KIR_N_STORE);
        s1->buf = 0;
        s1->index = dst;
        s1->value = rt_kir_load(a, k, which ? bb : ba, src);
        rt_kir_node *s0 = rt_kir_append(a, &iff->else_body, RT_KIR_N_STORE);
        s0->buf = 0;
        s0->index = dst;
        s0->value = rt_kir_flt(a, RT_KIR_F32, 0.0);
    }
    for (int acc = 0; acc < 2; acc++) {
        rt_kir_node *u = rt_kir_append(a, &p->body, RT_KIR_N_UKERNEL);
        u->uk = (rt_kir_ukernel){
            .vl = vl,
            .mr = mr,
            .nr = nr,
            .kc = rt_kir_int(a, kk),
            .a_off = rt_kir_int(a, 0),
            .b_off = rt_kir_int(a, (int64_t)mr * kk),
            .c_buf = bc,
            .c_off = rt_kir_bin(a, RT_KIR_ADD, rt_kir_bin(a, RT_KIR_MUL, i0, rt_kir_int(a, n)), j0),
            .ldc = n,
            .m_valid = mv,
            .n_valid = nv,
            .accumulate = rt_kir_int(a, acc),
            .stream = acc == 0};
        if (a_in_place) {
            u->uk.a_ld = kk;
            u->uk.a_buf = ba;
            u->uk.a_off = rt_kir_bin(a, RT_KIR_MUL, i0, rt_kir_int(a, kk));
            rt_kir_expr *whole =
                rt_kir_bin(a, RT_KIR_LE, rt_kir_bin(a, RT_KIR_ADD, i0, rt_kir_int(a, 2 * mr)),
                           rt_kir_int(a, m));
            u->uk.a_pf_next =
                rt_kir_select(a, whole, rt_kir_int(a, (int64_t)mr * kk), rt_kir_int(a, 0));
        }
    }
    return k;
}

typedef struct runner {
    rt_cpu_phase_fn fns[4];
    int64_t items[4];
    int32_t n;
} runner;

static void run_kernel(const rt_kir_kernel *k, const runner *r, void **args, int32_t threads) {
    rt_cpu_pool *pool = rt_cpu_pool_new(threads);
    RT_EXPECT(pool != NULL);
    if (!pool)
        return;
    rt_cpu_launch l = {r->n, r->fns, r->items, args, k->scratch_bytes, NULL};
    RT_EXPECT(rt_cpu_pool_run(pool, &l));
    rt_cpu_pool_free(pool);
}

static const char *last_ll; // build_both: the LLVM module's text before optimization

// Validates k and builds both targets of it; fns_llvm/fns_c receive the phase functions.
static bool build_both(rt_arena *a, rt_cpu_jit *jit, const rt_kir_kernel *k, runner *rl, runner *rc,
                       const char **out_c) {
    rt_err err = {0};
    RT_EXPECT_EQ(rt_kir_validate(k, &err), RT_OK);
    rt_llvm_target t = {rt_cpu_jit_context(jit), rt_cpu_jit_target_machine(jit),
                        rt_cpu_jit_avx512(jit)};
    void *mod = NULL;
    const char *ll = NULL;
    if (rt_emit_llvm(a, k, &t, true, &mod, &ll, &err) != RT_OK) {
        fprintf(stderr, "emit_llvm: %s\n%s\n", err.msg, err.log ? err.log : "");
        return false;
    }
    RT_EXPECT(strstr(ll, "define void @") != NULL);
    last_ll = ll;
    if (rt_cpu_jit_add_module(jit, mod, &err) != RT_OK)
        return false;
    const char *c = NULL;
    if (rt_emit_c(a, k, &c, &err) != RT_OK)
        return false;
    *out_c = c;
    const char *names[4];
    rl->n = rc->n = k->n_phases;
    for (int32_t i = 0; i < k->n_phases; i++) {
        names[i] = rt_arena_printf(a, "%s_%s", k->name, k->phases[i].name);
        rl->items[i] = rc->items[i] = k->phases[i].n_items;
        void *f = NULL;
        if (rt_cpu_jit_lookup(jit, names[i], &f, &err) != RT_OK)
            return false;
        rl->fns[i] = (rt_cpu_phase_fn)f;
    }
    void *cf[4];
    if (rt_cpu_cc_load(a, c, names, k->n_phases, cf, &err) != RT_OK) {
        fprintf(stderr, "cc: %s\n%s\n", err.msg, err.log ? err.log : "");
        return false;
    }
    for (int32_t i = 0; i < k->n_phases; i++)
        rc->fns[i] = (rt_cpu_phase_fn)cf[i];
    return true;
}

static void test_elementwise(rt_arena *a, rt_cpu_jit *jit) {
    enum { N = 1003 };
    rt_kir_kernel *k = build_elementwise(a, N);
    runner rl, rc;
    const char *c;
    RT_EXPECT(build_both(a, jit, k, &rl, &rc, &c));
    RT_EXPECT(last_ll && strstr(last_ll, "llvm.loop.interleave.count") == NULL); // no reduction
    RT_EXPECT(strstr(c, "rt_floordiv(") != NULL);
    RT_EXPECT(strstr(c, "__builtin_prefetch(&A[(i + 256)], 0, 2);") != NULL);
    static float in[N], o1[N], o2[N], want[N];
    for (int i = 0; i < N; i++) {
        in[i] = (float)((i * 37) % 101 - 50) / 8.0f;
        int64_t q = rt_floor_div(i - 5, 3);
        want[i] = in[i] * 2.0f + (float)q + (in[i] > 0 ? in[i] : 0.0f);
    }
    void *args1[3] = {NULL, in, o1}, *args2[3] = {NULL, in, o2};
    run_kernel(k, &rl, args1, 2);
    run_kernel(k, &rc, args2, 1);
    int bad = 0;
    for (int i = 0; i < N; i++)
        bad += o1[i] != want[i] || o2[i] != want[i];
    RT_EXPECT_EQ(bad, 0);
}

// Streaming stores (emit-llvm.c's explicit 16-lane loop of non-temporal stores): rows of len
// elements, O[r*len + i] = -(A[r*len + i] * S[r]) + max(A[r*len + i], 0.5) / 4, one row per
// item. With len = 37 no row is whole cache lines (the plain loop runs them); with len = 48
// every row is, aligned, and runs as non-temporal chunks. Both emitters must give the plain C
// loop's values.
static void test_stream(rt_arena *a, rt_cpu_jit *jit, int64_t len) {
    enum { ROWS = 19 };
    rt_kir_kernel *k = rt_kir_kernel_new(a, rt_arena_printf(a, "t_stream%lld", (long long)len));
    int32_t ba = rt_kir_add_buf(a, k, "A", RT_KIR_BUF_DATA, RT_KIR_F32, 0, -1);
    int32_t bs = rt_kir_add_buf(a, k, "S", RT_KIR_BUF_DATA, RT_KIR_F32, 1, -1);
    int32_t bo = rt_kir_add_buf(a, k, "O", RT_KIR_BUF_DATA, RT_KIR_F32, 2, -1);
    k->bufs[bo].written = true;
    rt_kir_phase *p = rt_kir_add_phase(a, k, "rows", ROWS);
    int32_t i = rt_kir_add_var(a, p, "i", RT_KIR_I64);
    rt_kir_expr *row = rt_kir_var_ref(a, p, p->item_var);
    rt_kir_node *loop =
        rt_kir_loop(a, &p->body, i, rt_kir_int(a, 0), rt_kir_int(a, len), RT_KIR_LOOP_VECTOR);
    rt_kir_expr *idx = rt_kir_bin(a, RT_KIR_ADD, rt_kir_bin(a, RT_KIR_MUL, row, rt_kir_int(a, len)),
                                  rt_kir_var_ref(a, p, i));
    rt_kir_expr *x = rt_kir_load(a, k, ba, idx);
    rt_kir_expr *v = rt_kir_neg(a, rt_kir_bin(a, RT_KIR_MUL, x, rt_kir_load(a, k, bs, row)));
    rt_kir_expr *m = rt_kir_bin(a, RT_KIR_MAX, x, rt_kir_flt(a, RT_KIR_F32, 0.5));
    v = rt_kir_bin(a, RT_KIR_ADD, v, rt_kir_bin(a, RT_KIR_DIV, m, rt_kir_flt(a, RT_KIR_F32, 4.0)));
    rt_kir_node *st = rt_kir_append(a, &loop->body, RT_KIR_N_STORE);
    st->buf = bo;
    st->index = idx;
    st->value = v;
    st->stream = true;
    runner rl, rc;
    const char *c;
    RT_EXPECT(build_both(a, jit, k, &rl, &rc, &c));
    RT_EXPECT(last_ll && strstr(last_ll, "!nontemporal") != NULL);
    int64_t n = ROWS * len;
    float *A = rt_arena_calloc(a, (size_t)n + 16, 4), *S = rt_arena_calloc(a, ROWS, 4);
    // The JIT's output 64-byte aligned, so that row r starts at 4 r len mod 64 bytes.
    size_t o1_bytes = ((size_t)n * 4 + 63) / 64 * 64;
    float *o1 = aligned_alloc(64, o1_bytes), *o2 = rt_arena_calloc(a, (size_t)n, 4);
    if (!o1)
        return;
    memset(o1, 0, o1_bytes);
    for (int64_t j = 0; j < n; j++)
        A[j] = (float)((j * 37) % 101 - 50) / 8.0f;
    for (int32_t r = 0; r < ROWS; r++)
        S[r] = 0.25f * (float)(r + 1);
    void *args1[4] = {NULL, A, S, o1}, *args2[4] = {NULL, A, S, o2};
    run_kernel(k, &rl, args1, 2);
    run_kernel(k, &rc, args2, 1);
    int bad = 0;
    for (int64_t j = 0; j < n; j++) {
        float x0 = A[j], want = -(x0 * S[j / len]) + (x0 > 0.5f ? x0 : 0.5f) / 4.0f;
        bad += fabsf(o1[j] - want) > 1e-6f * (1.0f + fabsf(want)) || o2[j] != o2[j] ||
               fabsf(o2[j] - want) > 1e-6f * (1.0f + fabsf(want));
    }
    RT_EXPECT_EQ(bad, 0);
    free(o1);
}

// Row reductions in vector loops: O[2 r] = max over the row of A, O[2 r + 1] = its sum, rows of
// len elements, one per item. The LLVM emitter asks for RT_L_REDUCE_INTERLEAVE accumulators on
// each reduction loop (emit-llvm.c): both emitters must give the reference within the
// reassociated sum's rounding, at row lengths that leave every remainder of the 4 x 16 lanes.
static void test_reduce(rt_arena *a, rt_cpu_jit *jit, int64_t len) {
    enum { ROWS = 7 };
    rt_kir_kernel *k = rt_kir_kernel_new(a, rt_arena_printf(a, "t_reduce%lld", (long long)len));
    int32_t ba = rt_kir_add_buf(a, k, "A", RT_KIR_BUF_DATA, RT_KIR_F32, 0, -1);
    int32_t bo = rt_kir_add_buf(a, k, "O", RT_KIR_BUF_DATA, RT_KIR_F32, 1, -1);
    k->bufs[bo].written = true;
    rt_kir_phase *p = rt_kir_add_phase(a, k, "rows", ROWS);
    rt_kir_expr *row = rt_kir_var_ref(a, p, p->item_var);
    for (int32_t which = 0; which < 2; which++) {
        int32_t acc = rt_kir_add_var(a, p, "acc", RT_KIR_F32);
        int32_t i = rt_kir_add_var(a, p, "i", RT_KIR_I64);
        rt_kir_node *init = rt_kir_append(a, &p->body, RT_KIR_N_FSET);
        init->var = acc;
        init->value = rt_kir_flt(a, RT_KIR_F32, which ? 0.0 : -1e30);
        rt_kir_node *loop =
            rt_kir_loop(a, &p->body, i, rt_kir_int(a, 0), rt_kir_int(a, len), RT_KIR_LOOP_VECTOR);
        rt_kir_expr *x = rt_kir_load(a, k, ba,
                                     rt_kir_bin(a, RT_KIR_ADD,
                                                rt_kir_bin(a, RT_KIR_MUL, row, rt_kir_int(a, len)),
                                                rt_kir_var_ref(a, p, i)));
        rt_kir_node *up = rt_kir_append(a, &loop->body, RT_KIR_N_FSET);
        up->var = acc;
        up->value = rt_kir_bin(a, which ? RT_KIR_ADD : RT_KIR_MAX, rt_kir_var_ref(a, p, acc), x);
        rt_kir_node *st = rt_kir_append(a, &p->body, RT_KIR_N_STORE);
        st->buf = bo;
        st->index = rt_kir_bin(a, RT_KIR_ADD, rt_kir_bin(a, RT_KIR_MUL, row, rt_kir_int(a, 2)),
                               rt_kir_int(a, which));
        st->value = rt_kir_var_ref(a, p, acc);
    }
    runner rl, rc;
    const char *c;
    RT_EXPECT(build_both(a, jit, k, &rl, &rc, &c));
    RT_EXPECT(last_ll && strstr(last_ll, "!\"llvm.loop.interleave.count\", i32 4}") != NULL);
    int64_t n = ROWS * len;
    float *A = rt_arena_calloc(a, (size_t)n + 1, 4);
    float o1[2 * ROWS], o2[2 * ROWS];
    for (int64_t j = 0; j < n; j++)
        A[j] = (float)((j * 37) % 101 - 50) / 8.0f;
    void *args1[3] = {NULL, A, o1}, *args2[3] = {NULL, A, o2};
    run_kernel(k, &rl, args1, 2);
    run_kernel(k, &rc, args2, 1);
    int bad = 0;
    for (int32_t r = 0; r < ROWS; r++) {
        double mx = -1e30, sum = 0, mag = 0;
        for (int64_t j = r * len; j < (r + 1) * len; j++) {
            mx = fmax(mx, (double)A[j]);
            sum += (double)A[j];
            mag += fabs((double)A[j]);
        }
        double tol = 1e-6 * (1.0 + mag);
        bad += o1[2 * r] != (float)mx || o2[2 * r] != (float)mx;
        bad += fabs((double)o1[2 * r + 1] - sum) > tol || fabs((double)o2[2 * r + 1] - sum) > tol;
    }
    RT_EXPECT_EQ(bad, 0);
}

// A vector loop whose float var starts afresh in every iteration (a window's accumulator:
// acc = 0; acc = acc + 2 A[i]; acc = acc + A[i]; O[i] = acc) carries nothing across iterations:
// it gets no interleave (forced on such a loop, LLVM 16 ran a 5x5 window at 8 lanes, 25% slower).
static void test_window_acc(rt_arena *a, rt_cpu_jit *jit) {
    enum { N = 45 };
    rt_kir_kernel *k = rt_kir_kernel_new(a, "t_window_acc");
    int32_t ba = rt_kir_add_buf(a, k, "A", RT_KIR_BUF_DATA, RT_KIR_F32, 0, -1);
    int32_t bo = rt_kir_add_buf(a, k, "O", RT_KIR_BUF_DATA, RT_KIR_F32, 1, -1);
    k->bufs[bo].written = true;
    rt_kir_phase *p = rt_kir_add_phase(a, k, "points", 1);
    int32_t acc = rt_kir_add_var(a, p, "acc", RT_KIR_F32),
            i = rt_kir_add_var(a, p, "i", RT_KIR_I64);
    rt_kir_node *loop =
        rt_kir_loop(a, &p->body, i, rt_kir_int(a, 0), rt_kir_int(a, N), RT_KIR_LOOP_VECTOR);
    rt_kir_expr *x = rt_kir_load(a, k, ba, rt_kir_var_ref(a, p, i));
    rt_kir_expr *terms[3] = {NULL, rt_kir_bin(a, RT_KIR_MUL, x, rt_kir_flt(a, RT_KIR_F32, 2.0)), x};
    for (int32_t t = 0; t < 3; t++) {
        rt_kir_node *n = rt_kir_append(a, &loop->body, RT_KIR_N_FSET);
        n->var = acc;
        n->value = t == 0 ? rt_kir_flt(a, RT_KIR_F32, 0.0)
                          : rt_kir_bin(a, RT_KIR_ADD, rt_kir_var_ref(a, p, acc), terms[t]);
    }
    rt_kir_node *st = rt_kir_append(a, &loop->body, RT_KIR_N_STORE);
    st->buf = bo;
    st->index = rt_kir_var_ref(a, p, i);
    st->value = rt_kir_var_ref(a, p, acc);
    runner rl, rc;
    const char *c;
    RT_EXPECT(build_both(a, jit, k, &rl, &rc, &c));
    RT_EXPECT(last_ll && strstr(last_ll, "llvm.loop.interleave.count") == NULL);
    float in[N], o1[N], o2[N];
    for (int j = 0; j < N; j++)
        in[j] = (float)(j % 7) - 3.0f;
    void *args1[3] = {NULL, in, o1}, *args2[3] = {NULL, in, o2};
    run_kernel(k, &rl, args1, 1);
    run_kernel(k, &rc, args2, 1);
    int bad = 0;
    for (int j = 0; j < N; j++)
        bad += o1[j] != 3.0f * in[j] || o2[j] != 3.0f * in[j];
    RT_EXPECT_EQ(bad, 0);
}

// Loop fusion (rt_kir_fuse_loops) on one row per item: loop 1 stores T[i] = 2 A[i] and takes the
// row's max m; between the loops acc = 0; loop 2 reads T at `shift` from its own element and
// sums into acc, then O[row] = acc. At shift 0 the loops fuse (the init moves before them) and
// both emitters give the sum; at shift 1 loop 2 would read an element loop 1 has not stored yet
// in the fused order, so they stay apart. Neither fuses a loop 2 with other bounds, one that
// reads loop 1's m, nor (early: acc = 0 comes before loop 1, which adds acc to every T) a loop 1
// reading the acc that loop 2 updates.
static void fset(rt_arena *a, rt_kir_block *b, int32_t var, rt_kir_expr *v) {
    rt_kir_node *n = rt_kir_append(a, b, RT_KIR_N_FSET);
    n->var = var;
    n->value = v;
}

static rt_kir_kernel *build_fuse(rt_arena *a, int64_t len, int64_t shift, int64_t hi2, bool read_m,
                                 bool early) {
    rt_kir_kernel *k = rt_kir_kernel_new(a, "t_fuse");
    int32_t ba = rt_kir_add_buf(a, k, "A", RT_KIR_BUF_DATA, RT_KIR_F32, 0, -1);
    int32_t bt = rt_kir_add_buf(a, k, "T", RT_KIR_BUF_DATA, RT_KIR_F32, 1, -1);
    int32_t bo = rt_kir_add_buf(a, k, "O", RT_KIR_BUF_DATA, RT_KIR_F32, 2, -1);
    k->bufs[bt].written = k->bufs[bo].written = true;
    rt_kir_phase *p = rt_kir_add_phase(a, k, "rows", 3);
    rt_kir_expr *base =
        rt_kir_bin(a, RT_KIR_MUL, rt_kir_var_ref(a, p, p->item_var), rt_kir_int(a, len + 1));
    int32_t i = rt_kir_add_var(a, p, "i", RT_KIR_I64), j = rt_kir_add_var(a, p, "j", RT_KIR_I64);
    int32_t m = rt_kir_add_var(a, p, "m", RT_KIR_F32),
            acc = rt_kir_add_var(a, p, "acc", RT_KIR_F32);
    rt_kir_expr *zero = rt_kir_flt(a, RT_KIR_F32, 0.0);
    fset(a, &p->body, m, zero);
    if (early)
        fset(a, &p->body, acc, zero);
    rt_kir_node *l1 =
        rt_kir_loop(a, &p->body, i, rt_kir_int(a, 0), rt_kir_int(a, len), RT_KIR_LOOP_VECTOR);
    rt_kir_expr *ti = rt_kir_bin(a, RT_KIR_ADD, base, rt_kir_var_ref(a, p, i));
    rt_kir_node *st = rt_kir_append(a, &l1->body, RT_KIR_N_STORE);
    st->buf = bt;
    st->index = ti;
    st->value = rt_kir_bin(a, RT_KIR_MUL, rt_kir_load(a, k, ba, ti), rt_kir_flt(a, RT_KIR_F32, 2));
    if (early)
        st->value = rt_kir_bin(a, RT_KIR_ADD, st->value, rt_kir_var_ref(a, p, acc));
    fset(a, &l1->body, m,
         rt_kir_bin(a, RT_KIR_MAX, rt_kir_var_ref(a, p, m), rt_kir_load(a, k, ba, ti)));
    if (!early)
        fset(a, &p->body, acc, zero);
    rt_kir_node *l2 =
        rt_kir_loop(a, &p->body, j, rt_kir_int(a, 0), rt_kir_int(a, hi2), RT_KIR_LOOP_VECTOR);
    rt_kir_expr *tj =
        rt_kir_bin(a, RT_KIR_ADD, base,
                   rt_kir_bin(a, RT_KIR_ADD, rt_kir_var_ref(a, p, j), rt_kir_int(a, shift)));
    rt_kir_expr *x = rt_kir_load(a, k, bt, tj);
    if (read_m)
        x = rt_kir_bin(a, RT_KIR_ADD, x, rt_kir_var_ref(a, p, m));
    fset(a, &l2->body, acc, rt_kir_bin(a, RT_KIR_ADD, rt_kir_var_ref(a, p, acc), x));
    rt_kir_node *out = rt_kir_append(a, &p->body, RT_KIR_N_STORE);
    out->buf = bo;
    out->index = rt_kir_var_ref(a, p, p->item_var);
    out->value = rt_kir_var_ref(a, p, acc);
    return k;
}

static int32_t count_loops(const rt_kir_block *b) {
    int32_t n = 0;
    for (int32_t i = 0; i < b->n; i++)
        n += b->nodes[i]->kind == RT_KIR_N_LOOP;
    return n;
}

// Loops over [0, h) counting into acc and acc2, with h = 5 set before the first and h = 7
// between them: the second's bounds read the new h, so the two must stay apart (fused, the
// second would run 5 times).
static void test_fuse_bounds(rt_arena *a) {
    rt_kir_kernel *k = rt_kir_kernel_new(a, "t_fuse_bounds");
    int32_t bo = rt_kir_add_buf(a, k, "O", RT_KIR_BUF_DATA, RT_KIR_F32, 0, -1);
    k->bufs[bo].written = true;
    rt_kir_phase *p = rt_kir_add_phase(a, k, "one", 1);
    int32_t h = rt_kir_add_var(a, p, "h", RT_KIR_I64);
    int32_t accs[2] = {rt_kir_add_var(a, p, "acc", RT_KIR_F32),
                       rt_kir_add_var(a, p, "acc2", RT_KIR_F32)};
    fset(a, &p->body, accs[0], rt_kir_flt(a, RT_KIR_F32, 0.0));
    fset(a, &p->body, accs[1], rt_kir_flt(a, RT_KIR_F32, 0.0));
    for (int32_t which = 0; which < 2; which++) {
        int32_t acc = accs[which];
        rt_kir_node *let = rt_kir_append(a, &p->body, RT_KIR_N_LET);
        let->var = h;
        let->value = rt_kir_int(a, which ? 7 : 5);
        int32_t i = rt_kir_add_var(a, p, "i", RT_KIR_I64);
        rt_kir_node *l = rt_kir_loop(a, &p->body, i, rt_kir_int(a, 0), rt_kir_var_ref(a, p, h),
                                     RT_KIR_LOOP_VECTOR);
        fset(a, &l->body, acc,
             rt_kir_bin(a, RT_KIR_ADD, rt_kir_var_ref(a, p, acc), rt_kir_flt(a, RT_KIR_F32, 1.0)));
    }
    RT_EXPECT(rt_kir_fuse_loops(a, k));
    RT_EXPECT_EQ(count_loops(&p->body), 2);
}

static void test_fuse(rt_arena *a, rt_cpu_jit *jit) {
    enum { LEN = 37, W = LEN + 1 };
    // (shift, bounds of loop 2, loop 2 reads m, loop 1 reads acc) -> loops left in the phase.
    const struct {
        int64_t shift, hi2;
        bool read_m, early;
        int32_t loops;
    } cases[] = {{0, LEN, false, false, 1},
                 {1, LEN, false, false, 2},
                 {0, LEN - 1, false, false, 2},
                 {0, LEN, true, false, 2},
                 {0, LEN, false, true, 2}};
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        rt_kir_kernel *k =
            build_fuse(a, LEN, cases[c].shift, cases[c].hi2, cases[c].read_m, cases[c].early);
        RT_EXPECT(rt_kir_fuse_loops(a, k));
        RT_EXPECT_EQ(count_loops(&k->phases[0].body), cases[c].loops);
        k->name = rt_arena_printf(a, "t_fuse%d", (int)c);
        runner rl, rc;
        const char *csrc;
        RT_EXPECT(build_both(a, jit, k, &rl, &rc, &csrc));
        float A[3 * W], T1[3 * W] = {0}, T2[3 * W] = {0}, o1[3], o2[3];
        for (int q = 0; q < 3 * W; q++)
            A[q] = (float)(q % 9) - 4.0f;
        void *args1[4] = {NULL, A, T1, o1}, *args2[4] = {NULL, A, T2, o2};
        run_kernel(k, &rl, args1, 2);
        run_kernel(k, &rc, args2, 1);
        int bad = 0;
        for (int r = 0; r < 3; r++) {
            double want = 0, mx = 0;
            for (int q = 0; q < LEN; q++)
                mx = fmax(mx, (double)A[r * W + q]);
            for (int64_t q = 0; q < cases[c].hi2; q++) {
                int64_t e = q + cases[c].shift; // T[LEN] of each row is never stored: 0
                want += e < LEN ? 2.0 * (double)A[r * W + e] : 0.0;
                want += cases[c].read_m ? mx : 0.0;
            }
            bad += fabs((double)o1[r] - want) > 1e-4 || fabs((double)o2[r] - want) > 1e-4;
        }
        RT_EXPECT_EQ(bad, 0);
    }
}

// A GEMM of micro-kernels mr x nr in vectors of vl floats (16: AVX-512, 8: AVX2, 4: NEON; any
// width runs on this host, LLVM splits or joins the vectors).
static void test_gemm(rt_arena *a, rt_cpu_jit *jit, int64_t m, int64_t n, int64_t kk, int32_t mr,
                      int32_t nr, int32_t vl, bool a_in_place) {
    rt_kir_kernel *k = build_gemm(a, m, n, kk, mr, nr, vl, a_in_place);
    runner rl, rc;
    const char *c;
    RT_EXPECT(build_both(a, jit, k, &rl, &rc, &c));
    // A in place: no A pack, and the hint of the next panel's rows in the k loop (both emitters;
    // to L2, locality 2, where the B stream's are 3).
    RT_EXPECT((strstr(c, "A panel") == NULL) == a_in_place);
    RT_EXPECT((strstr(c, "__builtin_prefetch(&ua[upf + (upf ? uk % ") != NULL) == a_in_place);
    RT_EXPECT((strstr(last_ll, ", i32 0, i32 2, i32 1)") != NULL) == a_in_place);
    // The B stream is prefetched (reads at locality 3, one per line of a k step) only by the
    // micro-kernel that starts from a zero C, not by the one that adds to C.
    int32_t b_prefetches = 0;
    for (const char *q = last_ll; (q = strstr(q, ", i32 0, i32 3, i32 1)")) != NULL; q++)
        b_prefetches++;
    RT_EXPECT_EQ(b_prefetches, (nr + 15) / 16);
    // The accumulators are vectors of vl floats.
    RT_EXPECT(strstr(last_ll, rt_arena_printf(a, "phi <%d x float>", (int)vl)) != NULL);
    float *A = rt_arena_calloc(a, (size_t)(m * kk), 4),
          *B = rt_arena_calloc(a, (size_t)(kk * n), 4);
    // The overwriting pass streams (non-temporal stores): C1 is 64-byte aligned (the streaming
    // path when ldc keeps rows aligned), C2 at offset 4 bytes from alignment (the fallback).
    float *C1 = rt_arena_calloc(a, (size_t)(m * n + 32), 4);
    float *C2 = rt_arena_calloc(a, (size_t)(m * n + 32), 4);
    C1 = (float *)(((uintptr_t)C1 + 63) & ~(uintptr_t)63);
    C2 = (float *)((((uintptr_t)C2 + 63) & ~(uintptr_t)63) + 4);
    for (int64_t i = 0; i < m * kk; i++)
        A[i] = (float)((i * 7) % 13 - 6) / 4.0f;
    for (int64_t i = 0; i < kk * n; i++)
        B[i] = (float)((i * 5) % 11 - 5) / 4.0f;
    for (int64_t i = 0; i < m * n; i++)
        C1[i] = C2[i] = 1e6f; // overwritten by the first micro-kernel pass
    void *args1[4] = {NULL, A, B, C1}, *args2[4] = {NULL, A, B, C2};
    run_kernel(k, &rl, args1, 2);
    run_kernel(k, &rc, args2, 2);
    double max_err = 0;
    for (int64_t i = 0; i < m; i++)
        for (int64_t j = 0; j < n; j++) {
            double s = 0;
            for (int64_t q = 0; q < kk; q++)
                s += (double)A[i * kk + q] * (double)B[q * n + j];
            s *= 2; // computed twice: overwrite, then accumulate
            max_err = fmax(max_err, fabs((double)C1[i * n + j] - s));
            max_err = fmax(max_err, fabs((double)C2[i * n + j] - s));
        }
    RT_EXPECT_NEAR(max_err, 0.0, 1e-3);
}

// The hint of the next rows belongs to an A read in place: on a packed A it is refused.
static void test_apf_invalid(rt_arena *a) {
    rt_kir_kernel *k = build_gemm(a, 12, 32, 8, 6, 32, 16, false);
    expect_validate(k, NULL);
    rt_kir_block *body = &k->phases[0].body;
    for (int32_t i = 0; i < body->n; i++)
        if (body->nodes[i]->kind == RT_KIR_N_UKERNEL)
            body->nodes[i]->uk.a_pf_next = rt_kir_int(a, 6 * 8);
    expect_validate(k, "micro-kernel prefetch of the next rows of an A not in place");
}

// A CPU device whose code does not run here: another isa (devices/arm-neoverse-n1.ini on an
// x86-64 host, x86-avx2.ini on an Arm one), or this isa with a feature no CPU has. The JIT is
// refused with an error (LLVM aborted the process when it got the foreign CPU name for the host
// triple), the emit-only target builds and compiles the kernel for the device's own triple.
static void test_foreign(rt_arena *a) {
    rt_device dev;
    rt_err err = {0};
    bool arm_host = rt_hal_host_isa() == RT_CPU_ISA_AARCH64;
    const char *path = arm_host ? RTGEN_SOURCE_DIR "/devices/x86-avx2.ini"
                                : RTGEN_SOURCE_DIR "/devices/arm-neoverse-n1.ini";
    rt_status st = rt_hal_load_device(path, &dev, &err);
    RT_EXPECT_EQ(st, RT_OK);
    if (st != RT_OK)
        return;
    const char *want_isa = arm_host ? "x86_64" : "aarch64";
    RT_EXPECT_STR(rt_cpu_isa_name(dev.isa), want_isa);
    const char *why = NULL;
    RT_EXPECT(!rt_cpu_runs_here(a, &dev, &why));
    RT_EXPECT(why && strncmp(why, "not this host (device isa ", 26) == 0);
    rt_cpu_jit *jit = NULL;
    RT_EXPECT_EQ(rt_cpu_jit_new(a, &dev, &jit, &err), RT_ERR_BACKEND);
    RT_EXPECT(strstr(err.msg, "not this host") != NULL);
    RT_EXPECT_EQ(rt_cpu_target_new(a, &dev, &jit, &err), RT_OK);
    RT_EXPECT(jit != NULL); // Debian's LLVM 16 builds both backends
    if (jit) {
        RT_EXPECT(strncmp(rt_cpu_jit_triple(jit), want_isa, strlen(want_isa)) == 0);
        rt_kir_kernel *k = build_elementwise(a, 1003);
        rt_llvm_target t = {rt_cpu_jit_context(jit), rt_cpu_jit_target_machine(jit),
                            rt_cpu_jit_avx512(jit)};
        void *mod = NULL;
        const char *ll = NULL;
        RT_EXPECT_EQ(rt_emit_llvm(a, k, &t, true, &mod, &ll, &err), RT_OK);
        RT_EXPECT(ll && strstr(ll, want_isa) != NULL); // target triple = "aarch64-..."
        size_t bytes = 0;
        RT_EXPECT_EQ(rt_cpu_jit_emit_object(jit, mod, &bytes, &err), RT_OK);
        RT_EXPECT(bytes > 0);
        RT_EXPECT_EQ(rt_cpu_jit_add_module(jit, NULL, &err), RT_ERR_BACKEND);
    }
    // This host's isa, a feature that no CPU has: emitted for, never run.
    RT_EXPECT_EQ(rt_hal_load_device(RTGEN_SOURCE_DIR "/devices/x86-avx2.ini", &dev, &err), RT_OK);
    dev.isa = rt_hal_host_isa();
    snprintf(dev.features, sizeof dev.features, "fma,rtgen_no_such_feature");
    RT_EXPECT(!rt_cpu_runs_here(a, &dev, &why));
    RT_EXPECT(why && strstr(why, "lacks rtgen-no-such-feature") != NULL);
}

int main(void) {
    rt_arena *a = rt_arena_new(1 << 20);
    test_foreign(a);
    test_fold(a);
    test_hoist(a);
    rt_cpu_jit *jit = NULL;
    rt_err err = {0};
    if (rt_cpu_jit_new(a, NULL, &jit, &err) != RT_OK) {
        fprintf(stderr, "jit: %s\n", err.msg);
        RT_EXPECT(0);
    } else {
        test_elementwise(a, jit);
        test_stream(a, jit, 37);
        test_stream(a, jit, 48);
        for (int64_t len = 1; len <= 131; len += len < 17 ? 16 : 19) // 1, 17, 36, 55 ... 131
            test_reduce(a, jit, len);
        test_window_acc(a, jit);
        test_fuse(a, jit);
        test_fuse_bounds(a);
        test_gemm(a, jit, 13, 37, 29, 6, 32, 16, false); // edge tiles in both m and n
        test_gemm(a, jit, 12, 32, 8, 6, 32, 16, false);  // full tiles only
        test_gemm(a, jit, 5, 16, 1, 4, 16, 16, false);   // k = 1
        test_gemm(a, jit, 13, 37, 29, 6, 16, 8, false);  // AVX2's 6x16 and 4x24, edges
        test_gemm(a, jit, 12, 48, 9, 4, 24, 8, false);
        test_gemm(a, jit, 7, 20, 5, 6, 16, 4, false); // NEON's widths
        // A in place with the next panel's hint: 31 rows of 6 (4 whole panels, one of 1 row),
        // 12 of 6 (the first panel's next is whole, the second's none), 5 of 6 (one cut panel).
        test_gemm(a, jit, 31, 37, 29, 6, 32, 16, true);
        test_gemm(a, jit, 12, 32, 17, 6, 32, 16, true);
        test_gemm(a, jit, 5, 16, 3, 6, 16, 8, true);
        test_apf_invalid(a);
    }
    rt_arena_free(a);
    return rt_test_finish("test-kir");
}
