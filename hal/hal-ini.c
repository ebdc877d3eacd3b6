// hal-ini.c: loads a device file (devices/*.ini) into an rt_device, strictly. A pre-scan of the
// text builds the section.key -> line:col map and rejects what iniparser accepts silently or
// reports without a position (duplicates, keys outside sections, malformed lines, unterminated
// headers, line continuations); iniparser 4.1 then parses a copy of the same text (with comments
// after section headers, which it cannot read, blanked out) and must agree with the pre-scan on
// every value. Numbers are parsed here (strict base 10, range-checked), every key is checked
// against the schema of device-ini.md, and the cross-checks of rt_hal_check_device run with the
// exact key positions in the original file. The result feeds perfmodel through const rt_device *.
#define _GNU_SOURCE // memfd_create
#include "hal.h"

#include <iniparser/iniparser.h>

#include <errno.h>
#include <limits.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#define RT_INI_MAX_FILE_BYTES (1 << 20)
#define RT_INI_MAX_LINE_CHARS 1000 // iniparser reads lines of at most 1023 characters
#define RT_INI_MAX_NAME_CHARS 63   // section and key names
#define RT_INI_MAX_ENTRIES    1024 // keys in a file (a device has about 60; bounds the lookups)
#define RT_INI_MAX_SECTIONS   64

// ---------------------------------------------------------------------------------------------
// Pre-scan: sections and entries with their positions
// ---------------------------------------------------------------------------------------------

typedef enum rt_ini_kind {
    RT_INI_DEVICE,
    RT_INI_COMPUTE,
    RT_INI_MEM,
} rt_ini_kind;

typedef struct rt_ini_sec {
    char name[RT_INI_MAX_NAME_CHARS + 1]; // lower case, as iniparser stores it
    rt_ini_kind kind;
    int32_t line, col; // the '['
    int32_t mem_index; // RT_INI_MEM: index in file order among [mem.*]
} rt_ini_sec;

typedef struct rt_ini_entry {
    int32_t sec;
    char key[RT_INI_MAX_NAME_CHARS + 1]; // lower case
    const char *value;                   // as the pre-scan reads it, then as iniparser does
    int32_t line, key_col, val_col;
} rt_ini_entry;

typedef struct rt_ini {
    const char *path; // the caller's path, for error locations
    rt_arena *arena;
    const char *text; // the file as read, once
    char *clean;      // the same bytes with what iniparser cannot read blanked out
    size_t len;
    rt_ini_sec *secs;
    int32_t n_secs, cap_secs;
    rt_ini_entry *ents;
    int32_t n_ents, cap_ents;
} rt_ini;

static rt_loc rt_ini_loc(const rt_ini *ini, int32_t line, int32_t col) {
    return rt_loc_make(ini->path, line, col);
}

static bool rt_ini_is_name_char(char c, bool section) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' ||
           (section && (c == '.' || c == '-'));
}

static char rt_ini_lower(char c) {
    return (c >= 'A' && c <= 'Z') ? (char)(c - 'A' + 'a') : c;
}

// Grows an arena array of elem_bytes elements to hold one more.
static rt_status rt_ini_grow(rt_ini *ini, void **arr, int32_t *cap, int32_t n, size_t elem_bytes,
                             rt_err *err) {
    if (n < *cap)
        return RT_OK;
    int32_t ncap = *cap ? *cap * 2 : 16;
    void *p = rt_arena_calloc(ini->arena, (size_t)ncap, elem_bytes);
    if (!p)
        return rt_fail(err, RT_ERR_NOMEM, RT_NOLOC, "out of memory reading %s", ini->path);
    if (*arr)
        memcpy(p, *arr, (size_t)n * elem_bytes);
    *arr = p;
    *cap = ncap;
    return RT_OK;
}

// Quotes at most 60 characters of s[0..n) for a message.
static void rt_ini_excerpt(const char *s, size_t n, char *buf, size_t size) {
    if (n > 60)
        snprintf(buf, size, "%.57s...", s);
    else
        snprintf(buf, size, "%.*s", (int)n, s);
}

static int32_t rt_ini_find_sec(const rt_ini *ini, const char *name) {
    for (int32_t i = 0; i < ini->n_secs; i++) {
        if (strcmp(ini->secs[i].name, name) == 0)
            return i;
    }
    return -1;
}

static const rt_ini_entry *rt_ini_find(const rt_ini *ini, int32_t sec, const char *key) {
    for (int32_t i = 0; i < ini->n_ents; i++) {
        if (ini->ents[i].sec == sec && strcmp(ini->ents[i].key, key) == 0)
            return &ini->ents[i];
    }
    return NULL;
}

static rt_status rt_ini_section_line(rt_ini *ini, const char *s, size_t n, int32_t line,
                                     int32_t col, rt_err *err) {
    // s[0] == '[', s[n-1] is not blank
    const char *close = memchr(s, ']', n);
    if (!close)
        return rt_fail(err, RT_ERR_SYNTAX, rt_ini_loc(ini, line, col + (int32_t)n),
                       "unterminated section header (expected ']', got end of line)");
    if (close != s + n - 1) {
        size_t off = (size_t)(close - s) + 1;
        while (s[off] == ' ' || s[off] == '\t') // s[n-1] is not blank: stops before n
            off++;
        if (s[off] != ';' && s[off] != '#') {
            char ex[80];
            rt_ini_excerpt(s + off, n - off, ex, sizeof ex);
            return rt_fail(err, RT_ERR_SYNTAX, rt_ini_loc(ini, line, col + (int32_t)off),
                           "unexpected text after section header (expected a comment or end of "
                           "line, got \"%s\")",
                           ex);
        }
        // iniparser 4.1 rejects a comment after a header: blank it out in its copy (same
        // length, so that line and column numbers still match the original).
        memset(ini->clean + (s - ini->text) + (close - s) + 1, ' ', n - (size_t)(close - s) - 1);
    }
    const char *a = s + 1, *b = close;
    while (a < b && (*a == ' ' || *a == '\t'))
        a++;
    while (b > a && (b[-1] == ' ' || b[-1] == '\t'))
        b--;
    size_t len = (size_t)(b - a);
    int32_t name_col = col + (int32_t)(a - s);
    if (len == 0)
        return rt_fail(err, RT_ERR_SYNTAX, rt_ini_loc(ini, line, col), "empty section name");
    for (size_t i = 0; i < len; i++) {
        if (!rt_ini_is_name_char(a[i], true)) {
            char ex[80];
            rt_ini_excerpt(a, len, ex, sizeof ex);
            return rt_fail(err, RT_ERR_SYNTAX, rt_ini_loc(ini, line, name_col + (int32_t)i),
                           "bad section name (expected letters, digits, '_', '.' or '-', got "
                           "\"%s\")",
                           ex);
        }
    }
    if (len > RT_INI_MAX_NAME_CHARS)
        return rt_fail(err, RT_ERR_SYNTAX, rt_ini_loc(ini, line, name_col),
                       "section name too long (expected at most %d characters, got %zu)",
                       RT_INI_MAX_NAME_CHARS, len);
    rt_ini_sec sec = {.line = line, .col = col, .mem_index = -1};
    for (size_t i = 0; i < len; i++)
        sec.name[i] = rt_ini_lower(a[i]);
    int32_t prev = rt_ini_find_sec(ini, sec.name);
    if (prev >= 0)
        return rt_fail(err, RT_ERR_SYNTAX, rt_ini_loc(ini, line, col),
                       "duplicate section [%s] (first at line %d)", sec.name,
                       (int)ini->secs[prev].line);
    if (strcmp(sec.name, "device") == 0) {
        sec.kind = RT_INI_DEVICE;
    } else if (strcmp(sec.name, "compute") == 0) {
        sec.kind = RT_INI_COMPUTE;
    } else if (strncmp(sec.name, "mem.", 4) == 0) {
        sec.kind = RT_INI_MEM;
        size_t mlen = strlen(sec.name + 4);
        if (mlen == 0)
            return rt_fail(err, RT_ERR_SYNTAX, rt_ini_loc(ini, line, col),
                           "empty memory level name in [mem.]");
        if (mlen >= sizeof((rt_mem_level *)0)->name)
            return rt_fail(err, RT_ERR_SYNTAX, rt_ini_loc(ini, line, col),
                           "memory level name too long (expected at most %zu characters, got %zu)",
                           sizeof((rt_mem_level *)0)->name - 1, mlen);
        int32_t n_mem = 0;
        for (int32_t i = 0; i < ini->n_secs; i++)
            n_mem += ini->secs[i].kind == RT_INI_MEM;
        if (n_mem >= RT_MAX_MEM_LEVELS)
            return rt_fail(err, RT_ERR_DEVICE, rt_ini_loc(ini, line, col),
                           "too many memory levels (expected at most %d, got %d)",
                           RT_MAX_MEM_LEVELS, (int)n_mem + 1);
        sec.mem_index = n_mem;
    } else {
        return rt_fail(err, RT_ERR_SYNTAX, rt_ini_loc(ini, line, col),
                       "unknown section [%s] (expected device, compute or mem.NAME)", sec.name);
    }
    if (ini->n_secs >= RT_INI_MAX_SECTIONS)
        return rt_fail(err, RT_ERR_SYNTAX, rt_ini_loc(ini, line, col),
                       "too many sections (expected at most %d)", RT_INI_MAX_SECTIONS);
    RT_TRY(rt_ini_grow(ini, (void **)&ini->secs, &ini->cap_secs, ini->n_secs, sizeof sec, err));
    ini->secs[ini->n_secs++] = sec;
    return RT_OK;
}

