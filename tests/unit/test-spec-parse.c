// test-spec-parse.c: the op-spec parser on every shipped example, with the IR fields checked
// for matmul, conv2d, trmm, proj, treernn and softmax; --set bindings; expression printing;
// the printed IR and its JSON form.
#include "spec-int.h"
#include "test.h"

#include <dirent.h>
#include <jansson.h>

static rt_op *load(rt_arena *a, const char *path) {
    rt_op *op = NULL;
    rt_err err = {0};
    if (rt_spec_load(a, path, NULL, 0, &op, &err) != RT_OK) {
        fprintf(stderr, "%s: %s:%d:%d: %s\n", path, err.where.file ? err.where.file : "-",
                err.where.line, err.where.col, err.msg);
        RT_EXPECT(!"example parses");
        return NULL;
    }
    return op;
}

static rt_op *parse(rt_arena *a, const char *text, const rt_size_binding *set, int32_t n_set,
                    rt_err *err) {
    rt_op *op = NULL;
    rt_err_clear(err);
    if (rt_spec_parse(a, text, "x.spec", set, n_set, &op, err) != RT_OK)
        return NULL;
    return op;
}

static const char *expr_text(rt_arena *a, const rt_op *op, const rt_stmt *st, const rt_expr *e) {
    rt_buf b;
    rt_buf_init(&b, a);
    rt_expr_print(op, st, NULL, e, &b);
    return b.data;
}

static int32_t tensor(const rt_op *op, const char *name) {
    for (int32_t i = 0; i < op->n_tensors; i++)
        if (!strcmp(op->tensors[i].name, name))
            return i;
    return -1;
}

static void test_all_examples(void) {
    DIR *d = opendir("examples");
    RT_EXPECT(d != NULL);
    int n = 0;
    for (struct dirent *e; d && (e = readdir(d));) {
        size_t len = strlen(e->d_name);
        if (len < 6 || strcmp(e->d_name + len - 5, ".spec"))
            continue;
        char path[512];
        snprintf(path, sizeof path, "examples/%s", e->d_name);
        rt_arena *a = rt_arena_new(1 << 16);
        rt_op *op = load(a, path);
        if (op) {
            rt_buf b;
            rt_buf_init(&b, a);
            rt_op_print(op, &b);
            RT_EXPECT(b.len > 0 && !b.oom);
            json_t *j = rt_op_to_json(op);
            RT_EXPECT(j &&
                      json_array_size(json_object_get(j, "statements")) == (size_t)op->n_stmts);
            json_decref(j);
        }
        rt_arena_free(a);
        n++;
    }
    if (d)
        closedir(d);
    RT_EXPECT(n >= 16);
}

static void test_matmul(void) {
    rt_arena *a = rt_arena_new(1 << 16);
    rt_op *op = load(a, "examples/matmul.spec");
    if (!op)
        return rt_arena_free(a);
    RT_EXPECT_STR(op->name, "matmul");
    RT_EXPECT_EQ(op->n_sizes, 3);
    RT_EXPECT_STR(op->sizes[2].name, "K");
    RT_EXPECT_EQ(op->sizes[2].value, 1024);
    RT_EXPECT_EQ(op->n_tensors, 3);
    RT_EXPECT_EQ(op->n_outputs, 1);
    RT_EXPECT_EQ(op->outputs[0], 2);
    const rt_tensor *A = &op->tensors[0], *C = &op->tensors[2];
    RT_EXPECT_EQ(A->role, RT_ROLE_INPUT);
    RT_EXPECT_EQ(A->dtype, RT_DTYPE_F32);
    RT_EXPECT_EQ(A->n_dims, 2);
    RT_EXPECT_EQ(A->dims[1].extent->kind, RT_EXPR_SIZE);
    RT_EXPECT_EQ(A->dims[1].extent->sym, 2);
    RT_EXPECT_EQ(A->loc.line, 6);
    RT_EXPECT_EQ(A->loc.col, 24);
    RT_EXPECT_EQ(C->role, RT_ROLE_OUTPUT);
    RT_EXPECT(!C->shape_given);
    RT_EXPECT_EQ(C->n_dims, 2);
    RT_EXPECT_EQ(C->writer, 0);
    int64_t v;
    RT_EXPECT(rt_expr_const_int(op, C->dims[0].extent, &v) && v == 4096);
    RT_EXPECT(rt_expr_const_int(op, C->dims[1].extent, &v) && v == 4096);
    RT_EXPECT_EQ(op->n_stmts, 1);
    const rt_stmt *st = &op->stmts[0];
    RT_EXPECT_EQ(st->out, 2);
    RT_EXPECT_EQ(st->op, RT_ASSIGN_ADD_INIT);
    RT_EXPECT_EQ(st->n_lhs, 2);
    RT_EXPECT_EQ(st->n_vars, 3);
    RT_EXPECT_STR(st->vars[2].name, "k");
    RT_EXPECT(st->vars[2].is_reduce);
    RT_EXPECT(!st->vars[0].is_reduce);
    RT_EXPECT_EQ(st->n_loops, 3);
    RT_EXPECT_EQ(st->loops[2], 2);
    RT_EXPECT_EQ(st->rhs->kind, RT_EXPR_BINARY);
    RT_EXPECT_EQ(st->rhs->bop, RT_BOP_MUL);
    RT_EXPECT_EQ(st->rhs->args[0]->kind, RT_EXPR_READ);
    RT_EXPECT_EQ(st->rhs->args[0]->tensor, 0);
    RT_EXPECT_EQ(st->rhs->args[1]->args[0]->var, 2);
    RT_EXPECT_EQ(st->rhs->args[1]->loc.col, 27);
    RT_EXPECT_STR(expr_text(a, op, st, st->rhs), "A(m, k) * B(k, n)");
    RT_EXPECT(!st->rhs->is_int);
    rt_arena_free(a);
}

