// driver.c: the rtgen pipeline behind the CLI and the library. Loads the device (INI or the
// detected host), parses the op-spec with --set bindings, binds --lengths / --tree files, then:
//   --dry-run    prints the canonical IR and the device summary (text or --json), writes nothing;
//   --interpret  runs the reference interpreter on seeded inputs and prints the outputs;
//   otherwise    constructs ranked rPrograms (perfmodel) and writes DIR/<op>.json through a
//                temporary directory that is renamed into place only when everything succeeded.
#include "driver.h"
#include "hal.h"
#include "interp.h"
#include "perfmodel.h"
#include "rtgen.h"
#include "layer.h"
#include "layer-emit.h"
#include "run-gpu.h"
#include "hal-gpu.h"

#include <errno.h>
#include <jansson.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

void rt_driver_options_init(rt_driver_options *o) {
    memset(o, 0, sizeof *o);
    o->out_dir = "rtgen-out";
    o->top_k = 10;
    o->seed = 1;
    o->profile = -1;
}

// --device, or the default device: a host.ini on the search path, else the detected host CPU
// with its measured (first-use probe, cached) figures (rt_hal_host_device).
// root as indented JSON text ending in a newline, in a; root is released. NULL: out of memory.
static char *rt_driver_json_text(rt_arena *a, json_t *root) {
    char *text = root ? json_dumps(root, JSON_INDENT(2)) : NULL;
    json_decref(root);
    char *copy = text ? rt_arena_printf(a, "%s\n", text) : NULL;
    free(text);
    return copy;
}

static rt_status rt_driver_load_device(const rt_driver_options *o, rt_device *dev, rt_err *err) {
    if (o->device_path)
        return rt_hal_load_device(o->device_path, dev, err);
    return rt_hal_host_device(dev, err);
}

// Reads every --lengths file once, before the spec is parsed for good: their entry counts may
// bind batch sizes (see rt_driver_infer_sizes).
static rt_status rt_driver_read_lengths(rt_arena *a, const rt_driver_options *o,
                                        rt_lengths_file ***out, rt_err *err) {
    rt_lengths_file **files;
    RT_ALLOC(a, files, o->n_lengths, err);
    for (int32_t i = 0; i < o->n_lengths; i++) {
        rt_status st = rt_lengths_read(a, o->lengths[i].path, &files[i], err);
        if (st != RT_OK) {
            rt_file_error_to_option(err, "--lengths", o->lengths[i].name, o->lengths[i].path);
            return st;
        }
    }
    *out = files;
    return RT_OK;
}

// A length tensor whose extent is a bare size symbol that --set did not bind takes its batch
// size from the data, as a user of TVM or PyTorch expects: the entry count of a plain list, or
// --batch for a histogram. Returns the --set bindings extended with those sizes.
// A layer's length tensors are found in the first def that declares them.
static rt_status rt_driver_infer_sizes(rt_arena *a, const rt_driver_options *o, rt_op *const *ops,
                                       int32_t n_ops, rt_lengths_file **files,
                                       rt_size_binding **out_sets, int32_t *out_n, rt_err *err) {
    rt_size_binding *sets;
    RT_ALLOC(a, sets, o->n_sets + o->n_lengths, err);
    int32_t n = 0;
    for (; n < o->n_sets; n++)
        sets[n] = o->sets[n];
    for (int32_t i = 0; i < o->n_lengths; i++) {
        const rt_file_binding *fb = &o->lengths[i];
        const rt_op *op = ops[0];
        int32_t t = rt_op_tensor_index(op, fb->name);
        for (int32_t k = 1; k < n_ops && t < 0; k++)
            t = rt_op_tensor_index(op = ops[k], fb->name);
        if (t < 0 || !op->tensors[t].is_length)
            return rt_fail(err, RT_ERR_USAGE, RT_NOLOC,
                           "--lengths %s=%s: no length tensor '%s' in %s", fb->name, fb->path,
                           fb->name, o->spec_path);
        const rt_tensor *lt = &op->tensors[t];
        const rt_expr *ext = lt->dims[0].extent;
        if (lt->n_dims != 1 || ext->kind != RT_EXPR_SIZE)
            continue;
        int64_t count = files[i]->is_histogram ? o->batch : files[i]->n;
        if (count <= 0)
            continue;
        const char *sym = op->sizes[ext->sym].name;
        bool given = false;
        for (int32_t k = 0; k < n; k++) {
            if (!strcmp(sets[k].name, sym)) {
                given = true;
                if (sets[k].value != count && k >= o->n_sets)
                    return rt_fail(err, RT_ERR_USAGE, RT_NOLOC,
                                   "--lengths %s=%s: %lld lengths, but size '%s' is already %lld "
                                   "from another length tensor",
                                   fb->name, fb->path, (long long)count, sym,
                                   (long long)sets[k].value);
            }
        }
        if (!given) {
            sets[n].name = sym;
            sets[n++].value = count;
        }
    }
    *out_sets = sets;
    *out_n = n;
    return RT_OK;
}

// Reads every --tree file (with the C of its tree parameter in op) and binds each tree's node
// count, which sizes the tensors over its nodes, to the file's node count, as a length file
// binds a batch size. For a construction (bind_default), a tree that no file gives is generated
// with RT_TREE_DEFAULT_NODES nodes unless --set binds its count: that count is bound too, so that
// the model and the kernels see the sizes the data will have. Returns the bindings extended
// with those counts, and the trees read (per --tree, in order).
static rt_status rt_driver_tree_sizes(rt_arena *a, const rt_driver_options *o, const rt_op *op,
                                      bool bind_default, rt_size_binding **sets, int32_t *n_sets,
                                      rt_tree_data ***out_trees, rt_err *err) {
    rt_size_binding *s;
    RT_ALLOC(a, s, *n_sets + o->n_trees + op->n_trees, err);
    int32_t n = *n_sets;
    for (int32_t i = 0; i < n; i++)
        s[i] = (*sets)[i];
    rt_tree_data **trees;
    RT_ALLOC(a, trees, o->n_trees, err);
    bool *given;
    RT_ALLOC(a, given, op->n_trees, err);
    for (int32_t i = 0; i < o->n_trees; i++) {
        const rt_file_binding *fb = &o->trees[i];
        int32_t t = rt_op_tree_index(op, fb->name);
        if (t < 0)
            return rt_fail(err, RT_ERR_USAGE, RT_NOLOC,
                           "--tree %s=%s: no tree parameter '%s' in %s", fb->name, fb->path,
                           fb->name, o->spec_path);
        rt_status st = rt_tree_read(a, fb->path, op->trees[t].max_children, &trees[i], err);
        if (st != RT_OK) {
            rt_file_error_to_option(err, "--tree", fb->name, fb->path);
            return st;
        }
        const rt_size *sz = &op->sizes[op->trees[t].n_sym];
        given[t] = true;
        if (!sz->bound) // a --set count that differs is reported when the tree is bound
            s[n++] = (rt_size_binding){sz->name, trees[i]->n_nodes};
    }
    for (int32_t t = 0; t < op->n_trees && bind_default; t++) {
        const rt_size *sz = &op->sizes[op->trees[t].n_sym];
        if (!given[t] && !sz->bound)
            s[n++] = (rt_size_binding){sz->name, RT_TREE_DEFAULT_NODES};
    }
    *sets = s;
    *n_sets = n;
    *out_trees = trees;
    return RT_OK;
}