// s[0..n) is a trimmed line that is neither blank, a comment nor a section header.
static rt_status rt_ini_entry_line(rt_ini *ini, const char *s, size_t n, int32_t line, int32_t col,
                                   rt_err *err) {
    const char *eq = memchr(s, '=', n);
    const char *kb = s, *ke = eq ? eq : s;
    while (ke > kb && (ke[-1] == ' ' || ke[-1] == '\t'))
        ke--;
    if (!eq || ke == kb) {
        char ex[80];
        rt_ini_excerpt(s, n, ex, sizeof ex);
        return rt_fail(err, RT_ERR_SYNTAX, rt_ini_loc(ini, line, 1),
                       "expected 'key = value' (got \"%s\")", ex);
    }
    size_t klen = (size_t)(ke - kb);
    for (size_t i = 0; i < klen; i++) {
        if (!rt_ini_is_name_char(kb[i], false)) {
            char ex[80];
            rt_ini_excerpt(kb, klen, ex, sizeof ex);
            return rt_fail(err, RT_ERR_SYNTAX, rt_ini_loc(ini, line, col + (int32_t)i),
                           "bad key name (expected letters, digits and '_', got \"%s\")", ex);
        }
    }
    if (klen > RT_INI_MAX_NAME_CHARS)
        return rt_fail(err, RT_ERR_SYNTAX, rt_ini_loc(ini, line, col),
                       "key name too long (expected at most %d characters, got %zu)",
                       RT_INI_MAX_NAME_CHARS, klen);
    rt_ini_entry e = {.sec = ini->n_secs - 1, .line = line, .key_col = col};
    for (size_t i = 0; i < klen; i++)
        e.key[i] = rt_ini_lower(kb[i]);
    if (e.sec < 0)
        return rt_fail(err, RT_ERR_SYNTAX, rt_ini_loc(ini, line, col),
                       "key '%s' outside any section (expected a [section] header first)", e.key);
    if (ini->n_ents >= RT_INI_MAX_ENTRIES)
        return rt_fail(err, RT_ERR_SYNTAX, rt_ini_loc(ini, line, col),
                       "too many keys (expected at most %d)", RT_INI_MAX_ENTRIES);
    const rt_ini_entry *prev = rt_ini_find(ini, e.sec, e.key);
    if (prev)
        return rt_fail(err, RT_ERR_SYNTAX, rt_ini_loc(ini, line, col),
                       "duplicate key '%s' in [%s] (first at line %d)", e.key,
                       ini->secs[e.sec].name, (int)prev->line);

    // The value: quoted (kept verbatim) or up to a ';' or '#' comment, trimmed.
    const char *end = s + n, *v = eq + 1;
    while (v < end && (*v == ' ' || *v == '\t'))
        v++;
    const char *vb = v, *ve;
    if (v < end && (*v == '"' || *v == '\'')) {
        const char *close = memchr(v + 1, *v, (size_t)(end - v - 1));
        if (!close)
            return rt_fail(err, RT_ERR_SYNTAX, rt_ini_loc(ini, line, col + (int32_t)(v - s)),
                           "unterminated quoted value (expected a closing %c)", *v);
        vb = v + 1;
        ve = close;
        const char *t = close + 1;
        while (t < end && (*t == ' ' || *t == '\t'))
            t++;
        if (t < end && *t != ';' && *t != '#') {
            char ex[80];
            rt_ini_excerpt(t, (size_t)(end - t), ex, sizeof ex);
            return rt_fail(err, RT_ERR_SYNTAX, rt_ini_loc(ini, line, col + (int32_t)(t - s)),
                           "unexpected text after quoted value (expected a comment or end of "
                           "line, got \"%s\")",
                           ex);
        }
    } else {
        ve = v;
        while (ve < end && *ve != ';' && *ve != '#')
            ve++;
        // iniparser cuts the value at any ';' or '#'; one glued to the text is a mistake
        // ("a;b" meant as one value), so a comment must follow a blank.
        if (ve < end && ve > vb && ve[-1] != ' ' && ve[-1] != '\t')
            return rt_fail(err, RT_ERR_SYNTAX, rt_ini_loc(ini, line, col + (int32_t)(ve - s)),
                           "'%c' inside a value starts a comment (expected a blank before it, or "
                           "a quoted value)",
                           *ve);
        while (ve > vb && (ve[-1] == ' ' || ve[-1] == '\t'))
            ve--;
    }
    e.val_col = col + (int32_t)(vb - s);
    e.value = rt_arena_strndup(ini->arena, vb, (size_t)(ve - vb));
    if (!e.value)
        return rt_fail(err, RT_ERR_NOMEM, RT_NOLOC, "out of memory reading %s", ini->path);
    RT_TRY(rt_ini_grow(ini, (void **)&ini->ents, &ini->cap_ents, ini->n_ents, sizeof e, err));
    ini->ents[ini->n_ents++] = e;
    return RT_OK;
}

static rt_status rt_ini_prescan(rt_ini *ini, const char *text, size_t len, rt_err *err) {
    if (len > RT_INI_MAX_FILE_BYTES)
        return rt_fail(err, RT_ERR_SYNTAX, rt_ini_loc(ini, 1, 1),
                       "device file too large (expected at most %d bytes, got %zu)",
                       RT_INI_MAX_FILE_BYTES, len);
    ini->text = text;
    ini->len = len;
    ini->clean = rt_arena_alloc(ini->arena, len + 1);
    if (!ini->clean)
        return rt_fail(err, RT_ERR_NOMEM, RT_NOLOC, "out of memory reading %s", ini->path);
    memcpy(ini->clean, text, len);
    ini->clean[len] = '\0';
    if (len >= 3 && memcmp(text, "\xef\xbb\xbf", 3) == 0)
        return rt_fail(err, RT_ERR_SYNTAX, rt_ini_loc(ini, 1, 1),
                       "byte-order mark at the start of the file (expected plain UTF-8 text)");
    int32_t line = 0;
    for (size_t pos = 0; pos < len;) {
        line++;
        const char *s = text + pos;
        const char *nl = memchr(s, '\n', len - pos);
        size_t n = nl ? (size_t)(nl - s) : len - pos;
        pos += n + (nl ? 1 : 0);
        if (n > 0 && s[n - 1] == '\r')
            n--;
        if (n > RT_INI_MAX_LINE_CHARS)
            return rt_fail(err, RT_ERR_SYNTAX, rt_ini_loc(ini, line, RT_INI_MAX_LINE_CHARS + 1),
                           "line too long (expected at most %d characters, got %zu)",
                           RT_INI_MAX_LINE_CHARS, n);
        for (size_t i = 0; i < n; i++) {
            unsigned char c = (unsigned char)s[i];
            if ((c < 0x20 && c != '\t') || c == 0x7f)
                return rt_fail(err, RT_ERR_SYNTAX, rt_ini_loc(ini, line, (int32_t)i + 1),
                               "invalid character 0x%02x (expected printable text)", c);
        }
        size_t a = 0;
        while (a < n && (s[a] == ' ' || s[a] == '\t'))
            a++;
        while (n > a && (s[n - 1] == ' ' || s[n - 1] == '\t'))
            n--;
        if (a == n)
            continue;
        int32_t col = (int32_t)a + 1;
        if (s[n - 1] == '\\') // iniparser would join the next line, even to a comment
            return rt_fail(err, RT_ERR_SYNTAX, rt_ini_loc(ini, line, (int32_t)n),
                           "line continuation is not supported (got '\\' at end of line)");
        if (s[a] == ';' || s[a] == '#')
            continue;
        if (s[a] == '[')
            RT_TRY(rt_ini_section_line(ini, s + a, n - a, line, col, err));
        else
            RT_TRY(rt_ini_entry_line(ini, s + a, n - a, line, col, err));
    }
    return RT_OK;
}

// ---------------------------------------------------------------------------------------------
// iniparser: the actual parse, silenced, and checked against the pre-scan
// ---------------------------------------------------------------------------------------------

// iniparser reports through one process-wide callback, so loads are serialized: the mutex guards
// the callback, its message buffer and iniparser_load.
static pthread_mutex_t rt_ini_lib_mutex = PTHREAD_MUTEX_INITIALIZER;
static char rt_ini_lib_msg[256];

// iniparser's error callback: keeps the first message instead of printing it.
static int rt_ini_lib_error(const char *fmt, ...) {
    if (rt_ini_lib_msg[0])
        return 0;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(rt_ini_lib_msg, sizeof rt_ini_lib_msg, fmt, ap);
    va_end(ap);
    for (char *p = rt_ini_lib_msg; *p; p++) {
        if (*p == '\n')
            *p = ' ';
    }
    return 0;
}

