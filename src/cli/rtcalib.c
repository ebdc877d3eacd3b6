// rtcalib.c: the calibration CLI. It starts from a device (--device=BASE.ini, or the detected
// host CPU), runs the host-CPU microbenchmarks of hal/calib-cpu.c with a progress display,
// replaces the values it measured (each marked "source = measured: rtcalib DATE"), refuses the
// ones whose repeats spread too much, and writes the device as INI through hal-ini-write.c:
// atomically to -o OUT.ini (a signal removes the temporary file), or to stdout.
// Exit codes as rtgen's: 0 ok, 1 bad input, 2 usage, 3 backend.
#include "calib.h"

#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define RT_CALIB_PROG "rtcalib"

typedef struct rt_calib_cli {
    const char *device_path; // NULL: the detected host
    const char *out_path;    // NULL or "-": stdout
    bool quick;
    int32_t repeats;
    double max_spread_pct;
    int32_t threads;
    bool verbose;
} rt_calib_cli;

static void rt_calib_usage(FILE *f) {
    fputs("usage: rtcalib [--device=BASE.ini] [-o OUT.ini] [options]\n"
          "\n"
          "Measures the host CPU (the clock under load, FMA latency and pipes per core, FMA\n"
          "peaks per data type, AMX and AVX512-BF16 where present, triad bandwidth of every\n"
          "memory level and a DRAM curve over access sizes, load and store throughput,\n"
          "thread-pool overheads) and writes a device INI that starts from\n"
          "BASE (default: the detected host) with the measured values replaced and marked\n"
          "\"source = measured: rtcalib DATE\". rtgen's default device is the file\n"
          "$XDG_CONFIG_HOME/rtgen/host.ini (~/.config/rtgen/host.ini) when it exists.\n"
          "\n"
          "options:\n"
          "  --device=FILE      start from this device file instead of the detected host\n"
          "  -o, --output=FILE  write the INI here, atomically (default: standard output)\n"
          "  --repeat=N         samples per probe, 2 to 256 (default 5)\n"
          "  --max-spread=PCT   refuse values whose (max-min)/median exceeds PCT (default 10)\n"
          "  --threads=N        threads for whole-device values (default: one per core)\n"
          "  --quick            tiny probes, for tests (a few seconds; values are rough)\n"
          "  --verbose          say where in rtgen's source an error was raised\n"
          "  -h, --help         this text\n"
          "  --version          print the version\n"
          "\n"
          "exit codes: 0 written, 1 bad input, 2 usage, 3 backend failure\n",
          f);
}

static int rt_calib_print_err(const rt_err *err, bool verbose) {
    char buf[1200];
    rt_err_format(err, RT_CALIB_PROG, verbose, buf, sizeof buf);
    fprintf(stderr, "%s\n", buf);
    return rt_status_exit_code(err->status);
}

static int rt_calib_usage_error(const char *fmt, ...) RT_PRINTF(1, 2);
static int rt_calib_usage_error(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    fputs(RT_CALIB_PROG ": error: ", stderr);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
    return 2;
}

// Strict base-10 integer in [lo, hi]; prints the usage error and returns false otherwise.
static bool rt_calib_int_opt(const char *opt, const char *s, long lo, long hi, int32_t *out) {
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (!*s || *end || errno == ERANGE || (s[0] == '0' && s[1]) || s[0] == '+' || s[0] == ' ') {
        rt_calib_usage_error("%s: expected an integer, got \"%s\"", opt, s);
        return false;
    }
    if (v < lo || v > hi) {
        rt_calib_usage_error("%s: %ld is out of range [%ld, %ld]", opt, v, lo, hi);
        return false;
    }
    *out = (int32_t)v;
    return true;
}

static bool rt_calib_num_opt(const char *opt, const char *s, double lo, double hi, double *out) {
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    bool digits = false;
    for (const char *p = s; *p; p++)
        digits |= *p >= '0' && *p <= '9';
    if (!*s || *end || errno == ERANGE || !digits || !isfinite(v) || s[0] == ' ') {
        rt_calib_usage_error("%s: expected a number, got \"%s\"", opt, s);
        return false;
    }
    if (v < lo || v > hi) {
        rt_calib_usage_error("%s: %s is out of range [%g, %g]", opt, s, lo, hi);
        return false;
    }
    *out = v;
    return true;
}

