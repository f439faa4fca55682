## params: REAL, METRIC
## A library window's k-NN tables from two lists per query (the lag scan of the
## all-to-all map, pyedmcl.xmap.lag_engine): the `core` list, the query's kc nearest
## among points that serve in every window, and the `edge` list, every other point of
## the windows (ke), each sorted in the knn kernel's total order (accumulated distance,
## then tie_key) with accumulated distances (the knn kernel with RAW=1). The window's
## library is the core points and the edge points in [lo, hi); its first k in that
## order are merged from the two lists (core entries all serve; an edge entry serves
## inside the window) and finished as the knn kernel finishes them, so the table is
## the knn kernel's over the window's library bit for bit (where kc >= k, or the core
## list holds every core point). A row with fewer is padded with index -1 and distance
## +inf, as the knn kernel pads. Inputs: nb libraries of `rows` rows; output row q of
## library b from input row row0 + q (query point qpts[row0 + q]), (nb, nq, k).
<%namespace name="metric" file="/common/_metric.mako"/>\
<%namespace name="topk" file="/common/_topk.mako"/>\
${metric.real_type(REAL)}

${topk.functions()}\

__kernel void knn_window(__global const int* restrict qpts, const int rows, const int row0,
                         const int nq, __global const int* restrict c_idx,
                         __global const real_t* restrict c_dist, const int kc,
                         __global const int* restrict e_idx,
                         __global const real_t* restrict e_dist, const int ke,
                         const int lo, const int hi, const int k,
                         __global int* restrict out_idx, __global real_t* restrict out_dist)
{
    const int q = get_global_id(0);
    if (q >= nq) return;
    const size_t b = get_global_id(1), r = b * (uint)rows + (uint)(row0 + q);
    const int p = qpts[row0 + q];
    const size_t ci = r * (uint)kc, ei = r * (uint)ke;
    const size_t o = (b * (uint)nq + (uint)q) * (uint)k;
    int i = 0, j = 0, n = 0;
    for (; n < k; ++n) {
        /* the next edge entry inside the window (a list ends at its first -1) */
        while (j < ke && e_idx[ei + j] >= 0 && (e_idx[ei + j] < lo || e_idx[ei + j] >= hi))
            ++j;
        const int lc = i < kc ? c_idx[ci + i] : -1;
        const int le = j < ke ? e_idx[ei + j] : -1;
        if (lc < 0 && le < 0) break;
        const real_t dc = lc < 0 ? INFINITY : c_dist[ci + i];
        const real_t de = le < 0 ? INFINITY : e_dist[ei + j];
        /* the two lists hold different points: their tie keys differ */
        const int core = le < 0 || (lc >= 0 && (dc < de || (dc == de && tie_key(p, lc) < tie_key(p, le))));
        out_idx[o + n] = core ? lc : le;
        out_dist[o + n] = ${metric.finish(METRIC, "(core ? dc : de)")};
        if (core) ++i; else ++j;
    }
    for (; n < k; ++n) {
        out_idx[o + n] = -1;
        out_dist[o + n] = INFINITY;
    }
}