static rt_status rt_driver_bind(rt_arena *a, const rt_driver_options *o, const rt_op *op,
                                rt_lengths_file **files, rt_tree_data **trees, rt_bindings **out,
                                rt_err *err) {
    rt_bindings *b;
    RT_TRY(rt_bindings_new(a, op, o->seed, &b, err));
    for (int32_t i = 0; i < o->n_lengths; i++) {
        const rt_file_binding *fb = &o->lengths[i];
        rt_status st = rt_bindings_set_lengths_file(b, fb->name, files[i], o->batch, err);
        if (st != RT_OK) {
            rt_file_error_to_option(err, "--lengths", fb->name, fb->path);
            return st;
        }
    }
    if (o->batch && o->n_lengths == 0)
        return rt_fail(err, RT_ERR_USAGE, RT_NOLOC, "--batch needs a --lengths histogram");
    for (int32_t i = 0; i < o->n_trees; i++) {
        const rt_file_binding *fb = &o->trees[i];
        rt_status st = rt_bindings_set_tree(b, fb->name, trees[i], err);
        if (st != RT_OK) {
            rt_file_error_to_option(err, "--tree", fb->name, fb->path);
            return st;
        }
    }
    *out = b;
    return RT_OK;
}

// Writes text to DIR/name inside the staging directory.
static rt_status rt_driver_write_file(rt_arena *a, const char *dir, const char *name,
                                      const char *text, rt_err *err) {
    char *path = rt_arena_printf(a, "%s/%s", dir, name);
    if (!path)
        return rt_fail(err, RT_ERR_NOMEM, RT_NOLOC, "out of memory");
    FILE *f = fopen(path, "w");
    if (!f)
        return rt_fail(err, RT_ERR_IO, RT_NOLOC, "cannot write %s: %s", path, strerror(errno));
    bool ok = fputs(text, f) >= 0;
    ok = (fclose(f) == 0) && ok;
    if (!ok)
        return rt_fail(err, RT_ERR_IO, RT_NOLOC, "cannot write %s: %s", path, strerror(errno));
    return RT_OK;
}

static void rt_driver_remove_tree(const char *dir, const char *const *names, int32_t n) {
    char path[4096];
    for (int32_t i = 0; i < n; i++) {
        snprintf(path, sizeof path, "%s/%s", dir, names[i]);
        unlink(path);
    }
    rmdir(dir);
}

// Output files are staged in OUT_DIR.tmp-PID and moved into OUT_DIR only when all were written.
typedef struct rt_driver_out {
    const char *dir, *stage;
    int32_t n_files;
    const char *names[256];
} rt_driver_out;

static rt_status rt_driver_out_begin(rt_arena *a, const char *dir, rt_driver_out *out,
                                     rt_err *err) {
    memset(out, 0, sizeof *out);
    out->dir = dir;
    out->stage = rt_arena_printf(a, "%s.tmp-%ld", dir, (long)getpid());
    if (!out->stage)
        return rt_fail(err, RT_ERR_NOMEM, RT_NOLOC, "out of memory");
    if (mkdir(out->stage, 0777) != 0)
        return rt_fail(err, RT_ERR_IO, RT_NOLOC, "-o %s: cannot create %s: %s", dir, out->stage,
                       strerror(errno));
    return RT_OK;
}

static rt_status rt_driver_out_add(rt_arena *a, rt_driver_out *out, const char *name,
                                   const char *text, rt_err *err) {
    if (out->n_files == (int32_t)(sizeof out->names / sizeof out->names[0]))
        return rt_fail(err, RT_ERR_IO, RT_NOLOC, "too many output files");
    out->names[out->n_files++] = name;
    return rt_driver_write_file(a, out->stage, name, text, err);
}

static rt_status rt_driver_out_commit(rt_driver_out *out, rt_err *err) {
    if (mkdir(out->dir, 0777) != 0 && errno != EEXIST)
        return rt_fail(err, RT_ERR_IO, RT_NOLOC, "-o %s: cannot create directory: %s", out->dir,
                       strerror(errno));
    char from[4096], to[4096];
    for (int32_t i = 0; i < out->n_files; i++) {
        snprintf(from, sizeof from, "%s/%s", out->stage, out->names[i]);
        snprintf(to, sizeof to, "%s/%s", out->dir, out->names[i]);
        if (rename(from, to) != 0)
            return rt_fail(err, RT_ERR_IO, RT_NOLOC, "cannot move %s to %s: %s", from, to,
                           strerror(errno));
    }
    rmdir(out->stage);
    return RT_OK;
}

// min / mean / max of a bound length tensor, for the dry-run report.
static void rt_driver_length_stats(rt_bindings *b, const char *name, int64_t *n, int64_t *lo,
                                   double *mean, int64_t *hi) {
    const rt_tensor_data *td = rt_bindings_data(b, name);
    *n = td->layout.elems;
    *lo = *n ? INT64_MAX : 0;
    *hi = 0;
    double sum = 0;
    for (int64_t k = 0; k < *n; k++) {
        int64_t v = (int64_t)td->data[k];
        *lo = v < *lo ? v : *lo;
        *hi = v > *hi ? v : *hi;
        sum += (double)v;
    }
    *mean = *n ? sum / (double)*n : 0.0;
}

static rt_bindings *rt_driver_layer_origin(const rt_layer *l, rt_layer_bindings *lb,
                                           const char *name);

// The end of a --dry-run's text: one line per --lengths tensor (its values from the bindings of
// the op, or of the layer l, that hold it), the device, then all of b to f.
static rt_status rt_driver_dry_run_finish(const rt_driver_options *o, const rt_device *dev,
                                          const rt_layer *l, rt_layer_bindings *llb,
                                          rt_bindings *ob, rt_buf *b, FILE *f, rt_err *err) {
    for (int32_t i = 0; i < o->n_lengths; i++) {
        int64_t n, lo, hi;
        double mean;
        const char *name = o->lengths[i].name;
        rt_driver_length_stats(l ? rt_driver_layer_origin(l, llb, name) : ob, name, &n, &lo, &mean,
                               &hi);
        rt_buf_linef(b, 0,
                     "lengths %s: %lld values from %s (seed %llu): min %lld, mean %.1f, max %lld",
                     name, (long long)n, o->lengths[i].path, (unsigned long long)o->seed,
                     (long long)lo, mean, (long long)hi);
    }
    if (!o->ir_only) {
        rt_buf_puts(b, "\n");
        rt_hal_print_device(dev, b);
    }
    if (b->oom)
        return rt_fail(err, RT_ERR_NOMEM, RT_NOLOC, "out of memory");
    fputs(b->data ? b->data : "", f);
    return RT_OK;
}

