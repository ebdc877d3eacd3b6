// hal-host-probe.c: the default device, what `rtgen OP.spec` runs on without --device. A device
// file on the search path ($RTGEN_HOST_INI, then $XDG_CONFIG_HOME/rtgen/host.ini, where
// `rtcalib -o` puts a full calibration) is loaded as it is. Otherwise the detected host
// (hal-host.c) takes the figures of a first-use probe -- calib-cpu.c's clock, FMA and triad
// probes in their short plan, about 0.2 s -- in place of its nominal clock, f32 peak and
// DRAM and last-level-cache bandwidths. The figures are cached per host, CPU model and CPU
// count in $XDG_CACHE_HOME/rtgen/, written atomically, so that only the first run pays.
#include "calib.h"

#include <errno.h>
#include <stddef.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define RT_HOST_CACHE_VERSION 2
#define RT_HOST_CACHE_MAX     4096 // bytes; a larger file is not a cache file

// ---------------------------------------------------------------------------------------------
// The probe
// ---------------------------------------------------------------------------------------------

// x rounded to 4 significant digits, as rtcalib writes its values: what the probe stores and
// what its cache reads back are then the same numbers.
static double rt_host_round4(double x) {
    if (!(x > 0.0) || !isfinite(x))
        return 0.0;
    double p = pow(10.0, 3 - (int)floor(log10(x)));
    return round(x * p) / p;
}

rt_status rt_hal_host_probe(const rt_device *nominal, rt_host_figures *out, rt_err *err) {
    memset(out, 0, sizeof *out);
    // Bandwidths keep their best sample (memory shared with other work only ever reads low),
    // the clock and the FMA rate their median (the rate a core holds, calib-cpu.c); a spread
    // over 5% samples the probe once more.
    rt_calib_opts opts = {.repeats = 5, .max_spread = 0.05, .host_probe = true};
    rt_calib_result *res = calloc(1, sizeof *res);
    if (!res)
        return rt_fail(err, RT_ERR_NOMEM, RT_NOLOC, "out of memory");
    rt_status st = rt_calib_cpu_run(nominal, &opts, res, err);
    for (int32_t i = 0; st == RT_OK && i < res->n_values; i++) {
        const rt_calib_value *v = &res->values[i];
        double x = v->skipped ? 0.0 : rt_host_round4(v->value);
        if (v->target == RT_CALIB_CLOCK)
            out->clock_mhz = x;
        else if (v->target == RT_CALIB_INSN && strcmp(v->insn, "f32_fma") == 0)
            out->f32_gflops_per_core = x;
        else if (v->target == RT_CALIB_LEVEL_BW && v->level == 1) {
            out->llc_gbps = x;
            out->llc_bytes = v->ws_bytes;
        } else if (v->target == RT_CALIB_LEVEL_BW && v->level == 0) {
            out->dram_gbps = x;
            out->dram_bytes = v->ws_bytes;
        } else if (v->target == RT_CALIB_LEVEL_STREAM && v->level == 0) {
            out->dram_stream_gbps = x;
        }
    }
    out->complete = st == RT_OK;
    for (int32_t i = 0; st == RT_OK && i < res->n_values; i++)
        out->complete = out->complete && !res->values[i].skipped;
    out->threads = res->threads;
    out->seconds = rt_host_round4(res->seconds);
    free(res);
    if (st != RT_OK)
        return st;
    if (out->clock_mhz > 0 && out->f32_gflops_per_core > 0 && nominal->lanes > 0) {
        double pipes = out->f32_gflops_per_core / (out->clock_mhz / 1000.0 * nominal->lanes * 2.0);
        if (pipes < 0.75 || fabs(pipes - round(pipes)) > 0.25) { // a disturbed probe
            out->clock_mhz = 0.0;
            out->complete = false;
        }
    }
    time_t now = time(NULL);
    struct tm tm;
    localtime_r(&now, &tm);
    strftime(out->date, sizeof out->date, "%Y-%m-%d", &tm);
    return RT_OK;
}

// ---------------------------------------------------------------------------------------------
// The cache file: "name = value" lines
// ---------------------------------------------------------------------------------------------

void rt_hal_host_figures_format(const rt_host_figures *fig, const char *key, rt_buf *out) {
    rt_buf_printf(out,
                  "# rtgen: figures of this host measured by the default device's first-use "
                  "probe;\n# delete this file to measure again (rtgen --help: RTGEN_NO_PROBE)\n");
    rt_buf_printf(out, "version = %d\nkey = %s\ndate = %s\n", RT_HOST_CACHE_VERSION, key,
                  fig->date);
    rt_buf_printf(out, "clock_mhz = %.6g\nf32_gflops_per_core = %.6g\nthreads = %d\n",
                  fig->clock_mhz, fig->f32_gflops_per_core, (int)fig->threads);
    rt_buf_printf(out, "llc_gbps = %.6g\nllc_bytes = %lld\n", fig->llc_gbps,
                  (long long)fig->llc_bytes);
    rt_buf_printf(out, "dram_gbps = %.6g\ndram_bytes = %lld\ndram_stream_gbps = %.6g\n",
                  fig->dram_gbps, (long long)fig->dram_bytes, fig->dram_stream_gbps);
    rt_buf_printf(out, "seconds = %.6g\n", fig->seconds);
}

