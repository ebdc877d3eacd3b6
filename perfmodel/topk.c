// topk.c: reports of the ranked rPrograms — the JSON report, the stdout table and the one-line
// top-1 summary used by the golden table (tests/golden/rtiles.txt).
//
// Ranking itself happens in rt_perf_construct (construct.c: predicted time, then the sum of
// stage times, padding waste and discovery order as tie-breaks, so output is deterministic).
// Only this file includes <jansson.h>; the header hands the report out as void *.
#include "perfmodel.h"
#include "gpu-plan.h"

#include <jansson.h>
#include <stdio.h>

static json_t *shape_json(const rt_perf_model *m, const int64_t *s) {
    json_t *o = json_object();
    for (int32_t x = 0; x < m->n_axes; x++)
        json_object_set_new(o, m->axes[x].name, json_integer(s[x]));
    return o;
}

static const char *tensor_name(const rt_perf_model *m, int32_t i) {
    int32_t t = m->access[i].tensor;
    return t >= 0 && t < m->op->n_tensors && m->op->tensors[t].name ? m->op->tensors[t].name : "?";
}

static json_t *rprog_json(const rt_perf_model *m, const rt_rprog *p, int32_t rank) {
    json_t *o = json_object();
    json_object_set_new(o, "rank", json_integer(rank));
    json_t *levels = json_array();
    for (int32_t l = 0; l < p->n_levels; l++) {
        const rt_rtile *t = &p->tile[l];
        json_t *lv = json_object();
        json_object_set_new(lv, "level", json_integer(l));
        json_object_set_new(lv, "name", json_string(m->dev->level[l].name));
        json_object_set_new(lv, "tile", shape_json(m, t->shape));
        json_t *data = json_array(), *pads = json_object();
        for (int32_t i = 0; i < m->n_access; i++) {
            json_t *d = json_object(), *ext = json_array();
            json_object_set_new(d, "tensor", json_string(tensor_name(m, i)));
            for (int32_t k = 0; k < m->access[i].n_dims; k++)
                json_array_append_new(ext, json_integer(t->data[i][k]));
            json_object_set_new(d, "extent", ext);
            json_array_append_new(data, d);
            if (t->pad_elems[i])
                json_object_set_new(pads, tensor_name(m, i), json_integer(t->pad_elems[i]));
        }
        json_object_set_new(lv, "data_tiles", data);
        json_object_set_new(lv, "storage_padding_elems", pads);
        json_object_set_new(lv, "footprint_bytes", json_integer(t->footprint_bytes));
        json_object_set_new(lv, "traffic_bytes", json_real(t->traffic_bytes));
        json_object_set_new(lv, "time_ns", json_real(t->time_ns));
        json_array_append_new(levels, lv);
    }
    json_object_set_new(o, "levels", levels);
    json_object_set_new(o, "threads_per_block", json_integer(p->threads_per_block));
    json_object_set_new(o, "blocks", json_integer(p->blocks));
    json_t *grid = json_object();
    for (int32_t x = 0; x < m->n_axes; x++)
        if (!m->axes[x].is_reduce)
            json_object_set_new(grid, m->axes[x].name, json_integer(p->grid[x]));
    json_object_set_new(o, "grid", grid);
    json_object_set_new(o, "blocks_per_unit", json_integer(p->blocks_per_unit));
    json_object_set_new(o, "regs_per_thread", json_integer(p->regs_per_thread));
    if (p->compiled_regs > 0) // priced again with the compiled kernel's registers
        json_object_set_new(o, "compiled_regs", json_integer(p->compiled_regs));
    json_object_set_new(o, "wave_efficiency", json_real(p->wave_eff));
    json_object_set_new(o, "compute_ns", json_real(p->compute_ns));
    json_object_set_new(o, "predicted_ns", json_real(p->predicted_ns));
    json_object_set_new(
        o, "bottleneck",
        json_string(p->bottleneck < 0 ? "compute" : m->dev->level[p->bottleneck].name));
    json_object_set_new(o, "bottleneck_level", json_integer(p->bottleneck));
    json_object_set_new(o, "flops", json_real(p->flops));
    json_object_set_new(o, "padding_waste", json_real(p->waste));
    json_object_set_new(o, "epsilon", json_real(p->epsilon));
    json_object_set_new(o, "shrunk", json_boolean(p->shrunk));
    json_object_set_new(o, "construction_ns", json_real(p->construct_ns));
    if (p->cpu.kind != RT_PERF_CPU_PLAN_NONE) {
        // The plan the CPU backend compiles (the kernel's opening comment prints the same line).
        rt_arena *a = rt_arena_new(4096);
        rt_buf b;
        rt_buf_init(&b, a);
        if (a)
            rt_perf_cpu_plan_text(&p->cpu, m->op, &m->op->stmts[m->main_stmt], &b);
        json_object_set_new(o, "plan", json_string(!a || b.oom || !b.data ? "" : b.data));
        rt_arena_free(a);
    }
    if (p->gpu) { // the plan, one line per phase, as the kernel's header comment prints it
        json_t *plan = json_array();
        rt_arena *a = rt_arena_new(4096);
        for (int32_t i = 0; a && i < p->gpu->n_phases; i++) {
            rt_buf b;
            rt_buf_init(&b, a);
            rt_gpu_plan_print_phase(m->op, p->gpu, i, &b);
            json_array_append_new(plan, json_string(b.data && !b.oom ? b.data : "?"));
        }
        rt_arena_free(a);
        json_object_set_new(o, "gpu_plan", plan);
    }
    return o;
}

