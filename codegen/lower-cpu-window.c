// lower-cpu-window.c: the CPU lowering of the modeled statement as the plan's blocked loop nest
// (rt_perf_cpu_loops: scale-out tiles as work items, a tile loop per lower level, point loops
// innermost) and of window reductions (pooling, depthwise convolution) with their packed rows.
#include "lower-cpu-impl.h"

#include <math.h>
#include <string.h>

// ---------------------------------------------------------------------------------------------
// The general path with the rTiles: the modeled statement's loop nest blocked level by level
// ---------------------------------------------------------------------------------------------

// An integer let of a fresh phase var; constants are returned as they are.
static rt_kir_expr *rt_gen_let(rt_lower *l, rt_kir_block *blk, const char *name, rt_kir_expr *v) {
    int64_t c;
    if (v && rt_kir_is_int(v, &c))
        return v;
    int32_t var = rt_kir_add_var(l->a, l->p, name ? name : "t", RT_KIR_I64);
    rt_kir_node *n = var >= 0 ? rt_kir_append(l->a, blk, RT_KIR_N_LET) : NULL;
    RT_LOWER_CHECK(l, n && v);
    if (!n || !v)
        return rt_kir_int(l->a, 0);
    n->var = var;
    n->value = v;
    return rt_kir_var_ref(l->a, l->p, var);
}

static int64_t rt_ceil_div64(int64_t x, int64_t y) {
    return (x + y - 1) / y;
}

// The kept vars of s with their tiles as the plan's loop nest gives them (rt_perf_cpu_loops;
// nothing is derived here), and the reduction vars in loop order. A flat axis (m->flat) is one
// var: its last member's, over the whole axis; the other members are left out (rt_lower_tiled
// binds them to 0).
static void rt_tiled_vars(const rt_lower *l, const rt_stmt *s, const rt_perf_cpu_loops *lp,
                          rt_tvar *tv, int32_t *n_red, int32_t *red) {
    const rt_perf_flat *fl = &l->m->flat;
    int32_t nr = 0;
    for (int32_t i = 0; i < s->n_loops && nr < RT_MAX_DIMS * 2; i++)
        if (s->loops[i] >= 0 && s->loops[i] < s->n_vars && s->vars[s->loops[i]].is_reduce)
            red[nr++] = s->loops[i];
    *n_red = nr;
    for (int32_t i = 0; i < lp->n_vars; i++) {
        rt_tvar *t = &tv[i];
        memset(t, 0, sizeof *t);
        t->v = lp->var[i];
        t->name = s->vars[t->v].name;
        t->tiled = lp->tiled[i];
        t->lo = lp->lo[i];
        t->hi = lp->lo[i] + lp->extent[i];
        memcpy(t->t, lp->tile[i], sizeof t->t);
        if (fl->n > 0 && i == lp->n_vars - 1) {
            char *nm = rt_arena_strdup(l->a, s->axes[fl->axis].name);
            for (char *c = nm; c && *c; c++)
                *c = *c == '.' ? '_' : *c;
            t->name = nm ? nm : t->name;
        }
    }
}

// The plan the kernel executes, from what the lowering built (the header's "plan:" line).
static void rt_tiled_executed(rt_lower *l, const rt_tvar *tv, int32_t nk, bool window,
                              const rt_win_pack *pk, bool packed) {
    rt_perf_cpu_plan *pl = &l->done;
    const rt_perf_model *m = l->m;
    memset(pl, 0, sizeof *pl);
    pl->kind = RT_PERF_CPU_PLAN_LOOPS;
    pl->block_level = m->block_level;
    pl->top = m->top;
    rt_perf_cpu_loops *lp = &pl->loops;
    lp->n_vars = nk;
    lp->items = 1;
    for (int32_t i = 0; i < nk; i++) {
        lp->var[i] = tv[i].v;
        lp->tiled[i] = tv[i].tiled;
        lp->lo[i] = tv[i].tiled ? tv[i].lo : 0;
        lp->extent[i] = tv[i].tiled ? tv[i].hi - tv[i].lo : 0;
        memcpy(lp->tile[i], tv[i].t, sizeof tv[i].t);
        if (tv[i].tiled)
            lp->items *= rt_ceil_div64(tv[i].hi - tv[i].lo, tv[i].t[m->block_level]);
    }
    lp->window = window;
    lp->win_pack = !packed       ? RT_PERF_CPU_WIN_PACK_NONE
                   : pk->yv >= 0 ? RT_PERF_CPU_WIN_PACK_ROWS
                                 : RT_PERF_CPU_WIN_PACK_X;
    lp->win_yu = packed ? pk->yu : 1;
}

// Does e mention none of the statement's reduction vars (and hold no sum)?
static bool rt_win_invariant(const rt_stmt *s, const rt_expr *e) {
    if (!e)
        return true;
    if (e->kind == RT_EXPR_SUM)
        return false;
    if (e->kind == RT_EXPR_INDEX && e->var >= 0 && e->var < s->n_vars && s->vars[e->var].is_reduce)
        return false;
    for (int32_t i = 0; i < e->n_args; i++)
        if (!rt_win_invariant(s, e->args[i]))
            return false;
    return true;
}

// Over the padded reads below e (rt_win_dim_of): raises *xlo and lowers *xhi to the x interior
// of each dim along x, and ands into *rows the condition that each row dim stays within its
// extents at every window point. Called with x and the window vars bound.
static void rt_win_bounds(rt_lower *l, const rt_expr *e, rt_kir_expr **xlo, rt_kir_expr **xhi,
                          rt_kir_expr **rows) {
    rt_arena *a = l->a;
    for (int32_t i = 0; e && i < e->n_args; i++)
        rt_win_bounds(l, e->args[i], xlo, xhi, rows);
    if (!e || e->kind != RT_EXPR_READ || !rt_win_padded(l, e) ||
        (l->win_pack && e == l->win_pack->read))
        return;
    for (int32_t d = 0; d < e->n_args; d++) {
        rt_affine af;
        int64_t ext = l->extent[e->tensor][d];
        rt_win_dim c = rt_win_dim_of(l, e->args[d], ext, &af);
        if (c != RT_WIN_X && c != RT_WIN_ROW)
            continue;
        // index = ax * x + rest + w, w over [mn, mx] from the window vars (and c0).
        int64_t ax = 0, mn = af.c0, mx = af.c0, lo, hi;
        rt_kir_expr *rest = rt_kir_int(a, 0);
        for (int32_t t = 0; t < af.n_terms; t++) {
            int32_t v = af.var[t];
            int64_t k = af.coef[t];
            if (v == l->win_x) {
                ax = k;
            } else if (rt_win_index(l, v) >= 0 && rt_var_range(l, v, &lo, &hi)) {
                mn += k * (k > 0 ? lo : hi - 1);
                mx += k * (k > 0 ? hi - 1 : lo);
            } else {
                rest = rt_kir_bin(a, RT_KIR_ADD, rest,
                                  rt_kir_bin(a, RT_KIR_MUL, rt_kir_int(a, k),
                                             rt_kir_var_ref(a, l->p, l->var_of[v])));
            }
        }
        rt_kir_expr *low = rt_kir_bin(a, RT_KIR_ADD, rest, rt_kir_int(a, mn));
        rt_kir_expr *high = rt_kir_bin(a, RT_KIR_ADD, rest, rt_kir_int(a, mx));
        if (c == RT_WIN_ROW) {
            *rows = rt_kir_bin(a, RT_KIR_AND, *rows,
                               rt_kir_bin(a, RT_KIR_AND,
                                          rt_kir_bin(a, RT_KIR_GE, low, rt_kir_int(a, 0)),
                                          rt_kir_bin(a, RT_KIR_LT, high, rt_kir_int(a, ext))));
            continue;
        }
        // ax * x + low >= 0 and ax * x + high < ext (floor division).
        rt_kir_expr *first = rt_kir_neg(a, rt_kir_bin(a, RT_KIR_DIV, low, rt_kir_int(a, ax)));
        rt_kir_expr *end = rt_kir_bin(
            a, RT_KIR_ADD,
            rt_kir_bin(a, RT_KIR_DIV, rt_kir_bin(a, RT_KIR_SUB, rt_kir_int(a, ext - 1), high),
                       rt_kir_int(a, ax)),
            rt_kir_int(a, 1));
        *xlo = rt_kir_bin(a, RT_KIR_MAX, *xlo, first);
        *xhi = rt_kir_bin(a, RT_KIR_MIN, *xhi, end);
    }
}