// A number of the cache file: all of s, finite, in [lo, hi].
static bool rt_host_number(const char *s, double lo, double hi, double *out) {
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (end == s || *end || errno == ERANGE || !isfinite(v) || v < lo || v > hi)
        return false;
    *out = v;
    return true;
}

static bool rt_host_is_date(const char *s) {
    static const char pattern[] = "dddd-dd-dd";
    for (size_t i = 0; i < sizeof pattern - 1; i++)
        if (pattern[i] == 'd' ? !(s[i] >= '0' && s[i] <= '9') : s[i] != pattern[i])
            return false;
    return s[sizeof pattern - 1] == '\0';
}

// The names of the cache file, each once, with the range of its value and where it goes.
typedef enum rt_host_field_kind {
    RT_HF_VERSION,
    RT_HF_KEY,
    RT_HF_DATE,
    RT_HF_F64,
    RT_HF_I64,
    RT_HF_I32,
} rt_host_field_kind;
typedef struct rt_host_field {
    const char *name;
    rt_host_field_kind kind;
    double lo, hi;
    size_t off; // into rt_host_figures: a double, int64_t or int32_t
} rt_host_field;

#define RT_HF(f) offsetof(rt_host_figures, f)
// clang-format off
static const rt_host_field rt_host_fields[] = {
    {"version",             RT_HF_VERSION, 0,    1e9,   0},
    {"key",                 RT_HF_KEY,     0,    0,     0},
    {"date",                RT_HF_DATE,    0,    0,     0},
    {"clock_mhz",           RT_HF_F64,     0,    2e4,   RT_HF(clock_mhz)},
    {"f32_gflops_per_core", RT_HF_F64,     1e-3, 1e6,   RT_HF(f32_gflops_per_core)},
    {"threads",             RT_HF_I32,     1,    65536, RT_HF(threads)},
    {"llc_gbps",            RT_HF_F64,     0,    1e6,   RT_HF(llc_gbps)},
    {"llc_bytes",           RT_HF_I64,     0,    1e15,  RT_HF(llc_bytes)},
    {"dram_gbps",           RT_HF_F64,     1e-3, 1e6,   RT_HF(dram_gbps)},
    {"dram_bytes",          RT_HF_I64,     1,    1e15,  RT_HF(dram_bytes)},
    {"dram_stream_gbps",    RT_HF_F64,     1e-3, 1e6,   RT_HF(dram_stream_gbps)},
    {"seconds",             RT_HF_F64,     0,    1e4,   RT_HF(seconds)},
};
// clang-format on
#define RT_HF_COUNT ((int)(sizeof rt_host_fields / sizeof rt_host_fields[0]))
_Static_assert(RT_HF_COUNT < 32, "rt_host_cache_line's seen mask");

// One "name = value" line into out; *seen gets the bit of the name. False: not a line of the
// cache (unknown name, a name twice, a value out of range, another key or version).
static bool rt_host_cache_line(char *line, const char *key, rt_host_figures *out, uint32_t *seen,
                               char *why, size_t why_size) {
    char *eq = strstr(line, " = ");
    if (!eq) {
        snprintf(why, why_size, "\"%.40s\" is not a \"name = value\" line", line);
        return false;
    }
    *eq = '\0';
    const char *value = eq + 3;
    int f = 0;
    while (f < RT_HF_COUNT && strcmp(rt_host_fields[f].name, line) != 0)
        f++;
    if (f == RT_HF_COUNT || (*seen >> f) & 1) {
        snprintf(why, why_size, "%s \"%.40s\"", f < RT_HF_COUNT ? "a second" : "an unknown name",
                 line);
        return false;
    }
    *seen |= 1u << f;
    const rt_host_field *d = &rt_host_fields[f];
    double x = 0;
    switch (d->kind) {
    case RT_HF_KEY:
        if (strcmp(value, key) == 0)
            return true;
        snprintf(why, why_size, "another host's figures (key \"%.80s\")", value);
        return false;
    case RT_HF_DATE:
        if (rt_host_is_date(value)) {
            snprintf(out->date, sizeof out->date, "%s", value);
            return true;
        }
        snprintf(why, why_size, "date \"%.20s\" is not YYYY-MM-DD", value);
        return false;
    case RT_HF_VERSION:
    case RT_HF_F64:
    case RT_HF_I64:
    case RT_HF_I32:
        break;
    }
    if (!rt_host_number(value, d->lo, d->hi, &x) || (d->kind >= RT_HF_I64 && x != floor(x))) {
        snprintf(why, why_size, "%s = \"%.40s\" is not a number in [%g, %g]", line, value, d->lo,
                 d->hi);
        return false;
    }
    if (d->kind == RT_HF_VERSION && x != RT_HOST_CACHE_VERSION) {
        snprintf(why, why_size, "version %g, not %d", x, RT_HOST_CACHE_VERSION);
        return false;
    }
    if (d->kind == RT_HF_I32)
        *(int32_t *)(void *)((char *)out + d->off) = (int32_t)x;
    else if (d->kind == RT_HF_F64)
        *(double *)(void *)((char *)out + d->off) = x;
    else if (d->kind == RT_HF_I64)
        *(int64_t *)(void *)((char *)out + d->off) = (int64_t)x;
    return true;
}