static void test_conv2d(void) {
    rt_arena *a = rt_arena_new(1 << 16);
    rt_op *op = load(a, "examples/conv2d.spec");
    if (!op)
        return rt_arena_free(a);
    const rt_tensor *I = &op->tensors[0], *O = &op->tensors[2];
    RT_EXPECT(I->has_pad);
    RT_EXPECT_NEAR(I->pad_value, 0, 0);
    RT_EXPECT(O->shape_given);
    const rt_stmt *st = &op->stmts[0];
    RT_EXPECT_EQ(st->n_vars, 7); // n f y x c r s
    RT_EXPECT_STR(st->vars[5].name, "r");
    const rt_expr *rd = st->rhs->args[0];
    RT_EXPECT_STR(expr_text(a, op, st, rd->args[2]), "2*y + r - 1");
    rt_affine af;
    RT_EXPECT(rt_expr_affine(op, rd->args[2], &af));
    RT_EXPECT_EQ(af.n_terms, 2);
    RT_EXPECT_EQ(af.c0, -1);
    RT_EXPECT_EQ(af.var[0], 2);
    RT_EXPECT_EQ(af.coef[0], 2);
    RT_EXPECT_EQ(af.coef[1], 1);
    RT_EXPECT(!rt_expr_affine(op, st->rhs, &af));
    rt_arena_free(a);
}

static void test_trmm(void) {
    rt_arena *a = rt_arena_new(1 << 16);
    rt_op *op = load(a, "examples/trmm.spec");
    if (!op)
        return rt_arena_free(a);
    const rt_tensor *L = &op->tensors[0];
    RT_EXPECT_STR(L->dims[0].name, "i");
    RT_EXPECT(L->ragged);
    RT_EXPECT(L->dims[1].ragged);
    RT_EXPECT(!L->dims[0].ragged);
    RT_EXPECT_EQ(L->dims[1].extent->kind, RT_EXPR_BINARY);
    RT_EXPECT_EQ(L->dims[1].extent->args[0]->kind, RT_EXPR_DIMREF);
    RT_EXPECT_EQ(L->dims[1].extent->args[0]->dim, 0);
    rt_buf b;
    rt_buf_init(&b, a);
    rt_expr_print(op, NULL, L, L->dims[1].extent, &b);
    RT_EXPECT_STR(b.data, "i + 1");
    rt_arena_free(a);
}

static void test_proj(void) {
    rt_arena *a = rt_arena_new(1 << 16);
    rt_op *op = load(a, "examples/proj.spec");
    if (!op)
        return rt_arena_free(a);
    const rt_tensor *len = &op->tensors[0], *X = &op->tensors[1];
    RT_EXPECT(len->is_length);
    RT_EXPECT_EQ(len->dtype, RT_DTYPE_I32);
    RT_EXPECT(X->ragged);
    RT_EXPECT(X->dims[1].ragged);
    const rt_expr *ext = X->dims[1].extent;
    RT_EXPECT_EQ(ext->kind, RT_EXPR_READ);
    RT_EXPECT_EQ(ext->tensor, 0);
    RT_EXPECT_EQ(ext->n_args, 1);
    RT_EXPECT_EQ(ext->args[0]->kind, RT_EXPR_DIMREF);
    RT_EXPECT_EQ(ext->args[0]->dim, 0);
    RT_EXPECT(ext->is_int);
    const rt_stmt *st = &op->stmts[0];
    RT_EXPECT(st->vars[1].ragged);
    RT_EXPECT_STR(expr_text(a, op, st, st->vars[1].hi), "len(b)");
    rt_arena_free(a);
}