static rt_status rt_driver_dry_run(rt_arena *a, const rt_driver_options *o, const rt_op *op,
                                   const rt_device *dev, rt_bindings *lb, FILE *f, rt_err *err) {
    if (o->json) {
        json_t *root = json_object();
        json_object_set_new(root, "rtgen", json_string(RT_VERSION_STRING));
        json_object_set_new(root, "op", (json_t *)rt_op_to_json(op));
        json_t *lens = json_array();
        for (int32_t i = 0; i < o->n_lengths; i++) {
            int64_t n, lo, hi;
            double mean;
            rt_driver_length_stats(lb, o->lengths[i].name, &n, &lo, &mean, &hi);
            json_array_append_new(lens, json_pack("{s:s, s:s, s:I, s:I, s:f, s:I}", "tensor",
                                                  o->lengths[i].name, "file", o->lengths[i].path,
                                                  "count", (json_int_t)n, "min", (json_int_t)lo,
                                                  "mean", mean, "max", (json_int_t)hi));
        }
        json_object_set_new(root, "lengths", lens);
        if (!o->ir_only)
            json_object_set_new(root, "device", (json_t *)rt_hal_device_to_json(dev));
        const char *text = rt_driver_json_text(a, root);
        if (!text)
            return rt_fail(err, RT_ERR_NOMEM, RT_NOLOC, "out of memory");
        fputs(text, f);
        return RT_OK;
    }
    rt_buf b;
    rt_buf_init(&b, a);
    rt_op_print(op, &b);
    return rt_driver_dry_run_finish(o, dev, NULL, NULL, lb, &b, f, err);
}

static rt_status rt_driver_interpret(rt_arena *a, const rt_op *op, rt_bindings *b, FILE *f,
                                     rt_err *err) {
    RT_TRY(rt_interp_run(op, b, err));
    rt_buf out;
    rt_buf_init(&out, a);
    rt_bindings_print_outputs(b, &out);
    if (out.oom)
        return rt_fail(err, RT_ERR_NOMEM, RT_NOLOC, "out of memory");
    fputs(out.data ? out.data : "", f);
    return RT_OK;
}

// The lengths the run binds feed the model as distributions (CORA: extents are histograms, not
// integers): those of --lengths files, and the generated ones of every other length tensor
// (uniform over 0..b->max_length, seeded), so that the model prices the problem the profile
// runs and checks; the generated ones carry the note (the report's length_note) naming them.
static rt_status rt_driver_length_dists(rt_arena *a, const rt_op *op, rt_bindings *b,
                                        rt_perf_options *popt, rt_err *err) {
    int32_t n_len = 0;
    bool generated = false;
    for (int32_t t = 0; t < op->n_tensors; t++) {
        if (!op->tensors[t].is_length)
            continue;
        n_len++;
        rt_tensor_data *td = &b->tensors[t];
        generated = generated || !td->bound;
    }
    if (n_len == 0)
        return RT_OK;
    if (generated) // generates the unbound lengths (and trees) as the profile will
        RT_TRY(rt_bindings_shape(b, err));
    rt_buf note;
    rt_buf_init(&note, a);
    rt_perf_length_dist *d;
    RT_ALLOC(a, d, n_len, err);
    int32_t n_dists = 0;
    for (int32_t t = 0; t < op->n_tensors; t++) {
        if (!op->tensors[t].is_length)
            continue;
        rt_tensor_data *td = &b->tensors[t];
        rt_assert(td->laid_out);
        int64_t n = td->layout.elems;
        if (n <= 0) // an empty batch: nothing to price by
            continue;
        int64_t *samples;
        RT_ALLOC(a, samples, n, err);
        for (int64_t k = 0; k < n; k++)
            samples[k] = (int64_t)td->data[k];
        d[n_dists].tensor = op->tensors[t].name;
        if (!td->bound) { // marked here, the note's text set below once it is whole
            rt_buf_printf(&note, "%s%s", note.len ? ", " : "", op->tensors[t].name);
            d[n_dists].note = "";
        }
        RT_TRY(rt_extent_dist_from_samples(a, samples, (int32_t)n, op->tensors[t].loc,
                                           &d[n_dists++].dist, err));
    }
    if (note.len) {
        rt_buf_printf(&note,
                      ": generated, uniform over 0..%lld (seed %llu; --lengths binds real ones)",
                      (long long)b->max_length, (unsigned long long)b->seed);
        if (note.oom)
            return rt_fail(err, RT_ERR_NOMEM, RT_NOLOC, "out of memory");
        for (int32_t i = 0; i < n_dists; i++)
            if (d[i].note)
                d[i].note = note.data;
    }
    popt->lengths = d;
    popt->n_lengths = n_dists;
    return RT_OK;
}

// Whether the candidates for a CPU-class device are profiled: when the device is this host,
// or --profile asks.
// By default the host is profiled: the default device (detected, or a host.ini that describes
// this host), not a --device file of some other CPU.
static bool rt_driver_cpu_profiles(const rt_driver_options *o, const rt_device *dev) {
    return o->profile < 0 ? dev->detected || !o->device_path : o->profile == 1;
}

// Kernels for a CPU-class device: lowered, emitted, and (when the device is this host, or
// --profile asks) JIT-compiled, checked against the reference and timed.
static rt_status rt_driver_cpu_kernels(rt_arena *a, const rt_driver_options *o, const rt_op *op,
                                       const rt_device *dev, rt_bindings *b,
                                       const rt_perf_result *res, rt_cpu_report **out,
                                       rt_err *err) {
    if (o->emit && strcmp(o->emit, "c") && strcmp(o->emit, "llvm"))
        return rt_fail(err, RT_ERR_USAGE, RT_NOLOC,
                       "--emit=%s needs a GPU device (the device '%s' is of class cpu)", o->emit,
                       dev->name);
    rt_cpu_options copt;
    memset(&copt, 0, sizeof copt);
    copt.emit = o->emit && !strcmp(o->emit, "c") ? RT_CPU_EMIT_C : RT_CPU_EMIT_LLVM;
    copt.profile = rt_driver_cpu_profiles(o, dev);
    copt.progress = true;
    // RTGEN_TEST_FAULT=NAME, for rtgen's tests only (not in --help): injects the fault NAME of
    // rt_cpu_fault (corrupt, nan, unwritten, clobber, zero, blind, crash, hang) into every
    // candidate's checked run, so that a profile in which every candidate is wrong, crashes or
    // times out can be produced at will.
    const char *fault = getenv("RTGEN_TEST_FAULT");
    if (fault && *fault && !rt_cpu_fault_from_name(fault, &copt.fault))
        return rt_fail(err, RT_ERR_USAGE, RT_NOLOC,
                       "RTGEN_TEST_FAULT: unknown fault \"%s\" (expected corrupt, nan, unwritten, "
                       "clobber, zero, blind, crash or hang)",
                       fault);
    return rt_cpu_build_and_profile(a, op, dev, b, res, &copt, out, err);
}