bool rt_hal_host_figures_parse(const char *text, const char *key, rt_host_figures *out, char *why,
                               size_t why_size) {
    memset(out, 0, sizeof *out);
    uint32_t seen = 0;
    char line[RT_HOST_CACHE_MAX];
    for (const char *p = text; *p;) {
        const char *nl = strchr(p, '\n');
        size_t n = nl ? (size_t)(nl - p) : strlen(p);
        if (n >= sizeof line) {
            snprintf(why, why_size, "a line of %zu bytes", n);
            return false;
        }
        memcpy(line, p, n);
        line[n] = '\0';
        p += n + (nl ? 1 : 0);
        if (n == 0 || line[0] == '#')
            continue;
        if (!rt_host_cache_line(line, key, out, &seen, why, why_size))
            return false;
    }
    if (seen != (1u << RT_HF_COUNT) - 1) {
        snprintf(why, why_size, "names missing (the file is cut short?)");
        return false;
    }
    out->complete = true; // only a complete probe is written
    return true;
}

// ---------------------------------------------------------------------------------------------
// Where things are
// ---------------------------------------------------------------------------------------------

// $VAR/rest when VAR is set to an absolute path (the XDG rule: a relative one is ignored), else
// $HOME/fallback/rest. False when neither gives a path that fits.
static bool rt_host_xdg_path(const char *var, const char *fallback, const char *rest, char *out,
                             size_t size) {
    const char *dir = getenv(var), *home = getenv("HOME");
    int n;
    if (dir && dir[0] == '/')
        n = snprintf(out, size, "%s/%s", dir, rest);
    else if (home && home[0] == '/')
        n = snprintf(out, size, "%s/%s/%s", home, fallback, rest);
    else
        return false;
    return n > 0 && (size_t)n < size;
}