enum {
    RT_OPT_DEVICE = 256,
    RT_OPT_QUICK,
    RT_OPT_REPEAT,
    RT_OPT_MAX_SPREAD,
    RT_OPT_THREADS,
    RT_OPT_VERSION,
    RT_OPT_VERBOSE,
};

// Returns -1 to go on, else the exit code.
static int rt_calib_parse(int argc, char **argv, rt_calib_cli *cli) {
    static const struct option longs[] = {
        {"device", required_argument, NULL, RT_OPT_DEVICE},
        {"output", required_argument, NULL, 'o'},
        {"quick", no_argument, NULL, RT_OPT_QUICK},
        {"repeat", required_argument, NULL, RT_OPT_REPEAT},
        {"max-spread", required_argument, NULL, RT_OPT_MAX_SPREAD},
        {"threads", required_argument, NULL, RT_OPT_THREADS},
        {"verbose", no_argument, NULL, RT_OPT_VERBOSE},
        {"help", no_argument, NULL, 'h'},
        {"version", no_argument, NULL, RT_OPT_VERSION},
        {NULL, 0, NULL, 0},
    };
    bool seen_device = false, seen_out = false;
    opterr = 0;
    for (;;) {
        int c = getopt_long(argc, argv, ":o:h", longs, NULL);
        if (c == -1)
            break;
        const char *arg = argv[optind - 1];
        switch (c) {
        case 'h':
            rt_calib_usage(stdout);
            return 0;
        case RT_OPT_VERSION:
            printf("rtcalib %s\n", RT_VERSION_STRING);
            return 0;
        case RT_OPT_DEVICE:
            if (seen_device)
                return rt_calib_usage_error("--device given twice");
            seen_device = true;
            cli->device_path = optarg;
            break;
        case 'o':
            if (seen_out)
                return rt_calib_usage_error("-o given twice");
            seen_out = true;
            if (!optarg[0])
                return rt_calib_usage_error("-o: expected a file name, got \"\"");
            cli->out_path = optarg;
            break;
        case RT_OPT_QUICK:
            cli->quick = true;
            break;
        case RT_OPT_VERBOSE:
            cli->verbose = true;
            break;
        case RT_OPT_REPEAT:
            if (!rt_calib_int_opt("--repeat", optarg, 2, 256, &cli->repeats))
                return 2;
            break;
        case RT_OPT_MAX_SPREAD:
            if (!rt_calib_num_opt("--max-spread", optarg, 0.0, 1000.0, &cli->max_spread_pct))
                return 2;
            break;
        case RT_OPT_THREADS:
            if (!rt_calib_int_opt("--threads", optarg, 1, 256, &cli->threads))
                return 2;
            break;
        case ':': {
            // The option as typed, without an inline "=value" part.
            char name[64];
            snprintf(name, sizeof name, "%s", arg);
            char *eq = strchr(name, '=');
            if (eq)
                *eq = '\0';
            if (optopt > 0 && optopt < 256)
                snprintf(name, sizeof name, "-%c", optopt);
            return rt_calib_usage_error("option '%s' needs a value", name);
        }
        default: {
            char name[64];
            if (optopt > 0 && optopt < 256)
                snprintf(name, sizeof name, "-%c", optopt);
            else
                snprintf(name, sizeof name, "%.*s", (int)strcspn(arg, "="), arg);
            return rt_calib_usage_error("unknown option '%s' (see rtcalib --help)", name);
        }
        }
    }
    if (optind < argc)
        return rt_calib_usage_error("unexpected argument \"%s\" (see rtcalib --help)",
                                    argv[optind]);
    return -1;
}

// ---------------------------------------------------------------------------------------------
// Progress and reports
// ---------------------------------------------------------------------------------------------

typedef struct rt_progress {
    bool tty; // stderr is a terminal: one line, redrawn for each probe
} rt_progress;