// One output element of a window reduction at the current x, in blk (with a packed read of
// yu > 1 rows per y, one per output row y + dy): an accumulator starts from the reduction's
// identity (or the output for '+='), takes every window point in order (the window vars set to
// constants, so the body is straight-line code), and is stored. A sum of `f / k` or `f * k` with
// k free of the window accumulates f and divides (multiplies) once: one division per output
// instead of one per point.
static rt_status rt_win_body(rt_lower *l, rt_kir_block *blk) {
    rt_arena *a = l->a;
    const rt_stmt *s = l->s;
    const rt_win_pack *pk = l->win_pack && l->win_pack->rb ? l->win_pack : NULL;
    int32_t yu = pk ? (int32_t)pk->yu : 1, yv = pk ? pk->yv : -1;
    int32_t ob = l->data_buf[s->out], y0 = yv >= 0 ? l->var_of[yv] : -1;
    const rt_expr *point = s->rhs, *post = NULL;
    bool sum = s->op == RT_ASSIGN_ADD || s->op == RT_ASSIGN_ADD_INIT;
    const rt_expr *e = s->rhs;
    if (sum && !e->is_int && e->kind == RT_EXPR_BINARY && e->n_args == 2 &&
        (e->bop == RT_BOP_DIV || e->bop == RT_BOP_MUL)) {
        if (rt_win_invariant(s, e->args[1]))
            point = e->args[0], post = e->args[1];
        else if (e->bop == RT_BOP_MUL && rt_win_invariant(s, e->args[0]))
            point = e->args[1], post = e->args[0];
    }
    rt_kir_bop bop = rt_assign_bop(s->op);
    int64_t wlo[3], wext[3], n_points = 1;
    for (int32_t i = 0; i < l->win_nr; i++) {
        int64_t h;
        rt_var_range(l, l->win_red[i], &wlo[i], &h);
        wext[i] = h - wlo[i];
        n_points *= wext[i];
    }
    // Points go round-robin to up to four accumulators (two per output row of two), combined at
    // the end: a row has only a few vector iterations, too few to hide one chain of 25 dependent
    // adds (a 5x5 window); more would spill the window's weights held in registers. An empty
    // window (where r in 2:2) keeps one, which stores the identity.
    int32_t n_acc = n_points < 1        ? 1
                    : n_points < 4 / yu ? (int32_t)n_points
                                        : 4 / yu,
            acc[RT_WIN_Y_ROWS][4];
    rt_kir_expr *off[RT_WIN_Y_ROWS], *out_now[RT_WIN_Y_ROWS];
    for (int32_t dy = 0; dy < yu; dy++) {
        if (pk)
            l->var_of[yv] = pk->yvar[dy];
        RT_TRY(rt_lower_out_offset(l, &off[dy]));
        out_now[dy] = rt_kir_cast(a, l->ct, rt_kir_load(a, l->k, ob, off[dy]));
        for (int32_t i = 0; i < n_acc; i++) {
            acc[dy][i] = rt_kir_add_var(a, l->p, "acc", l->ct);
            rt_kir_node *init = acc[dy][i] >= 0 ? rt_kir_append(a, blk, RT_KIR_N_FSET) : NULL;
            RT_LOWER_CHECK(l, init);
            if (!init)
                return RT_OK;
            init->var = acc[dy][i];
            init->value = i == 0 && s->op == RT_ASSIGN_ADD && !post
                              ? out_now[dy]
                              : rt_kir_flt(a, l->ct, rt_assign_identity(s->op));
        }
    }
    // The (output row, point) pairs in order: by point, or with several rows by the packed row
    // and column they read (the rows' shared loads next to each other).
    int64_t order[RT_WIN_Y_ROWS * 49], key[RT_WIN_Y_ROWS * 49], n_items = n_points * yu;
    for (int64_t it = 0; it < n_items; it++) {
        int64_t pt = it / yu, dy = it % yu, h = dy * (pk ? pk->ay : 0), b = 0;
        for (int64_t i = l->win_nr - 1, rem = pt; yu > 1 && i >= 0; i--) {
            h += pk->br[i] * (wlo[i] + rem % wext[i]);
            b += pk->bx[i] * (wlo[i] + rem % wext[i]);
            rem /= wext[i];
        }
        key[it] = yu > 1 ? (h * 4096 + b) * 128 + it : it;
        int64_t j = it;
        for (; j > 0 && key[order[j - 1]] > key[it]; j--)
            order[j] = order[j - 1];
        order[j] = it;
    }
    l->pre = blk;
    int64_t set[3] = {0, 0, 0};
    for (int64_t k = 0; k < n_items; k++) {
        int64_t pt = order[k] / yu, dy = order[k] % yu;
        if (pk)
            l->var_of[yv] = pk->yvar[dy];
        l->win_dy = dy;
        // Window vars of point pt (the last one fastest), set where they change.
        for (int64_t i = l->win_nr - 1, rem = pt; i >= 0; i--) {
            l->win_pt[i] = wlo[i] + rem % wext[i];
            rem /= wext[i];
            if (k > 0 && set[i] == l->win_pt[i])
                continue;
            set[i] = l->win_pt[i];
            rt_kir_node *let = rt_kir_append(a, blk, RT_KIR_N_LET);
            RT_LOWER_CHECK(l, let);
            if (!let)
                return RT_OK;
            let->var = l->var_of[l->win_red[i]];
            let->value = rt_kir_int(a, l->win_pt[i]);
        }
        rt_kir_expr *x;
        RT_TRY(rt_tr_num(l, point, &x));
        rt_kir_node *upd = rt_kir_append(a, blk, RT_KIR_N_FSET);
        int32_t ai = acc[dy][pt % n_acc];
        rt_kir_expr *nv = rt_kir_bin(a, bop, rt_kir_var_ref(a, l->p, ai), x);
        RT_LOWER_CHECK(l, upd && nv);
        if (!upd)
            return RT_OK;
        upd->var = ai;
        upd->value = nv;
    }
    l->win_dy = 0;
    for (int32_t dy = 0; dy < yu; dy++) {
        if (pk)
            l->var_of[yv] = pk->yvar[dy];
        rt_kir_expr *part[4];
        for (int32_t i = 0; i < n_acc; i++)
            part[i] = rt_kir_var_ref(a, l->p, acc[dy][i]);
        for (int32_t w = 1; w < n_acc; w *= 2)
            for (int32_t i = 0; i + w < n_acc; i += 2 * w)
                part[i] = rt_kir_bin(a, bop, part[i], part[i + w]);
        rt_kir_expr *value = part[0];
        if (post) {
            rt_kir_expr *k;
            RT_TRY(rt_tr_num(l, post, &k));
            value = rt_kir_bin(a, e->bop == RT_BOP_DIV ? RT_KIR_DIV : RT_KIR_MUL, value, k);
            if (s->op == RT_ASSIGN_ADD)
                value = rt_kir_bin(a, RT_KIR_ADD, out_now[dy], value);
        }
        rt_lower_store_out(l, blk, off[dy], value);
    }
    if (pk)
        l->var_of[yv] = y0;
    return RT_OK;
}

