// spec-lex.c: the op-spec lexer. First stage of the front end: OP.spec text -> tokens
// (identifiers, integer and real literals, operators, punctuation), each with its 1-based line
// and column (tabs count as one column). '#' starts a comment to the end of the line.
// A lexical error ends the token list with an RT_TOK_ERROR token that spec-parse.c reports
// when it reaches it, so the first error in file order wins.
#include "spec-int.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

typedef struct rt_lexer {
    rt_arena *a;
    const char *path;
    const char *p;          // next character
    const char *line_start; // first character of the current line
    int32_t line;
    rt_token *toks;
    int32_t n, cap;
    rt_err *err;
} rt_lexer;

// Longest spellings first: the lexer takes the first one that matches (maximal munch).
static const char *const rt_puncts[] = {
    "+=!", "*=!", "+=", "->", "==", "!=", "<=", ">=", "&&", "||", "(", ")", "[", "]", "{",
    "}",   ",",   ":",  ".",  "@",  "?",  "+",  "-",  "*",  "/",  "%", "=", "<", ">", "!",
};

static bool is_ident_start(char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_';
}

static bool is_digit(char c) {
    return c >= '0' && c <= '9';
}

static bool is_ident_char(char c) {
    return is_ident_start(c) || is_digit(c);
}

static rt_status push(rt_lexer *lx, rt_tok_kind kind, const char *start, const char *end,
                      rt_token **out) {
    if (lx->n == lx->cap) {
        int32_t cap = lx->cap ? lx->cap * 2 : 256;
        rt_token *t = rt_arena_calloc(lx->a, (size_t)cap, sizeof *t);
        if (!t)
            return rt_fail(lx->err, RT_ERR_NOMEM, RT_NOLOC, "out of memory");
        if (lx->n)
            memcpy(t, lx->toks, (size_t)lx->n * sizeof *t);
        lx->toks = t;
        lx->cap = cap;
    }
    rt_token *t = &lx->toks[lx->n++];
    memset(t, 0, sizeof *t);
    t->kind = kind;
    t->loc = rt_loc_make(lx->path, lx->line, (int32_t)(start - lx->line_start) + 1);
    t->text = start;
    t->len = (int32_t)(end - start);
    *out = t;
    return RT_OK;
}

static rt_status push_error(rt_lexer *lx, const char *start, const char *end, const char *msg) {
    rt_token *t = NULL;
    RT_TRY(push(lx, RT_TOK_ERROR, start, end, &t));
    t->msg = msg;
    if (!t->msg)
        return rt_fail(lx->err, RT_ERR_NOMEM, RT_NOLOC, "out of memory");
    return RT_OK;
}

// Scans a number at lx->p: digits [ '.' digits ] [ e [+-] digits ], or '.' digits [...].
static rt_status lex_number(rt_lexer *lx) {
    const char *s = lx->p, *q = s;
    bool real = false;
    while (is_digit(*q))
        q++;
    if (*q == '.' && is_digit(q[1])) {
        real = true;
        q++;
        while (is_digit(*q))
            q++;
    }
    if ((*q == 'e' || *q == 'E') &&
        (is_digit(q[1]) || ((q[1] == '+' || q[1] == '-') && is_digit(q[2])))) {
        real = true;
        q += 2;
        while (is_digit(*q))
            q++;
    }
    if (is_ident_char(*q) || (*q == '.' && is_digit(q[1]))) {
        while (is_ident_char(*q) || (*q == '.' && is_digit(q[1])))
            q++;
        if (q - s > 64)
            q = s + 64;
        return push_error(lx, s, q,
                          rt_arena_printf(lx->a, "invalid number '%.*s'", (int)(q - s), s));
    }
    char *copy = rt_arena_strndup(lx->a, s, (size_t)(q - s));
    if (!copy)
        return rt_fail(lx->err, RT_ERR_NOMEM, RT_NOLOC, "out of memory");
    rt_token *t;
    if (real) {
        errno = 0;
        double v = strtod(copy, NULL);
        if (errno == ERANGE && (v > 1.0 || v < -1.0))
            return push_error(lx, s, q,
                              rt_arena_printf(lx->a, "real literal '%.64s' is out of range", copy));
        RT_TRY(push(lx, RT_TOK_REAL, s, q, &t));
        t->rval = v;
    } else {
        int64_t v = 0;
        for (const char *c = s; c < q; c++) {
            int d = *c - '0';
            if (v > (INT64_MAX - d) / 10)
                return push_error(lx, s, q,
                                  rt_arena_printf(lx->a,
                                                  "integer literal %.64s is out of range "
                                                  "(expected at most %lld)",
                                                  copy, (long long)INT64_MAX));
            v = v * 10 + d;
        }
        RT_TRY(push(lx, RT_TOK_INT, s, q, &t));
        t->ival = v;
    }
    lx->p = q;
    return RT_OK;
}