// Kernels for a GPU-class device (run-gpu.h): emitted in --emit's target (the device's own by
// default), compiled for the device's own, and where it is present checked and timed.
// RTGEN_TEST_FAULT (tests only, see rt_driver_cpu_kernels) takes one fault there: corrupt.
static rt_status rt_driver_gpu_kernels(rt_arena *a, const rt_driver_options *o,
                                       const rt_device *dev, rt_bindings *b,
                                       const rt_perf_result *res, rt_gpu_report *g, rt_err *err) {
    memset(g, 0, sizeof *g);
    g->winner = -1;
    rt_gpu_target own, t;
    if (!rt_gpu_target_of_device(dev, &own))
        return rt_fail(err, RT_ERR_DEVICE, dev->origin, "device class %s has no GPU target",
                       rt_devclass_name(dev->devclass));
    t = own;
    if (o->emit && !rt_gpu_target_from_name(o->emit, &t))
        return rt_fail(err, RT_ERR_USAGE, RT_NOLOC,
                       "--emit=%s needs a CPU device (the device '%s' is of class %s)", o->emit,
                       dev->name, rt_devclass_name(dev->devclass));
    rt_gpu_report_options gopt = {.target = t,
                                  .spec_path = o->spec_path,
                                  .profile = o->profile != 0,
                                  .b = b,
                                  .test_fault = getenv("RTGEN_TEST_FAULT"),
                                  .compile_threads = 2};
    return rt_gpu_build_and_profile(a, dev, res, &gopt, g, err);
}

// Writes the report and every candidate's source: the winner (or the model's top-1) as
// DIR/<op>.<ext>, the others as DIR/<op>.rank<N>.<ext>; after a failed profile (best < 0) the
// report as DIR/<op>.failed.json and every source as DIR/<op>.failed.rank<N>.<ext>, so that
// nothing looks like a result. All or nothing.
static rt_status rt_driver_write_outputs(rt_arena *a, const rt_driver_options *o, const rt_op *op,
                                         const char *report, int32_t n, const char *const *sources,
                                         const int32_t *ranks, int32_t best, const char *ext,
                                         rt_err *err) {
    rt_driver_out out;
    RT_TRY(rt_driver_out_begin(a, o->out_dir, &out, err));
    const char *tag = best < 0 ? ".failed" : "";
    rt_status st =
        rt_driver_out_add(a, &out, rt_arena_printf(a, "%s%s.json", op->name, tag), report, err);
    for (int32_t i = 0; st == RT_OK && i < n; i++) {
        const char *name =
            i == best ? rt_arena_printf(a, "%s.%s", op->name, ext)
                      : rt_arena_printf(a, "%s%s.rank%d.%s", op->name, tag, (int)ranks[i], ext);
        if (!name || !sources[i])
            st = rt_fail(err, RT_ERR_NOMEM, RT_NOLOC, "out of memory");
        else
            st = rt_driver_out_add(a, &out, name, sources[i], err);
    }
    if (st == RT_OK)
        st = rt_driver_out_commit(&out, err);
    if (st != RT_OK)
        rt_driver_remove_tree(out.stage, out.names, out.n_files);
    return st;
}

// After a profile in which no candidate passed: one line per candidate on stderr (rank, status,
// reason), and the error (RT_ERR_BACKEND) counting them by status.
static rt_status rt_driver_failed(rt_arena *a, const rt_driver_options *o, const rt_op *op,
                                  const rt_cpu_report *cpu, const rt_gpu_report *g, bool in_layer,
                                  rt_err *err) {
    const char *names[16];
    int32_t counts[16], n_names = 0, n = cpu ? cpu->n : g->n;
    for (int32_t i = 0; i < n; i++) {
        const char *status, *why;
        int32_t rank;
        if (cpu) {
            const rt_cpu_cand *c = &cpu->cands[i];
            rank = c->rank + 1;
            status =
                c->status == RT_CPU_CAND_TIMEOUT ? "timed out" : rt_cpu_cand_status_name(c->status);
            why = c->reason;
            if (c->same_as >= 0)
                why = rt_arena_printf(a, "the same code as rank %d", (int)c->same_as + 1);
            fprintf(stderr, "rtgen: rank %d %s: %s: %s\n", (int)rank, c->name,
                    rt_cpu_cand_status_name(c->status), why ? why : "");
        } else {
            rank = g->cands[i].rank;
            status = g->status[i];
            why = g->reason[i] ? g->reason[i] : "not run";
            fprintf(stderr, "rtgen: rank %d: %s: %s\n", (int)rank, status, why ? why : "");
        }
        int32_t k = 0;
        while (k < n_names && strcmp(names[k], status) != 0)
            k++;
        if (k == n_names && n_names < 16) {
            names[n_names] = status;
            counts[n_names++] = 0;
        }
        if (k < n_names)
            counts[k]++;
    }
    rt_buf tally;
    rt_buf_init(&tally, a);
    for (int32_t k = 0; k < n_names; k++)
        rt_buf_printf(&tally, "%s%d %s", k ? ", " : "", (int)counts[k], names[k]);
    // A def of a layer (o->keep_failed refused): the layer writes nothing.
    const char *kept = in_layer ? "nothing was written"
                       : o->keep_failed
                           ? rt_arena_printf(a, "their sources and report are in %s as %s.failed.*",
                                             o->out_dir, op->name)
                           : rt_arena_printf(a,
                                             "nothing was written (--keep-failed writes them as "
                                             "%s.failed.*)",
                                             op->name);
    return rt_fail(err, RT_ERR_BACKEND, RT_NOLOC, "no candidate of %s passed its check (%s); %s",
                   op->name, tally.data ? tally.data : "", kept ? kept : "");
}