// Loops var over [lo, hi) of kind `kind` and returns in body[0..*n) the blocks where the caller
// puts the iteration (two when the choice below is made at run time). A vector loop longer than
// `lanes` whose iterations may run twice (`redo`: they recompute and overwrite) runs as blocks of
// exactly `lanes`, the last one shifted back to end at hi: every block is one full vector with
// no scalar remainder, which for rows like 40 = 2 x 16 + 8 outputs of a 5x5 window would
// otherwise cost as much as the vector part (25 scalar multiply-adds per output).
static void rt_win_loops(rt_lower *l, rt_kir_block *blk, int32_t var, rt_kir_expr *lo,
                         rt_kir_expr *hi, rt_kir_loop_kind kind, bool redo, rt_kir_block **body,
                         int32_t *n) {
    rt_arena *a = l->a;
    int64_t clo, chi, lanes = l->dev && l->dev->lanes > 1 ? l->dev->lanes : 1;
    bool known = rt_kir_is_int(lo, &clo) && rt_kir_is_int(hi, &chi);
    *n = 0;
    if (known && chi <= clo)
        return;
    rt_kir_expr *len = rt_kir_bin(a, RT_KIR_SUB, hi, lo);
    bool block = kind == RT_KIR_LOOP_VECTOR && lanes > 1 && redo && (!known || chi - clo > lanes);
    rt_kir_block *plain = blk;
    if (block && !known) {
        rt_kir_node *br = rt_kir_append(a, blk, RT_KIR_N_IF);
        RT_LOWER_CHECK(l, br && len);
        if (!br)
            return;
        br->cond = rt_kir_bin(a, RT_KIR_GT, len, rt_kir_int(a, lanes));
        blk = &br->body;
        plain = &br->else_body;
    }
    if (block) {
        int32_t vb =
            rt_kir_add_var(a, l->p, rt_arena_printf(a, "%s_v", l->p->vars[var].name), RT_KIR_I64);
        rt_kir_expr *nb =
            rt_kir_bin(a, RT_KIR_DIV, rt_kir_bin(a, RT_KIR_ADD, len, rt_kir_int(a, lanes - 1)),
                       rt_kir_int(a, lanes));
        rt_kir_node *outer =
            vb >= 0 ? rt_kir_loop(a, blk, vb, rt_kir_int(a, 0), nb, RT_KIR_LOOP_SERIAL) : NULL;
        RT_LOWER_CHECK(l, outer);
        if (!outer)
            return;
        rt_kir_expr *v0 =
            rt_gen_let(l, &outer->body, rt_arena_printf(a, "%s_v0", l->p->vars[var].name),
                       rt_kir_bin(a, RT_KIR_MIN,
                                  rt_kir_bin(a, RT_KIR_ADD, lo,
                                             rt_kir_bin(a, RT_KIR_MUL, rt_kir_var_ref(a, l->p, vb),
                                                        rt_kir_int(a, lanes))),
                                  rt_kir_bin(a, RT_KIR_SUB, hi, rt_kir_int(a, lanes))));
        rt_kir_node *loop = rt_kir_loop(a, &outer->body, var, v0,
                                        rt_kir_bin(a, RT_KIR_ADD, v0, rt_kir_int(a, lanes)), kind);
        RT_LOWER_CHECK(l, loop);
        if (!loop)
            return;
        body[(*n)++] = &loop->body;
        if (known)
            return;
    }
    rt_kir_node *loop = rt_kir_loop(a, plain, var, lo, hi, kind);
    RT_LOWER_CHECK(l, loop);
    if (loop)
        body[(*n)++] = &loop->body;
}

// x over [lo, hi) of a window reduction, each iteration one whole output (rt_win_body); outputs
// are recomputed where blocks overlap unless the statement accumulates into them ('+=').
static rt_status rt_win_loop(rt_lower *l, rt_kir_block *blk, int32_t xv, rt_kir_expr *lo,
                             rt_kir_expr *hi, rt_kir_loop_kind kind) {
    rt_kir_block *body[2];
    int32_t n;
    rt_win_loops(l, blk, l->var_of[xv], lo, hi, kind, l->s->op != RT_ASSIGN_ADD, body, &n);
    for (int32_t i = 0; i < n; i++)
        RT_TRY(rt_win_body(l, body[i]));
    return RT_OK;
}

// Number of reads below e with an index mentioning var v; *found gets the last.
static int32_t rt_reads_with_var(const rt_expr *e, int32_t v, const rt_expr **found) {
    if (!e)
        return 0;
    int32_t n = 0;
    for (int32_t i = 0; i < e->n_args; i++)
        n += rt_reads_with_var(e->args[i], v, found);
    if (e->kind == RT_EXPR_READ && rt_expr_uses_var(e, v)) {
        *found = e;
        n++;
    }
    return n;
}

// Range [*mn, *mx] of sum coef[i] * w_i over the window vars.
static void rt_win_span(const rt_lower *l, const int64_t *coef, int64_t *mn, int64_t *mx) {
    *mn = *mx = 0;
    for (int32_t i = 0; i < l->win_nr; i++) {
        int64_t lo = 0, hi = 1;
        rt_var_range(l, l->win_red[i], &lo, &hi);
        *mn += coef[i] * (coef[i] > 0 ? lo : hi - 1);
        *mx += coef[i] * (coef[i] > 0 ? hi - 1 : lo);
    }
}

// Binds the packed-rows read the plan chose (rt_perf_cpu_loops.win_pack, perfmodel/cpu.c
// window_pack decides it; nothing is decided here) to the statement: the one read of an f32
// dense tensor that moves with x, in one affine dim (stride a) whose other vars are window vars
// or outer kept vars; at most one other dim (the row dim) holds window vars (or yv, y's loop
// handed over, yu output rows per y iteration), affine in them and outer kept vars. False when
// the statement has no such read (the plan and the statement disagree).
static bool rt_win_pack_bind(const rt_lower *l, int32_t xv, int32_t yv, int64_t x_max, int64_t yu,
                             rt_win_pack *pk) {
    const rt_stmt *s = l->s;
    const rt_expr *rd = NULL;
    memset(pk, 0, sizeof *pk);
    pk->dim = pk->rdim = -1;
    pk->yv = yv;
    if (l->ct != RT_KIR_F32 || rt_reads_with_var(s->rhs, xv, &rd) != 1)
        return false;
    const rt_tensor *tn = &l->op->tensors[rd->tensor];
    if (rd->n_args != tn->n_dims || l->k->bufs[l->data_buf[rd->tensor]].type != RT_KIR_F32)
        return false;
    pk->read = rd;
    for (int32_t d = 0; d < rd->n_args; d++) {
        rt_affine af;
        bool on_x = false, on_row = false;
        if (l->start_buf[rd->tensor][d] >= 0 || !rt_expr_affine(l->op, rd->args[d], &af))
            return false;
        for (int32_t i = 0; i < af.n_terms; i++) {
            int32_t v = af.var[i];
            if (v == xv)
                on_x = true;
            else if (v == yv || rt_win_index(l, v) >= 0)
                on_row = true;
            else if (v < 0 || v >= s->n_vars || s->vars[v].is_reduce)
                return false;
        }
        if (on_x && pk->dim < 0)
            pk->dim = d, pk->af = af;
        else if (!on_x && on_row && pk->rdim < 0)
            pk->rdim = d, pk->raf = af;
        else if (on_x || on_row)
            return false;
    }
    if (pk->dim < 0)
        return false;
    for (int32_t i = 0; i < pk->af.n_terms; i++) {
        int32_t v = pk->af.var[i], w = rt_win_index(l, v);
        if (v == yv)
            return false;
        if (v == xv)
            pk->a = pk->af.coef[i];
        else if (w >= 0)
            pk->bx[w] = pk->af.coef[i];
    }
    for (int32_t i = 0; pk->rdim >= 0 && i < pk->raf.n_terms; i++) {
        int32_t v = pk->raf.var[i], w = rt_win_index(l, v);
        if (v == yv)
            pk->ay = pk->raf.coef[i];
        else if (w >= 0 && pk->bx[w] != 0)
            return false;
        else if (w >= 0)
            pk->br[w] = pk->raf.coef[i];
    }
    if (pk->a < 1 || (yv >= 0 && pk->ay < 1))
        return false;
    rt_win_span(l, pk->bx, &pk->bmin, &pk->bmax);
    rt_win_span(l, pk->br, &pk->brmin, &pk->brmax);
    // Each phase of a row has room for the run and a shift of up to 15 (rt_win_pack_setup),
    // rounded to whole vectors.
    pk->q = rt_win_pack_row_elems(x_max, pk->a, pk->bmax - pk->bmin);
    int64_t span = pk->brmax - pk->brmin + 1;
    pk->yu = yv >= 0 ? yu : 1;
    pk->rows = yv >= 0 ? rt_win_pack_ring_rows(span, pk->ay, pk->yu) : span;
    return true;
}

