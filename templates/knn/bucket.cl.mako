## params: REAL
## The two helpers of the E scan's buckets (pyedmcl.edm.scan_buckets), which find the
## neighbours of a bucket of E values with one state-space kernel of the bucket's largest
## E (EB coordinates) and K (KB neighbours).
##
## knn_columns: the (n, EB) matrix of a series whose row P holds x[P + j*tau] in column
## j < E where the window fits (P < rows), zeros elsewhere; one work-item per entry. Each
## distance over it adds the per-E kernel's terms in the same order plus exact zeros.
##
## knn_trim: a table of KB entries a row cut to its first k: entries k .. ld-1 of every
## row become empty slots (index -1, distance inf), as the knn kernel leaves slots with no
## admissible point. The k nearest in the kernel's total order are the first k of its KB
## nearest, so the cut table is the K = k kernel's bit for bit, and a lookup of K = KB
## over it skips the empty slots.
<%namespace name="metric" file="/common/_metric.mako"/>\
${metric.real_type(REAL)}

__kernel void knn_columns(__global const real_t* restrict x, const int n, const int rows,
                          const int E, const int tau, const int EB,
                          __global real_t* restrict out)
{
    const int P = get_global_id(0);
    const int j = get_global_id(1);
    if (P >= n || j >= EB) return;
    out[(size_t)P * EB + j] = (P < rows && j < E) ? x[P + j * tau] : (real_t)0;
}

__kernel void knn_trim(__global int* restrict idx, __global real_t* restrict dist,
                       const int rows, const int ld, const int k)
{
    const int r = get_global_id(0);
    if (r >= rows) return;
    const size_t o = (size_t)r * ld;
    for (int c = k; c < ld; c++) {
        idx[o + c] = -1;
        dist[o + c] = INFINITY;
    }
}