// Writes the sanitized copy where iniparser (which only reads paths) can open it: a memfd named
// /proc/self/fd/N, or, where that cannot be opened, a temporary file. *out_tmp is set when the
// caller must unlink path. Returns the descriptor to close, or -1.
static int rt_ini_write_clean(const rt_ini *ini, char *path, size_t size, bool *out_tmp) {
    *out_tmp = false;
    int fd = memfd_create("rtgen-ini", MFD_CLOEXEC);
    if (fd >= 0) {
        snprintf(path, size, "/proc/self/fd/%d", fd);
        if (access(path, R_OK) != 0) {
            close(fd);
            fd = -1;
        }
    }
    if (fd < 0) {
        const char *dir = getenv("TMPDIR");
        int n = snprintf(path, size, "%s/rtgen-ini-XXXXXX", dir && dir[0] ? dir : "/tmp");
        if (n < 0 || (size_t)n >= size) {
            errno = ENAMETOOLONG;
            return -1;
        }
        fd = mkstemp(path);
        if (fd < 0)
            return -1;
        *out_tmp = true;
    }
    for (size_t done = 0; done < ini->len;) {
        ssize_t n = write(fd, ini->clean + done, ini->len - done);
        if (n <= 0) {
            int saved = n < 0 ? errno : EIO;
            close(fd);
            if (*out_tmp)
                unlink(path);
            errno = saved;
            return -1;
        }
        done += (size_t)n;
    }
    return fd;
}

// Replaces the copy's path by the caller's in iniparser's message (it names the file it read).
static void rt_ini_lib_message(const rt_ini *ini, const char *copy, char *buf, size_t size) {
    const char *m = rt_ini_lib_msg[0] ? rt_ini_lib_msg : "no message";
    const char *at = strstr(m, copy);
    if (at)
        snprintf(buf, size, "%.*s%s%s", (int)(at - m), m, ini->path, at + strlen(copy));
    else
        snprintf(buf, size, "%s", m);
    size_t n = strlen(buf);
    while (n > 0 && buf[n - 1] == ' ')
        buf[--n] = '\0';
}

static rt_status rt_ini_libparse(rt_ini *ini, rt_err *err) {
    char copy[PATH_MAX];
    bool tmp = false;
    int fd = rt_ini_write_clean(ini, copy, sizeof copy, &tmp);
    if (fd < 0)
        return rt_fail(err, RT_ERR_IO, rt_ini_loc(ini, 1, 1),
                       "cannot make a copy of the file for iniparser (%s)", strerror(errno));
    char msg[sizeof rt_ini_lib_msg + 256];
    pthread_mutex_lock(&rt_ini_lib_mutex);
    rt_ini_lib_msg[0] = '\0';
    iniparser_set_error_callback(rt_ini_lib_error);
    dictionary *d = iniparser_load(copy);
    rt_ini_lib_message(ini, copy, msg, sizeof msg);
    pthread_mutex_unlock(&rt_ini_lib_mutex);
    close(fd);
    if (tmp)
        unlink(copy);
    if (!d)
        return rt_fail(err, RT_ERR_SYNTAX, rt_ini_loc(ini, 1, 1),
                       "iniparser could not read the file (%s)", msg);
    rt_status st = RT_OK;
    if (iniparser_getnsec(d) != ini->n_secs)
        st = rt_fail(err, RT_ERR_SYNTAX, rt_ini_loc(ini, 1, 1),
                     "iniparser read %d sections (expected %d)", iniparser_getnsec(d),
                     (int)ini->n_secs);
    for (int32_t i = 0; st == RT_OK && i < ini->n_ents; i++) {
        rt_ini_entry *e = &ini->ents[i];
        char key[2 * RT_INI_MAX_NAME_CHARS + 2];
        snprintf(key, sizeof key, "%s:%s", ini->secs[e->sec].name, e->key);
        const char *v = iniparser_getstring(d, key, NULL);
        if (!v || strcmp(v, e->value) != 0) {
            st = rt_fail(err, RT_ERR_SYNTAX, rt_ini_loc(ini, e->line, e->val_col),
                         "iniparser reads '%s' differently (expected \"%s\", got \"%s\")", e->key,
                         e->value, v ? v : "(nothing)");
            break;
        }
        e->value = rt_arena_strdup(ini->arena, v);
        if (!e->value)
            st = rt_fail(err, RT_ERR_NOMEM, RT_NOLOC, "out of memory reading %s", ini->path);
    }
    iniparser_freedict(d);
    return st;
}

// ---------------------------------------------------------------------------------------------
// Values: strict base-10 numbers and the small structured values
// ---------------------------------------------------------------------------------------------

// " in bytes" etc., from the unit suffix of a key.
static const char *rt_ini_unit_words(const char *key) {
    // clang-format off
    static const struct { const char *suffix, *words; } units[] = {
        {"_bytes",  " in bytes"},      {"_mhz",    " in MHz"},
        {"_gbps",   " in GB/s"},       {"_gflops", " in GFLOP/s"},
        {"_gops",   " in GOP/s"},      {"_us",     " in microseconds"},
        {"_ns",     " in nanoseconds"}, {"_cycles", " in cycles"},
        {"_gflops_per_teu", " in GFLOP/s"},
    };
    // clang-format on
    size_t n = strlen(key);
    for (size_t i = 0; i < sizeof units / sizeof units[0]; i++) {
        size_t m = strlen(units[i].suffix);
        if (n > m && strcmp(key + n - m, units[i].suffix) == 0)
            return units[i].words;
    }
    return "";
}

// Checks s is [-]digits with no leading zero. Returns false on bad syntax; *lead0 on "010".
static bool rt_ini_int_syntax(const char *s, size_t n, bool *lead0) {
    size_t i = 0;
    *lead0 = false;
    if (i < n && s[i] == '-')
        i++;
    if (i == n)
        return false;
    for (size_t j = i; j < n; j++) {
        if (s[j] < '0' || s[j] > '9')
            return false;
    }
    *lead0 = s[i] == '0' && n - i > 1;
    return true;
}

// Parses s[0..n) as a decimal integer; false on syntax or range error (*range set for range).
static bool rt_ini_scan_int(const char *s, size_t n, int64_t *out, bool *lead0, bool *range) {
    char buf[64];
    *range = false;
    if (!rt_ini_int_syntax(s, n, lead0) || n >= sizeof buf) {
        *range = n >= sizeof buf && rt_ini_int_syntax(s, n, lead0);
        return false;
    }
    memcpy(buf, s, n);
    buf[n] = '\0';
    errno = 0;
    char *end;
    long long v = strtoll(buf, &end, 10);
    if (errno == ERANGE || *end != '\0') {
        *range = errno == ERANGE;
        return false;
    }
    *out = v;
    return true;
}

// [-]digits[.digits][e[+-]digits] or [-].digits..., no leading zero before another digit.
static bool rt_ini_num_syntax(const char *s, size_t n, bool *lead0) {
    size_t i = 0, int_digits = 0, frac_digits = 0;
    *lead0 = false;
    if (i < n && s[i] == '-')
        i++;
    size_t first = i;
    while (i < n && s[i] >= '0' && s[i] <= '9')
        i++, int_digits++;
    if (int_digits > 1 && s[first] == '0')
        *lead0 = true;
    if (i < n && s[i] == '.') {
        i++;
        while (i < n && s[i] >= '0' && s[i] <= '9')
            i++, frac_digits++;
    }
    if (int_digits + frac_digits == 0)
        return false;
    if (i < n && (s[i] == 'e' || s[i] == 'E')) {
        i++;
        if (i < n && (s[i] == '+' || s[i] == '-'))
            i++;
        size_t exp_digits = 0;
        while (i < n && s[i] >= '0' && s[i] <= '9')
            i++, exp_digits++;
        if (exp_digits == 0)
            return false;
    }
    return i == n;
}

static bool rt_ini_scan_num(const char *s, size_t n, double *out, bool *lead0, bool *range) {
    char buf[128];
    *range = false;
    if (!rt_ini_num_syntax(s, n, lead0))
        return false;
    if (n >= sizeof buf) {
        *range = true;
        return false;
    }
    memcpy(buf, s, n);
    buf[n] = '\0';
    errno = 0;
    char *end;
    double v = strtod(buf, &end);
    if (*end != '\0' || !isfinite(v) || (errno == ERANGE && fabs(v) > 1.0)) {
        *range = true;
        return false;
    }
    *out = v;
    return true;
}

static rt_loc rt_ini_val_loc(const rt_ini *ini, const rt_ini_entry *e) {
    return rt_ini_loc(ini, e->line, e->val_col);
}

static rt_loc rt_ini_key_loc(const rt_ini *ini, const rt_ini_entry *e) {
    return rt_ini_loc(ini, e->line, e->key_col);
}