// The part of affine index af from the outer kept vars (all but x, y and the window vars).
static rt_kir_expr *rt_win_outer(rt_lower *l, const rt_affine *af, const rt_win_pack *pk) {
    rt_kir_expr *k = rt_kir_int(l->a, af->c0);
    for (int32_t i = 0; i < af->n_terms; i++) {
        int32_t v = af->var[i];
        if (v != l->win_x && v != pk->yv && rt_win_index(l, v) < 0)
            k = rt_kir_bin(l->a, RT_KIR_ADD, k,
                           rt_kir_bin(l->a, RT_KIR_MUL, rt_kir_int(l->a, af->coef[i]),
                                      rt_kir_var_ref(l->a, l->p, l->var_of[v])));
    }
    return k;
}

// One packing store per phase ph: scratch[base + ph*q + qv] = the read at run element
// j = a*qv + ph (index u0 + j along the x dim, idx along the others), guarded (j < len and within
// the extents, else the pad value) or not.
static void rt_win_pack_copy(rt_lower *l, rt_kir_block *blk, const rt_win_pack *pk,
                             rt_kir_expr **idx, rt_kir_expr *u0, rt_kir_expr *len,
                             rt_kir_expr *base, int32_t qv, bool guard) {
    rt_arena *a = l->a;
    const rt_expr *rd = pk->read;
    const rt_tensor *tn = &l->op->tensors[rd->tensor];
    int64_t ext = l->extent[rd->tensor][pk->dim];
    for (int64_t ph = 0; ph < pk->a; ph++) {
        rt_kir_expr *q = rt_kir_var_ref(a, l->p, qv);
        rt_kir_expr *j = rt_kir_bin(
            a, RT_KIR_ADD, rt_kir_bin(a, RT_KIR_MUL, q, rt_kir_int(a, pk->a)), rt_kir_int(a, ph));
        rt_kir_expr *u = rt_kir_bin(a, RT_KIR_ADD, u0, j), *ok = rt_kir_int(a, 1);
        rt_kir_expr *sub[RT_MAX_DIMS];
        memcpy(sub, idx, sizeof sub);
        sub[pk->dim] = u;
        if (guard) {
            ok = rt_kir_bin(a, RT_KIR_AND, rt_kir_bin(a, RT_KIR_LT, j, len),
                            rt_kir_bin(a, RT_KIR_AND, rt_kir_bin(a, RT_KIR_GE, u, rt_kir_int(a, 0)),
                                       rt_kir_bin(a, RT_KIR_LT, u, rt_kir_int(a, ext))));
            sub[pk->dim] = rt_kir_bin(a, RT_KIR_MIN, rt_kir_bin(a, RT_KIR_MAX, u, rt_kir_int(a, 0)),
                                      rt_kir_int(a, ext - 1));
        }
        rt_kir_expr *v =
            rt_kir_load(a, l->k, l->data_buf[rd->tensor], rt_tr_offset(l, rd->tensor, sub, NULL));
        rt_kir_node *st = rt_kir_append(a, blk, RT_KIR_N_STORE);
        RT_LOWER_CHECK(l, st && v && ok);
        if (!st)
            return;
        st->buf = 0;
        st->index = rt_kir_bin(a, RT_KIR_ADD, rt_kir_bin(a, RT_KIR_ADD, base, q),
                               rt_kir_int(a, ph * pk->q + pk->shift));
        st->value = rt_kir_select(a, ok, v, rt_kir_flt(a, RT_KIR_F32, tn->pad_value));
    }
}

// What the packed rows of pk for x over [lo, hi) (y from ylo when handed over) share, as lets in
// blk before any row is packed (see the fields of rt_win_pack); reserves the scratch.
static rt_status rt_win_pack_setup(rt_lower *l, rt_kir_block *blk, rt_win_pack *pk, rt_kir_expr *lo,
                                   rt_kir_expr *hi, rt_kir_expr *ylo) {
    rt_arena *a = l->a;
    const rt_expr *rd = pk->read;
    const rt_tensor *tn = &l->op->tensors[rd->tensor];
    int64_t A = pk->a, ext = l->extent[rd->tensor][pk->dim];
    int64_t bytes = pk->rows * A * pk->q * 4;
    if (bytes > l->p->scratch_bytes)
        l->p->scratch_bytes = bytes;
    if (bytes > l->k->scratch_bytes)
        l->k->scratch_bytes = bytes;
    pk->lo = lo;
    pk->len = rt_gen_let(
        l, blk, "pk_len",
        rt_kir_bin(a, RT_KIR_ADD,
                   rt_kir_bin(a, RT_KIR_MUL, rt_kir_int(a, A),
                              rt_kir_bin(a, RT_KIR_SUB, rt_kir_bin(a, RT_KIR_SUB, hi, lo),
                                         rt_kir_int(a, 1))),
                   rt_kir_int(a, pk->bmax - pk->bmin + 1)));
    pk->nq = rt_gen_let(l, blk, "pk_nq",
                        rt_kir_bin(a, RT_KIR_DIV,
                                   rt_kir_bin(a, RT_KIR_ADD, pk->len, rt_kir_int(a, A - 1)),
                                   rt_kir_int(a, A)));
    // The run starts at u0 = a * lo + bmin + (the outer kept vars' part of the index).
    pk->u0 = rt_gen_let(l, blk, "pk_u0",
                        rt_kir_bin(a, RT_KIR_ADD, rt_kir_bin(a, RT_KIR_MUL, rt_kir_int(a, A), lo),
                                   rt_kir_bin(a, RT_KIR_ADD, rt_win_outer(l, &pk->af, pk),
                                              rt_kir_int(a, pk->bmin))));
    // q over [qa, qb): every phase within the run and (padded tensors) the extents.
    rt_kir_expr *qa = rt_kir_int(a, 0), *qb = rt_kir_bin(a, RT_KIR_DIV, pk->len, rt_kir_int(a, A));
    if (tn->has_pad) {
        qa = rt_kir_bin(a, RT_KIR_MAX, qa,
                        rt_kir_neg(a, rt_kir_bin(a, RT_KIR_DIV, pk->u0, rt_kir_int(a, A))));
        qb = rt_kir_bin(a, RT_KIR_MIN, qb,
                        rt_kir_bin(a, RT_KIR_DIV,
                                   rt_kir_bin(a, RT_KIR_SUB, rt_kir_int(a, ext), pk->u0),
                                   rt_kir_int(a, A)));
    }
    pk->qa = rt_gen_let(l, blk, "pk_q0", rt_kir_bin(a, RT_KIR_MIN, qa, pk->nq));
    pk->qb = rt_gen_let(l, blk, "pk_q1", rt_kir_bin(a, RT_KIR_MAX, qb, pk->qa));
    // Element q of a phase sits at q + shift, so that the vector copy from qa stores whole
    // 64-byte lines (a store split over two lines costs twice) when qa is known here.
    int64_t qa0;
    pk->shift = rt_kir_is_int(pk->qa, &qa0) ? (16 - qa0 % 16) % 16 : 0;
    // Row h is at index r0 + h along the row dim.
    if (pk->rdim >= 0) {
        rt_kir_expr *r =
            rt_kir_bin(a, RT_KIR_ADD, rt_win_outer(l, &pk->raf, pk), rt_kir_int(a, pk->brmin));
        if (pk->yv >= 0)
            r = rt_kir_bin(a, RT_KIR_ADD, r, rt_kir_bin(a, RT_KIR_MUL, rt_kir_int(a, pk->ay), ylo));
        pk->r0 = rt_gen_let(l, blk, "pk_r0", r);
    }
    // The read's other indices, and whether those that may leave the extents stay within.
    pk->valid = rt_kir_int(a, 1);
    for (int32_t d = 0; d < rd->n_args; d++) {
        rt_affine daf;
        int64_t dext = l->extent[rd->tensor][d];
        pk->idx[d] = NULL;
        if (d == pk->dim || d == pk->rdim)
            continue;
        RT_TRY(rt_tr_int(l, rd->args[d], &pk->idx[d]));
        if (tn->has_pad && rt_win_dim_of(l, rd->args[d], dext, &daf) != RT_WIN_IN)
            pk->valid = rt_kir_bin(
                a, RT_KIR_AND, pk->valid,
                rt_kir_bin(a, RT_KIR_AND, rt_kir_bin(a, RT_KIR_GE, pk->idx[d], rt_kir_int(a, 0)),
                           rt_kir_bin(a, RT_KIR_LT, pk->idx[d], rt_kir_int(a, dext))));
    }
    pk->hv = rt_kir_add_var(a, l->p, "pk_h", RT_KIR_I64);
    pk->qv = rt_kir_add_var(a, l->p, "pk_q", RT_KIR_I64);
    pk->pv = pk->rdim >= 0 ? rt_kir_add_var(a, l->p, "pk_pf", RT_KIR_I64) : 0;
    if (pk->hv < 0 || pk->qv < 0 || pk->pv < 0)
        return rt_fail(l->err, RT_ERR_NOMEM, RT_NOLOC, "out of memory");
    return RT_OK;
}