static void test_treernn(void) {
    rt_arena *a = rt_arena_new(1 << 16);
    rt_op *op = load(a, "examples/treernn.spec");
    if (!op)
        return rt_arena_free(a);
    RT_EXPECT_EQ(op->n_trees, 1);
    const rt_tree *T = &op->trees[0];
    RT_EXPECT_STR(T->name, "T");
    RT_EXPECT_EQ(T->max_children, 2);
    RT_EXPECT_STR(op->sizes[T->n_sym].name, "N");
    RT_EXPECT(!op->sizes[T->n_sym].bound);
    int32_t word = tensor(op, "word"), h = tensor(op, "h");
    RT_EXPECT(op->tensors[word].is_index);
    RT_EXPECT(!op->tensors[word].is_length);
    RT_EXPECT_EQ(op->tensors[h].writer, 0);
    RT_EXPECT_EQ(op->n_stmts, 2);
    const rt_stmt *s0 = &op->stmts[0], *s1 = &op->stmts[1];
    RT_EXPECT_EQ(s0->n_preds, 1);
    RT_EXPECT(!s0->preds[0].negate);
    RT_EXPECT_STR(s0->preds[0].fn, "leaf");
    RT_EXPECT(s1->preds[0].negate);
    RT_EXPECT(!s0->recursive);
    RT_EXPECT(s1->recursive);
    // tanh(sum_j (...) / sqrt(H)): j reduced inside the call argument, not a loop
    RT_EXPECT_EQ(s1->n_loops, 2);
    RT_EXPECT_EQ(s1->rhs->kind, RT_EXPR_CALL);
    RT_EXPECT_EQ(s1->rhs->fn, RT_FN_TANH);
    const rt_expr *sum = s1->rhs->args[0];
    RT_EXPECT_EQ(sum->kind, RT_EXPR_SUM);
    RT_EXPECT_EQ(sum->n_sum_vars, 1);
    RT_EXPECT_STR(s1->vars[sum->sum_vars[0]].name, "j");
    RT_EXPECT_EQ(sum->args[0]->kind, RT_EXPR_BINARY);
    RT_EXPECT_EQ(sum->args[0]->bop, RT_BOP_DIV);
    // (Wl(i, j) * h(T.child(n, 0), j) + ...) / sqrt(H): the first child read
    const rt_expr *child = sum->args[0]->args[0]->args[0]->args[1]->args[0];
    RT_EXPECT_EQ(child->kind, RT_EXPR_CHILD);
    RT_EXPECT_EQ(child->tree, 0);
    RT_EXPECT_EQ(child->child, 0);
    RT_EXPECT(child->is_int);
    RT_EXPECT_STR(expr_text(a, op, s1, s1->rhs),
                  "tanh((Wl(i, j) * h(T.child(n, 0), j) + Wr(i, j) * h(T.child(n, 1), j)) / "
                  "sqrt(H))");
    RT_EXPECT_STR(expr_text(a, op, s0, s0->rhs), "Emb(word(n), i)");
    rt_arena_free(a);
}

// The op and the layer keep their own copy of the path: a caller's buffer may change or go
// after the parse (bench-model's path was a stack array read after its function returned).
static void test_path_copied(void) {
    rt_arena *a = rt_arena_new(1 << 16);
    char path[32] = "mine.spec";
    const char *text = "def f(float(4) X) -> (Y) {\n Y(i) = X(i) * 2\n}\n";
    rt_op *op = NULL;
    rt_layer *l = NULL;
    rt_err err = {0};
    RT_EXPECT_EQ(rt_spec_parse(a, text, path, NULL, 0, &op, &err), RT_OK);
    RT_EXPECT_EQ(rt_spec_parse_layer(a, text, path, NULL, 0, &l, &err), RT_OK);
    memset(path, 'x', sizeof path - 1);
    RT_EXPECT(op && op->file != path);
    RT_EXPECT_STR(op ? op->file : "", "mine.spec");
    RT_EXPECT_STR(op ? op->tensors[0].loc.file : "", "mine.spec");
    RT_EXPECT_STR(l ? l->file : "", "mine.spec");
    rt_arena_free(a);
}