// An integer value in [min, max]; min is 0 or 1 ("must be >= 0" / "must be > 0").
static rt_status rt_ini_get_int(const rt_ini *ini, const rt_ini_entry *e, int64_t min, int64_t max,
                                int64_t *out, rt_err *err) {
    const char *v = e->value;
    size_t n = strlen(v);
    bool lead0, range;
    int64_t x = 0;
    if (!rt_ini_scan_int(v, n, &x, &lead0, &range)) {
        if (range)
            return rt_fail(err, RT_ERR_DEVICE, rt_ini_val_loc(ini, e),
                           "'%s' is out of range (expected at most %lld, got \"%s\")", e->key,
                           (long long)max, v);
        return rt_fail(err, RT_ERR_DEVICE, rt_ini_val_loc(ini, e),
                       "'%s' expects an integer%s (got \"%s\")", e->key, rt_ini_unit_words(e->key),
                       v);
    }
    if (lead0)
        return rt_fail(err, RT_ERR_DEVICE, rt_ini_val_loc(ini, e),
                       "'%s' has a leading zero (expected a decimal integer, got \"%s\")", e->key,
                       v);
    if (x < min)
        return rt_fail(err, RT_ERR_DEVICE, rt_ini_val_loc(ini, e), "'%s' must be %s (got %lld)",
                       e->key, min > 0 ? "> 0" : ">= 0", (long long)x);
    if (x > max)
        return rt_fail(err, RT_ERR_DEVICE, rt_ini_val_loc(ini, e),
                       "'%s' is out of range (expected at most %lld, got %lld)", e->key,
                       (long long)max, (long long)x);
    *out = x;
    return RT_OK;
}

// A finite number; positive when strict, else >= 0.
static rt_status rt_ini_get_num(const rt_ini *ini, const rt_ini_entry *e, bool strict, double *out,
                                rt_err *err) {
    const char *v = e->value;
    bool lead0, range;
    double x = 0.0;
    if (!rt_ini_scan_num(v, strlen(v), &x, &lead0, &range)) {
        if (range)
            return rt_fail(err, RT_ERR_DEVICE, rt_ini_val_loc(ini, e),
                           "'%s' is out of range (expected a finite number, got \"%s\")", e->key,
                           v);
        return rt_fail(err, RT_ERR_DEVICE, rt_ini_val_loc(ini, e),
                       "'%s' expects a number%s (got \"%s\")", e->key, rt_ini_unit_words(e->key),
                       v);
    }
    if (lead0)
        return rt_fail(err, RT_ERR_DEVICE, rt_ini_val_loc(ini, e),
                       "'%s' has a leading zero (expected a decimal number, got \"%s\")", e->key,
                       v);
    if (strict ? !(x > 0.0) : !(x >= 0.0))
        return rt_fail(err, RT_ERR_DEVICE, rt_ini_val_loc(ini, e), "'%s' must be %s (got %s)",
                       e->key, strict ? "> 0" : ">= 0", v);
    *out = x;
    return RT_OK;
}

// bandwidth_curve_gbps = 1024:95, 4096:310: bytes strictly ascending, all positive.
static rt_status rt_ini_get_curve(const rt_ini *ini, const rt_ini_entry *e, rt_mem_level *lvl,
                                  rt_err *err) {
    const char *v = e->value, *p = v;
    lvl->n_curve = 0;
    for (;;) {
        while (*p == ' ' || *p == '\t')
            p++;
        const char *item = p, *comma = strchr(p, ',');
        const char *end = comma ? comma : p + strlen(p);
        const char *ie = end;
        while (ie > item && (ie[-1] == ' ' || ie[-1] == '\t'))
            ie--;
        rt_loc at = rt_ini_loc(ini, e->line, e->val_col + (int32_t)(item - v));
        const char *colon = memchr(item, ':', (size_t)(ie - item));
        int64_t bytes = 0;
        double gbps = 0.0;
        bool lead0 = false, range = false, lead0b = false;
        if (!colon || !rt_ini_scan_int(item, (size_t)(colon - item), &bytes, &lead0, &range) ||
            !rt_ini_scan_num(colon + 1, (size_t)(ie - colon - 1), &gbps, &lead0b, &range) ||
            lead0 || lead0b) {
            char ex[80];
            rt_ini_excerpt(item, (size_t)(ie - item), ex, sizeof ex);
            return rt_fail(err, RT_ERR_DEVICE, at,
                           "'%s' expects \"bytes:gbps, ...\" with decimal numbers (got \"%s\")",
                           e->key, ex);
        }
        if (bytes <= 0 || !(gbps > 0.0))
            return rt_fail(err, RT_ERR_DEVICE, at, "'%s' points must be positive (got %lld:%g)",
                           e->key, (long long)bytes, gbps);
        if (lvl->n_curve >= RT_MAX_CURVE_POINTS)
            return rt_fail(err, RT_ERR_DEVICE, at, "too many points in '%s' (expected at most %d)",
                           e->key, RT_MAX_CURVE_POINTS);
        if (lvl->n_curve > 0 && bytes <= lvl->curve[lvl->n_curve - 1].bytes)
            return rt_fail(err, RT_ERR_DEVICE, at,
                           "'%s' bytes must be strictly ascending (got %lld after %lld)", e->key,
                           (long long)bytes, (long long)lvl->curve[lvl->n_curve - 1].bytes);
        lvl->curve[lvl->n_curve].bytes = bytes;
        lvl->curve[lvl->n_curve].gbps = gbps;
        lvl->n_curve++;
        if (!comma)
            break;
        p = comma + 1;
    }
    return RT_OK;
}

// mma_shape = 16x16x16
static rt_status rt_ini_get_shape(const rt_ini *ini, const rt_ini_entry *e, rt_device *dev,
                                  rt_err *err) {
    const char *v = e->value, *p = v;
    int64_t dims[3] = {0, 0, 0};
    bool ok = true;
    for (int i = 0; ok && i < 3; i++) {
        const char *x = strchr(p, 'x');
        const char *end = (i < 2) ? x : p + strlen(p);
        bool lead0, range;
        ok = end && rt_ini_scan_int(p, (size_t)(end - p), &dims[i], &lead0, &range) && !lead0 &&
             dims[i] > 0 && dims[i] <= 1024;
        if (ok && i < 2)
            p = x + 1;
    }
    if (!ok)
        return rt_fail(err, RT_ERR_DEVICE, rt_ini_val_loc(ini, e),
                       "'%s' expects MxNxK with each in 1..1024 (got \"%s\")", e->key, v);
    dev->mma_m = (int32_t)dims[0];
    dev->mma_n = (int32_t)dims[1];
    dev->mma_k = (int32_t)dims[2];
    return RT_OK;
}

