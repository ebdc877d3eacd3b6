// lengths.c: length files for ragged tensors (--lengths NAME=FILE). Reads a plain list (one
// length per line) or a 'length count' histogram, told apart by the first entry's field count,
// with file:line:col errors; takes a list as is or samples a histogram with the seeded PRNG.
// Also turns such an error into the option-style message the CLI prints. The interpreter's
// bindings (interp.c) and the driver consume the result.
#include "lengths.h"

#include "rng.h"

#include <stdio.h>
#include <string.h>

// One whitespace-separated field of a line.
typedef struct rt_field {
    const char *text;
    int32_t len;
    int32_t col; // 1-based
} rt_field;

#define RT_LINE_MAX_FIELDS 3 // we only need to know "more than 2"

// Splits the line starting at p (up to '\n' or NUL) into fields, dropping a '#' comment.
// Returns the number of fields (counting all, storing at most RT_LINE_MAX_FIELDS), sets
// *out_end_col to the column just after the last field and *next to the next line's start.
static int32_t rt_split_line(const char *p, rt_field *fields, int32_t *out_end_col,
                             const char **next) {
    int32_t n = 0, col = 1, end_col = 1;
    bool comment = false;
    while (*p && *p != '\n') {
        char c = *p;
        if (c == '#')
            comment = true;
        if (comment || c == ' ' || c == '\t' || c == '\r' || c == '\f' || c == '\v') {
            p++;
            col++;
            continue;
        }
        const char *start = p;
        int32_t start_col = col;
        while (*p && *p != '\n' && *p != '#' && *p != ' ' && *p != '\t' && *p != '\r' &&
               *p != '\f' && *p != '\v') {
            p++;
            col++;
        }
        if (n < RT_LINE_MAX_FIELDS)
            fields[n] = (rt_field){start, (int32_t)(p - start), start_col};
        n++;
        end_col = col;
    }
    *out_end_col = end_col;
    *next = *p == '\n' ? p + 1 : p;
    return n;
}

// Parses a field as a non-negative decimal integer no larger than max. what names it in the
// range message ("length", "count").
static rt_status rt_parse_count(const rt_field *f, const char *path, int32_t line, int64_t max,
                                const char *what, int64_t *out, rt_err *err) {
    rt_loc loc = rt_loc_make(path, line, f->col);
    int64_t v = 0;
    bool overflow = false;
    for (int32_t i = 0; i < f->len; i++) {
        char c = f->text[i];
        if (c < '0' || c > '9' || f->len > 64)
            return rt_fail(err, RT_ERR_SYNTAX, loc,
                           "expected a non-negative integer (got \"%.*s\")", (int)f->len, f->text);
        if (v > (INT64_MAX - (c - '0')) / 10)
            overflow = true;
        else
            v = v * 10 + (c - '0');
    }
    if (overflow || v > max)
        return rt_fail(err, RT_ERR_SYNTAX, loc, "%s %.*s is too large (expected at most %lld)",
                       what, (int)f->len, f->text, (long long)max);
    *out = v;
    return RT_OK;
}

