## params: E, TAU, METRIC, REAL, FMA, MODE, THEILER_MATRIX, WBORDER
## version: 1
## Windowed RQA in one pass over the band of the auto-recurrence matrix that the windows
## cover (pyedmcl/rqa/band.py). Window k is the square [kS, kS + W)^2 (k < nw). One
## work-item walks one lane once -- a column j over the rows of every window holding it
## (MODE "vertical"), or a diagonal d = j - i >= kmin over the rows i whose cell lies in
## some window (MODE "diagonal", black runs only) -- and, for each maximal run [s, e] of
## the lane, adds it to the histogram of every window it lies in, cut as each window cuts
## it: whole in the windows k_lo .. k_hi that contain it (one add at row k_lo and one
## subtract at row k_hi + 1 of a difference array over windows; the host's cumulative sum
## over k gives each window's histogram), cut at the top border in the windows whose top
## row kS falls inside it, cut at the bottom border in those whose bottom row does. Runs
## of white cells touching a window's top or bottom are dropped with WBORDER=0 (CRP
## toolbox). Histograms: int32 [(nw + 1) * W], index k * W + length - 1. The recurrence
## decision is rqa_lines' (same distance sums, `d < thr` on one precomputed threshold,
## THEILER_MATRIX: |i - j| < w is not recurrent), so every window equals rqa() of it.
<%namespace name="metric" file="/common/_metric.mako"/>
${metric.real_type(REAL)}

inline int fdiv(const int a, const int b) { return a >= 0 ? a / b : -((b - 1 - a) / b); }
inline int cdiv(const int a, const int b) { return -fdiv(-a, b); }

/* run of length len whole in windows lo .. hi */
inline void whole(__global int* h, const int lo, const int hi, const int len, const int W)
{
    if (lo > hi) return;
    atomic_add(&h[lo * W + len - 1], 1);
    atomic_sub(&h[(hi + 1) * W + len - 1], 1);
}

/* Run [s, e] of a lane whose cells in window k are the rows kS .. kS + W - 1 - d (d: the
   diagonal, 0 for a column), windows klo .. khi holding the lane. `inside` bounds come
   from the caller (they differ for a column's white runs without WBORDER); cut runs are
   counted when `cuts`. */
inline void close_run(__global int* h, const int s, const int e, const int lo_in,
                      const int hi_in, const int klo, const int khi, const int d,
                      const int W, const int S, const int cuts)
{
    whole(h, max(lo_in, klo), min(hi_in, khi), e - s + 1, W);
    if (!cuts) return;
    /* top cuts: s < kS <= e */
    for (int k = max(klo, fdiv(s, S) + 1), kt = min(khi, fdiv(e, S)); k <= kt; ++k) {
        const int len = min(e, k * S + W - 1 - d) - k * S + 1;
        whole(h, k, k, len, W);
    }
    /* bottom cuts: kS <= s <= kS + W - 1 - d < e */
    for (int k = max(klo, cdiv(s - W + 1 + d, S)), kt = min(khi, fdiv(min(s, e - W + d), S));
         k <= kt; ++k)
        whole(h, k, k, k * S + W - d - s, W);
}

/* a column j's run [s, e] of colour c (windows klo .. khi hold the column) */
inline void vertical_run(__global int* hb, __global int* hw, const int s, const int e,
                         const int c, const int j, const int klo, const int khi, const int W,
                         const int S)
{
    if (c || ${WBORDER})   /* whole where kS <= min(s, j) and max(e, j) <= kS + W - 1 */
        close_run(c ? hb : hw, s, e, cdiv(max(e, j) - W + 1, S), fdiv(min(s, j), S), klo, khi,
                  0, W, S, 1);
    else                   /* white, not touching the window's top or bottom */
        close_run(hw, s, e, cdiv(max(e + 1, j) - W + 1, S), fdiv(min(s - 1, j), S), klo, khi,
                  0, W, S, 0);
}

/* a diagonal d's black run [s, e] (rows i): whole where kS <= s and e + d <= kS + W - 1 */
inline void diagonal_run(__global int* hb, const int s, const int e, const int d,
                         const int nw, const int W, const int S)
{
    close_run(hb, s, e, cdiv(e + d - W + 1, S), fdiv(s, S), 0, nw - 1, d, W, S, 1);
}

__kernel void rqa_band_${MODE}(__global const real_t* restrict x, const real_t thr,
                               const int lane0, const int nlanes, const int W, const int S,
                               const int nw, const int w,
                               __global int* restrict hb, __global int* restrict hw)
{
    const int gid = get_global_id(0);
    if (gid >= nlanes) return;
% if MODE == "vertical":
    const int j = lane0 + gid;
    const int klo = max(0, cdiv(j - W + 1, S)), khi = min(nw - 1, fdiv(j, S));
    if (klo > khi) return;
    const int r0 = klo * S, r1 = khi * S + W;         /* rows of the windows holding j */
    real_t yj[${E}];
%   for m in range(E):
    yj[${m}] = x[j + ${m * TAU}];
%   endfor
% else:
    const int d = lane0 + gid;                        /* cells (i, i + d) */
    const int r0 = 0, r1 = (nw - 1) * S + W - d;
% endif
    int cc = -1, s = r0;
    for (int i = r0; i < r1; ++i) {
% if MODE == "diagonal":
        const int kb = min(i / S, nw - 1);            /* the window reaching furthest right */
        if (i + d > kb * S + W - 1) {                 /* in no window: the lane breaks here */
            if (cc == 1) diagonal_run(hb, s, i - 1, d, nw, W, S);
            cc = -1;
            continue;
        }
% endif
        real_t acc = (real_t)0;
% for m in range(E):
%   if MODE == "vertical":
        ${metric.step(METRIC, "acc", "x[i + %d]" % (m * TAU), "yj[%d]" % m, FMA=FMA)}
%   else:
        ${metric.step(METRIC, "acc", "x[i + %d]" % (m * TAU), "x[i + d + %d]" % (m * TAU), FMA=FMA)}
%   endif
% endfor
        int rec = (acc < thr) ? 1 : 0;
% if THEILER_MATRIX and MODE == "vertical":
        rec = (i - j >= w || j - i >= w) ? rec : 0;
% endif
        if (rec != cc) {
% if MODE == "vertical":
            if (cc >= 0) vertical_run(hb, hw, s, i - 1, cc, j, klo, khi, W, S);
% else:
            if (cc == 1) diagonal_run(hb, s, i - 1, d, nw, W, S);
% endif
            cc = rec;
            s = i;
        }
    }
% if MODE == "vertical":
    if (cc >= 0) vertical_run(hb, hw, s, r1 - 1, cc, j, klo, khi, W, S);
% else:
    if (cc == 1) diagonal_run(hb, s, r1 - 1, d, nw, W, S);
% endif
}