// A loop of var over the 64-byte lines of a run of len f32 elements, with one PREFETCH in it whose
// buffer and index the caller fills in: the index is the run's start plus *off, the element var
// 16 of the run, the last line's hint at its last element. A run need not start on a line (rows of
// 1000 or 83 floats do not), and then it spans one line more than (len + 15) / 16: on 128x1000x4032
// leaving that line out of the next B block's prefetch (every other row) cost 4% of the GEMM on a
// Zen 4 core, the pack stalling on it. So the loop runs (len + 15) / 16 + 1 times (the last hint
// repeats the line before it when the run does start on one). NULL when out of memory.
rt_kir_node *rt_prefetch_lines(rt_lower *l, rt_kir_block *blk, int32_t var, rt_kir_expr *len,
                               rt_kir_expr **off) {
    rt_arena *a = l->a;
    rt_kir_expr *lines =
        rt_kir_bin(a, RT_KIR_ADD,
                   rt_kir_bin(a, RT_KIR_DIV, rt_kir_bin(a, RT_KIR_ADD, len, rt_kir_int(a, 15)),
                              rt_kir_int(a, 16)),
                   rt_kir_bin(a, RT_KIR_MIN, len, rt_kir_int(a, 1)));
    rt_kir_node *lp = rt_kir_loop(a, blk, var, rt_kir_int(a, 0), lines, RT_KIR_LOOP_SERIAL);
    rt_kir_node *pf = lp ? rt_kir_append(a, &lp->body, RT_KIR_N_PREFETCH) : NULL;
    *off = rt_kir_bin(a, RT_KIR_MIN,
                      rt_kir_bin(a, RT_KIR_MUL, rt_kir_var_ref(a, l->p, var), rt_kir_int(a, 16)),
                      rt_kir_bin(a, RT_KIR_SUB, len, rt_kir_int(a, 1)));
    RT_LOWER_CHECK(l, pf && *off);
    return pf && *off ? pf : NULL;
}

// Packs rows [from, to) of pk in blk (after rt_win_pack_setup): each row, when its index along
// the row dim is within the extents, as a vector copy of the part of the run within the extents
// and scalar guarded copies at its ends, else as a row of pad values.
static void rt_win_pack_rows(rt_lower *l, rt_kir_block *blk, rt_win_pack *pk, rt_kir_expr *from,
                             rt_kir_expr *to) {
    rt_arena *a = l->a;
    const rt_expr *rd = pk->read;
    const rt_tensor *tn = &l->op->tensors[rd->tensor];
    int64_t A = pk->a;
    rt_kir_node *hl = rt_kir_loop(a, blk, pk->hv, from, to, RT_KIR_LOOP_SERIAL);
    RT_LOWER_CHECK(l, hl);
    if (!hl)
        return;
    rt_kir_block *rb = &hl->body;
    rt_kir_expr *h = rt_kir_var_ref(a, l->p, pk->hv), *valid = pk->valid;
    rt_kir_expr *idx[RT_MAX_DIMS];
    memcpy(idx, pk->idx, sizeof idx);
    if (pk->rdim >= 0) {
        rt_affine raf;
        int64_t rext = l->extent[rd->tensor][pk->rdim];
        idx[pk->rdim] = rt_gen_let(l, rb, "pk_row", rt_kir_bin(a, RT_KIR_ADD, pk->r0, h));
        if (tn->has_pad && rt_win_dim_of(l, rd->args[pk->rdim], rext, &raf) != RT_WIN_IN)
            valid = rt_kir_bin(
                a, RT_KIR_AND, valid,
                rt_kir_bin(a, RT_KIR_AND, rt_kir_bin(a, RT_KIR_GE, idx[pk->rdim], rt_kir_int(a, 0)),
                           rt_kir_bin(a, RT_KIR_LT, idx[pk->rdim], rt_kir_int(a, rext))));
    }
    // Prefetch of the run RT_WIN_PF_ROWS rows further down, one hint per 64-byte line: the
    // packing reads each row once, right before the FMAs that use it, and the hardware
    // prefetcher does not run far enough ahead across the planes a work item interleaves.
    if (pk->rdim >= 0) {
        rt_kir_expr *sub[RT_MAX_DIMS];
        memcpy(sub, idx, sizeof sub);
        sub[pk->rdim] = rt_kir_bin(a, RT_KIR_ADD, idx[pk->rdim], rt_kir_int(a, RT_WIN_PF_ROWS));
        rt_kir_expr *off = NULL;
        rt_kir_node *pf = rt_prefetch_lines(l, rb, pk->pv, pk->len, &off);
        sub[pk->dim] = rt_kir_bin(a, RT_KIR_ADD, pk->u0, off);
        RT_LOWER_CHECK(l, sub[pk->rdim] && sub[pk->dim]);
        if (pf) {
            pf->buf = l->data_buf[rd->tensor];
            pf->index = rt_tr_offset(l, rd->tensor, sub, NULL);
            RT_LOWER_CHECK(l, pf->index);
        }
    }
    rt_kir_expr *base = rt_kir_bin(
        a, RT_KIR_MUL, pk->yv >= 0 ? rt_kir_bin(a, RT_KIR_MOD, h, rt_kir_int(a, pk->rows)) : h,
        rt_kir_int(a, A * pk->q));
    rt_kir_block *fill = NULL;
    int64_t all;
    if (!rt_kir_is_int(valid, &all) || !all) {
        rt_kir_node *br = rt_kir_append(a, rb, RT_KIR_N_IF);
        RT_LOWER_CHECK(l, br && valid);
        if (!br)
            return;
        br->cond = valid;
        rb = &br->body;
        fill = &br->else_body;
    }
    rt_kir_block *body[2];
    int32_t n, qv = pk->qv;
    rt_win_loops(l, rb, qv, rt_kir_int(a, 0), pk->qa, RT_KIR_LOOP_SERIAL, false, body, &n);
    for (int32_t i = 0; i < n; i++)
        rt_win_pack_copy(l, body[i], pk, idx, pk->u0, pk->len, base, qv, true);
    rt_win_loops(l, rb, qv, pk->qa, pk->qb, RT_KIR_LOOP_VECTOR, true, body, &n);
    for (int32_t i = 0; i < n; i++)
        rt_win_pack_copy(l, body[i], pk, idx, pk->u0, pk->len, base, qv, false);
    rt_win_loops(l, rb, qv, pk->qb, pk->nq, RT_KIR_LOOP_SERIAL, false, body, &n);
    for (int32_t i = 0; i < n; i++)
        rt_win_pack_copy(l, body[i], pk, idx, pk->u0, pk->len, base, qv, true);
    if (!fill)
        return;
    rt_win_loops(l, fill, qv, rt_kir_int(a, 0), pk->nq, RT_KIR_LOOP_VECTOR, true, body, &n);
    for (int32_t i = 0; i < n; i++)
        for (int64_t ph = 0; ph < A; ph++) {
            rt_kir_node *st = rt_kir_append(a, body[i], RT_KIR_N_STORE);
            RT_LOWER_CHECK(l, st);
            if (!st)
                return;
            st->buf = 0;
            st->index = rt_kir_bin(a, RT_KIR_ADD,
                                   rt_kir_bin(a, RT_KIR_ADD, base, rt_kir_var_ref(a, l->p, qv)),
                                   rt_kir_int(a, ph * pk->q + pk->shift));
            st->value = rt_kir_flt(a, RT_KIR_F32, tn->pad_value);
        }
}