static void rt_calib_progress(void *ctx, const rt_calib_event *ev) {
    rt_progress *pr = ctx;
    if (pr->tty) {
        if (ev->value)
            return; // the line of the next probe replaces it
        fprintf(stderr, "\r\033[K[%2d/%d] %-.60s  %5.1f s", (int)ev->index, (int)ev->count,
                ev->probe, ev->elapsed_s);
        fflush(stderr);
        return;
    }
    if (!ev->value)
        return;
    const rt_calib_value *v = ev->value;
    if (v->skipped)
        fprintf(stderr, "rtcalib: [%d/%d] %s: %s\n", (int)ev->index, (int)ev->count, v->name,
                v->note);
    else
        fprintf(stderr, "rtcalib: [%d/%d] %s: %.4g %s (spread %.1f%%)\n", (int)ev->index,
                (int)ev->count, v->name, v->value, v->unit, 100.0 * v->stats.spread);
}

// The table of every probe, one line each (used for the INI header and the summary).
static void rt_calib_table(const rt_calib_result *res, rt_buf *b) {
    rt_buf_printf(b, "%-56s %12s %-8s %7s\n", "probe", "value", "unit", "spread");
    for (int32_t i = 0; i < res->n_values; i++) {
        const rt_calib_value *v = &res->values[i];
        if (v->skipped) {
            rt_buf_printf(b, "%-56s %12s %-8s %7s  %s\n", v->name, "-", v->unit, "-", v->note);
            continue;
        }
        rt_buf_printf(b, "%-56s %12.4g %-8s %6.1f%%%s\n", v->name, v->value, v->unit,
                      100.0 * v->stats.spread, v->refused ? "  refused (too noisy)" : "");
    }
}

// ---------------------------------------------------------------------------------------------
// Signals: an interrupted run leaves no OUT.ini and no temporary file
// ---------------------------------------------------------------------------------------------

static void rt_calib_on_signal(int sig) {
    rt_hal_file_abort_signal();
    static const char msg[] = "\nrtcalib: interrupted, nothing written\n";
    ssize_t w = write(STDERR_FILENO, msg, sizeof msg - 1);
    (void)w;
    signal(sig, SIG_DFL);
    raise(sig);
}

static void rt_calib_signals(void) {
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = rt_calib_on_signal;
    sigemptyset(&sa.sa_mask);
    int sigs[] = {SIGINT, SIGTERM, SIGHUP};
    for (size_t i = 0; i < sizeof sigs / sizeof sigs[0]; i++)
        sigaction(sigs[i], &sa, NULL);
}

// ---------------------------------------------------------------------------------------------
// main
// ---------------------------------------------------------------------------------------------