static void test_softmax(void) {
    rt_arena *a = rt_arena_new(1 << 16);
    rt_op *op = load(a, "examples/softmax.spec");
    if (!op)
        return rt_arena_free(a);
    RT_EXPECT_EQ(op->n_stmts, 4);
    RT_EXPECT_EQ(op->n_tensors, 5); // X, Y, then temporaries mx, e, s
    RT_EXPECT_STR(op->tensors[2].name, "mx");
    RT_EXPECT_EQ(op->tensors[2].role, RT_ROLE_TEMP);
    RT_EXPECT_EQ(op->tensors[2].n_dims, 1);
    RT_EXPECT_EQ(op->tensors[3].writer, 1);
    RT_EXPECT_EQ(op->stmts[0].op, RT_ASSIGN_MAX_INIT);
    RT_EXPECT_EQ(op->stmts[2].op, RT_ASSIGN_ADD_INIT);
    RT_EXPECT_EQ(op->stmts[1].rhs->kind, RT_EXPR_CALL);
    RT_EXPECT_EQ(op->stmts[1].rhs->fn, RT_FN_EXP);
    RT_EXPECT_EQ(op->stmts[3].rhs->bop, RT_BOP_DIV);
    int64_t v;
    RT_EXPECT(rt_expr_const_int(op, op->tensors[3].dims[1].extent, &v) && v == 1024);
    rt_arena_free(a);
}

static void test_set_bindings(void) {
    rt_arena *a = rt_arena_new(1 << 16);
    rt_err err;
    const char *text = "size M = 8\ndef f(float(M) A) -> (C) {\n  C(i) = A(i)\n}\n";
    rt_size_binding set = {"M", 128};
    rt_op *op = parse(a, text, &set, 1, &err);
    RT_EXPECT(op != NULL);
    if (op) {
        RT_EXPECT_EQ(op->sizes[0].value, 128);
        RT_EXPECT(op->sizes[0].overridden);
    }
    rt_size_binding bad = {"Q", 4};
    RT_EXPECT(!parse(a, text, &bad, 1, &err));
    RT_EXPECT_EQ(err.status, RT_ERR_USAGE);
    RT_EXPECT(err.where.file == NULL);
    RT_EXPECT_STR(err.msg, "--set Q=4: no size 'Q' in x.spec");
    rt_size_binding zero = {"M", 0};
    RT_EXPECT(!parse(a, text, &zero, 1, &err));
    RT_EXPECT_EQ(err.status, RT_ERR_USAGE);
    rt_arena_free(a);
}

static void test_syntax(void) {
    rt_arena *a = rt_arena_new(1 << 16);
    rt_err err;
    RT_EXPECT(!parse(a, "", NULL, 0, &err));
    RT_EXPECT_STR(err.msg, "expected 'def' (got end of file)");
    RT_EXPECT_EQ(err.status, RT_ERR_SYNTAX);
    RT_EXPECT_EQ(err.where.line, 1);
    RT_EXPECT(!parse(a, "def f(float(8) A) -> (C) {\n  C(i) = A(i) ? 1\n}", NULL, 0, &err));
    RT_EXPECT_STR(err.msg, "expected ':' (got '}')");
    RT_EXPECT_EQ(err.where.line, 3);
    // precedence and printing of a mixed expression
    rt_op *op = parse(a,
                      "def f(float(8) A) -> (C) {\n"
                      "  C(i) = -A(i) * 2 + (A(i) - 1) / 3 < 1 && !(i % 2 == 0) ? 1.5 : 2\n}",
                      NULL, 0, &err);
    RT_EXPECT(op != NULL);
    if (op) {
        const rt_stmt *st = &op->stmts[0];
        RT_EXPECT_EQ(st->rhs->kind, RT_EXPR_COND);
        RT_EXPECT_EQ(st->rhs->args[0]->bop, RT_BOP_AND);
        RT_EXPECT_STR(expr_text(a, op, st, st->rhs),
                      "-A(i) * 2 + (A(i) - 1) / 3 < 1 && !(i%2 == 0) ? 1.5 : 2");
    }
    // directives parse and are kept
    op = parse(a,
               "size B = 4\ndef f(int32(B) len, float(b:B, len(b)) X) -> (Y) {\n"
               "  Y(b, i) = X(b, i)\n  @pad_loop(i, 32)\n  @order(b, longest_first)\n"
               "  @tile(shared, i=64, b=2)\n  @pad_storage(Y, 1, 64)\n}\n",
               NULL, 0, &err);
    RT_EXPECT(op != NULL);
    if (op) {
        RT_EXPECT_EQ(op->n_directives, 4);
        RT_EXPECT_STR(op->directives[2].name, "tile");
        RT_EXPECT_EQ(op->directives[2].n_args, 3);
        RT_EXPECT(op->directives[2].args[1].has_value);
        RT_EXPECT_EQ(op->directives[2].args[1].value, 64);
    }
    RT_EXPECT(!parse(a, "def f(float(8) A) -> (C) {\n  C(i) = A(i)\n  @order(i, random)\n}", NULL,
                     0, &err));
    RT_EXPECT_STR(err.msg, "@order: argument 2 must be longest_first, shortest_first or given");
    rt_arena_free(a);
}

