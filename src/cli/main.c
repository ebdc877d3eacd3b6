// main.c: the rtgen command line. Parses options (getopt_long), loads the device (INI or the
// detected host) and the op-spec, binds ragged lengths and trees, then either prints the
// canonical IR and device summary (--dry-run) or runs the pipeline. The only place that prints
// errors: `FILE:LINE:COL: error: ...` for inputs, `rtgen: error: ...` for options.
#include "rt.h"
#include "spec.h"
#include "hal.h"
#include "interp.h"
#include "driver.h"

#include <errno.h>
#include <getopt.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void rt_main_usage(FILE *f) {
    fputs("usage: rtgen [--device=FILE.ini] [options] OP.spec\n"
          "\n"
          "Constructs hardware-aligned tile programs for one tensor operator on one device,\n"
          "ranks them with a micro-performance model and emits the top K kernels.\n"
          "\n"
          "options:\n"
          "  --device=FILE.ini    device description (default: the host CPU; see below)\n"
          "  --top-k=N            number of ranked candidates to keep (default 10)\n"
          "  --emit=TARGET        cuda|hip|opencl|c|llvm (default: the device's class)\n"
          "  --set NAME=VALUE     bind a size symbol (overrides 'size' lines)\n"
          "  --lengths NAME=FILE  bind a ragged length tensor: one integer per line, or a\n"
          "                       'length count' histogram sampled with --batch and --seed\n"
          "  --batch=B            histogram sample count (default: the length tensor's extent)\n"
          "  --seed=S             seed of input and length sampling (default 1)\n"
          "  --tree NAME=FILE     bind a tree parameter: one node per line 'id child0 child1'\n"
          "  -o DIR               output directory (default ./rtgen-out/)\n"
          "  --profile            compile, check and time the top K on the device\n"
          "  --no-profile         only construct and emit\n"
          "  --keep-failed        when no candidate passes its check (exit 3), still write\n"
          "                       them, as OP.failed.json and OP.failed.rankN.EXT\n"
          "  --json               machine-readable report on stdout\n"
          "  --explain            print the construction trace\n"
          "  --dry-run            print the canonical IR and the device summary; write nothing\n"
          "  --ir-only            with --dry-run: print only the IR\n"
          "  --interpret          run the reference interpreter on seeded inputs and print a\n"
          "                       summary of every output (the numerical oracle)\n"
          "  --verbose            add where in rtgen an error was raised\n"
          "  -h, --help           this text\n"
          "  --version            version\n"
          "\n"
          "The default device is the first of: the file $RTGEN_HOST_INI names; the file\n"
          "$XDG_CONFIG_HOME/rtgen/host.ini (~/.config/rtgen/host.ini when XDG_CONFIG_HOME is\n"
          "unset), where `rtcalib -o` can write a full calibration; the detected host CPU, whose\n"
          "clock, f32 peak and DRAM and last-level-cache bandwidths a short probe measures on\n"
          "first use (a few tenths of a second) and caches in $XDG_CACHE_HOME/rtgen/\n"
          "(~/.cache/rtgen/; delete the file to measure again). RTGEN_NO_PROBE=1 skips the\n"
          "probe. The device's clock, peaks and bandwidths print as \"measured DATE\" or\n"
          "\"nominal\".\n"
          "\n"
          "exit codes: 0 success, 1 bad input, 2 usage, 3 backend failure or no candidate\n"
          "passed its check, 4 no candidate fits the device or the profile's data does not fit\n"
          "in memory\n",
          f);
}

enum {
    OPT_DEVICE = 256,
    OPT_TOPK,
    OPT_EMIT,
    OPT_SET,
    OPT_LENGTHS,
    OPT_BATCH,
    OPT_SEED,
    OPT_TREE,
    OPT_PROFILE,
    OPT_NO_PROFILE,
    OPT_KEEP_FAILED,
    OPT_JSON,
    OPT_EXPLAIN,
    OPT_DRY_RUN,
    OPT_IR_ONLY,
    OPT_INTERPRET,
    OPT_VERBOSE,
    OPT_VERSION,
};