static int rt_calib_main(const rt_calib_cli *cli) {
    rt_err err;
    rt_err_clear(&err);
    static rt_device base, dev; // large: not on the stack
    rt_status st = cli->device_path ? rt_hal_load_device(cli->device_path, &base, &err)
                                    : rt_hal_detect_host(NULL, &base, &err);
    if (st != RT_OK)
        return rt_calib_print_err(&err, cli->verbose);
    // --- GPU probes (hal/calib-gpu.c): a cuda, hip or opencl base is measured on its device;
    // without one the probes are compiled, their resources printed, and nothing is written.
    bool gpu = base.devclass != RT_DEVCLASS_CPU;
    rt_arena *gpu_arena = NULL;
    rt_calib_gpu_plan *gpu_plan = NULL;
    // --- end GPU probes

    // Open the output first: a bad path fails now, not after a minute of probes.
    rt_calib_signals();
    rt_atomic_file out = {.fd = -1};
    bool to_file = cli->out_path && strcmp(cli->out_path, "-") != 0;
    if (to_file && rt_hal_file_begin(&out, cli->out_path, &err) != RT_OK)
        return rt_calib_print_err(&err, cli->verbose);

    rt_progress pr = {.tty = isatty(STDERR_FILENO) == 1};
    rt_calib_opts opts = {
        .threads = cli->threads,
        .repeats = cli->repeats,
        .max_spread = cli->max_spread_pct / 100.0,
        .quick = cli->quick,
        .progress = rt_calib_progress,
        .progress_ctx = &pr,
    };
    static rt_calib_result res;
    if (gpu) { // --- GPU probes
        gpu_arena = rt_arena_new(1 << 20);
        st = gpu_arena ? rt_calib_gpu_run(gpu_arena, &base, &opts, &gpu_plan, &res, &err)
                       : rt_fail(&err, RT_ERR_NOMEM, RT_NOLOC, "out of memory");
        if (gpu_plan && gpu_plan->compiled_arch[0]) {
            rt_buf table;
            rt_buf_init(&table, gpu_arena);
            rt_calib_gpu_print_resources(gpu_plan, &table);
            if (table.data)
                fputs(table.data, to_file || st != RT_OK ? stdout : stderr);
        }
    } else // --- end GPU probes
        st = rt_calib_cpu_run(&base, &opts, &res, &err);
    if (pr.tty)
        fputs("\r\033[K", stderr);
    if (st == RT_OK) {
        if (!gpu && res.threads != base.units)
            fprintf(stderr,
                    "rtcalib: warning: measured with %d thread%s but the device has units = %d; "
                    "whole-device values describe %d core%s\n",
                    (int)res.threads, res.threads == 1 ? "" : "s", (int)base.units,
                    (int)res.threads, res.threads == 1 ? "" : "s");
        if (!gpu && !base.detected && strcmp(base.arch, "native") != 0 &&
            strcmp(base.arch, res.cpu_name) != 0)
            fprintf(stderr,
                    "rtcalib: warning: %s has arch = %s but this host is %s; the measured values "
                    "describe this host\n",
                    cli->device_path, base.arch, res.cpu_name);
        char date[32];
        time_t now = time(NULL);
        struct tm tm;
        localtime_r(&now, &tm);
        strftime(date, sizeof date, "%Y-%m-%d", &tm);
        st = gpu ? rt_calib_gpu_apply(&base, &res, opts.max_spread, date, &dev, &err)
                 : rt_calib_apply(&base, &res, opts.max_spread, date, &dev, &err);
        if (st == RT_OK) {
            for (int32_t i = 0; i < res.n_values; i++) {
                if (res.values[i].refused)
                    fprintf(stderr, "rtcalib: warning: %s; kept the base value\n",
                            res.values[i].note);
                else if (res.values[i].skipped)
                    fprintf(stderr, "rtcalib: note: %s %s\n", res.values[i].name,
                            res.values[i].note);
            }
        }
        rt_arena *a = st == RT_OK ? rt_arena_new(64 * 1024) : NULL;
        if (st == RT_OK && !a)
            st = rt_fail(&err, RT_ERR_NOMEM, RT_NOLOC, "out of memory");
        if (st == RT_OK) {
            rt_buf header, ini, summary;
            rt_buf_init(&header, a);
            rt_buf_init(&ini, a);
            rt_buf_init(&summary, a);
            rt_buf_printf(&header,
                          "written by rtcalib %s on %s from %s: %s %s, %d thread%s, %d "
                          "repeats per probe, max spread %g%%%s\n\n",
                          RT_VERSION_STRING, date, cli->device_path ? cli->device_path : "(host)",
                          gpu ? "device" : "host", res.cpu_name, (int)res.threads,
                          res.threads == 1 ? "" : "s", (int)opts.repeats, cli->max_spread_pct,
                          cli->quick ? " (--quick: rough values)" : "");
            rt_calib_table(&res, &header);
            rt_calib_table(&res, &summary);
            rt_buf_printf(&summary, "%.1f s in all\n", res.seconds);
            st = rt_hal_write_ini(&dev, header.data, &ini, &err);
            if (st == RT_OK && (ini.oom || summary.oom))
                st = rt_fail(&err, RT_ERR_NOMEM, RT_NOLOC, "out of memory");
            if (st == RT_OK && to_file)
                st = rt_hal_file_commit(&out, ini.data, ini.len, &err);
            if (st == RT_OK) {
                FILE *report = to_file ? stdout : stderr;
                fputs(summary.data, report);
                if (to_file)
                    printf("wrote %s\n", cli->out_path);
                else
                    fputs(ini.data, stdout);
            }
        }
        rt_arena_free(a);
    }
    if (st != RT_OK) {
        rt_hal_file_abort(&out);
        int code = rt_calib_print_err(&err, cli->verbose);
        rt_arena_free(gpu_arena);
        return code;
    }
    rt_arena_free(gpu_arena);
    if (fflush(stdout) != 0 || ferror(stdout)) {
        fprintf(stderr, "rtcalib: error: cannot write standard output: %s\n", strerror(errno));
        return 1;
    }
    return 0;
}

int main(int argc, char **argv) {
    rt_calib_cli cli = {.repeats = 5, .max_spread_pct = 10.0};
    int rc = rt_calib_parse(argc, argv, &cli);
    if (rc >= 0)
        return rc;
    return rt_calib_main(&cli);
}