// y's loop handed to the packing (pk->yv >= 0), yu = pk->yu output rows per iteration
// (rt_win_pack_plan): packs the rows of the first iteration in *blk and opens y's loop of
// ceil(n / yu) iterations over its n >= yu values from ylo; *blk becomes the loop's body, where
// y = min(ylo + yu i, yhi - yu) (the last iteration shifted back to end at yhi: it recomputes
// rows of the one before), y + dy the output row dy, the rows the next iteration adds are packed
// (before its x loop, so that their loads overlap that loop's arithmetic), and pk->rb holds the
// offsets of the iteration's span + ay (yu - 1) rows in the ring (NULL *blk when out of memory).
static rt_status rt_win_rows(rt_lower *l, rt_kir_block **blk, rt_win_pack *pk, rt_kir_expr *ylo,
                             rt_kir_expr *yhi, rt_kir_expr *lo, rt_kir_expr *hi) {
    rt_arena *a = l->a;
    int64_t span = pk->brmax - pk->brmin + 1, yu = pk->yu, ay = pk->ay;
    RT_TRY(rt_win_pack_setup(l, *blk, pk, lo, hi, ylo));
    l->win_pack = pk;
    // Iteration i computes rows t(i) = min(yu i, n - yu) .. t(i) + yu - 1 (relative to ylo) and
    // reads packed rows [ay t(i), ay (t(i) + yu - 1) + span).
    rt_kir_expr *n = rt_gen_let(l, *blk, "y_n", rt_kir_bin(a, RT_KIR_SUB, yhi, ylo));
    rt_win_pack_rows(l, *blk, pk, rt_kir_int(a, 0), rt_kir_int(a, ay * (yu - 1) + span));
    int32_t iv = rt_kir_add_var(a, l->p, "y_i", RT_KIR_I64);
    pk->rb = rt_arena_alloc(a, sizeof *pk->rb * (size_t)(span + ay * (yu - 1)));
    rt_kir_node *yl =
        iv >= 0 && pk->rb
            ? rt_kir_loop(a, *blk, iv, rt_kir_int(a, 0),
                          rt_kir_bin(a, RT_KIR_DIV,
                                     rt_kir_bin(a, RT_KIR_ADD, n, rt_kir_int(a, yu - 1)),
                                     rt_kir_int(a, yu)),
                          RT_KIR_LOOP_SERIAL)
            : NULL;
    RT_LOWER_CHECK(l, yl);
    *blk = yl ? &yl->body : NULL;
    if (!yl)
        return RT_OK;
    rt_kir_block *b = *blk;
    rt_kir_expr *nlast = rt_kir_bin(a, RT_KIR_SUB, n, rt_kir_int(a, yu));
    rt_kir_expr *i = rt_kir_var_ref(a, l->p, iv);
    rt_kir_expr *t = rt_gen_let(
        l, b, "y_t",
        rt_kir_bin(a, RT_KIR_MIN, rt_kir_bin(a, RT_KIR_MUL, i, rt_kir_int(a, yu)), nlast));
    for (int64_t dy = 0; dy < yu; dy++) {
        const char *name = l->s->vars[pk->yv].name;
        pk->yvar[dy] = dy == 0 ? l->var_of[pk->yv]
                               : rt_kir_add_var(a, l->p, rt_arena_printf(a, "%s_%d", name, (int)dy),
                                                RT_KIR_I64);
        rt_kir_node *let = pk->yvar[dy] >= 0 ? rt_kir_append(a, b, RT_KIR_N_LET) : NULL;
        RT_LOWER_CHECK(l, let);
        if (!let)
            return RT_OK;
        let->var = pk->yvar[dy];
        let->value =
            rt_kir_bin(a, RT_KIR_ADD, ylo, rt_kir_bin(a, RT_KIR_ADD, t, rt_kir_int(a, dy)));
    }
    // The rows the next iteration adds: [max(ay t', end), ay t' + ay (yu - 1) + span) for
    // t' = min(t + yu, n - yu), end = ay t + ay (yu - 1) + span (none after the last).
    rt_kir_expr *tn =
        rt_kir_bin(a, RT_KIR_MIN, rt_kir_bin(a, RT_KIR_ADD, t, rt_kir_int(a, yu)), nlast);
    rt_kir_expr *cover = rt_kir_int(a, ay * (yu - 1) + span);
    rt_kir_expr *end =
        rt_kir_bin(a, RT_KIR_ADD, rt_kir_bin(a, RT_KIR_MUL, t, rt_kir_int(a, ay)), cover);
    rt_kir_expr *first = rt_kir_bin(a, RT_KIR_MUL, tn, rt_kir_int(a, ay));
    rt_win_pack_rows(l, b, pk, rt_gen_let(l, b, "pk_h0", rt_kir_bin(a, RT_KIR_MAX, first, end)),
                     rt_kir_bin(a, RT_KIR_ADD, first, cover));
    // Offsets of the iteration's rows in the ring.
    for (int64_t h = 0; h < span + ay * (yu - 1); h++)
        pk->rb[h] = rt_gen_let(
            l, b, "pk_rb",
            rt_kir_bin(a, RT_KIR_MUL,
                       rt_kir_bin(a, RT_KIR_MOD,
                                  rt_kir_bin(a, RT_KIR_ADD,
                                             rt_kir_bin(a, RT_KIR_MUL, t, rt_kir_int(a, ay)),
                                             rt_kir_int(a, h)),
                                  rt_kir_int(a, pk->rows)),
                       rt_kir_int(a, pk->a * pk->q)));
    return RT_OK;
}