static rt_status rt_driver_construct(rt_arena *a, const rt_driver_options *o, const rt_op *op,
                                     const rt_device *dev, rt_bindings *b, FILE *f, rt_err *err) {
    rt_perf_options popt;
    memset(&popt, 0, sizeof popt);
    popt.top_k = o->top_k;
    RT_TRY(rt_driver_length_dists(a, op, b, &popt, err));
    rt_buf explain;
    rt_buf_init(&explain, a);
    if (o->explain)
        popt.explain = &explain;
    // A profile whose data cannot fit in memory is refused before the construction runs.
    if (dev->devclass == RT_DEVCLASS_CPU && rt_driver_cpu_profiles(o, dev))
        RT_TRY(rt_cpu_profile_fits(a, op, b, NULL, NULL, err));
    rt_perf_result *res = NULL;
    RT_TRY(rt_perf_construct(a, op, dev, &popt, &res, err));
    if (o->explain && explain.data)
        fputs(explain.data, o->json ? stderr : f);

    rt_cpu_report *cpu = NULL;
    rt_gpu_report gpu;
    memset(&gpu, 0, sizeof gpu);
    bool is_cpu = dev->devclass == RT_DEVCLASS_CPU;
    if (is_cpu)
        RT_TRY(rt_driver_cpu_kernels(a, o, op, dev, b, res, &cpu, err));
    else
        RT_TRY(rt_driver_gpu_kernels(a, o, dev, b, res, &gpu, err));

    // Sources in rank order, and which one is the winner.
    int32_t n = is_cpu ? cpu->n : gpu.n, best;
    const char **sources;
    int32_t *ranks;
    RT_ALLOC(a, sources, n, err);
    RT_ALLOC(a, ranks, n, err);
    const char *ext = is_cpu ? cpu->ext : gpu.ext;
    for (int32_t i = 0; i < n; i++) {
        if (is_cpu) {
            sources[i] = rt_cpu_report_source(cpu, i, &ext);
            ranks[i] = cpu->cands[i].rank + 1;
        } else {
            sources[i] = gpu.cands[i].source;
            ranks[i] = gpu.cands[i].rank;
        }
    }
    int32_t winner = is_cpu ? cpu->winner : gpu.winner;
    // Profiled: the candidates were run and checked (not: --no-profile, no device present,
    // another target, too large to check). Then a winner is required: nothing passed is a
    // failure, and no file may look like a result.
    bool profiled = is_cpu ? cpu->profiled : gpu.not_profiled == NULL;
    bool failed = profiled && winner < 0;
    // Not profiled: the model's choice (on a GPU, priced with the compiled kernels' registers).
    int32_t model_top1 = is_cpu ? 0 : rt_gpu_report_model_choice(&gpu);
    best = failed ? -1 : winner >= 0 ? winner : model_top1;

    json_t *root = json_object();
    json_object_set_new(root, "rtgen", json_string(RT_VERSION_STRING));
    json_object_set_new(root, "spec", json_string(o->spec_path));
    json_object_set_new(root, "device", json_string(dev->path));
    json_object_set_new(root, "profiled", json_boolean(profiled));
    json_object_set_new(root, "winner", winner >= 0 ? json_integer(ranks[winner]) : json_null());
    if (n > 0)
        json_object_set_new(root, "model_top1", json_integer(ranks[model_top1]));
    if (!is_cpu && gpu.not_profiled)
        json_object_set_new(root, "not_profiled", json_string(gpu.not_profiled));
    if (is_cpu && cpu->not_profiled)
        json_object_set_new(root, "not_profiled", json_string(cpu->not_profiled));
    if (is_cpu)
        json_object_set_new(root, "target", cpu->target ? json_string(cpu->target) : json_null());
    json_object_set_new(root, "construction", (json_t *)rt_perf_result_to_json(res));
    json_object_set_new(root, "kernels",
                        is_cpu ? (json_t *)rt_cpu_report_to_json(cpu)
                               : (json_t *)rt_gpu_report_to_json(&gpu, res));
    char *report = rt_driver_json_text(a, root);
    if (!report)
        return rt_fail(err, RT_ERR_NOMEM, RT_NOLOC, "out of memory");
    if (!failed || o->keep_failed)
        RT_TRY(rt_driver_write_outputs(a, o, op, report, n, sources, ranks, best, ext, err));

    if (o->json) {
        fputs(report, f);
        return failed ? rt_driver_failed(a, o, op, cpu, &gpu, false, err) : RT_OK;
    }
    rt_buf table;
    rt_buf_init(&table, a);
    rt_perf_print_table(res, &table);
    if (is_cpu)
        rt_cpu_report_print(cpu, &table);
    else
        rt_gpu_report_print(&gpu, res, &table);
    if (table.data)
        fputs(table.data, f);
    if (failed) {
        if (o->keep_failed)
            fprintf(f, "report: %s/%s.failed.json\n", o->out_dir, op->name);
        fflush(f);
        return rt_driver_failed(a, o, op, cpu, &gpu, false, err);
    }
    fprintf(f, "kernel: %s/%s.%s%s\n", o->out_dir, op->name, ext,
            winner >= 0 ? "" : " (model's top-1; not profiled)");
    fprintf(f, "report: %s/%s.json\n", o->out_dir, op->name);
    return RT_OK;
}

// ---------------------------------------------------------------------------------------------
// Layers: a spec file of several defs (spec.h rt_layer), run as one chain (layer.h)
// ---------------------------------------------------------------------------------------------

// The bindings of def k where the layer's tensor called name is made (its first declaration).
static rt_bindings *rt_driver_layer_origin(const rt_layer *l, rt_layer_bindings *lb,
                                           const char *name) {
    for (int32_t i = 0; i < l->n_tensors; i++)
        if (!strcmp(l->tensors[i].name, name))
            return lb->ops[l->tensors[i].op];
    return NULL;
}

static rt_status rt_driver_layer_bind(rt_arena *a, const rt_driver_options *o, const rt_layer *l,
                                      rt_lengths_file **files, rt_layer_bindings **out,
                                      rt_err *err) {
    if (o->keep_failed)
        return rt_fail(err, RT_ERR_USAGE, RT_NOLOC,
                       "--keep-failed: not supported for layer %s (a file of several defs)",
                       l->name);
    if (o->n_trees)
        return rt_fail(err, RT_ERR_USAGE, RT_NOLOC, "--tree %s=%s: layer %s has no trees",
                       o->trees[0].name, o->trees[0].path, l->name);
    if (o->batch && o->n_lengths == 0)
        return rt_fail(err, RT_ERR_USAGE, RT_NOLOC, "--batch needs a --lengths histogram");
    rt_layer_bindings *lb = NULL;
    RT_TRY(rt_layer_bindings_new(a, l, o->seed, &lb, err));
    for (int32_t i = 0; i < o->n_lengths; i++) {
        const rt_file_binding *fb = &o->lengths[i];
        rt_status st = rt_layer_bindings_set_lengths_file(lb, fb->name, files[i], o->batch, err);
        if (st != RT_OK) {
            rt_file_error_to_option(err, "--lengths", fb->name, fb->path);
            return st;
        }
    }
    // The lengths, layouts and layer inputs; each def's own data is made where it is used.
    RT_TRY(rt_layer_bindings_prepare_inputs(lb, err));
    *out = lb;
    return RT_OK;
}

