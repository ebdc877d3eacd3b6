// rt-arena.c: the per-compilation arena (chunked bump allocator with overflow checks, zeroed
// memory, deferred releases of foreign handles) and the arena-backed text buffer.
#include "rt.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct rt_chunk {
    struct rt_chunk *next;
    size_t used, size;
    _Alignas(max_align_t) unsigned char data[];
} rt_chunk;

typedef struct rt_defer {
    struct rt_defer *next;
    void (*fn)(void *);
    void *handle;
} rt_defer;

struct rt_arena {
    rt_chunk *head;
    rt_defer *defers;
    size_t chunk_bytes, used_bytes;
    long fail_after; // < 0: never
    bool failed;     // an allocation returned NULL
};

rt_arena *rt_arena_new(size_t chunk_bytes) {
    rt_arena *a = calloc(1, sizeof *a);
    if (!a)
        return NULL;
    a->chunk_bytes = chunk_bytes < 4096 ? 4096 : chunk_bytes;
    a->fail_after = -1;
    return a;
}

void rt_arena_free(rt_arena *a) {
    if (!a)
        return;
    for (rt_defer *d = a->defers; d; d = d->next) // newest first
        d->fn(d->handle);
    rt_chunk *c = a->head;
    while (c) {
        rt_chunk *next = c->next;
        free(c);
        c = next;
    }
    free(a);
}

void rt_arena_fail_after(rt_arena *a, long n) {
    a->fail_after = n;
}

size_t rt_arena_used_bytes(const rt_arena *a) {
    return a->used_bytes;
}

bool rt_arena_failed(const rt_arena *a) {
    return a->failed;
}

rt_status rt_arena_status(rt_arena *a, rt_status st, rt_err *err) {
    if (st == RT_OK || st == RT_ERR_NOMEM || !a->failed)
        return st;
    if (err)
        rt_err_clear(err); // else the first error would stand (rt_err_vset)
    return rt_fail(err, RT_ERR_NOMEM, RT_NOLOC, "out of memory");
}

void *rt_arena_alloc(rt_arena *a, size_t bytes) {
    if (a->fail_after == 0 || bytes > SIZE_MAX / 2) {
        a->failed = true;
        return NULL;
    }
    if (a->fail_after > 0)
        a->fail_after--;
    const size_t align = _Alignof(max_align_t);
    size_t need = (bytes + align - 1) & ~(align - 1);
    if (need == 0)
        need = align;
    rt_chunk *c = a->head;
    if (!c || c->size - c->used < need) {
        size_t size = need > a->chunk_bytes ? need : a->chunk_bytes;
        c = malloc(sizeof *c + size);
        if (!c) {
            a->failed = true;
            return NULL;
        }
        c->size = size;
        c->used = 0;
        if (a->head && need > a->chunk_bytes) {
            // A big block goes behind the current chunk so the current one keeps filling.
            c->next = a->head->next;
            a->head->next = c;
        } else {
            c->next = a->head;
            a->head = c;
        }
    }
    void *p = c->data + c->used;
    c->used += need;
    a->used_bytes += need;
    memset(p, 0, need);
    return p;
}

void *rt_arena_calloc(rt_arena *a, size_t n, size_t elem_bytes) {
    if (elem_bytes && n > SIZE_MAX / 2 / elem_bytes) {
        a->failed = true;
        return NULL;
    }
    return rt_arena_alloc(a, n * elem_bytes);
}

char *rt_arena_strndup(rt_arena *a, const char *s, size_t n) {
    char *p = rt_arena_alloc(a, n + 1);
    if (p) {
        memcpy(p, s, n);
        p[n] = '\0';
    }
    return p;
}

char *rt_arena_strdup(rt_arena *a, const char *s) {
    return s ? rt_arena_strndup(a, s, strlen(s)) : NULL;
}

char *rt_arena_printf(rt_arena *a, const char *fmt, ...) {
    va_list ap, ap2;
    va_start(ap, fmt);
    va_copy(ap2, ap);
    int n = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    char *p = n < 0 ? NULL : rt_arena_alloc(a, (size_t)n + 1);
    if (p)
        vsnprintf(p, (size_t)n + 1, fmt, ap2);
    va_end(ap2);
    return p;
}

rt_status rt_arena_defer(rt_arena *a, void (*fn)(void *), void *handle) {
    rt_defer *d = rt_arena_alloc(a, sizeof *d);
    if (!d)
        return RT_ERR_NOMEM;
    d->fn = fn;
    d->handle = handle;
    d->next = a->defers;
    a->defers = d;
    return RT_OK;
}

// ---------------------------------------------------------------------------------------------
// rt_buf
// ---------------------------------------------------------------------------------------------

void rt_buf_init(rt_buf *b, rt_arena *a) {
    memset(b, 0, sizeof *b);
    b->arena = a;
}

static bool rt_buf_reserve(rt_buf *b, size_t extra) {
    if (b->oom)
        return false;
    if (b->len + extra + 1 <= b->cap)
        return true;
    size_t cap = b->cap ? b->cap : 256;
    while (cap < b->len + extra + 1) {
        if (cap > SIZE_MAX / 4) {
            b->oom = true;
            return false;
        }
        cap *= 2;
    }
    char *p = rt_arena_alloc(b->arena, cap);
    if (!p) {
        b->oom = true;
        return false;
    }
    if (b->data)
        memcpy(p, b->data, b->len + 1);
    b->data = p;
    b->cap = cap;
    return true;
}

void rt_buf_putn(rt_buf *b, const char *s, size_t n) {
    if (!rt_buf_reserve(b, n))
        return;
    memcpy(b->data + b->len, s, n);
    b->len += n;
    b->data[b->len] = '\0';
}

void rt_buf_puts(rt_buf *b, const char *s) {
    rt_buf_putn(b, s, strlen(s));
}

void rt_buf_vprintf(rt_buf *b, const char *fmt, va_list ap) {
    va_list ap2;
    va_copy(ap2, ap);
    int n = vsnprintf(NULL, 0, fmt, ap);
    if (n >= 0 && rt_buf_reserve(b, (size_t)n)) {
        vsnprintf(b->data + b->len, (size_t)n + 1, fmt, ap2);
        b->len += (size_t)n;
    }
    va_end(ap2);
}

void rt_buf_printf(rt_buf *b, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    rt_buf_vprintf(b, fmt, ap);
    va_end(ap);
}

void rt_buf_linef(rt_buf *b, int indent, const char *fmt, ...) {
    for (int i = 0; i < indent; i++)
        rt_buf_puts(b, "    ");
    va_list ap;
    va_start(ap, fmt);
    rt_buf_vprintf(b, fmt, ap);
    va_end(ap);
    rt_buf_putn(b, "\n", 1);
}
