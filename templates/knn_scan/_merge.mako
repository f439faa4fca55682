## knn_scan.cl.mako with SPLIT > 1: kernel knn_scan_merge merges the SPLIT partial
## sorted lists of each (E, query) by the total order (distance, |p - l|, l); needs the
## KS table and KMAX of the main template.
<%namespace name="metric" file="/common/_metric.mako"/>
<%def name="kernel()">\
/* merge the SPLIT partial sorted lists of each (E, query) by (distance, |p - l|, l) */
__kernel void knn_scan_merge(__global const int* restrict ints, const int nq,
                             __global const int* restrict pidx, __global const real_t* restrict pdist,
                             __global int* restrict out_idx, __global real_t* restrict out_dist)
{
    const int q = get_global_id(0);
    const int j = get_global_id(1);
    if (q >= nq) return;
    {   /* series batching (grid dimension 2), as knn_scan */
        const size_t b = get_global_id(2), plane = (size_t)${EMAX} * nq * KMAX;
        pidx += b * ${SPLIT} * plane;
        pdist += b * ${SPLIT} * plane;
        out_idx += b * plane;
        out_dist += b * plane;
    }
    const int p = ints[nq + q];
    const int K = KS[j];
    const size_t plane = (size_t)${EMAX} * nq * KMAX;
    const size_t row = ((size_t)j * nq + q) * KMAX;
    int h[${SPLIT}];
    for (int s = 0; s < ${SPLIT}; ++s) h[s] = 0;
    for (int k = 0; k < KMAX; ++k) {
        int best = -1, bl = -1, bkey = 0;
        real_t bd = INFINITY;
        if (k < K) {
            for (int s = 0; s < ${SPLIT}; ++s) {
                if (h[s] >= K) continue;
                const int l = pidx[s * plane + row + h[s]];
                if (l < 0) continue;
                const real_t d = pdist[s * plane + row + h[s]];
                const int key = tie_key(p, l);
                if (best < 0 || d < bd || (d == bd && key < bkey)) {
                    best = s; bl = l; bd = d; bkey = key;
                }
            }
        }
        if (best >= 0) h[best] += 1;
        out_idx[row + k] = bl;
        out_dist[row + k] = bl < 0 ? INFINITY : ${"bd" if context.get("RAW", 0) else metric.finish(METRIC, "bd")};
    }
}
</%def>
