## params: REAL
## A narrower library's k-NN tables read off wider ones (the lag scan of the all-to-all
## map, pyedmcl.xmap.lags): rows of KW entries in the knn kernel's total order
## (distance, then |p - l|, then l) over a library that holds every point of the
## window [lo, hi); the first K entries of a row whose point lies in the window are the
## first K of that order over the window's points, so this table equals the knn
## kernel's over the window's library bit for bit (the same distances, copied). The
## wider rows must hold at least K window points where the window has K (the host's
## KW: K plus the library points outside some window); a row with fewer is padded with
## index -1 and distance +inf, as the knn kernel pads.
## Input: nb libraries of `rows` rows of KW entries each, output row q of library b
## from input row row0 + q; output (nb, nq, K). K and KW are arguments: one program.
<%namespace name="metric" file="/common/_metric.mako"/>\
${metric.real_type(REAL)}

__kernel void knn_window(__global const int* restrict in_idx,
                         __global const real_t* restrict in_dist,
                         const int kw, const int rows, const int row0, const int nq,
                         const int lo, const int hi, const int k,
                         __global int* restrict out_idx, __global real_t* restrict out_dist)
{
    const int q = get_global_id(0);
    if (q >= nq) return;
    const size_t b = get_global_id(1);
    const size_t i = (b * (uint)rows + (uint)(row0 + q)) * (uint)kw;
    const size_t o = (b * (uint)nq + (uint)q) * (uint)k;
    int n = 0;
    for (int j = 0; j < kw && n < k; ++j) {
        const int l = in_idx[i + j];
        if (l < 0) break;  /* padding: no point after it */
        if (l >= lo && l < hi) {
            out_idx[o + n] = l;
            out_dist[o + n] = in_dist[i + j];
            ++n;
        }
    }
    for (; n < k; ++n) {
        out_idx[o + n] = -1;
        out_dist[o + n] = INFINITY;
    }
}