// Where the op admits fewer different kernels than were asked for.
static const char *rt_perf_fewer_note(int32_t n, int32_t k, char *buf, size_t size) {
    snprintf(buf, size,
             "the construction found %d different kernel%s (distinct plans), fewer than top-k = "
             "%d; rPrograms with equal plans are one candidate",
             (int)n, n == 1 ? "" : "s", (int)k);
    return buf;
}

void *rt_perf_result_to_json(const rt_perf_result *r) {
    const rt_perf_model *m = r->model;
    char buf[200];
    json_t *o = json_object();
    if (!o)
        return NULL;
    json_object_set_new(o, "op", json_string(m->op->name ? m->op->name : "?"));
    json_object_set_new(o, "device", json_string(m->dev->name));
    json_object_set_new(o, "dtype", json_string(rt_dtype_name(m->dtype)));
    json_object_set_new(o, "main_statement", json_integer(m->main_stmt));
    json_t *fused = json_array();
    for (int32_t i = 0; i < m->n_fused; i++)
        json_array_append_new(fused, json_integer(m->fused[i]));
    json_object_set_new(o, "fused_statements", fused);
    if (m->n_fused > 0)
        json_object_set_new(o, "fusion_note",
                            json_string("tiles are constructed for the main statement; the "
                                        "others are fused as prologue/epilogue and their "
                                        "traffic and arithmetic are added"));
    if (m->recursive)
        json_object_set_new(o, "plan_note",
                            json_string("recursive or predicated statements: simple "
                                        "per-statement plan over one level of the structure"));
    if (m->default_dist_note)
        json_object_set_new(o, "length_note", json_string(m->default_dist_note));
    json_t *axes = json_array();
    for (int32_t x = 0; x < m->n_axes; x++) {
        const rt_perf_axis *ax = &m->axes[x];
        json_t *a = json_object();
        json_object_set_new(a, "name", json_string(ax->name));
        json_object_set_new(a, "reduce", json_boolean(ax->is_reduce));
        json_object_set_new(a, "ragged", json_boolean(ax->ragged));
        json_object_set_new(a, "extent", json_integer(ax->extent));
        json_object_set_new(a, "mean_extent", json_real(rt_extent_dist_mean(&ax->dist)));
        json_array_append_new(axes, a);
    }
    json_object_set_new(o, "axes", axes);
    json_object_set_new(o, "use_mma", json_boolean(m->use_mma));
    json_object_set_new(o, "candidates_found", json_integer(r->n_found));
    json_object_set_new(o, "candidates_same_kernel", json_integer(r->n_same_kernel));
    if (r->n_cands < r->top_k)
        json_object_set_new(o, "candidates_note",
                            json_string(rt_perf_fewer_note(r->n_cands, r->top_k, buf, sizeof buf)));
    json_object_set_new(o, "tile_evaluations", json_integer(r->n_evals));
    json_object_set_new(o, "model_steps", json_integer(r->n_steps));
    json_object_set_new(o, "construction_ns", json_real(r->construct_ns));
    json_object_set_new(o, "top1_construction_ns", json_real(r->top1_ns));
    json_t *cands = json_array();
    for (int32_t i = 0; i < r->n_cands; i++)
        json_array_append_new(cands, rprog_json(m, &r->cands[i], i + 1));
    json_object_set_new(o, "candidates", cands);
    return o;
}

