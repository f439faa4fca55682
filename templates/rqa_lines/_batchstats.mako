## MODE "bstats" of rqa_lines (WG alone shapes it): what the measures take from the
## histograms of a batch launch (MODE bvertical / bdiagonal, _batch.mako), so that the host
## reads a few numbers and the nonzero bins per series instead of every bin. One
## work-group per (series g, kind q: 0 diagonal, 1 vertical, 2 white) of the launch; its
## WG work-items take consecutive slices of the hstride bins. Per (g, q):
##   stats[4 (3 g + q) ..]: points in lines >= lmin, points in all lines, lines >= lmin,
##     the longest line (0: none) -- each < 2^32 (lines of n <= 4095 points: n^2 cells);
##   offs[2 (3 g + q) ..]: where its counts start in vals, and how many: the nonzero bins of
##     lengths >= lmin, in length order (what the entropies sum), placed by one atomic add
##     on `used` (vals holds every bin of the launch: it never overflows).
## Import with <%namespace name="bstats" file="/rqa_lines/_batchstats.mako"/>.

<%def name="kernel()">\
__kernel __attribute__((reqd_work_group_size(${WG}, 1, 1)))
void rqa_bstats(__global const uint* restrict hd, __global const uint* restrict hv,
                __global const uint* restrict hw, const int hstride,
                const int lmin_d, const int lmin_v, const int lmin_w,
                __global uint* restrict stats, __global uint* restrict offs,
                __global uint* restrict vals, __global uint* restrict used)
{
    const int gq = get_group_id(0), g = gq / 3, q = gq % 3, t = get_local_id(0);
    __global const uint* const h = (q == 0 ? hd : (q == 1 ? hv : hw)) + (size_t)g * hstride;
    const uint lmin = (uint)(q == 0 ? lmin_d : (q == 1 ? lmin_v : lmin_w));
    const int seg = (hstride + ${WG - 1}) / ${WG};
    const int b0 = IMIN(t * seg, hstride), b1 = IMIN(b0 + seg, hstride);
    __local uint cnt[${WG + 1}];
    __local uint acc[4];
    __local uint base;
    if (t < 4) acc[t] = 0u;
    barrier(CLK_LOCAL_MEM_FENCE);
    uint c = 0u, pmin = 0u, pall = 0u, lines = 0u, top = 0u;
    for (int b = b0; b < b1; ++b) {
        const uint k = h[b], len = (uint)b + 1u;
        if (k) {
            pall += k * len;
            top = len;
            if (len >= lmin) { pmin += k * len; lines += k; ++c; }
        }
    }
    cnt[t + 1] = c;
    if (pmin) atomic_add(&acc[0], pmin);
    if (pall) atomic_add(&acc[1], pall);
    if (lines) atomic_add(&acc[2], lines);
    if (top) atomic_max(&acc[3], top);
    barrier(CLK_LOCAL_MEM_FENCE);
    if (t == 0) {   /* the slices' first value, in order; the (g, q)'s place in vals */
        cnt[0] = 0u;
        for (int i = 1; i <= ${WG}; ++i) cnt[i] += cnt[i - 1];
        base = atomic_add(used, cnt[${WG}]);
        for (int i = 0; i < 4; ++i) stats[4 * gq + i] = acc[i];
        offs[2 * gq] = base;
        offs[2 * gq + 1] = cnt[${WG}];
    }
    barrier(CLK_LOCAL_MEM_FENCE);
    uint at = base + cnt[t];
    for (int b = b0; b < b1; ++b) {
        const uint k = h[b];
        if (k && (uint)b + 1u >= lmin) vals[at++] = k;
    }
}
</%def>
