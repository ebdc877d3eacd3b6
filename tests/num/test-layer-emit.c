// test-layer-emit.c: the layer's entry point as C (layer-emit.h), end to end. For each layer
// (examples/layers/ffn.spec and the four transformer encoder layers — CORA's and BERT-base's
// configurations, each also causal — at small sizes) the defs are
// constructed and profiled on one ragged batch, the layer is run by the library (rt_layer_run,
// checked against the interpreter), and <layer>.c + <layer>.h are emitted next to the winners'
// C. Those files and a driver written here (it includes <layer>.h, reads the lengths and inputs,
// allocates them by the header's element counts, calls the entry point, writes the outputs) are
// compiled with `cc -O2 -fopenmp` and run on random inputs over several batches: the profiled
// one (compared with the library's outputs too), lengths 1 and the maximum, all equal, with
// empty and longer sequences than the profiled batch. Every layer output must equal the
// interpreter's within the tolerance table; a negative length makes the entry point return -1.
// Skips (77) without a C compiler.
#include "test.h"
#include "num-host.h"

#include "layer.h"
#include "layer-emit.h"
#include "compare.h"
#include "interp.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#define NB 4 // the batch of every case (--set B=4)

typedef struct emit_case {
    const char *spec;
    rt_size_binding sets[8];
    int32_t n_sets;
} emit_case;

static const char *cc_path(void) {
    const char *cc = getenv("CC");
    return cc && *cc ? cc : "cc";
}

static bool write_file(const char *dir, const char *name, const char *text) {
    char path[1024];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    FILE *f = fopen(path, "w");
    if (!f)
        return false;
    bool ok = fputs(text, f) >= 0;
    return fclose(f) == 0 && ok;
}

// The layer's parameters in the entry point's order: inputs, then outputs.
static int32_t params_of(const rt_layer *l, int32_t *idx) {
    int32_t n = 0;
    for (int32_t pass = 0; pass < 2; pass++)
        for (int32_t i = 0; i < l->n_tensors; i++)
            if (pass == 0 ? l->tensors[i].is_input : l->tensors[i].is_output)
                idx[n++] = i;
    return n;
}

static bool is_length(const rt_layer *l, int32_t i) {
    return l->tensors[i].is_input &&
           l->ops[l->tensors[i].op]->tensors[l->tensors[i].tensor].is_length;
}

// driver.c: argv[1] the inputs (each length tensor: NB int32; each other input: its elements
// as float), argv[2] the outputs written (float); exits with the entry point's status & 255.
static const char *driver_text(rt_arena *a, const rt_layer *l, const rt_layer_c *lc) {
    int32_t idx[64], n = params_of(l, idx);
    rt_buf b;
    rt_buf_init(&b, a);
    rt_buf_printf(&b, "#include \"%s\"\n#include <stdio.h>\n#include <stdlib.h>\n", lc->h_name);
    rt_buf_puts(&b, "int main(int argc, char **argv) {\n    (void)argc;\n"
                    "    FILE *in = fopen(argv[1], \"rb\"), *out = fopen(argv[2], \"wb\");\n"
                    "    if (!in || !out)\n        return 100;\n");
    for (int32_t j = 0; j < n; j++) {
        int32_t i = idx[j];
        const char *nm = l->tensors[i].name;
        if (is_length(l, i)) {
            rt_buf_printf(&b, "    int32_t *%s = malloc(%d * sizeof(int32_t));\n", nm, NB);
            rt_buf_printf(&b, "    if (fread(%s, sizeof(int32_t), %d, in) != %d)\n", nm, NB, NB);
            rt_buf_puts(&b, "        return 101;\n");
            continue;
        }
        rt_buf_printf(&b, "    int64_t n_%s = %s_elems_%s(len);\n", nm, lc->fn, nm);
        rt_buf_printf(&b, "    float *%s = malloc((n_%s > 0 ? n_%s : 1) * sizeof(float));\n", nm,
                      nm, nm);
        if (l->tensors[i].is_input)
            rt_buf_printf(&b,
                          "    if (n_%s > 0 && fread(%s, sizeof(float), n_%s, in) != "
                          "(size_t)n_%s)\n        return 102;\n",
                          nm, nm, nm, nm);
    }
    rt_buf_printf(&b, "    int rc = %s(", lc->fn);
    for (int32_t j = 0; j < n; j++)
        rt_buf_printf(&b, "%s%s", j ? ", " : "", l->tensors[idx[j]].name);
    rt_buf_puts(&b, ");\n    if (rc != 0)\n        return rc & 255;\n");
    for (int32_t j = 0; j < n; j++)
        if (l->tensors[idx[j]].is_output)
            rt_buf_printf(&b, "    fwrite(%s, sizeof(float), n_%s, out);\n",
                          l->tensors[idx[j]].name, l->tensors[idx[j]].name);
    rt_buf_puts(&b, "    return fclose(out) != 0 ? 103 : 0;\n}\n");
    return b.oom ? NULL : b.data;
}