static void shape_text(const rt_perf_model *m, const int64_t *s, rt_buf *out) {
    for (int32_t x = 0; x < m->n_axes; x++)
        rt_buf_printf(out, "%s%lld", x ? "x" : "", (long long)s[x]);
}

void rt_perf_print_table(const rt_perf_result *r, rt_buf *out) {
    const rt_perf_model *m = r->model;
    rt_buf_printf(out, "%s on %s: %d candidates (%d constructed, %lld tiles evaluated, %.3f ms)\n",
                  m->op->name ? m->op->name : "?", m->dev->name, r->n_cands, r->n_found,
                  (long long)r->n_evals, r->construct_ns / 1e6);
    if (r->n_cands < r->top_k) {
        char buf[200];
        rt_buf_printf(out, "note: %s\n", rt_perf_fewer_note(r->n_cands, r->top_k, buf, sizeof buf));
    }
    if (m->default_dist_note)
        rt_buf_printf(out, "lengths: %s\n", m->default_dist_note);
    rt_buf_puts(out, "axes");
    for (int32_t x = 0; x < m->n_axes; x++)
        rt_buf_printf(out, " %s%s", m->axes[x].name, m->axes[x].is_reduce ? "(r)" : "");
    rt_buf_puts(out, "\n");
    rt_buf_printf(out, "%4s  %-44s %8s %8s %12s %-10s %6s\n", "rank", "tiles (level 1 .. top)",
                  "threads", "blocks", "predicted_us", "bottleneck", "waste");
    for (int32_t i = 0; i < r->n_cands; i++) {
        const rt_rprog *p = &r->cands[i];
        rt_buf tiles;
        rt_buf_init(&tiles, out->arena);
        for (int32_t l = 1; l < p->n_levels; l++) {
            if (l > 1)
                rt_buf_puts(&tiles, " / ");
            shape_text(m, p->tile[l].shape, &tiles);
        }
        rt_buf_printf(out, "%4d  %-44s %8lld %8lld %12.2f %-10s %5.1f%%\n", i + 1,
                      tiles.data ? tiles.data : "", (long long)p->threads_per_block,
                      (long long)p->blocks, p->predicted_ns / 1e3,
                      p->bottleneck < 0 ? "compute" : m->dev->level[p->bottleneck].name,
                      p->waste * 100);
    }
}

void rt_perf_print_top1(const rt_perf_result *r, rt_buf *out) {
    const rt_perf_model *m = r->model;
    if (r->n_cands == 0)
        return;
    const rt_rprog *p = &r->cands[0];
    rt_buf_printf(out, "axes ");
    for (int32_t x = 0; x < m->n_axes; x++)
        rt_buf_printf(out, "%s%s%s", x ? "," : "", m->axes[x].name,
                      m->axes[x].is_reduce ? "(r)" : "");
    for (int32_t l = 1; l < p->n_levels; l++) {
        rt_buf_printf(out, " %s ", m->dev->level[l].name);
        shape_text(m, p->tile[l].shape, out);
    }
    rt_buf_printf(out, " threads %lld blocks %lld bottleneck %s", (long long)p->threads_per_block,
                  (long long)p->blocks,
                  p->bottleneck < 0 ? "compute" : m->dev->level[p->bottleneck].name);
}