// The cache file of this key: DIR/host-<host name>-<FNV-1a of the key, 16 hex digits>.txt.
static bool rt_host_cache_path(const char *key, char *out, size_t size) {
    uint64_t h = 1469598103934665603ull;
    for (const char *p = key; *p; p++)
        h = (h ^ (unsigned char)*p) * 1099511628211ull;
    char name[128] = "host-";
    size_t n = strlen(name);
    for (const char *p = key; *p && *p != ' ' && n < 64; p++) // the host name, safe characters
        name[n++] = (*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') ||
                            (*p >= '0' && *p <= '9') || *p == '-' || *p == '.'
                        ? *p
                        : '_';
    snprintf(name + n, sizeof name - n, "-%016llx.txt", (unsigned long long)h);
    char rest[160];
    snprintf(rest, sizeof rest, "rtgen/%s", name);
    return rt_host_xdg_path("XDG_CACHE_HOME", ".cache", rest, out, size);
}

// Creates the directories of path's parent (mode 0700, as XDG asks); errno set on failure.
static bool rt_host_mkdirs(const char *path) {
    char dir[1024];
    snprintf(dir, sizeof dir, "%s", path);
    char *slash = strrchr(dir, '/');
    if (!slash || slash == dir)
        return true;
    *slash = '\0';
    for (char *p = dir + 1;; p++) {
        bool end = *p == '\0';
        if (*p == '/' || end) {
            *p = '\0';
            if (mkdir(dir, 0700) != 0 && errno != EEXIST)
                return false;
            if (end)
                return true;
            *p = '/';
        }
    }
}

// Reads the figures cached at path for key. False when there is no such file or it is not a
// valid one (why says which; empty when there is no file).
static bool rt_host_cache_read(const char *path, const char *key, rt_host_figures *out, char *why,
                               size_t why_size) {
    why[0] = '\0';
    FILE *f = fopen(path, "rb");
    if (!f)
        return false;
    char text[RT_HOST_CACHE_MAX + 1];
    size_t n = fread(text, 1, sizeof text, f);
    bool bad = ferror(f) != 0;
    fclose(f);
    if (bad || n > RT_HOST_CACHE_MAX || memchr(text, '\0', n)) {
        snprintf(why, why_size, bad ? "unreadable" : "not a text file of at most %d bytes",
                 RT_HOST_CACHE_MAX);
        return false;
    }
    text[n] = '\0';
    return rt_hal_host_figures_parse(text, key, out, why, why_size);
}

// Writes the figures to path atomically; "" in note, or why not.
static void rt_host_cache_write(const char *path, const char *key, const rt_host_figures *fig,
                                char *note, size_t note_size) {
    note[0] = '\0';
    rt_arena *a = rt_arena_new(8192);
    if (!a) {
        snprintf(note, note_size, "out of memory");
        return;
    }
    rt_buf text;
    rt_buf_init(&text, a);
    rt_hal_host_figures_format(fig, key, &text);
    rt_err e;
    rt_err_clear(&e);
    rt_atomic_file af = {.fd = -1};
    if (text.oom)
        snprintf(note, note_size, "out of memory");
    else if (!rt_host_mkdirs(path))
        snprintf(note, note_size, "cannot create its directory: %s", strerror(errno));
    else if (rt_hal_file_begin(&af, path, &e) != RT_OK ||
             rt_hal_file_commit(&af, text.data, text.len, &e) != RT_OK)
        snprintf(note, note_size, "%s", e.msg);
    rt_arena_free(a);
}

// ---------------------------------------------------------------------------------------------
// The default device
// ---------------------------------------------------------------------------------------------

static bool rt_host_env_set(const char *name) {
    const char *v = getenv(name);
    return v && v[0] && strcmp(v, "0") != 0;
}

// The detected host with measured figures: cached ones, or the probe's (then cached).
static rt_status rt_host_measured_device(rt_device *out, rt_err *err) {
    char key[512], path[1024], why[256], note[1400];
    rt_hal_host_key(key, sizeof key);
    bool have_path = rt_host_cache_path(key, path, sizeof path);
    rt_host_figures fig;
    if (have_path && rt_host_cache_read(path, key, &fig, why, sizeof why)) {
        snprintf(note, sizeof note, "; figures cached in %s", path);
        return rt_hal_detect_host_measured(&fig, note, out, err);
    }
    rt_device *nominal = malloc(sizeof *nominal);
    if (!nominal)
        return rt_fail(err, RT_ERR_NOMEM, RT_NOLOC, "out of memory");
    rt_status st = rt_hal_detect_host_measured(NULL, NULL, nominal, err);
    if (st != RT_OK) {
        free(nominal);
        return st;
    }
    rt_err pe;
    rt_err_clear(&pe);
    st = rt_hal_host_probe(nominal, &fig, &pe);
    free(nominal);
    if (st != RT_OK) { // the nominal device, saying why
        snprintf(note, sizeof note, "; the first-use probe failed (%s)", pe.msg);
        return rt_hal_detect_host_measured(NULL, note, out, err);
    }
    char written[600] = "neither XDG_CACHE_HOME nor HOME is an absolute path";
    if (!fig.complete) // a loaded machine: the next run measures again
        snprintf(written, sizeof written,
                 "a probe found too few samples undisturbed by other work (figures left nominal)");
    else if (have_path)
        rt_host_cache_write(path, key, &fig, written, sizeof written);
    if (!written[0])
        snprintf(note, sizeof note, "; measured in %.2g s, figures cached in %s%s%s%s", fig.seconds,
                 path, why[0] ? " (replacing a file that was not valid: " : "", why,
                 why[0] ? ")" : "");
    else
        snprintf(note, sizeof note, "; measured in %.2g s, figures not cached: %s", fig.seconds,
                 written);
    return rt_hal_detect_host_measured(&fig, note, out, err);
}

rt_status rt_hal_host_device(rt_device *out, rt_err *err) {
    const char *env = getenv("RTGEN_HOST_INI");
    if (env && env[0]) {
        if (access(env, R_OK) != 0)
            return rt_fail(err, RT_ERR_IO, RT_NOLOC, "RTGEN_HOST_INI=%s: cannot read: %s", env,
                           strerror(errno));
        return rt_hal_load_device(env, out, err);
    }
    char path[1024];
    if (rt_host_xdg_path("XDG_CONFIG_HOME", ".config", "rtgen/host.ini", path, sizeof path) &&
        access(path, F_OK) == 0)
        return rt_hal_load_device(path, out, err);
    if (rt_host_env_set("RTGEN_NO_PROBE"))
        return rt_hal_detect_host_measured(NULL, "; RTGEN_NO_PROBE is set: no probe", out, err);
    return rt_host_measured_device(out, err);
}