static void test_print(void) {
    rt_arena *a = rt_arena_new(1 << 16);
    rt_op *op = load(a, "examples/matmul.spec");
    if (op) {
        rt_buf b;
        rt_buf_init(&b, a);
        rt_op_print(op, &b);
        RT_EXPECT_STR(b.data, "op matmul (examples/matmul.spec)\n"
                              "sizes: M = 4096, N = 4096, K = 1024\n"
                              "tensor A: float(M, K) input, dense 4096 x 1024, 16777216 bytes\n"
                              "tensor B: float(K, N) input, dense 1024 x 4096, 16777216 bytes\n"
                              "tensor C: float(M, N) output (inferred), dense 4096 x 4096, "
                              "67108864 bytes\n"
                              "stmt 1: C(m, n) +=! A(m, k) * B(k, n); accumulates in float\n"
                              "    loop m in 0:M (4096) spatial\n"
                              "    loop n in 0:N (4096) spatial\n"
                              "    loop k in 0:K (1024) reduce\n"
                              "    axes: [m] 4096, [n] 4096, [k] 1024 reduce\n");
        json_t *j = rt_op_to_json(op);
        json_t *t = json_array_get(json_object_get(j, "tensors"), 2);
        RT_EXPECT_STR(json_string_value(json_object_get(t, "storage")), "dense");
        RT_EXPECT_STR(json_string_value(json_object_get(t, "role")), "output");
        json_t *s = json_array_get(json_object_get(j, "statements"), 0);
        RT_EXPECT_STR(json_string_value(json_object_get(s, "text")),
                      "C(m, n) +=! A(m, k) * B(k, n)");
        json_t *k = json_array_get(json_object_get(s, "loops"), 2);
        RT_EXPECT_STR(json_string_value(json_object_get(s, "acc_dtype")), "float");
        RT_EXPECT(json_is_true(json_object_get(s, "reduces")));
        RT_EXPECT_EQ(json_integer_value(json_object_get(k, "extent")), 1024);
        RT_EXPECT(json_is_true(json_object_get(k, "reduce")));
        json_decref(j);
    }
    op = load(a, "examples/proj.spec");
    if (op) {
        rt_buf b;
        rt_buf_init(&b, a);
        rt_op_print(op, &b);
        RT_EXPECT(strstr(b.data, "tensor X: float(b:B, len(b), 512) input, ragged (packed)\n"));
        RT_EXPECT(strstr(b.data, "    loop i in 0:len(b) spatial vloop\n"));
        RT_EXPECT(strstr(b.data, "    axes: [b.i] ragged, [n] 512, [k] 512 reduce\n"));
        json_t *j = rt_op_to_json(op);
        json_t *x = json_array_get(json_object_get(j, "tensors"), 1);
        RT_EXPECT_STR(json_string_value(json_object_get(x, "storage")), "ragged (packed)");
        json_t *d1 = json_array_get(json_object_get(x, "dims"), 1);
        RT_EXPECT_STR(json_string_value(json_object_get(d1, "extent")), "len(b)");
        RT_EXPECT(json_is_true(json_object_get(d1, "ragged")));
        json_t *ax = json_array_get(
            json_object_get(json_array_get(json_object_get(j, "statements"), 0), "axes"), 0);
        RT_EXPECT_EQ(json_integer_value(json_object_get(ax, "extent")), -1);
        RT_EXPECT_EQ(json_array_size(json_object_get(ax, "members")), 2);
        json_decref(j);
    }
    rt_arena_free(a);
}

int main(void) {
    test_all_examples();
    test_matmul();
    test_conv2d();
    test_trmm();
    test_proj();
    test_treernn();
    test_softmax();
    test_path_copied();
    test_set_bindings();
    test_syntax();
    test_print();
    return rt_test_finish("test-spec-parse");
}
