## params: E, TAU, METRIC, REAL, FMA, G, MODE, THEILER_MATRIX
## version: 1
## Windowed RQA in one pass over the band of the recurrence matrix (pyedmcl/rqa/band.py):
## the band is cut into G x G tiles (G = gcd(window, step), so every window is a union of
## whole tiles) and each lane of a tile -- a column (MODE "vertical") or a diagonal
## (MODE "diagonal", local offset c - r = l - (G - 1)) -- is walked once. A lane's runs
## that touch neither end of the lane are counted in the tile's histograms (hb: black,
## hw: white, index length - 1; runs inside a tile lie inside every window holding the
## tile); its first and last runs go to first[] / last[] as `length | colour << 31`
## (first == last when the lane is one run), for the host to join the runs of
## consecutive tiles as each window cuts them. Vertical lanes also count their
## recurrences (nrec); diagonal lanes count black runs only (hw, nrec unused). Diagonal lanes with d = j - i < kmin are not analysed
## (first = last = 0). The recurrence decision is rqa_lines' (same distance sums, same
## `d < thr` on one precomputed threshold, THEILER_MATRIX: |i - j| < w is not recurrent).
<%namespace name="metric" file="/common/_metric.mako"/>
${metric.real_type(REAL)}
<% LANES = G if MODE == "vertical" else 2 * G - 1 %>

__kernel void rqa_band_${MODE}(__global const real_t* restrict x, const real_t thr,
                               __global const int* restrict ta, __global const int* restrict tb,
                               const int ntiles, const int w, const int kmin,
                               __global uint* restrict first, __global uint* restrict last,
                               __global uint* restrict nrec, __global uint* restrict hb,
                               __global uint* restrict hw)
{
    const int gid = get_global_id(0);
    const int t = gid / ${LANES}, l = gid - t * ${LANES};
    if (t >= ntiles) return;
    const int i0 = ta[t] * ${G}, j0 = tb[t] * ${G};
% if MODE == "vertical":
    const int r0 = 0, r1 = ${G}, off = 0, jc = j0 + l;   /* column j0 + l, rows i0 .. */
% else:
    const int off = l - ${G - 1};                          /* cells (i0 + r, j0 + r + off) */
    if (j0 - i0 + off < kmin) { first[gid] = 0u; last[gid] = 0u; return; }
    const int r0 = off < 0 ? -off : 0, r1 = off > 0 ? ${G} - off : ${G};
% endif
    uint cc = 2u, cl = 0u, fst = 0u, closed = 0u, cnt = 0u;
    for (int r = r0; r < r1; ++r) {
        const int i = i0 + r;
% if MODE == "vertical":
        const int j = jc;
% else:
        const int j = j0 + r + off;
% endif
        real_t acc = (real_t)0;
% for m in range(E):
        ${metric.step(METRIC, "acc", "x[i + %d]" % (m * TAU), "x[j + %d]" % (m * TAU), FMA=FMA)}
% endfor
        uint rec = (acc < thr) ? 1u : 0u;
% if THEILER_MATRIX:
        rec = (abs(i - j) >= w) ? rec : 0u;
% endif
        cnt += rec;
        if (rec == cc) {
            ++cl;
        } else {
            if (cl) {
                if (!closed) fst = cl | (cc << 31);
                else if (cc) atomic_inc(&hb[t * ${G} + cl - 1]);
% if MODE == "vertical":
                else atomic_inc(&hw[t * ${G} + cl - 1]);
% endif
                closed = 1u;
            }
            cc = rec;
            cl = 1u;
        }
    }
    const uint lst = cl | (cc << 31);
    first[gid] = closed ? fst : lst;
    last[gid] = lst;
% if MODE == "vertical":
    nrec[gid] = cnt;
% endif
}