// Strict base-10 integer in [lo, hi] for option values.
static rt_status rt_main_parse_int(const char *opt, const char *text, int64_t lo, int64_t hi,
                                   int64_t *out, rt_err *err) {
    char *end = NULL;
    errno = 0;
    long long v = strtoll(text, &end, 10);
    if (!*text || *end || errno == ERANGE || text[0] == ' ' || text[0] == '+')
        return rt_fail(err, RT_ERR_USAGE, RT_NOLOC, "%s: expected an integer, got \"%s\"", opt,
                       text);
    if (v < lo || v > hi)
        return rt_fail(err, RT_ERR_USAGE, RT_NOLOC, "%s: %lld is out of range [%lld, %lld]", opt, v,
                       (long long)lo, (long long)hi);
    *out = v;
    return RT_OK;
}

// Splits "NAME=VALUE"; NAME must be an identifier and VALUE non-empty.
static rt_status rt_main_split_binding(rt_arena *a, const char *opt, const char *arg,
                                       const char **name, const char **value, rt_err *err) {
    const char *eq = strchr(arg, '=');
    bool ok = eq && eq != arg && eq[1] != '\0';
    for (const char *p = arg; ok && p < eq; p++)
        ok = (*p == '_' || (*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') ||
              (p > arg && *p >= '0' && *p <= '9'));
    if (!ok)
        return rt_fail(err, RT_ERR_USAGE, RT_NOLOC, "%s: expected NAME=VALUE, got \"%s\"", opt,
                       arg);
    *name = rt_arena_strndup(a, arg, (size_t)(eq - arg));
    *value = eq + 1;
    if (!*name)
        return rt_fail(err, RT_ERR_NOMEM, RT_NOLOC, "out of memory");
    return RT_OK;
}

static rt_status rt_main_parse_args(rt_arena *a, int argc, char **argv, rt_driver_options *o,
                                    bool *exit_now, rt_err *err) {
    static const struct option longopts[] = {
        {"device", required_argument, NULL, OPT_DEVICE},
        {"top-k", required_argument, NULL, OPT_TOPK},
        {"emit", required_argument, NULL, OPT_EMIT},
        {"set", required_argument, NULL, OPT_SET},
        {"lengths", required_argument, NULL, OPT_LENGTHS},
        {"batch", required_argument, NULL, OPT_BATCH},
        {"seed", required_argument, NULL, OPT_SEED},
        {"tree", required_argument, NULL, OPT_TREE},
        {"profile", no_argument, NULL, OPT_PROFILE},
        {"no-profile", no_argument, NULL, OPT_NO_PROFILE},
        {"keep-failed", no_argument, NULL, OPT_KEEP_FAILED},
        {"json", no_argument, NULL, OPT_JSON},
        {"explain", no_argument, NULL, OPT_EXPLAIN},
        {"dry-run", no_argument, NULL, OPT_DRY_RUN},
        {"ir-only", no_argument, NULL, OPT_IR_ONLY},
        {"interpret", no_argument, NULL, OPT_INTERPRET},
        {"verbose", no_argument, NULL, OPT_VERBOSE},
        {"help", no_argument, NULL, 'h'},
        {"version", no_argument, NULL, OPT_VERSION},
        {NULL, 0, NULL, 0},
    };
    RT_ALLOC(a, o->sets, argc, err);
    RT_ALLOC(a, o->lengths, argc, err);
    RT_ALLOC(a, o->trees, argc, err);
    opterr = 0;
    optind = 1;
    int c;
    while ((c = getopt_long(argc, argv, ":o:h", longopts, NULL)) != -1) {
        int64_t v;
        const char *name, *value;
        switch (c) {
        case OPT_DEVICE:
            o->device_path = optarg;
            break;
        case OPT_TOPK:
            RT_TRY(rt_main_parse_int("--top-k", optarg, 1, 1000, &v, err));
            o->top_k = (int32_t)v;
            break;
        case OPT_EMIT:
            if (strcmp(optarg, "cuda") && strcmp(optarg, "hip") && strcmp(optarg, "opencl") &&
                strcmp(optarg, "c") && strcmp(optarg, "llvm"))
                return rt_fail(err, RT_ERR_USAGE, RT_NOLOC,
                               "--emit: unknown target \"%s\" (expected cuda, hip, opencl, c or "
                               "llvm)",
                               optarg);
            o->emit = optarg;
            break;
        case OPT_SET:
            RT_TRY(rt_main_split_binding(a, "--set", optarg, &name, &value, err));
            RT_TRY(rt_main_parse_int("--set", value, 1, INT64_MAX / 4, &v, err));
            for (int32_t i = 0; i < o->n_sets; i++)
                if (!strcmp(o->sets[i].name, name))
                    return rt_fail(err, RT_ERR_USAGE, RT_NOLOC, "--set %s given twice", name);
            o->sets[o->n_sets].name = name;
            o->sets[o->n_sets++].value = v;
            break;
        case OPT_LENGTHS:
        case OPT_TREE: {
            const char *opt = c == OPT_TREE ? "--tree" : "--lengths";
            RT_TRY(rt_main_split_binding(a, opt, optarg, &name, &value, err));
            rt_file_binding *list = c == OPT_TREE ? o->trees : o->lengths;
            int32_t *n = c == OPT_TREE ? &o->n_trees : &o->n_lengths;
            for (int32_t i = 0; i < *n; i++)
                if (!strcmp(list[i].name, name))
                    return rt_fail(err, RT_ERR_USAGE, RT_NOLOC, "%s %s given twice", opt, name);
            list[*n].name = name;
            list[(*n)++].path = value;
            break;
        }
        case OPT_BATCH:
            RT_TRY(rt_main_parse_int("--batch", optarg, 1, 1 << 24, &v, err));
            o->batch = v;
            break;
        case OPT_SEED:
            RT_TRY(rt_main_parse_int("--seed", optarg, 0, INT64_MAX, &v, err));
            o->seed = (uint64_t)v;
            break;
        case 'o':
            if (!*optarg)
                return rt_fail(err, RT_ERR_USAGE, RT_NOLOC, "-o: empty directory name");
            o->out_dir = optarg;
            break;
        case OPT_PROFILE:
            o->profile = 1;
            break;
        case OPT_NO_PROFILE:
            o->profile = 0;
            break;
        case OPT_KEEP_FAILED:
            o->keep_failed = true;
            break;
        case OPT_JSON:
            o->json = true;
            break;
        case OPT_EXPLAIN:
            o->explain = true;
            break;
        case OPT_DRY_RUN:
            o->dry_run = true;
            break;
        case OPT_IR_ONLY:
            o->ir_only = true;
            break;
        case OPT_INTERPRET:
            o->interpret = true;
            break;
        case OPT_VERBOSE:
            o->verbose = true;
            break;
        case 'h':
            rt_main_usage(stdout);
            *exit_now = true;
            return RT_OK;
        case OPT_VERSION:
            printf("rtgen %s\n", RT_VERSION_STRING);
            *exit_now = true;
            return RT_OK;
        case ':':
            return rt_fail(err, RT_ERR_USAGE, RT_NOLOC, "option '%s' needs a value",
                           argv[optind - 1]);
        default:
            return rt_fail(err, RT_ERR_USAGE, RT_NOLOC, "unknown option '%s' (see rtgen --help)",
                           argv[optind - 1]);
        }
    }
    if (o->ir_only && !o->dry_run)
        return rt_fail(err, RT_ERR_USAGE, RT_NOLOC, "--ir-only needs --dry-run");
    if (optind == argc)
        return rt_fail(err, RT_ERR_USAGE, RT_NOLOC, "no op-spec file given (see rtgen --help)");
    if (argc - optind > 1)
        return rt_fail(err, RT_ERR_USAGE, RT_NOLOC,
                       "one op-spec file expected, got %d (\"%s\" and \"%s\")", argc - optind,
                       argv[optind], argv[optind + 1]);
    o->spec_path = argv[optind];
    return RT_OK;
}

int main(int argc, char **argv) {
    rt_err err;
    rt_err_clear(&err);
    rt_arena *a = rt_arena_new(1 << 20);
    if (!a) {
        fputs("rtgen: error: out of memory\n", stderr);
        return 1;
    }
    rt_driver_options o;
    rt_driver_options_init(&o);
    bool exit_now = false;
    rt_status st = rt_main_parse_args(a, argc, argv, &o, &exit_now, &err);
    if (st == RT_OK && !exit_now)
        st = rt_driver_run(a, &o, stdout, &err);
    int code = 0;
    if (st != RT_OK) {
        char line[1024];
        rt_err_format(&err, "rtgen", o.verbose, line, sizeof line);
        fprintf(stderr, "%s\n", line);
        if (err.log && o.verbose)
            fprintf(stderr, "%s\n", err.log);
        code = rt_status_exit_code(st);
    }
    rt_arena_free(a);
    return code;
}