// The innermost kept var xv over [lo, hi) of a window reduction (rt_window_form), and with pk
// and yv >= 0 the one before it, y over [ylo, yhi): the packed rows first (pk, when not NULL),
// then per y (when handed over) the x borders where a padded read may leave its extents as
// scalar loops with guarded reads, the interior as one vector loop of unguarded reads; when a
// row of the window may leave its extents (top and bottom rows of a padded conv), that vector
// loop is versioned on it, the slow copy selecting the pad value per row (x-invariant, so the
// loads stay unit-stride or interleaved). The caller (rt_lower_tiled) has set win_x, win_red
// and win_nr of l.
static rt_status rt_lower_window(rt_lower *l, rt_kir_block *blk, rt_win_pack *pk, rt_kir_expr *ylo,
                                 rt_kir_expr *yhi, int32_t xv, rt_kir_expr *lo, rt_kir_expr *hi) {
    rt_arena *a = l->a;
    const rt_stmt *s = l->s;
    int32_t yv = pk ? pk->yv : -1;
    if (yv >= 0)
        l->var_of[yv] = rt_kir_add_var(a, l->p, s->vars[yv].name, RT_KIR_I64);
    l->var_of[xv] = rt_kir_add_var(a, l->p, s->vars[xv].name, RT_KIR_I64);
    for (int32_t i = 0; i < l->win_nr; i++)
        l->var_of[l->win_red[i]] = rt_kir_add_var(a, l->p, s->vars[l->win_red[i]].name, RT_KIR_I64);
    l->win = true;
    l->win_pack = NULL;
    if (yv >= 0) {
        RT_TRY(rt_win_rows(l, &blk, pk, ylo, yhi, lo, hi));
        if (!blk)
            return RT_OK;
    } else if (pk) {
        // The only rows, before the x loop.
        RT_TRY(rt_win_pack_setup(l, blk, pk, lo, hi, ylo));
        rt_win_pack_rows(l, blk, pk, rt_kir_int(a, 0), rt_kir_int(a, pk->brmax - pk->brmin + 1));
        l->win_pack = pk;
    }
    rt_kir_expr *xlo = lo, *xhi = hi, *rows = rt_kir_int(a, 1);
    rt_win_bounds(l, s->rhs, &xlo, &xhi, &rows);
    // Interior [xlo, xhi) within [lo, hi).
    xlo = rt_gen_let(l, blk, "x_in0", rt_kir_bin(a, RT_KIR_MIN, xlo, hi));
    xhi = rt_gen_let(l, blk, "x_in1", rt_kir_bin(a, RT_KIR_MAX, xhi, xlo));
    rt_status st = RT_OK;
    l->win_guard_x = l->win_guard_row = true;
    st = rt_win_loop(l, blk, xv, lo, xlo, RT_KIR_LOOP_SERIAL);
    int64_t all_rows = 0;
    if (st == RT_OK && rt_kir_is_int(rows, &all_rows) && all_rows) {
        l->win_guard_x = l->win_guard_row = false;
        st = rt_win_loop(l, blk, xv, xlo, xhi, RT_KIR_LOOP_VECTOR);
    } else if (st == RT_OK) {
        rt_kir_node *br = rt_kir_append(a, blk, RT_KIR_N_IF);
        RT_LOWER_CHECK(l, br && rows);
        if (br) {
            br->cond = rows;
            l->win_guard_x = l->win_guard_row = false;
            st = rt_win_loop(l, &br->body, xv, xlo, xhi, RT_KIR_LOOP_VECTOR);
            l->win_guard_row = true;
            if (st == RT_OK)
                st = rt_win_loop(l, &br->else_body, xv, xlo, xhi, RT_KIR_LOOP_VECTOR);
        }
    }
    l->win_guard_x = l->win_guard_row = true;
    if (st == RT_OK)
        st = rt_win_loop(l, blk, xv, xhi, hi, RT_KIR_LOOP_SERIAL);
    l->win = false;
    l->win_pack = NULL;
    l->win_nr = 0; // win_red is the caller's
    return st;
}

// The tile loops of the levels below the work item, outer levels first: a loop per level where
// a var's tile shrinks, its base and end let in the loop. *blk is the innermost body on return
// (NULL when out of memory, flagged in l).
static rt_status rt_tiled_level_loops(rt_lower *l, rt_tvar *tv, int32_t nk, rt_kir_block **blk) {
    rt_arena *a = l->a;
    int32_t bl = l->m->block_level, top = l->m->top;
    for (int32_t lv = bl + 1; lv <= top; lv++) {
        for (int32_t i = 0; i < nk; i++) {
            rt_tvar *t = &tv[i];
            if (!t->tiled || t->t[lv] >= t->t[lv - 1])
                continue;
            const char *name = t->name;
            int64_t tl = t->t[lv];
            bool exact = t->exact && t->t[lv - 1] % tl == 0;
            rt_kir_expr *trip =
                t->exact ? rt_kir_int(a, rt_ceil_div64(t->t[lv - 1], tl))
                         : rt_kir_bin(a, RT_KIR_DIV,
                                      rt_kir_bin(a, RT_KIR_ADD,
                                                 rt_kir_bin(a, RT_KIR_SUB, t->end, t->base),
                                                 rt_kir_int(a, tl - 1)),
                                      rt_kir_int(a, tl));
            int32_t ti =
                rt_kir_add_var(a, l->p, rt_arena_printf(a, "%s_t%d", name, (int)lv), RT_KIR_I64);
            if (ti < 0)
                return rt_fail(l->err, RT_ERR_NOMEM, RT_NOLOC, "out of memory");
            rt_kir_node *loop =
                rt_kir_loop(a, *blk, ti, rt_kir_int(a, 0), trip, RT_KIR_LOOP_SERIAL);
            RT_LOWER_CHECK(l, loop && trip);
            *blk = loop ? &loop->body : NULL;
            if (!loop)
                return RT_OK;
            rt_kir_expr *base =
                rt_gen_let(l, *blk, rt_arena_printf(a, "%s_b%d", name, (int)lv),
                           rt_kir_bin(a, RT_KIR_ADD, t->base,
                                      rt_kir_bin(a, RT_KIR_MUL, rt_kir_var_ref(a, l->p, ti),
                                                 rt_kir_int(a, tl))));
            rt_kir_expr *end = rt_kir_bin(a, RT_KIR_ADD, base, rt_kir_int(a, tl));
            t->end = exact ? end
                           : rt_gen_let(l, *blk, rt_arena_printf(a, "%s_e%d", name, (int)lv),
                                        rt_kir_bin(a, RT_KIR_MIN, end, t->end));
            t->base = base;
            t->exact = exact;
        }
    }
    return RT_OK;
}

