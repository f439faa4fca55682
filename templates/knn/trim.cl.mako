## params: REAL
## A k-NN table of KB entries a row cut to its first k: entries k .. ld-1 of every row
## become empty slots (index -1, distance inf), as the knn kernel leaves slots with no
## admissible point. The E scan beyond the fused range finds the neighbours of a bucket of
## E values with one kernel of the bucket's largest K (pyedmcl.edm.scan_buckets); the k
## nearest in the kernel's total order are the first k of its KB nearest, so the cut
## table is the K = k kernel's bit for bit, and a lookup of K = KB over it skips the
## empty slots.
<%namespace name="metric" file="/common/_metric.mako"/>\
${metric.real_type(REAL)}

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