static int run_cmd(const char *cmd) {
    int st = system(cmd);
    return st == -1 || !WIFEXITED(st) ? -1 : WEXITSTATUS(st);
}

// The layer's bindings on the given lengths (seed: the inputs), prepared.
static rt_status bind(rt_arena *a, const rt_layer *l, const int32_t *len, uint64_t seed,
                      rt_layer_bindings **out, rt_err *err) {
    RT_TRY(rt_layer_bindings_new(a, l, seed, out, err));
    RT_TRY(rt_bindings_set_lengths((*out)->ops[0], "len", len, NB, err));
    return rt_layer_bindings_prepare(*out, err);
}

// Writes lb's inputs for the driver; returns false on an I/O error.
static bool write_inputs(const rt_layer *l, rt_layer_bindings *lb, const char *path) {
    FILE *f = fopen(path, "wb");
    if (!f)
        return false;
    int32_t idx[64], n = params_of(l, idx);
    for (int32_t j = 0; j < n; j++) {
        const rt_layer_tensor *lt = &l->tensors[idx[j]];
        if (!lt->is_input)
            continue;
        const rt_tensor_data *td = &lb->ops[lt->op]->tensors[lt->tensor];
        for (int64_t e = 0; e < td->layout.elems; e++) {
            if (is_length(l, idx[j])) {
                int32_t v = (int32_t)td->data[e];
                fwrite(&v, sizeof v, 1, f);
            } else {
                float v = (float)td->data[e];
                fwrite(&v, sizeof v, 1, f);
            }
        }
    }
    return fclose(f) == 0;
}

// Reads the driver's outputs and compares each with want (the interpreter's or the library's
// outputs, in lb); false (with a line) when one is rejected or the sizes differ.
static bool outputs_match(rt_arena *a, const rt_layer *l, rt_layer_bindings *want, const char *path,
                          const char *what) {
    FILE *f = fopen(path, "rb");
    if (!f)
        return false;
    bool ok = true;
    for (int32_t i = 0; i < l->n_tensors; i++) {
        const rt_layer_tensor *lt = &l->tensors[i];
        if (!lt->is_output)
            continue;
        const rt_tensor_data *td = &want->ops[lt->op]->tensors[lt->tensor];
        int64_t n = td->layout.elems;
        double *got = rt_arena_alloc(a, sizeof(double) * (size_t)(n + 1));
        for (int64_t e = 0; e < n; e++) {
            float v;
            if (fread(&v, sizeof v, 1, f) != 1) {
                fprintf(stderr, "%s: output %s: %lld elements expected, %lld read\n", what,
                        lt->name, (long long)n, (long long)e);
                fclose(f);
                return false;
            }
            got[e] = v;
        }
        rt_compare_result cr;
        rt_compare_data(td->data, got, n, &cr);
        if (!rt_compare_accept(&cr, l->ops[lt->op]->tensors[lt->tensor].dtype)) {
            fprintf(stderr, "%s: output %s differs: max abs error %.3g at %lld, nmse %.3g\n", what,
                    lt->name, cr.max_abs_err, (long long)cr.worst_index, cr.nmse);
            ok = false;
        }
    }
    if (fgetc(f) != EOF) {
        fprintf(stderr, "%s: the driver wrote more than the outputs\n", what);
        ok = false;
    }
    fclose(f);
    return ok;
}