// --dry-run of a layer: each def's canonical IR in order, the lengths, the device.
static rt_status rt_driver_layer_dry_run(rt_arena *a, const rt_driver_options *o, const rt_layer *l,
                                         const rt_device *dev, rt_layer_bindings *lb, FILE *f,
                                         rt_err *err) {
    if (o->json) {
        json_t *root = json_object(), *ops = json_array();
        json_object_set_new(root, "rtgen", json_string(RT_VERSION_STRING));
        json_object_set_new(root, "layer", json_string(l->name));
        for (int32_t k = 0; k < l->n_ops; k++)
            json_array_append_new(ops, (json_t *)rt_op_to_json(l->ops[k]));
        json_object_set_new(root, "ops", ops);
        if (!o->ir_only)
            json_object_set_new(root, "device", (json_t *)rt_hal_device_to_json(dev));
        const char *text = rt_driver_json_text(a, root);
        if (!text)
            return rt_fail(err, RT_ERR_NOMEM, RT_NOLOC, "out of memory");
        fputs(text, f);
        return RT_OK;
    }
    rt_buf b;
    rt_buf_init(&b, a);
    for (int32_t k = 0; k < l->n_ops; k++) {
        rt_buf_linef(&b, 0, "# layer %s, def %d of %d", l->name, (int)k + 1, (int)l->n_ops);
        rt_op_print(l->ops[k], &b);
    }
    return rt_driver_dry_run_finish(o, dev, l, lb, NULL, &b, f, err);
}

// --interpret of a layer: the defs in order on one chain of data, each def's outputs printed.
static rt_status rt_driver_layer_interpret(rt_arena *a, const rt_layer *l, rt_layer_bindings *lb,
                                           FILE *f, rt_err *err) {
    RT_TRY(rt_layer_interp_run(lb, err));
    rt_buf out;
    rt_buf_init(&out, a);
    for (int32_t k = 0; k < l->n_ops; k++) {
        rt_buf_linef(&out, 0, "def %s:", l->ops[k]->name);
        rt_bindings_print_outputs(lb->ops[k], &out);
    }
    if (out.oom)
        return rt_fail(err, RT_ERR_NOMEM, RT_NOLOC, "out of memory");
    fputs(out.data ? out.data : "", f);
    return RT_OK;
}

// Def op of a layer through the single-op pipeline: construction, kernels, profile, on b.
static rt_status rt_driver_layer_op_on(rt_arena *a, const rt_driver_options *o, const rt_op *op,
                                       const rt_device *dev, rt_bindings *b, rt_perf_result **res,
                                       rt_cpu_report **cpu, rt_err *err) {
    rt_perf_options popt;
    memset(&popt, 0, sizeof popt);
    popt.top_k = o->top_k;
    RT_TRY(rt_driver_length_dists(a, op, b, &popt, err));
    if (rt_driver_cpu_profiles(o, dev))
        RT_TRY(rt_cpu_profile_fits(a, op, b, NULL, NULL, err));
    RT_TRY(rt_perf_construct(a, op, dev, &popt, res, err));
    RT_TRY(rt_driver_cpu_kernels(a, o, op, dev, b, *res, cpu, err));
    if ((*cpu)->profiled && (*cpu)->winner < 0)
        return rt_driver_failed(a, o, op, *cpu, NULL, true, err);
    return RT_OK;
}

// One def of a layer through the single-op pipeline: construction, kernels, profile, on def k's
// bindings made in an arena of its own (rt_layer_bindings_def) and released with its profiling
// data: a layer's profile holds one def's data at a time, not the sum over its defs.
static rt_status rt_driver_layer_op(rt_arena *a, const rt_driver_options *o, const rt_layer *l,
                                    int32_t k, const rt_device *dev, rt_layer_bindings *lb,
                                    rt_perf_result **res, rt_cpu_report **cpu, rt_err *err) {
    rt_arena *s = rt_arena_new(1 << 16);
    if (!s)
        return rt_fail(err, RT_ERR_NOMEM, RT_NOLOC, "out of memory");
    rt_bindings *b = NULL;
    rt_status st = rt_layer_bindings_def(s, lb, k, &b, err);
    if (st == RT_OK)
        st = rt_driver_layer_op_on(a, o, l->ops[k], dev, b, res, cpu, err);
    rt_arena_free(s);
    return st;
}

// Writes DIR/<layer>.json, every def's sources (<op>.<ext> for its winner or top-1,
// <op>.rankN.<ext> for the others), the winners' C (<op>.c, where the primary source is .ll)
// and the layer's entry point calling them (<layer>.c, <layer>.h: layer-emit.h), all or nothing.
static rt_status rt_driver_layer_write(rt_arena *a, const rt_driver_options *o, const rt_layer *l,
                                       rt_cpu_report *const *cpu, const char *report, rt_err *err) {
    rt_layer_c lc;
    RT_TRY(rt_layer_emit_c(a, l, cpu, NULL, &lc, err));
    rt_driver_out out;
    RT_TRY(rt_driver_out_begin(a, o->out_dir, &out, err));
    rt_status st = rt_driver_out_add(a, &out, rt_arena_printf(a, "%s.json", l->name), report, err);
    if (st == RT_OK)
        st = rt_driver_out_add(a, &out, lc.c_name, lc.c_text, err);
    if (st == RT_OK)
        st = rt_driver_out_add(a, &out, lc.h_name, lc.h_text, err);
    for (int32_t k = 0; st == RT_OK && k < l->n_ops; k++) {
        const rt_cpu_report *c = cpu[k];
        int32_t best = c->winner >= 0 ? c->winner : 0;
        for (int32_t i = 0; st == RT_OK && i < c->n; i++) {
            const char *ext, *src = rt_cpu_report_source(c, i, &ext);
            const char *name = i == best ? rt_arena_printf(a, "%s.%s", l->ops[k]->name, ext)
                                         : rt_arena_printf(a, "%s.rank%d.%s", l->ops[k]->name,
                                                           (int)c->cands[i].rank + 1, ext);
            st = !name || !src ? rt_fail(err, RT_ERR_NOMEM, RT_NOLOC, "out of memory")
                               : rt_driver_out_add(a, &out, name, src, err);
        }
        if (st == RT_OK && strcmp(c->ext, "c") != 0) // the C that <layer>.c calls
            st = rt_driver_out_add(a, &out, rt_arena_printf(a, "%s.c", l->ops[k]->name),
                                   c->cands[best].c_source, err);
    }
    if (st == RT_OK)
        st = rt_driver_out_commit(&out, err);
    if (st != RT_OK)
        rt_driver_remove_tree(out.stage, out.names, out.n_files);
    return st;
}