// Statement si blocked by the rTiles into a phase of its own: the scale-out level's tiles are
// the work items (spread over cores), each lower level a serial tile loop per tiled var (outer
// tile loops before inner ones), the register level's point loops innermost with the last kept
// var vectorized. *done is false when nothing is tiled (no phase was added).
rt_status rt_lower_tiled(rt_lower *l, int32_t si, bool *done) {
    rt_arena *a = l->a;
    const rt_stmt *s = &l->op->stmts[si];
    const rt_perf_model *m = l->m;
    int32_t bl = m->block_level, top = m->top, nk, red[RT_MAX_DIMS * 2], nr;
    int64_t n_items;
    rt_tvar tv[RT_MAX_DIMS * 2];
    const rt_perf_flat *fl = &m->flat;
    const rt_perf_cpu_loops *lp = &l->rp->cpu.loops;
    *done = false;
    if (l->rp->cpu.kind != RT_PERF_CPU_PLAN_LOOPS || lp->n_vars < 1)
        return RT_OK;
    *done = true;
    nk = lp->n_vars;
    n_items = lp->items;
    rt_tiled_vars(l, s, lp, tv, &nr, red);
    RT_TRY(rt_lower_begin_stmt(l, s));
    // A window reduction whose strided read can be packed: when its row index moves with the
    // kept var before x (y), y's tiles below the work item are dropped so that y runs over the
    // item's rows right outside x and each packed row is shared by the output rows that overlap
    // it (the ring of packed rows is the L1 set the y tiles stood for); the tile and point
    // loops of the other vars go outside y. The model's loop plan (perfmodel/cpu.c) does the
    // same.
    // The plan's tiles of y already run over the item's rows when it hands y's loop over.
    bool window = lp->window;
    rt_win_pack pk;
    bool packed = false;
    if (window) {
        l->win_x = tv[nk - 1].v;
        l->win_red = red;
        l->win_nr = nr;
        rt_tvar *tx = &tv[nk - 1], *ty = nk >= 2 ? &tv[nk - 2] : NULL;
        int64_t x_max = 0, lo, hi;
        if (tx->tiled)
            x_max = tx->t[top];
        else if (rt_var_range(l, tx->v, &lo, &hi))
            x_max = hi - lo;
        if (lp->win_pack != RT_PERF_CPU_WIN_PACK_NONE) {
            bool rows = lp->win_pack == RT_PERF_CPU_WIN_PACK_ROWS && ty;
            packed = rt_win_pack_bind(l, tx->v, rows ? ty->v : -1, x_max, lp->win_yu, &pk);
            if (!packed)
                return rt_fail(
                    l->err, RT_ERR_BACKEND, s->loc,
                    "internal: the plan packs a window read the statement does not have");
        }
    }
    rt_tiled_executed(l, tv, nk, window, &pk, packed);
    rt_buf b;
    rt_buf_init(&b, a);
    rt_buf_printf(&b, "statement %d blocked by the rTiles [", (int)si);
    for (int32_t lv = bl; lv <= top; lv++) {
        rt_buf_printf(&b, "%s", lv > bl ? "; " : "");
        for (int32_t i = 0, first = 1; i < nk; i++)
            if (tv[i].tiled) {
                rt_buf_printf(&b, "%s%s=%lld", first ? "" : ",", tv[i].name,
                              (long long)tv[i].t[lv]);
                first = 0;
            }
    }
    rt_buf_puts(&b, "]");
    if (packed)
        rt_buf_puts(&b, pk.yv >= 0 ? ", strided read packed by rows" : ", strided read packed");
    if (packed && pk.yu > 1)
        rt_buf_printf(&b, ", %d output rows per y", (int)pk.yu);
    l->p = rt_kir_add_phase(a, l->k, b.oom ? "statement" : b.data, n_items);
    if (!l->p)
        return rt_fail(l->err, RT_ERR_NOMEM, RT_NOLOC, "out of memory");
    rt_kir_block *blk = &l->p->body;
    // The flat axis's outer members: 0 in every offset (the flat index holds their part).
    if (fl->n > 0) {
        rt_kir_node *c = rt_kir_append(a, blk, RT_KIR_N_COMMENT);
        const char *text =
            rt_arena_printf(a, "%s as one flat index %s (every access reads it as one run)",
                            s->axes[fl->axis].name, tv[nk - 1].name);
        if (!c || !text)
            return rt_fail(l->err, RT_ERR_NOMEM, RT_NOLOC, "out of memory");
        c->text = text;
    }
    for (int32_t i = 0; i + 1 < fl->n; i++) {
        int32_t v = fl->mem[i];
        l->var_of[v] = rt_kir_add_var(a, l->p, s->vars[v].name, RT_KIR_I64);
        rt_kir_node *let = l->var_of[v] >= 0 ? rt_kir_append(a, blk, RT_KIR_N_LET) : NULL;
        if (!let)
            return rt_fail(l->err, RT_ERR_NOMEM, RT_NOLOC, "out of memory");
        let->var = l->var_of[v];
        let->value = rt_kir_int(a, 0);
    }
    // Work item -> tile index per tiled var (the first var varies slowest).
    rt_kir_expr *rem = rt_kir_var_ref(a, l->p, l->p->item_var);
    int64_t left = n_items;
    for (int32_t i = nk - 1; i >= 0; i--) {
        rt_tvar *t = &tv[i];
        if (!t->tiled)
            continue;
        const char *name = t->name;
        int64_t ext = t->hi - t->lo, nb = rt_ceil_div64(ext, t->t[bl]);
        t->exact = ext % t->t[bl] == 0;
        if (nb == 1) {
            t->base = rt_kir_int(a, t->lo);
            t->end = rt_kir_int(a, t->hi);
            continue;
        }
        rt_kir_expr *bi = left == nb ? rem : rt_kir_bin(a, RT_KIR_MOD, rem, rt_kir_int(a, nb));
        left /= nb;
        rem = left > 1 ? rt_kir_bin(a, RT_KIR_DIV, rem, rt_kir_int(a, nb)) : rt_kir_int(a, 0);
        t->base = rt_gen_let(l, blk, rt_arena_printf(a, "%s_b%d", name, (int)bl),
                             rt_kir_bin(a, RT_KIR_ADD, rt_kir_int(a, t->lo),
                                        rt_kir_bin(a, RT_KIR_MUL, bi, rt_kir_int(a, t->t[bl]))));
        rt_kir_expr *end = rt_kir_bin(a, RT_KIR_ADD, t->base, rt_kir_int(a, t->t[bl]));
        t->end = t->exact ? end
                          : rt_gen_let(l, blk, rt_arena_printf(a, "%s_e%d", name, (int)bl),
                                       rt_kir_bin(a, RT_KIR_MIN, end, rt_kir_int(a, t->hi)));
    }
    RT_TRY(rt_tiled_level_loops(l, tv, nk, &blk));
    if (!blk)
        return RT_OK;
    // Point loops in the statement's order; vloops read their bounds here.
    bool by_rows = window && packed && pk.yv >= 0;
    for (int32_t i = 0; i < nk; i++) {
        rt_tvar *t = &tv[i];
        rt_kir_expr *lo = t->base, *hi = t->end;
        if (!t->tiled)
            RT_TRY(rt_tr_loops_range(l, t->v, &lo, &hi));
        if (window && i == nk - (by_rows ? 2 : 1)) {
            rt_kir_expr *xlo = tv[nk - 1].base, *xhi = tv[nk - 1].end;
            if (!tv[nk - 1].tiled)
                RT_TRY(rt_tr_loops_range(l, tv[nk - 1].v, &xlo, &xhi));
            if (!by_rows)
                lo = hi = NULL;
            return rt_lower_window(l, blk, packed ? &pk : NULL, lo, hi, tv[nk - 1].v, xlo, xhi);
        }
        l->var_of[t->v] = rt_kir_add_var(a, l->p, t->name, RT_KIR_I64);
        bool innermost = i == nk - 1 && nr == 0;
        rt_kir_node *loop = rt_kir_loop(a, blk, l->var_of[t->v], lo, hi,
                                        innermost ? RT_KIR_LOOP_VECTOR : RT_KIR_LOOP_SERIAL);
        RT_LOWER_CHECK(l, loop);
        if (!loop)
            return RT_OK;
        blk = &loop->body;
    }
    return rt_lower_element(l, blk, red, nr);
}