// Constructs and profiles every def on lb, runs the layer in the library (checked).
static rt_status build_layer(rt_arena *a, const rt_device *dev, const rt_layer *l,
                             rt_layer_bindings *lb, rt_cpu_report **cpu, rt_err *err) {
    for (int32_t k = 0; k < l->n_ops; k++) {
        rt_perf_result *perf = NULL;
        rt_perf_options popt = {.top_k = 1};
        rt_cpu_options copt = {
            .profile = true, .budget_ms = 1, .threads = 2, .emit = RT_CPU_EMIT_C};
        RT_TRY(rt_perf_construct(a, l->ops[k], dev, &popt, &perf, err));
        RT_TRY(rt_cpu_build_and_profile(a, l->ops[k], dev, lb->ops[k], perf, &copt, &cpu[k], err));
    }
    rt_layer_options lopt = {.budget_ms = 1, .seed = 11, .check = true};
    rt_layer_report *r = NULL;
    RT_TRY(rt_layer_run(a, l, cpu, lb, &lopt, &r, err));
    if (!r->correct)
        return rt_fail(err, RT_ERR_BACKEND, RT_NOLOC, "the library's layer run: %s", r->why);
    return RT_OK;
}

// Writes the layer's C, the winners' C and the driver into dir and compiles them.
static bool compile_layer(rt_arena *a, const rt_layer *l, rt_cpu_report **cpu, const char *dir,
                          rt_err *err) {
    rt_layer_c lc;
    if (rt_layer_emit_c(a, l, cpu, NULL, &lc, err) != RT_OK)
        return false;
    const char *drv = driver_text(a, l, &lc);
    bool ok = drv && write_file(dir, lc.c_name, lc.c_text) &&
              write_file(dir, lc.h_name, lc.h_text) && write_file(dir, "driver.c", drv);
    rt_buf cmd;
    rt_buf_init(&cmd, a);
    rt_buf_printf(&cmd, "cd '%s' && %s -O2 -fopenmp -o driver driver.c %s", dir, cc_path(),
                  lc.c_name);
    for (int32_t k = 0; ok && k < l->n_ops; k++) {
        const char *name = rt_arena_printf(a, "%s.c", l->ops[k]->name);
        ok = write_file(dir, name, cpu[k]->cands[cpu[k]->winner].c_source);
        rt_buf_printf(&cmd, " %s", name);
    }
    rt_buf_puts(&cmd, " -lm");
    if (ok && run_cmd(cmd.data) != 0) {
        fprintf(stderr, "%s: %s failed\n", l->name, cmd.data);
        ok = false;
    }
    return ok;
}

// Runs the compiled driver on lb's inputs (killed after 20 s: 124); its exit status.
static int run_driver(const rt_layer *l, rt_layer_bindings *lb, const char *dir) {
    char in[1024], cmd[3200];
    snprintf(in, sizeof in, "%s/in.bin", dir);
    if (!write_inputs(l, lb, in))
        return -1;
    snprintf(cmd, sizeof cmd, "cd '%s' && OMP_NUM_THREADS=2 timeout 20 ./driver in.bin out.bin",
             dir);
    return run_cmd(cmd);
}