// The layer's JSON report: the run (per op and total) and each def's construction and kernels.
static char *rt_driver_layer_json(rt_arena *a, const rt_driver_options *o, const rt_device *dev,
                                  const rt_layer *l, rt_perf_result *const *res,
                                  rt_cpu_report *const *cpu, const rt_layer_report *run) {
    json_t *root = json_object(), *defs = json_array();
    json_object_set_new(root, "rtgen", json_string(RT_VERSION_STRING));
    json_object_set_new(root, "spec", json_string(o->spec_path));
    json_object_set_new(root, "device", json_string(dev->path));
    json_object_set_new(root, "layer",
                        run ? (json_t *)rt_layer_report_to_json(run)
                            : json_pack("{s:s, s:b, s:s}", "layer", l->name, "ran", 0, "not_run",
                                        cpu[0]->not_profiled ? cpu[0]->not_profiled
                                                             : "its defs were not profiled"));
    for (int32_t k = 0; k < l->n_ops; k++) {
        json_t *d = json_object();
        json_object_set_new(d, "def", json_string(l->ops[k]->name));
        json_object_set_new(d, "profiled", json_boolean(cpu[k]->profiled));
        json_object_set_new(d, "target",
                            cpu[k]->target ? json_string(cpu[k]->target) : json_null());
        json_object_set_new(d, "construction", (json_t *)rt_perf_result_to_json(res[k]));
        json_object_set_new(d, "kernels", (json_t *)rt_cpu_report_to_json(cpu[k]));
        json_array_append_new(defs, d);
    }
    json_object_set_new(root, "defs", defs);
    return rt_driver_json_text(a, root);
}

// ---- A layer on a GPU-class device: each def through the single-op GPU path, then the layer
// run on the device buffers (layer.h rt_layer_gpu_run) where every def was profiled.

// Writes DIR/<layer>.json and every def's sources (<op>.<ext> for its winner or top-1,
// <op>.rankN.<ext> for the others), all or nothing. No host entry point: the report's
// layer.launches lists the launch sequence (README).
static rt_status rt_driver_layer_gpu_write(rt_arena *a, const rt_driver_options *o,
                                           const rt_layer *l, rt_gpu_report *const *g,
                                           const char *report, rt_err *err) {
    rt_driver_out out;
    RT_TRY(rt_driver_out_begin(a, o->out_dir, &out, err));
    rt_status st = rt_driver_out_add(a, &out, rt_arena_printf(a, "%s.json", l->name), report, err);
    for (int32_t k = 0; st == RT_OK && k < l->n_ops; k++) {
        int32_t best = g[k]->winner >= 0 ? g[k]->winner : 0;
        for (int32_t i = 0; st == RT_OK && i < g[k]->n; i++) {
            const char *name = i == best ? rt_arena_printf(a, "%s.%s", l->ops[k]->name, g[k]->ext)
                                         : rt_arena_printf(a, "%s.rank%d.%s", l->ops[k]->name,
                                                           (int)g[k]->cands[i].rank, g[k]->ext);
            st = !name ? rt_fail(err, RT_ERR_NOMEM, RT_NOLOC, "out of memory")
                       : rt_driver_out_add(a, &out, name, g[k]->cands[i].source, err);
        }
    }
    if (st == RT_OK)
        st = rt_driver_out_commit(&out, err);
    if (st != RT_OK)
        rt_driver_remove_tree(out.stage, out.names, out.n_files);
    return st;
}

// The GPU layer's JSON report: the run (or why not) and each def's construction and kernels.
static char *rt_driver_layer_gpu_json(rt_arena *a, const rt_driver_options *o, const rt_device *dev,
                                      const rt_layer *l, rt_perf_result *const *res,
                                      rt_gpu_report *const *g, const rt_layer_report *run,
                                      const char *not_run) {
    json_t *root = json_object(), *defs = json_array();
    json_object_set_new(root, "rtgen", json_string(RT_VERSION_STRING));
    json_object_set_new(root, "spec", json_string(o->spec_path));
    json_object_set_new(root, "device", json_string(dev->path));
    json_object_set_new(
        root, "layer",
        run ? (json_t *)rt_layer_report_to_json(run)
            : json_pack("{s:s, s:b, s:s}", "layer", l->name, "ran", 0, "not_run", not_run));
    for (int32_t k = 0; k < l->n_ops; k++) {
        json_t *d = json_object();
        json_object_set_new(d, "def", json_string(l->ops[k]->name));
        json_object_set_new(d, "profiled", json_boolean(g[k]->not_profiled == NULL));
        if (g[k]->not_profiled)
            json_object_set_new(d, "not_profiled", json_string(g[k]->not_profiled));
        json_object_set_new(d, "winner",
                            g[k]->winner >= 0 ? json_integer(g[k]->cands[g[k]->winner].rank)
                                              : json_null());
        json_object_set_new(d, "construction", (json_t *)rt_perf_result_to_json(res[k]));
        json_object_set_new(d, "kernels", (json_t *)rt_gpu_report_to_json(g[k], res[k]));
        json_array_append_new(defs, d);
    }
    json_object_set_new(root, "defs", defs);
    return rt_driver_json_text(a, root);
}

// Each def constructed, emitted, compiled and (where the device is present) checked and timed as
// a single def is; *not_run NULL when every def was profiled, else why the layer cannot run.
static rt_status rt_driver_layer_gpu_defs(rt_arena *a, const rt_driver_options *o,
                                          const rt_layer *l, const rt_device *dev,
                                          rt_layer_bindings *lb, rt_perf_result **res,
                                          rt_gpu_report **g, rt_buf *table, const char **not_run,
                                          rt_err *err) {
    *not_run = NULL;
    for (int32_t k = 0; k < l->n_ops; k++) {
        const rt_op *op = l->ops[k];
        rt_perf_options popt;
        memset(&popt, 0, sizeof popt);
        popt.top_k = o->top_k;
        RT_TRY(rt_driver_length_dists(a, op, lb->ops[k], &popt, err));
        RT_TRY(rt_perf_construct(a, op, dev, &popt, &res[k], err));
        RT_ALLOC(a, g[k], 1, err);
        RT_TRY(rt_driver_gpu_kernels(a, o, dev, lb->ops[k], res[k], g[k], err));
        if (!g[k]->not_profiled && g[k]->winner < 0)
            return rt_driver_failed(a, o, op, NULL, g[k], true, err);
        if (g[k]->not_profiled && !*not_run)
            *not_run = rt_arena_printf(a, "def %s not profiled: %s", op->name, g[k]->not_profiled);
        rt_buf_linef(table, 0, "def %d of %d: %s", (int)k + 1, (int)l->n_ops, op->name);
        rt_perf_print_table(res[k], table);
        rt_gpu_report_print(g[k], res[k], table);
    }
    return RT_OK;
}

