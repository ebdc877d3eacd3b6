// run.c: the candidate loop of the run layer (run.h) and the host data its backends share.
#include "run.h"

const int32_t *rt_run_tree_array(const rt_tree_data *t, rt_kir_tree_field f, int64_t *n) {
    switch (f) {
    case RT_KIR_TREE_CHILD:
        *n = (int64_t)t->n_nodes * t->max_children;
        return t->child;
    case RT_KIR_TREE_ORDER:
        *n = t->n_nodes;
        return t->order;
    case RT_KIR_TREE_LEVEL_BEGIN:
        *n = (int64_t)t->n_levels + 1;
        return t->level_begin;
    case RT_KIR_TREE_N_LEVELS:
        *n = 1;
        return &t->n_levels;
    default:
        *n = 0;
        return NULL;
    }
}
