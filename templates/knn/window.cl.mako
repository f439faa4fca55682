## params: REAL, METRIC
## A library window's k-NN tables from two lists per query (the lag scan of the
## all-to-all map, pyedmcl.xmap.lag_engine): the `core` list, the query's kc nearest
## among points that serve in every window, and the `edge` list, every other point of
## the windows (ke), each sorted in the knn kernel's total order (accumulated distance,
## then tie_key) with accumulated distances (the knn kernel or the fused scan with
## RAW=1). The window's library is the core points and the edge points in [lo, hi); its
## first k in that order are merged from the two lists (core entries all serve; an edge
## entry serves inside the window) and finished as the knn kernel finishes them, so the
## table is the knn kernel's over the window's library bit for bit (where the core list
## holds k, or every core point). A row with fewer is padded with index -1 and distance
## +inf, as the knn kernel pads. ke = 0: the core list alone, finished.
## Addressing: list X's row of query q of library b at X_bs * b + X_off + (row0 + q) *
## X_ld (the fused scan's tables: rows of KMAX, an E plane of a library's block); an
## entry l of list X stands for point l + X_sh in the output's points, whose query is
## qpts[row0 + q] (tie keys are differences of points: a shift leaves them alone).
## Output (nb, nq, k).
<%namespace name="metric" file="/common/_metric.mako"/>\
<%namespace name="topk" file="/common/_topk.mako"/>\
${metric.real_type(REAL)}

${topk.functions()}\

__kernel void knn_window(__global const int* restrict qpts, const int row0, const int nq,
                         const int lo, const int hi, const int k,
                         __global const int* restrict c_idx,
                         __global const real_t* restrict c_dist, const int kc,
                         const int c_ld, const ulong c_bs, const ulong c_off, const int c_sh,
                         __global const int* restrict e_idx,
                         __global const real_t* restrict e_dist, const int ke,
                         const int e_ld, const ulong e_bs, const ulong e_off, const int e_sh,
                         __global int* restrict out_idx, __global real_t* restrict out_dist)
{
    const int q = get_global_id(0);
    if (q >= nq) return;
    const size_t b = get_global_id(1);
    const int p = qpts[row0 + q];
    const size_t ci = b * c_bs + c_off + (size_t)(row0 + q) * (uint)c_ld;
    const size_t ei = b * e_bs + e_off + (size_t)(row0 + q) * (uint)e_ld;
    const size_t o = (b * (uint)nq + (uint)q) * (uint)k;
    int i = 0, j = 0, n = 0;
    for (; n < k; ++n) {
        /* the next edge entry inside the window (a list ends at its first -1) */
        while (j < ke && e_idx[ei + j] >= 0
               && (e_idx[ei + j] + e_sh < lo || e_idx[ei + j] + e_sh >= hi))
            ++j;
        const int lc = i < kc && c_idx[ci + i] >= 0 ? c_idx[ci + i] + c_sh : -1;
        const int le = j < ke && e_idx[ei + j] >= 0 ? e_idx[ei + j] + e_sh : -1;
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