rt_status rt_lengths_parse(rt_arena *a, const char *text, const char *path, rt_lengths_file **out,
                           rt_err *err) {
    // Upper bound on entries: number of lines.
    int64_t max_entries = 1;
    for (const char *p = text; *p; p++)
        max_entries += *p == '\n';
    rt_lengths_file *f;
    RT_ALLOC(a, f, 1, err);
    f->path = path;
    RT_ALLOC(a, f->values, max_entries, err);

    int32_t line = 0;
    const char *p = text;
    while (*p) {
        line++;
        rt_field fields[RT_LINE_MAX_FIELDS];
        int32_t end_col;
        int32_t n = rt_split_line(p, fields, &end_col, &p);
        if (n == 0)
            continue;
        if (f->n == 0) {
            if (n > 2)
                return rt_fail(err, RT_ERR_SYNTAX, rt_loc_make(path, line, fields[2].col),
                               "expected a length or 'length count' (got %d fields)", (int)n);
            f->is_histogram = n == 2;
            if (f->is_histogram)
                RT_ALLOC(a, f->counts, max_entries, err);
        }
        if (f->is_histogram && n != 2) {
            int32_t col = n > 2 ? fields[2].col : end_col;
            return rt_fail(err, RT_ERR_SYNTAX, rt_loc_make(path, line, col),
                           "expected 'length count' (got %d field%s)", (int)n, n == 1 ? "" : "s");
        }
        if (!f->is_histogram && n != 1)
            return rt_fail(err, RT_ERR_SYNTAX, rt_loc_make(path, line, fields[1].col),
                           "expected one length per line (got %d fields)", (int)n);
        int64_t v;
        RT_TRY(rt_parse_count(&fields[0], path, line, INT32_MAX, "length", &v, err));
        f->values[f->n] = (int32_t)v;
        if (f->is_histogram) {
            int64_t c;
            RT_TRY(rt_parse_count(&fields[1], path, line, INT64_MAX, "count", &c, err));
            if (c == 0)
                return rt_fail(err, RT_ERR_SYNTAX, rt_loc_make(path, line, fields[1].col),
                               "count must be positive (got 0)");
            if (f->total > INT64_MAX - c)
                return rt_fail(err, RT_ERR_SYNTAX, rt_loc_make(path, line, fields[1].col),
                               "total count is too large (expected at most %lld)",
                               (long long)INT64_MAX);
            f->counts[f->n] = c;
            f->total += c;
        } else {
            f->total++;
        }
        f->n++;
    }
    if (f->n == 0)
        return rt_fail(err, RT_ERR_SYNTAX, rt_loc_make(path, 0, 0), "lengths file has no entries");
    *out = f;
    return RT_OK;
}

rt_status rt_lengths_read(rt_arena *a, const char *path, rt_lengths_file **out, rt_err *err) {
    char *text;
    size_t len;
    RT_TRY(rt_read_file(a, path, &text, &len, err));
    if (strlen(text) != len)
        return rt_fail(err, RT_ERR_SYNTAX, rt_loc_make(path, 0, 0),
                       "lengths file contains a NUL byte");
    return rt_lengths_parse(a, text, path, out, err);
}

rt_status rt_lengths_take(const rt_lengths_file *f, const char *name, int64_t count, uint64_t seed,
                          int32_t *out_lengths, rt_err *err) {
    if (!f->is_histogram) {
        if (f->n != count)
            return rt_fail(err, RT_ERR_SPEC, rt_loc_make(f->path, 0, 0),
                           "expected %lld lengths for '%s' (got %lld)", (long long)count, name,
                           (long long)f->n);
        memcpy(out_lengths, f->values, (size_t)count * sizeof *out_lengths);
        return RT_OK;
    }
    // Inverse-CDF sampling: draw r uniform in [0, total) and take the first bin whose running
    // count exceeds r (a linear scan: histograms have at most a few hundred bins).
    rt_rng rng;
    rt_rng_seed(&rng, seed);
    for (int64_t s = 0; s < count; s++) {
        uint64_t r = rt_rng_below(&rng, (uint64_t)f->total);
        int64_t bin = 0;
        uint64_t acc = (uint64_t)f->counts[0];
        while (r >= acc && bin + 1 < f->n)
            acc += (uint64_t)f->counts[++bin];
        out_lengths[s] = f->values[bin];
    }
    return RT_OK;
}

void rt_file_error_to_option(rt_err *err, const char *option, const char *name, const char *path) {
    if (!err || err->status == RT_OK || !err->where.file || !path ||
        strcmp(err->where.file, path) != 0)
        return;
    char msg[sizeof err->msg];
    snprintf(msg, sizeof msg, "%s", err->msg);
    // "WHAT (got X)" at the very end reads ", got X" in the option form.
    size_t len = strlen(msg);
    char *got = strstr(msg, " (got ");
    if (got && len > 0 && msg[len - 1] == ')' && !strstr(got + 1, " (got ")) {
        msg[len - 1] = '\0';
        got[0] = ',';
        got[1] = ' ';
    }
    char line[32] = "";
    if (err->where.line > 0)
        snprintf(line, sizeof line, ":%d", (int)err->where.line);
    char text[2 * sizeof err->msg];
    snprintf(text, sizeof text, "%s %s=%s%s: %s", option, name, path, line, msg);
    size_t n = strlen(text) < sizeof err->msg ? strlen(text) : sizeof err->msg - 1;
    memcpy(err->msg, text, n); // truncates like the other messages
    err->msg[n] = '\0';
    err->where = RT_NOLOC;
}