rt_status rt_spec_lex(rt_arena *a, const char *text, const char *path, rt_token **out,
                      int32_t *n_out, rt_err *err) {
    rt_lexer lx = {.a = a, .path = path, .p = text, .line_start = text, .line = 1, .err = err};
    rt_token *t;
    for (;;) {
        char c = *lx.p;
        if (c == '\0') {
            RT_TRY(push(&lx, RT_TOK_EOF, lx.p, lx.p, &t));
            break;
        }
        if (c == '\n') {
            lx.p++;
            lx.line++;
            lx.line_start = lx.p;
            continue;
        }
        if (c == ' ' || c == '\t' || c == '\r' || c == '\f' || c == '\v') {
            lx.p++;
            continue;
        }
        if (c == '#') {
            while (*lx.p && *lx.p != '\n')
                lx.p++;
            continue;
        }
        if (is_digit(c) || (c == '.' && is_digit(lx.p[1]))) {
            RT_TRY(lex_number(&lx));
            if (lx.toks[lx.n - 1].kind == RT_TOK_ERROR)
                break;
            continue;
        }
        if (is_ident_start(c)) {
            const char *s = lx.p;
            while (is_ident_char(*lx.p))
                lx.p++;
            size_t n = (size_t)(lx.p - s);
            // 'max=!' and 'min=!' are single operator tokens.
            if (n == 3 && (!memcmp(s, "max", 3) || !memcmp(s, "min", 3)) && lx.p[0] == '=' &&
                lx.p[1] == '!') {
                lx.p += 2;
                RT_TRY(push(&lx, RT_TOK_PUNCT, s, lx.p, &t));
            } else {
                RT_TRY(push(&lx, RT_TOK_IDENT, s, lx.p, &t));
            }
            continue;
        }
        bool found = false;
        for (size_t i = 0; i < sizeof rt_puncts / sizeof rt_puncts[0]; i++) {
            size_t n = strlen(rt_puncts[i]);
            if (!strncmp(lx.p, rt_puncts[i], n)) {
                RT_TRY(push(&lx, RT_TOK_PUNCT, lx.p, lx.p + n, &t));
                lx.p += n;
                found = true;
                break;
            }
        }
        if (found)
            continue;
        unsigned char uc = (unsigned char)c;
        const char *msg = uc >= 0x20 && uc < 0x7f
                              ? rt_arena_printf(a, "unexpected character '%c'", c)
                              : rt_arena_printf(a, "unexpected byte 0x%02x", uc);
        RT_TRY(push_error(&lx, lx.p, lx.p + 1, msg));
        break;
    }
    *out = lx.toks;
    *n_out = lx.n;
    return RT_OK;
}

bool rt_tok_is(const rt_token *tok, const char *s) {
    if (tok->kind != RT_TOK_IDENT && tok->kind != RT_TOK_PUNCT)
        return false;
    size_t n = strlen(s);
    return (size_t)tok->len == n && !memcmp(tok->text, s, n);
}

const char *rt_tok_describe(rt_arena *a, const rt_token *tok) {
    if (tok->kind == RT_TOK_EOF)
        return "end of file";
    int n = tok->len > 40 ? 40 : tok->len;
    return rt_arena_printf(a, "'%.*s%s'", n, tok->text, tok->len > 40 ? "..." : "");
}