static rt_status rt_driver_layer_gpu(rt_arena *a, const rt_driver_options *o, const rt_layer *l,
                                     const rt_device *dev, rt_layer_bindings *lb, FILE *f,
                                     rt_err *err) {
    rt_perf_result **res;
    rt_gpu_report **g;
    RT_ALLOC(a, res, l->n_ops, err);
    RT_ALLOC(a, g, l->n_ops, err);
    rt_buf table;
    rt_buf_init(&table, a);
    const char *not_run = NULL;
    RT_TRY(rt_layer_bindings_prepare(lb, err)); // every def profiled on lb's own data
    RT_TRY(rt_driver_layer_gpu_defs(a, o, l, dev, lb, res, g, &table, &not_run, err));
    rt_layer_report *run = NULL;
    if (!not_run) {
        rt_gpu_runtime *rt = NULL;
        RT_TRY(rt_gpu_runtime_open(a, dev, &rt, err));
        rt_layer_options lopt = {.seed = o->seed, .check = true};
        RT_TRY(rt_layer_gpu_run(a, l, rt, (const rt_gpu_report *const *)g, lb, &lopt, &run, err));
        rt_layer_report_print(run, &table);
    } else {
        rt_buf_linef(&table, 0, "layer %s not run: %s", l->name, not_run);
    }
    char *report = rt_driver_layer_gpu_json(a, o, dev, l, res, g, run, not_run);
    if (!report || table.oom)
        return rt_fail(err, RT_ERR_NOMEM, RT_NOLOC, "out of memory");
    if (run && run->checked && !run->correct)
        return rt_fail(err, RT_ERR_BACKEND, RT_NOLOC, "layer %s: %s; nothing was written", l->name,
                       run->why);
    RT_TRY(rt_driver_layer_gpu_write(a, o, l, g, report, err));
    if (o->json) {
        fputs(report, f);
        return RT_OK;
    }
    fputs(table.data ? table.data : "", f);
    fprintf(f, "kernels: %s/<def>.%s for each def\n", o->out_dir, g[0]->ext);
    fprintf(f,
            "entry point: none for a GPU device; the launch sequence (kernel, grid, block, "
            "arguments) is in %s/%s.json, layer.launches%s\n",
            o->out_dir, l->name, run ? "" : " once the layer runs");
    fprintf(f, "report: %s/%s.json\n", o->out_dir, l->name);
    return RT_OK;
}

static rt_status rt_driver_layer_construct(rt_arena *a, const rt_driver_options *o,
                                           const rt_layer *l, const rt_device *dev,
                                           rt_layer_bindings *lb, FILE *f, rt_err *err) {
    RT_TRY(rt_layer_emit_check_names(l, err)); // before anything is constructed
    if (dev->devclass != RT_DEVCLASS_CPU)
        return rt_driver_layer_gpu(a, o, l, dev, lb, f, err);
    rt_perf_result **res;
    rt_cpu_report **cpu;
    RT_ALLOC(a, res, l->n_ops, err);
    RT_ALLOC(a, cpu, l->n_ops, err);
    rt_buf table;
    rt_buf_init(&table, a);
    bool profiled = true;
    for (int32_t k = 0; k < l->n_ops; k++) {
        RT_TRY(rt_driver_layer_op(a, o, l, k, dev, lb, &res[k], &cpu[k], err));
        profiled = profiled && cpu[k]->profiled;
        rt_buf_linef(&table, 0, "def %d of %d: %s", (int)k + 1, (int)l->n_ops, l->ops[k]->name);
        rt_perf_print_table(res[k], &table);
        rt_cpu_report_print(cpu[k], &table);
    }
    rt_layer_report *run = NULL;
    if (profiled) {
        rt_layer_options lopt = {.seed = o->seed, .check = true};
        RT_TRY(rt_layer_run(a, l, cpu, lb, &lopt, &run, err));
        rt_layer_report_print(run, &table);
    } else {
        rt_buf_linef(&table, 0, "layer %s not run: its defs were not profiled", l->name);
    }
    char *report = rt_driver_layer_json(a, o, dev, l, res, cpu, run);
    if (!report || table.oom)
        return rt_fail(err, RT_ERR_NOMEM, RT_NOLOC, "out of memory");
    if (run && run->checked && !run->correct)
        return rt_fail(err, RT_ERR_BACKEND, RT_NOLOC, "layer %s: %s; nothing was written", l->name,
                       run->why);
    RT_TRY(rt_driver_layer_write(a, o, l, cpu, report, err));
    if (o->json) {
        fputs(report, f);
        return RT_OK;
    }
    fputs(table.data ? table.data : "", f);
    fprintf(f, "kernels: %s/<def>.%s for each def\n", o->out_dir, cpu[0]->ext);
    fprintf(f, "entry point: %s/%s.c, %s.h (compile with the defs' %s<def>.c)\n", o->out_dir,
            l->name, l->name, strcmp(cpu[0]->ext, "c") ? "C kernels " : "");
    fprintf(f, "report: %s/%s.json\n", o->out_dir, l->name);
    return RT_OK;
}

static rt_status rt_driver_run_layer(rt_arena *a, const rt_driver_options *o, const rt_device *dev,
                                     rt_lengths_file **files, const char *text, rt_layer *l,
                                     FILE *f, rt_err *err) {
    rt_size_binding *sets = NULL;
    int32_t n_sets = 0;
    RT_TRY(rt_driver_infer_sizes(a, o, l->ops, l->n_ops, files, &sets, &n_sets, err));
    if (n_sets > o->n_sets)
        RT_TRY(rt_spec_parse_layer(a, text, o->spec_path, sets, n_sets, &l, err));
    rt_layer_bindings *lb = NULL;
    RT_TRY(rt_driver_layer_bind(a, o, l, files, &lb, err));
    if (o->dry_run)
        return rt_driver_layer_dry_run(a, o, l, dev, lb, f, err);
    if (o->interpret)
        return rt_driver_layer_interpret(a, l, lb, f, err);
    return rt_driver_layer_construct(a, o, l, dev, lb, f, err);
}

rt_status rt_driver_run(rt_arena *a, const rt_driver_options *o, FILE *f, rt_err *err) {
    rt_device *dev;
    RT_ALLOC(a, dev, 1, err);
    RT_TRY(rt_driver_load_device(o, dev, err));
    rt_lengths_file **files = NULL;
    RT_TRY(rt_driver_read_lengths(a, o, &files, err));
    char *text;
    RT_TRY(rt_read_file(a, o->spec_path, &text, NULL, err));
    rt_layer *layer;
    RT_TRY(rt_spec_parse_layer(a, text, o->spec_path, o->sets, o->n_sets, &layer, err));
    if (layer->n_ops > 1)
        return rt_driver_run_layer(a, o, dev, files, text, layer, f, err);
    rt_op *op = layer->ops[0];
    rt_size_binding *sets = NULL;
    int32_t n_sets = 0;
    RT_TRY(rt_driver_infer_sizes(a, o, &op, 1, files, &sets, &n_sets, err));
    rt_tree_data **trees = NULL;
    RT_TRY(
        rt_driver_tree_sizes(a, o, op, !o->dry_run && !o->interpret, &sets, &n_sets, &trees, err));
    if (n_sets > o->n_sets)
        RT_TRY(rt_spec_parse(a, text, o->spec_path, sets, n_sets, &op, err));
    rt_bindings *b = NULL;
    RT_TRY(rt_driver_bind(a, o, op, files, trees, &b, err));
    if (o->dry_run)
        return rt_driver_dry_run(a, o, op, dev, b, f, err);
    if (o->interpret)
        return rt_driver_interpret(a, op, b, f, err);
    return rt_driver_construct(a, o, op, dev, b, f, err);
}
