// layout.h: THE storage layout of dense and ragged tensors. The interpreter builds it from the
// bound sizes and lengths (interp.c); the backends' kernels address memory the same way.
#ifndef RT_LAYOUT_H
#define RT_LAYOUT_H

#include "rt.h"
#include "spec.h" // RT_MAX_DIMS

// ---------------------------------------------------------------------------------------------
// Storage layout of a tensor (dense or ragged), interp.c
//
// Every tensor is one flat array. For dims d0..d(n-1), a ragged dim's extent is evaluated with
// the indices of the outer dims it depends on; the stored elements are exactly the valid index
// tuples, in lexicographic (row-major) order, PACKED: no padding between slices (CORA).
//
// Offsets: let pos(-1) = 0 and, from the outermost dim inwards,
//     dense dim k:   pos(k) = pos(k-1) * extent[k] + i_k
//     ragged dim k:  pos(k) = start[k][pos(k-1)] + i_k
// pos(k) is the rank of the prefix (i0..ik) among the valid prefixes of length k+1 in
// lexicographic order; pos(n-1) is the element's offset. start[k] is the exclusive prefix sum
// of the extent of dim k over the prefixes of length k (n_rows[k] + 1 entries), so the extent
// of dim k under prefix p is start[k][p+1] - start[k][p] and every access is O(rank).
// Example: float(b:3, len(b), 2) X with len = {2, 0, 3}: n_rows = {1, 3, 5, 10},
// start[1] = {0, 2, 2, 5}; X(2, 1, 0) is at (start[1][2] + 1) * 2 + 0 = 6.
// ---------------------------------------------------------------------------------------------

typedef struct rt_layout {
    int32_t n_dims;
    int64_t extent[RT_MAX_DIMS];     // dense dim: its extent; ragged dim: -1
    int64_t *start[RT_MAX_DIMS];     // ragged dim k: [n_rows[k] + 1]; NULL for dense dims
    int64_t n_rows[RT_MAX_DIMS + 1]; // n_rows[k]: valid prefixes of length k; [0] = 1
    int64_t elems;                   // stored elements = n_rows[n_dims]
} rt_layout;

// Offset of the element at idx[0..n_dims); false when some index is outside its extent.
bool rt_layout_offset(const rt_layout *l, const int64_t *idx, int64_t *out_offset);

#endif
