// spec-int.h: private interface of the op-spec front end (spec-lex.c, spec-parse.c,
// spec-check.c, spec-expr.c). Not for other layers: they use spec.h.
#ifndef RT_SPEC_INT_H
#define RT_SPEC_INT_H

#include "spec.h"

#define RT_SPEC_MAX_DEPTH 256 // expression nesting and tree height limit

// ---------------------------------------------------------------------------------------------
// Tokens (spec-lex.c)
// ---------------------------------------------------------------------------------------------

typedef enum rt_tok_kind {
    RT_TOK_EOF,
    RT_TOK_IDENT,
    RT_TOK_INT,
    RT_TOK_REAL,
    RT_TOK_PUNCT, // operators and punctuation, including '+=!', '*=!', 'max=!', 'min=!'
    RT_TOK_ERROR, // lexical error: msg says what; always the last token
    RT_TOK_KIND_COUNT
} rt_tok_kind;

typedef struct rt_token {
    rt_tok_kind kind;
    rt_loc loc;       // first character
    const char *text; // lexeme in the source text (not NUL-terminated)
    int32_t len;
    int64_t ival;    // RT_TOK_INT
    double rval;     // RT_TOK_REAL
    const char *msg; // RT_TOK_ERROR
} rt_token;

// Splits text into tokens, ending with RT_TOK_EOF or RT_TOK_ERROR (lexical errors become a
// token so that the parser reports the first error in file order). Fails only on NOMEM.
rt_status rt_spec_lex(rt_arena *a, const char *text, const char *path, rt_token **out,
                      int32_t *n_out, rt_err *err);
// True when tok is an identifier or punctuation spelled exactly s.
bool rt_tok_is(const rt_token *tok, const char *s);
// "'x'" or "end of file", for "(got ...)" in messages. Arena-allocated.
const char *rt_tok_describe(rt_arena *a, const rt_token *tok);

// ---------------------------------------------------------------------------------------------
// Checker (spec-check.c): everything after parsing
// ---------------------------------------------------------------------------------------------

// Checks statements, infers ranges and output shapes, fuses axes, checks directives.
rt_status rt_spec_check(rt_arena *a, rt_op *op, rt_err *err);

// ---------------------------------------------------------------------------------------------
// Expression helpers shared by the front end (spec-expr.c)
// ---------------------------------------------------------------------------------------------

// Arity of a function (1 or 2).
int32_t rt_fn_arity(rt_fn fn);
// Looks up a function by name.
bool rt_fn_from_name(const char *name, size_t len, rt_fn *out);
rt_expr *rt_expr_new(rt_arena *a, rt_expr_kind kind, rt_loc loc);
// Deep copy.
rt_expr *rt_expr_copy(rt_arena *a, const rt_expr *e);
// Deep copy with every RT_EXPR_DIMREF k replaced by a copy of args[k] (k < n_args).
rt_expr *rt_expr_subst_dimrefs(rt_arena *a, const rt_expr *e, rt_expr *const *args, int32_t n_args);
// True when e contains a node of kind k.
bool rt_expr_has_kind(const rt_expr *e, rt_expr_kind k);
// Number of uses of index var v in e.
int32_t rt_expr_count_var(const rt_expr *e, int32_t v);
// Prints a number the way op-spec reads it back (integers without '.', reals round-trip).
void rt_num_print(double v, bool is_int, rt_buf *out);

#endif