static void emit_case_run(const rt_device *dev, const emit_case *ec, const char *tmp) {
    rt_arena *a = rt_arena_new(1 << 20);
    rt_err err = {0};
    rt_layer *l = NULL;
    rt_layer_bindings *lb = NULL;
    rt_cpu_report *cpu[16] = {0};
    static const int32_t profiled[NB] = {1, 7, 3, 7}; // 1 and the maximum
    static const int32_t batches[][NB] = {
        {1, 7, 3, 7},  // the profiled batch
        {5, 5, 5, 5},  // all equal
        {7, 1, 7, 1},  // 1 and the maximum, another order
        {0, 1, 11, 2}, // an empty sequence, one longer than any profiled
    };
    char dir[1024], out[1100];
    const char *base = strrchr(ec->spec, '/');
    snprintf(dir, sizeof dir, "%s/%s", tmp, base ? base + 1 : ec->spec);
    snprintf(out, sizeof out, "%s/out.bin", dir);
    mkdir(dir, 0700);
    rt_status st = rt_spec_load_layer(a, ec->spec, ec->sets, ec->n_sets, &l, &err);
    if (st == RT_OK)
        st = bind(a, l, profiled, 5, &lb, &err);
    if (st == RT_OK)
        st = build_layer(a, dev, l, lb, cpu, &err);
    if (st != RT_OK) {
        fprintf(stderr, "%s: %s\n", ec->spec, err.msg);
        RT_EXPECT(0);
        rt_arena_free(a);
        return;
    }
    bool built = compile_layer(a, l, cpu, dir, &err);
    if (!built)
        fprintf(stderr, "%s: %s\n", ec->spec, err.msg);
    RT_EXPECT(built);
    // The profiled batch against the library's outputs (lb holds them after rt_layer_run).
    if (built) {
        RT_EXPECT_EQ(run_driver(l, lb, dir), 0);
        RT_EXPECT(outputs_match(a, l, lb, out, "the library's batch, against rt_layer_run"));
    }
    for (size_t i = 0; built && i < sizeof batches / sizeof batches[0]; i++) {
        rt_layer_bindings *ref = NULL;
        st = bind(a, l, batches[i], 100 + i, &ref, &err);
        if (st == RT_OK)
            st = rt_layer_interp_run(ref, &err);
        RT_EXPECT_EQ(st, RT_OK);
        if (st != RT_OK) {
            fprintf(stderr, "%s: %s\n", ec->spec, err.msg);
            break;
        }
        RT_EXPECT_EQ(run_driver(l, ref, dir), 0);
        char what[128];
        snprintf(what, sizeof what, "%s, batch %zu, against the interpreter", l->name, i);
        RT_EXPECT(outputs_match(a, l, ref, out, what));
    }
    // A negative length: -1 (exit status 255), nothing run.
    if (built) {
        rt_layer_bindings *bad = NULL;
        RT_EXPECT_EQ(bind(a, l, profiled, 9, &bad, &err), RT_OK);
        rt_tensor_data *len = rt_bindings_data(bad->ops[0], "len");
        len->data[2] = -3;
        RT_EXPECT_EQ(run_driver(l, bad, dir), 255);
    }
    rt_arena_free(a);
}

int main(void) {
    rt_device dev;
    if (!rt_num_host(&dev))
        return 77;
    char cmd[640];
    snprintf(cmd, sizeof cmd, "%s --version >/dev/null 2>&1", cc_path());
    if (run_cmd(cmd) != 0) {
        fprintf(stderr, "no C compiler (%s)\n", cc_path());
        return 77;
    }
    // The scratch folder ($TMPDIR, else /tmp): the emitted C, its objects and the drivers.
    const char *td = getenv("TMPDIR");
    char tmp[512];
    snprintf(tmp, sizeof tmp, "%s/rt-layer-emit-XXXXXX", td && *td ? td : "/tmp");
    if (!mkdtemp(tmp)) {
        perror(tmp);
        return 1;
    }
    static const emit_case cases[] = {
        {"examples/layers/ffn.spec", {{"B", NB}, {"D", 24}, {"F", 40}}, 3},
        // the encoder layers at small sizes, each file with other heads and widths
        {"examples/layers/cora_encoder.spec",
         {{"B", NB}, {"M", 32}, {"H", 2}, {"D", 16}, {"F", 48}},
         5},
        {"examples/layers/cora_encoder_causal.spec",
         {{"B", NB}, {"M", 32}, {"H", 2}, {"D", 16}, {"F", 48}},
         5},
        {"examples/layers/bert_encoder.spec",
         {{"B", NB}, {"M", 24}, {"H", 3}, {"D", 8}, {"F", 40}},
         5},
        {"examples/layers/bert_encoder_causal.spec",
         {{"B", NB}, {"M", 24}, {"H", 3}, {"D", 8}, {"F", 40}},
         5},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        emit_case_run(&dev, &cases[i], tmp);
    if (rt_test_failures == 0) {
        snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmp);
        run_cmd(cmd);
    } else {
        fprintf(stderr, "files kept in %s\n", tmp);
    }
    return rt_test_finish("test-layer-emit");
}