// features = avx512f, avx512bw, fma: stored as "avx512f,avx512bw,fma".
static rt_status rt_ini_get_features(const rt_ini *ini, const rt_ini_entry *e, rt_device *dev,
                                     rt_err *err) {
    const char *v = e->value;
    size_t o = 0;
    bool ok = true, need = true; // need: a feature name must come next
    for (const char *p = v; ok && *p; p++) {
        char c = *p;
        if (c == ' ' || c == '\t')
            continue;
        if (c == ',') {
            ok = !need;
            need = true;
            if (ok && o + 1 < sizeof dev->features)
                dev->features[o++] = ',';
            continue;
        }
        ok = (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_' || c == '-' || c == '.';
        if (ok && !need && p > v && (p[-1] == ' ' || p[-1] == '\t'))
            ok = false; // two names without a comma
        need = false;
        if (ok && o + 1 < sizeof dev->features)
            dev->features[o++] = c;
        else if (ok)
            return rt_fail(err, RT_ERR_DEVICE, rt_ini_val_loc(ini, e),
                           "'%s' is too long (expected at most %zu characters)", e->key,
                           sizeof dev->features - 1);
    }
    if (!ok || need)
        return rt_fail(err, RT_ERR_DEVICE, rt_ini_val_loc(ini, e),
                       "'%s' expects a comma-separated list of lower-case ISA features (got "
                       "\"%s\")",
                       e->key, v);
    dev->features[o] = '\0';
    return RT_OK;
}

static rt_status rt_ini_get_text(const rt_ini *ini, const rt_ini_entry *e, char *dst, size_t size,
                                 rt_err *err) {
    size_t n = strlen(e->value);
    if (n == 0)
        return rt_fail(err, RT_ERR_DEVICE, rt_ini_val_loc(ini, e),
                       "'%s' expects a value (got nothing)", e->key);
    if (n >= size)
        return rt_fail(err, RT_ERR_DEVICE, rt_ini_val_loc(ini, e),
                       "'%s' is too long (expected at most %zu characters, got %zu)", e->key,
                       size - 1, n);
    memcpy(dst, e->value, n + 1);
    return RT_OK;
}

static rt_status rt_ini_get_source(const rt_ini *ini, const rt_ini_entry *e, rt_device *dev,
                                   const char **out, rt_err *err) {
    if (!e->value[0])
        return rt_fail(err, RT_ERR_DEVICE, rt_ini_val_loc(ini, e),
                       "'%s' expects a value (got nothing)", e->key);
    *out = rt_hal_device_text(dev, e->value);
    if (!*out)
        return rt_fail(err, RT_ERR_DEVICE, rt_ini_val_loc(ini, e),
                       "'%s' texts are too long (expected at most %d bytes in all)", e->key,
                       RT_DEVICE_TEXT_BYTES);
    return RT_OK;
}

// ---------------------------------------------------------------------------------------------
// The schema: one row per key
// ---------------------------------------------------------------------------------------------

typedef enum rt_key_type {
    RT_KEY_TEXT,     // char array in rt_device
    RT_KEY_SOURCE,   // const char * into dev->text
    RT_KEY_CLASS,    // device class
    RT_KEY_I32,      // int32_t
    RT_KEY_I64,      // int64_t
    RT_KEY_F64,      // double, > 0
    RT_KEY_F64_NN,   // double, >= 0
    RT_KEY_SCOPE,    // rt_mem_scope
    RT_KEY_MANAGED,  // rt_mem_managed
    RT_KEY_CURVE,    // bandwidth_curve_gbps
    RT_KEY_SHAPE,    // mma_shape
    RT_KEY_FEATURES, // features
    RT_KEY_ISA,      // isa (rt_cpu_isa)
} rt_key_type;

enum {
    RT_KEY_REQUIRED = 1,     // every device
    RT_KEY_REQUIRED_GPU = 2, // GPU classes (cuda, hip, opencl)
    RT_KEY_GPU_ONLY = 4,     // rejected for class cpu
    RT_KEY_CPU_ONLY = 8,     // rejected for GPU classes
    RT_KEY_NONNEG = 16,      // integers: >= 0 instead of > 0
};

typedef struct rt_key_def {
    const char *key;
    rt_key_type type;
    unsigned flags;
    size_t offset; // into rt_device ([device], [compute]) or rt_mem_level ([mem.*])
    size_t size;   // RT_KEY_TEXT: array size
} rt_key_def;

#define RT_DEV(f)      offsetof(rt_device, f)
#define RT_DEV_SIZE(f) sizeof(((rt_device *)0)->f)
#define RT_LVL(f)      offsetof(rt_mem_level, f)
#define REQ            RT_KEY_REQUIRED
#define GPU_REQ        RT_KEY_REQUIRED_GPU
#define GPU            RT_KEY_GPU_ONLY

// clang-format off
static const rt_key_def rt_device_keys[] = {
    {"name",                  RT_KEY_TEXT,     REQ,             RT_DEV(name), RT_DEV_SIZE(name)},
    {"class",                 RT_KEY_CLASS,    REQ,             RT_DEV(devclass), 0},
    {"arch",                  RT_KEY_TEXT,     REQ,             RT_DEV(arch), RT_DEV_SIZE(arch)},
    {"units",                 RT_KEY_I32,      REQ,             RT_DEV(units), 0},
    {"lanes",                 RT_KEY_I32,      REQ,             RT_DEV(lanes), 0},
    {"teus_per_unit",         RT_KEY_I32,      REQ,             RT_DEV(teus_per_unit), 0},
    {"clock_mhz",             RT_KEY_F64,      REQ,             RT_DEV(clock_mhz), 0},
    {"max_threads_per_block", RT_KEY_I32,      GPU_REQ | GPU,   RT_DEV(max_threads_per_block), 0},
    {"max_threads_per_unit",  RT_KEY_I32,      GPU_REQ | GPU,   RT_DEV(max_threads_per_unit), 0},
    {"max_blocks_per_unit",   RT_KEY_I32,      GPU,             RT_DEV(max_blocks_per_unit), 0},
    {"regs_per_unit",         RT_KEY_I64,      GPU_REQ | GPU,   RT_DEV(regs_per_unit), 0},
    {"launch_overhead_us",    RT_KEY_F64_NN,   0,               RT_DEV(launch_overhead_us), 0},
    {"sync_overhead_us",      RT_KEY_F64_NN,   0,               RT_DEV(sync_overhead_us), 0},
    {"features",              RT_KEY_FEATURES, RT_KEY_CPU_ONLY, 0, 0},
    {"isa",                   RT_KEY_ISA,      RT_KEY_CPU_ONLY, RT_DEV(isa), 0},
    {"source",                RT_KEY_SOURCE,   0,               RT_DEV(device_source), 0},
    // GPU plan facts (perfmodel/gpu-plan.c, hal-gpu.c occupancy; docs: README "Device files"):
    // register allocation granule per warp or per lane, and the grouped block order's width on
    // devices whose L2 holds a group's operand panels. Absent: 0 (no rounding, launch order).
    {"reg_granule_warp",      RT_KEY_I32,      GPU,             RT_DEV(reg_granule_warp), 0},
    {"reg_granule_lane",      RT_KEY_I32,      GPU,             RT_DEV(reg_granule_lane), 0},
    {"raster_group_blocks",   RT_KEY_I32,      GPU,             RT_DEV(raster_group_blocks), 0},
};

static const rt_key_def rt_compute_keys[] = {
    {"f32_gflops",         RT_KEY_F64,    RT_KEY_REQUIRED, RT_DEV(peak_gflops[RT_DTYPE_F32]), 0},
    {"f16_gflops",         RT_KEY_F64,    0, RT_DEV(peak_gflops[RT_DTYPE_F16]), 0},
    {"bf16_gflops",        RT_KEY_F64,    0, RT_DEV(peak_gflops[RT_DTYPE_BF16]), 0},
    {"f64_gflops",         RT_KEY_F64,    0, RT_DEV(peak_gflops[RT_DTYPE_F64]), 0},
    {"i32_gops",           RT_KEY_F64,    0, RT_DEV(peak_gflops[RT_DTYPE_I32]), 0},
    {"i8_gops",            RT_KEY_F64,    0, RT_DEV(peak_gflops[RT_DTYPE_I8]), 0},
    {"mma_f32_gflops",     RT_KEY_F64,    0, RT_DEV(mma_gflops[RT_DTYPE_F32]), 0},
    {"mma_f16_gflops",     RT_KEY_F64,    0, RT_DEV(mma_gflops[RT_DTYPE_F16]), 0},
    {"mma_bf16_gflops",    RT_KEY_F64,    0, RT_DEV(mma_gflops[RT_DTYPE_BF16]), 0},
    {"mma_f64_gflops",     RT_KEY_F64,    0, RT_DEV(mma_gflops[RT_DTYPE_F64]), 0},
    {"mma_i8_gops",        RT_KEY_F64,    0, RT_DEV(mma_gflops[RT_DTYPE_I8]), 0},
    {"mma_shape",          RT_KEY_SHAPE,  0, 0, 0},
    {"fma_latency_cycles", RT_KEY_I32,    0, RT_DEV(fma_latency_cycles), 0},
    // CPU microarchitecture costs (rt_cpu_costs; class cpu only, rt_ini_check_cpu_costs)
    {"store_ports",        RT_KEY_F64,    0, RT_DEV(cpu_costs.store_ports), 0},
    {"gather_cycles",      RT_KEY_F64,    0, RT_DEV(cpu_costs.gather_cycles), 0},
    {"vloop_entry_cycles", RT_KEY_F64,    0, RT_DEV(cpu_costs.vloop_entry_cycles), 0},
    {"libm_cycles",        RT_KEY_F64,    0, RT_DEV(cpu_costs.libm_cycles), 0},
    {"sqrt_cycles",        RT_KEY_F64,    0, RT_DEV(cpu_costs.sqrt_cycles), 0},
    {"source",             RT_KEY_SOURCE, 0, RT_DEV(compute_source), 0},
};

static const rt_key_def rt_mem_keys[] = {
    {"level",                RT_KEY_I32,     RT_KEY_REQUIRED | RT_KEY_NONNEG, RT_LVL(level), 0},
    {"scope",                RT_KEY_SCOPE,   RT_KEY_REQUIRED, RT_LVL(scope), 0},
    {"managed",              RT_KEY_MANAGED, RT_KEY_REQUIRED, RT_LVL(managed), 0},
    {"capacity_bytes",       RT_KEY_I64,     RT_KEY_REQUIRED, RT_LVL(capacity_bytes), 0},
    {"tile_capacity_bytes",  RT_KEY_I64,     0, RT_LVL(tile_capacity_bytes), 0},
    {"bandwidth_gbps",       RT_KEY_F64,     0, RT_LVL(bandwidth_gbps), 0},
    {"bandwidth_curve_gbps", RT_KEY_CURVE,   0, 0, 0},
    {"stream_gbps",          RT_KEY_F64,     0, RT_LVL(stream_gbps), 0},
    {"transaction_bytes",    RT_KEY_I32,     0, RT_LVL(transaction_bytes), 0},
    {"banks",                RT_KEY_I32,     0, RT_LVL(banks), 0},
    {"bank_bytes",           RT_KEY_I32,     0, RT_LVL(bank_bytes), 0},
    {"line_bytes",           RT_KEY_I32,     0, RT_LVL(line_bytes), 0},
    {"ways",                 RT_KEY_I32,     0, RT_LVL(ways), 0},
    {"latency_ns",           RT_KEY_F64,     0, RT_LVL(latency_ns), 0},
    {"source",               RT_KEY_SOURCE,  0, RT_LVL(source), 0},
};
// clang-format on

#undef REQ
#undef GPU_REQ
#undef GPU

static const char rt_insn_suffix[] = "_gflops_per_teu";

static void rt_ini_schema(rt_ini_kind kind, const rt_key_def **defs, size_t *n) {
    switch (kind) {
    case RT_INI_DEVICE:
        *defs = rt_device_keys;
        *n = sizeof rt_device_keys / sizeof rt_device_keys[0];
        return;
    case RT_INI_COMPUTE:
        *defs = rt_compute_keys;
        *n = sizeof rt_compute_keys / sizeof rt_compute_keys[0];
        return;
    case RT_INI_MEM:
        *defs = rt_mem_keys;
        *n = sizeof rt_mem_keys / sizeof rt_mem_keys[0];
        return;
    }
    *defs = NULL;
    *n = 0;
}

static const rt_key_def *rt_ini_key_def(rt_ini_kind kind, const char *key) {
    const rt_key_def *defs;
    size_t n;
    rt_ini_schema(kind, &defs, &n);
    for (size_t i = 0; i < n; i++) {
        if (strcmp(defs[i].key, key) == 0)
            return &defs[i];
    }
    return NULL;
}

// A per-instruction-class entry: "<name>_gflops_per_teu" with a non-empty name.
static bool rt_ini_is_insn_key(const char *key) {
    size_t n = strlen(key), m = sizeof rt_insn_suffix - 1;
    return n > m && strcmp(key + n - m, rt_insn_suffix) == 0;
}

static bool rt_devclass_is_gpu(rt_devclass c) {
    return c != RT_DEVCLASS_CPU;
}

// Parses one entry into dev (or lvl for [mem.*]).
static rt_status rt_ini_apply(const rt_ini *ini, const rt_ini_entry *e, const rt_key_def *def,
                              rt_device *dev, rt_mem_level *lvl, rt_err *err) {
    char *base = lvl ? (char *)lvl : (char *)dev;
    void *field = base + def->offset;
    const char *v = e->value;
    int64_t i64;
    switch (def->type) {
    case RT_KEY_TEXT:
        return rt_ini_get_text(ini, e, field, def->size, err);
    case RT_KEY_SOURCE:
        return rt_ini_get_source(ini, e, dev, (const char **)field, err);
    case RT_KEY_CLASS:
        if (!rt_hal_find_class(v, &dev->devclass))
            return rt_fail(err, RT_ERR_DEVICE, rt_ini_val_loc(ini, e),
                           "unknown device class '%s' (expected cuda, hip, opencl or cpu)", v);
        dev->ops = rt_hal_class_ops(dev->devclass);
        return RT_OK;
    case RT_KEY_I32:
        RT_TRY(rt_ini_get_int(ini, e, (def->flags & RT_KEY_NONNEG) ? 0 : 1, INT32_MAX, &i64, err));
        *(int32_t *)field = (int32_t)i64;
        return RT_OK;
    case RT_KEY_I64:
        RT_TRY(rt_ini_get_int(ini, e, (def->flags & RT_KEY_NONNEG) ? 0 : 1, INT64_MAX, &i64, err));
        *(int64_t *)field = i64;
        return RT_OK;
    case RT_KEY_F64:
    case RT_KEY_F64_NN:
        return rt_ini_get_num(ini, e, def->type == RT_KEY_F64, (double *)field, err);
    case RT_KEY_SCOPE:
        for (int s = 0; s < RT_MEM_SCOPE_COUNT; s++) {
            if (strcmp(v, rt_mem_scope_name((rt_mem_scope)s)) == 0) {
                lvl->scope = (rt_mem_scope)s;
                return RT_OK;
            }
        }
        return rt_fail(err, RT_ERR_DEVICE, rt_ini_val_loc(ini, e),
                       "unknown scope '%s' (expected device, unit, block or thread)", v);
    case RT_KEY_MANAGED:
        if (strcmp(v, "explicit") == 0 || strcmp(v, "cache") == 0) {
            lvl->managed = v[0] == 'c' ? RT_MEM_CACHE : RT_MEM_EXPLICIT;
            return RT_OK;
        }
        return rt_fail(err, RT_ERR_DEVICE, rt_ini_val_loc(ini, e),
                       "unknown managed mode '%s' (expected explicit or cache)", v);
    case RT_KEY_CURVE:
        return rt_ini_get_curve(ini, e, lvl, err);
    case RT_KEY_SHAPE:
        return rt_ini_get_shape(ini, e, dev, err);
    case RT_KEY_FEATURES:
        return rt_ini_get_features(ini, e, dev, err);
    case RT_KEY_ISA:
        if (!rt_cpu_isa_find(v, &dev->isa))
            return rt_fail(err, RT_ERR_DEVICE, rt_ini_val_loc(ini, e),
                           "unknown isa '%s' (expected x86_64 or aarch64)", v);
        return RT_OK;
    }
    rt_assert(!"bad key type");
    return RT_ERR_DEVICE;
}

// ---------------------------------------------------------------------------------------------
// CPU microarchitecture costs ([compute] store_ports ... sqrt_cycles, rt_cpu_costs)
// ---------------------------------------------------------------------------------------------

static const char *const rt_cpu_cost_keys[] = {"store_ports", "gather_cycles", "vloop_entry_cycles",
                                               "libm_cycles", "sqrt_cycles"};

// They describe a CPU core: a GPU class names none of them.
static rt_status rt_ini_check_cpu_costs(const rt_ini *ini, int32_t comp_sec, bool gpu,
                                        rt_err *err) {
    for (size_t k = 0; gpu && k < sizeof rt_cpu_cost_keys / sizeof rt_cpu_cost_keys[0]; k++) {
        const rt_ini_entry *e = rt_ini_find(ini, comp_sec, rt_cpu_cost_keys[k]);
        if (e)
            return rt_fail(err, RT_ERR_DEVICE, rt_ini_key_loc(ini, e),
                           "'%s' is for class cpu only (a GPU class has no such cost)", e->key);
    }
    return RT_OK;
}

rt_cpu_costs rt_hal_cpu_costs(const rt_device *dev) {
    rt_cpu_costs c = dev->cpu_costs;
    c.store_ports = c.store_ports > 0 ? c.store_ports : RT_CPU_COST_DEFAULT_STORE_PORTS;
    c.gather_cycles = c.gather_cycles > 0 ? c.gather_cycles : RT_CPU_COST_DEFAULT_GATHER_CYCLES;
    c.vloop_entry_cycles =
        c.vloop_entry_cycles > 0 ? c.vloop_entry_cycles : RT_CPU_COST_DEFAULT_VLOOP_ENTRY_CYCLES;
    c.libm_cycles = c.libm_cycles > 0 ? c.libm_cycles : RT_CPU_COST_DEFAULT_LIBM_CYCLES;
    c.sqrt_cycles = c.sqrt_cycles > 0 ? c.sqrt_cycles : RT_CPU_COST_DEFAULT_SQRT_CYCLES;
    return c;
}

// ---------------------------------------------------------------------------------------------
// Cross-checks, shared by the loader (exact positions) and rt_hal_check_device
// ---------------------------------------------------------------------------------------------

// Where a key of a section is: sec -1 = [device], -2 = [compute], >= 0 = the level number.
// Keys the file does not have point at the section header.
typedef struct rt_locator {
    const rt_ini *ini; // NULL: no file (detected device): use dev locations
    const rt_device *dev;
    int32_t level_sec[RT_MAX_MEM_LEVELS]; // ini section index of each level
} rt_locator;

#define RT_SEC_DEVICE  (-1)
#define RT_SEC_COMPUTE (-2)

static rt_loc rt_locate(const rt_locator *lc, int32_t sec, const char *key) {
    const rt_ini *ini = lc->ini;
    if (!ini) {
        if (sec >= 0 && sec < lc->dev->n_levels && lc->dev->level[sec].loc.file)
            return lc->dev->level[sec].loc;
        return lc->dev->origin;
    }
    int32_t si = -1;
    if (sec >= 0)
        si = lc->level_sec[sec];
    else
        si = rt_ini_find_sec(ini, sec == RT_SEC_DEVICE ? "device" : "compute");
    if (si < 0)
        return rt_ini_loc(ini, 1, 1);
    const rt_ini_entry *e = key ? rt_ini_find(ini, si, key) : NULL;
    if (e)
        return rt_ini_key_loc(ini, e);
    return rt_ini_loc(ini, ini->secs[si].line, ini->secs[si].col);
}

static bool rt_is_pow2(int64_t x) {
    return x > 0 && (x & (x - 1)) == 0;
}

static rt_status rt_check_level(const rt_locator *lc, const rt_device *dev, int32_t i,
                                rt_err *err) {
    const rt_mem_level *l = &dev->level[i];
    int32_t top = dev->n_levels - 1;
    if (l->level != i)
        return rt_fail(err, RT_ERR_DEVICE, rt_locate(lc, i, "level"),
                       "level %d of [mem.%s] is out of order (expected %d)", (int)l->level, l->name,
                       (int)i);
    if (i < top && !(l->bandwidth_gbps > 0.0))
        return rt_fail(err, RT_ERR_DEVICE, rt_locate(lc, i, NULL),
                       "missing key 'bandwidth_gbps' in [mem.%s]", l->name);
    if (l->tile_capacity_bytes > l->capacity_bytes)
        return rt_fail(err, RT_ERR_DEVICE, rt_locate(lc, i, "tile_capacity_bytes"),
                       "'tile_capacity_bytes' exceeds 'capacity_bytes' in [mem.%s] (expected at "
                       "most %lld, got %lld)",
                       l->name, (long long)l->capacity_bytes, (long long)l->tile_capacity_bytes);
    if (i > 0 && l->capacity_bytes > dev->level[i - 1].capacity_bytes)
        return rt_fail(err, RT_ERR_DEVICE, rt_locate(lc, i, "capacity_bytes"),
                       "'capacity_bytes' of [mem.%s] exceeds that of the level below (expected at "
                       "most %lld as in [mem.%s], got %lld)",
                       l->name, (long long)dev->level[i - 1].capacity_bytes, dev->level[i - 1].name,
                       (long long)l->capacity_bytes);
    if ((l->banks > 0) != (l->bank_bytes > 0)) {
        const char *has = l->banks > 0 ? "banks" : "bank_bytes";
        const char *lacks = l->banks > 0 ? "bank_bytes" : "banks";
        return rt_fail(err, RT_ERR_DEVICE, rt_locate(lc, i, has), "'%s' requires '%s' in [mem.%s]",
                       has, lacks, l->name);
    }
    static const char *const pow2_keys[] = {"transaction_bytes", "bank_bytes", "line_bytes"};
    const int32_t pow2_vals[] = {l->transaction_bytes, l->bank_bytes, l->line_bytes};
    for (int k = 0; k < 3; k++) {
        if (pow2_vals[k] != 0 && !rt_is_pow2(pow2_vals[k]))
            return rt_fail(err, RT_ERR_DEVICE, rt_locate(lc, i, pow2_keys[k]),
                           "'%s' must be a power of two (got %d)", pow2_keys[k], (int)pow2_vals[k]);
    }
    if (l->managed != RT_MEM_CACHE && (l->line_bytes > 0 || l->ways > 0)) {
        const char *k = l->line_bytes > 0 ? "line_bytes" : "ways";
        return rt_fail(err, RT_ERR_DEVICE, rt_locate(lc, i, k),
                       "'%s' applies to cache levels only (expected managed = cache in "
                       "[mem.%s])",
                       k, l->name);
    }
    if (i == 0 && l->scope != RT_MEM_SCOPE_DEVICE)
        return rt_fail(err, RT_ERR_DEVICE, rt_locate(lc, i, "scope"),
                       "level 0 must have scope = device (got %s in [mem.%s])",
                       rt_mem_scope_name(l->scope), l->name);
    if (i == top && l->managed != RT_MEM_EXPLICIT)
        return rt_fail(err, RT_ERR_DEVICE, rt_locate(lc, i, "managed"),
                       "the highest level holds registers (expected managed = explicit in "
                       "[mem.%s])",
                       l->name);
    return RT_OK;
}

// The instruction set a feature name belongs to, for the names that belong to one only
// (RT_CPU_ISA_NONE for the others): catches an Arm device file without `isa = aarch64`.
static rt_cpu_isa rt_feature_isa(const char *name, size_t n) {
    // clang-format off
    static const struct { const char *prefix; rt_cpu_isa isa; } marks[] = {
        {"sse", RT_CPU_ISA_X86_64}, {"avx", RT_CPU_ISA_X86_64}, {"fma", RT_CPU_ISA_X86_64},
        {"amx", RT_CPU_ISA_X86_64}, {"neon", RT_CPU_ISA_AARCH64}, {"asimd", RT_CPU_ISA_AARCH64},
        {"sve", RT_CPU_ISA_AARCH64}, {"dotprod", RT_CPU_ISA_AARCH64},
    };
    // clang-format on
    for (size_t i = 0; i < sizeof marks / sizeof marks[0]; i++) {
        size_t m = strlen(marks[i].prefix);
        if (n >= m && strncmp(name, marks[i].prefix, m) == 0)
            return marks[i].isa;
    }
    return RT_CPU_ISA_NONE;
}

// A CPU device's features must not name another instruction set than its isa.
static rt_status rt_check_isa(const rt_locator *lc, const rt_device *dev, rt_err *err) {
    for (const char *p = dev->features; *p;) {
        size_t n = strcspn(p, ",");
        rt_cpu_isa f = rt_feature_isa(p, n);
        if (f != RT_CPU_ISA_NONE && f != dev->isa)
            return rt_fail(err, RT_ERR_DEVICE, rt_locate(lc, RT_SEC_DEVICE, "features"),
                           "feature '%.*s' is of isa %s, but the device's isa is %s (set 'isa "
                           "= %s' in [device]; without it the isa is this host's)",
                           (int)n, p, rt_cpu_isa_name(f), rt_cpu_isa_name(dev->isa),
                           rt_cpu_isa_name(f));
        p += n + (p[n] == ',');
    }
    return RT_OK;
}

static rt_status rt_check_device_at(const rt_locator *lc, const rt_device *dev, rt_err *err) {
    bool gpu = rt_devclass_is_gpu(dev->devclass);
    const char *cls = rt_devclass_name(dev->devclass);
    if (dev->n_levels < 2)
        return rt_fail(err, RT_ERR_DEVICE, rt_locate(lc, RT_SEC_DEVICE, NULL),
                       "too few memory levels (expected at least 2 [mem.*] sections, got %d)",
                       (int)dev->n_levels);
    for (int32_t i = 0; i < dev->n_levels; i++)
        RT_TRY(rt_check_level(lc, dev, i, err));

    // Class rules.
    if (!gpu) {
        static const char *const gpu_keys[] = {"max_threads_per_block", "max_threads_per_unit",
                                               "max_blocks_per_unit", "regs_per_unit"};
        const int64_t vals[] = {dev->max_threads_per_block, dev->max_threads_per_unit,
                                dev->max_blocks_per_unit, dev->regs_per_unit};
        for (int k = 0; k < 4; k++) {
            if (vals[k] != 0)
                return rt_fail(err, RT_ERR_DEVICE, rt_locate(lc, RT_SEC_DEVICE, gpu_keys[k]),
                               "'%s' is for GPU classes only (class is cpu)", gpu_keys[k]);
        }
        RT_TRY(rt_check_isa(lc, dev, err));
    } else {
        if (dev->features[0])
            return rt_fail(err, RT_ERR_DEVICE, rt_locate(lc, RT_SEC_DEVICE, "features"),
                           "'features' is for class cpu only (class is %s)", cls);
        if (dev->isa != RT_CPU_ISA_NONE)
            return rt_fail(err, RT_ERR_DEVICE, rt_locate(lc, RT_SEC_DEVICE, "isa"),
                           "'isa' is for class cpu only (class is %s)", cls);
        if (dev->max_threads_per_block > dev->max_threads_per_unit)
            return rt_fail(err, RT_ERR_DEVICE,
                           rt_locate(lc, RT_SEC_DEVICE, "max_threads_per_block"),
                           "'max_threads_per_block' exceeds 'max_threads_per_unit' (expected at "
                           "most %d, got %d)",
                           (int)dev->max_threads_per_unit, (int)dev->max_threads_per_block);
        bool shared = false;
        for (int32_t i = 1; i < dev->n_levels - 1; i++) {
            const rt_mem_level *l = &dev->level[i];
            shared |= l->managed == RT_MEM_EXPLICIT &&
                      (l->scope == RT_MEM_SCOPE_UNIT || l->scope == RT_MEM_SCOPE_BLOCK);
        }
        if (!shared)
            return rt_fail(err, RT_ERR_DEVICE, rt_locate(lc, RT_SEC_DEVICE, "class"),
                           "class %s needs an explicit shared-memory level (expected a [mem.*] "
                           "between global and registers with scope = unit or block and managed "
                           "= explicit)",
                           cls);
        const rt_mem_level *top = &dev->level[dev->n_levels - 1];
        if (top->scope != RT_MEM_SCOPE_THREAD)
            return rt_fail(err, RT_ERR_DEVICE, rt_locate(lc, dev->n_levels - 1, "scope"),
                           "the register level of class %s must have scope = thread (got %s in "
                           "[mem.%s])",
                           cls, rt_mem_scope_name(top->scope), top->name);
    }

    // Matrix units: a shape and at least one peak, or neither.
    bool any_mma = false;
    int first_mma = -1;
    for (int t = 0; t < RT_DTYPE_COUNT; t++) {
        if (dev->mma_gflops[t] > 0.0 && first_mma < 0)
            first_mma = t;
        any_mma |= dev->mma_gflops[t] > 0.0;
    }
    if (dev->mma_m > 0 && !any_mma)
        return rt_fail(err, RT_ERR_DEVICE, rt_locate(lc, RT_SEC_COMPUTE, "mma_shape"),
                       "'mma_shape' requires an mma_*_gflops peak in [compute]");
    if (any_mma && dev->mma_m == 0) {
        // ORDER RT_DTYPE
        static const char *const mma_keys[] = {"mma_f32_gflops",  "mma_f16_gflops",
                                               "mma_bf16_gflops", "mma_f64_gflops",
                                               "mma_i32_gops",    "mma_i8_gops"};
        _Static_assert(sizeof mma_keys / sizeof mma_keys[0] == RT_DTYPE_COUNT, "ORDER RT_DTYPE");
        return rt_fail(err, RT_ERR_DEVICE, rt_locate(lc, RT_SEC_COMPUTE, mma_keys[first_mma]),
                       "'%s' requires 'mma_shape' in [compute]", mma_keys[first_mma]);
    }

    // The f32 peak cannot exceed what the issue rate allows (with 2x slack for dual issue and
    // boost clocks); catches copying an f16 or tensor-core figure into f32_gflops.
    double issue_gflops =
        (double)dev->units * dev->teus_per_unit * dev->lanes * 2.0 * dev->clock_mhz / 1000.0;
    if (dev->peak_gflops[RT_DTYPE_F32] > 2.0 * issue_gflops)
        return rt_fail(err, RT_ERR_DEVICE, rt_locate(lc, RT_SEC_COMPUTE, "f32_gflops"),
                       "'f32_gflops' exceeds twice the issue rate units x teus_per_unit x lanes "
                       "x 2 x clock (expected at most %.0f, got %g)",
                       2.0 * issue_gflops, dev->peak_gflops[RT_DTYPE_F32]);

    RT_TRY(rt_hal_validate(dev, err));
    return RT_OK;
}

rt_status rt_hal_check_device(const rt_device *dev, rt_err *err) {
    rt_locator lc = {.ini = NULL, .dev = dev};
    return rt_check_device_at(&lc, dev, err);
}

// ---------------------------------------------------------------------------------------------
// The loader
// ---------------------------------------------------------------------------------------------

static rt_status rt_ini_build(rt_ini *ini, rt_device *dev, rt_locator *lc, rt_err *err) {
    int32_t n_mem = 0, dev_sec = rt_ini_find_sec(ini, "device"),
            comp_sec = rt_ini_find_sec(ini, "compute");
    rt_mem_level mem[RT_MAX_MEM_LEVELS];
    memset(mem, 0, sizeof mem);
    for (int32_t s = 0; s < ini->n_secs; s++)
        n_mem += ini->secs[s].kind == RT_INI_MEM;

    // Every entry in file order: known key, well-formed value.
    for (int32_t i = 0; i < ini->n_ents; i++) {
        const rt_ini_entry *e = &ini->ents[i];
        const rt_ini_sec *sec = &ini->secs[e->sec];
        rt_mem_level *lvl = sec->kind == RT_INI_MEM ? &mem[sec->mem_index] : NULL;
        const rt_key_def *def = rt_ini_key_def(sec->kind, e->key);
        if (!def && sec->kind == RT_INI_COMPUTE && rt_ini_is_insn_key(e->key)) {
            size_t n = strlen(e->key) - (sizeof rt_insn_suffix - 1);
            if (dev->n_insn >= RT_MAX_INSN_PEAKS)
                return rt_fail(err, RT_ERR_DEVICE, rt_ini_key_loc(ini, e),
                               "too many '*%s' entries (expected at most %d)", rt_insn_suffix,
                               RT_MAX_INSN_PEAKS);
            rt_insn_peak *p = &dev->insn[dev->n_insn];
            if (n >= sizeof p->name)
                return rt_fail(err, RT_ERR_DEVICE, rt_ini_key_loc(ini, e),
                               "instruction class name too long in '%s' (expected at most %zu "
                               "characters)",
                               e->key, sizeof p->name - 1);
            memcpy(p->name, e->key, n);
            p->name[n] = '\0';
            RT_TRY(rt_ini_get_num(ini, e, true, &p->gflops_per_teu, err));
            dev->n_insn++;
            continue;
        }
        if (!def)
            return rt_fail(err, RT_ERR_DEVICE, rt_ini_key_loc(ini, e), "unknown key '%s' in [%s]",
                           e->key, sec->name);
        RT_TRY(rt_ini_apply(ini, e, def, dev, lvl, err));
    }

    // Required sections and keys.
    if (dev_sec < 0)
        return rt_fail(err, RT_ERR_DEVICE, rt_ini_loc(ini, 1, 1), "missing section [device]");
    if (comp_sec < 0)
        return rt_fail(err, RT_ERR_DEVICE, rt_ini_loc(ini, 1, 1), "missing section [compute]");
    if (n_mem == 0)
        return rt_fail(err, RT_ERR_DEVICE, rt_ini_loc(ini, 1, 1),
                       "missing sections [mem.NAME] (expected one per memory level)");
    for (int32_t s = 0; s < ini->n_secs; s++) {
        const rt_ini_sec *sec = &ini->secs[s];
        const rt_key_def *defs;
        size_t n;
        rt_ini_schema(sec->kind, &defs, &n);
        for (size_t k = 0; k < n; k++) {
            if ((defs[k].flags & RT_KEY_REQUIRED) && !rt_ini_find(ini, s, defs[k].key))
                return rt_fail(err, RT_ERR_DEVICE, rt_ini_loc(ini, sec->line, sec->col),
                               "missing key '%s' in [%s]", defs[k].key, sec->name);
        }
    }
    // Class-dependent keys.
    bool gpu = rt_devclass_is_gpu(dev->devclass);
    for (size_t k = 0; k < sizeof rt_device_keys / sizeof rt_device_keys[0]; k++) {
        const rt_key_def *def = &rt_device_keys[k];
        const rt_ini_entry *e = rt_ini_find(ini, dev_sec, def->key);
        if (e && !gpu && (def->flags & RT_KEY_GPU_ONLY))
            return rt_fail(err, RT_ERR_DEVICE, rt_ini_key_loc(ini, e),
                           "'%s' is for GPU classes only (class is cpu)", def->key);
        if (e && gpu && (def->flags & RT_KEY_CPU_ONLY))
            return rt_fail(err, RT_ERR_DEVICE, rt_ini_key_loc(ini, e),
                           "'%s' is for class cpu only (class is %s)", def->key,
                           rt_devclass_name(dev->devclass));
        if (!e && gpu && (def->flags & RT_KEY_REQUIRED_GPU))
            return rt_fail(err, RT_ERR_DEVICE,
                           rt_ini_loc(ini, ini->secs[dev_sec].line, ini->secs[dev_sec].col),
                           "missing key '%s' in [device] (required for class %s)", def->key,
                           rt_devclass_name(dev->devclass));
    }

    RT_TRY(rt_ini_check_cpu_costs(ini, comp_sec, gpu, err));

    // Level numbering: 0..n-1, each exactly once.
    int32_t seen_sec[RT_MAX_MEM_LEVELS];
    for (int32_t i = 0; i < RT_MAX_MEM_LEVELS; i++)
        seen_sec[i] = -1;
    for (int32_t s = 0; s < ini->n_secs; s++) {
        const rt_ini_sec *sec = &ini->secs[s];
        if (sec->kind != RT_INI_MEM)
            continue;
        const rt_mem_level *l = &mem[sec->mem_index];
        const rt_ini_entry *e = rt_ini_find(ini, s, "level");
        if (l->level >= n_mem)
            return rt_fail(err, RT_ERR_DEVICE, rt_ini_key_loc(ini, e),
                           "level %d leaves a gap (expected levels 0..%d, one per [mem.*] "
                           "section)",
                           (int)l->level, (int)n_mem - 1);
        if (seen_sec[l->level] >= 0)
            return rt_fail(err, RT_ERR_DEVICE, rt_ini_key_loc(ini, e),
                           "level %d appears twice ([%s] and [%s])", (int)l->level,
                           ini->secs[seen_sec[l->level]].name, sec->name);
        seen_sec[l->level] = s;
    }
    // Place the levels by number.
    dev->n_levels = n_mem;
    for (int32_t i = 0; i < n_mem; i++) {
        const rt_ini_sec *sec = &ini->secs[seen_sec[i]];
        rt_mem_level *l = &dev->level[i];
        *l = mem[sec->mem_index];
        snprintf(l->name, sizeof l->name, "%s", sec->name + 4);
        l->loc = rt_loc_make(dev->path, sec->line, sec->col);
        if (!rt_ini_find(ini, seen_sec[i], "tile_capacity_bytes"))
            l->tile_capacity_bytes = l->capacity_bytes;
        lc->level_sec[i] = seen_sec[i];
    }
    return RT_OK;
}

rt_status rt_hal_load_device(const char *path, rt_device *out, rt_err *err) {
    memset(out, 0, sizeof *out);
    snprintf(out->path, sizeof out->path, "%s", path);
    out->origin = rt_loc_make(out->path, 1, 0);
    rt_arena *a = rt_arena_new(64 * 1024);
    if (!a)
        return rt_fail(err, RT_ERR_NOMEM, RT_NOLOC, "out of memory loading %s", path);
    rt_ini ini = {.path = path, .arena = a};
    char *text = NULL;
    size_t len = 0;
    rt_status st = rt_read_file(a, path, &text, &len, err);
    if (st == RT_OK)
        st = rt_ini_prescan(&ini, text, len, err);
    if (st == RT_OK)
        st = rt_ini_libparse(&ini, err);
    rt_locator lc = {.ini = &ini, .dev = out};
    if (st == RT_OK)
        st = rt_ini_build(&ini, out, &lc, err);
    if (st == RT_OK && out->devclass == RT_DEVCLASS_CPU && out->isa == RT_CPU_ISA_NONE)
        out->isa = rt_hal_host_isa();
    if (st == RT_OK) {
        const rt_ini_entry *arch = rt_ini_find(&ini, rt_ini_find_sec(&ini, "device"), "arch");
        out->arch_loc = rt_ini_val_loc(&ini, arch); // the caller's path while checking
        st = rt_check_device_at(&lc, out, err);
        out->arch_loc.file = out->path;
    }
    rt_arena_free(a);
    return st;
}
