## params: E, TAU, METRIC, REAL, FMA, MODE, THEILER_MATRIX, WBORDER, W, S, WG, CH, NK, LB, OUTLINE, EXACT
## version: 2
## Windowed RQA in one pass over the band of the auto-recurrence matrix that the windows
## cover (pyedmcl/rqa/band.py). Window k is the square [kS, kS + W)^2 (k < nw). One
## work-item walks one lane once -- a column j over the rows of every window holding it
## (MODE "vertical"), or CH rows of a diagonal d = j - i >= kmin, cells in no window
## skipped (MODE "diagonal", black runs only; a work-item owns the runs that start in its
## CH rows and walks on past them to finish its last one) -- and, for each maximal run
## [s, e] of the lane, adds it to the histogram of every window it lies in, cut as that
## window cuts it: whole in the windows k_lo .. k_hi that contain it (one add at row k_lo
## and one subtract at row k_hi + 1 of a difference array over windows; the host's
## cumulative sum over k gives each window's histogram), cut at the top border in the
## windows whose top row kS falls inside it, cut at the bottom border in those whose
## bottom row does. Runs of white cells touching a window's top or bottom are dropped
## with WBORDER=0 (CRP toolbox). Histograms: int32 [(nw + 1) * W], index
## k * W + length - 1. A work-group's adds for its NK windows from KL on and lengths
## <= LB go to local histograms first (LB = 0: none), flushed once. The recurrence
## decision is rqa_lines' (same distance sums, `d < thr` on one precomputed threshold,
## THEILER_MATRIX: |i - j| < w is not recurrent), so every window equals rqa() of it.
## EXACT=1 (float32 on a device with fp64): the cells within the float32 error bound of
## the threshold are redone in double from the raw series (xd64) and decided by
## d64 < thr64, as rqa_lines' EXACT does (common/_exact.mako, pyedmcl/rqa/exact.py).
## OUTLINE=1 keeps close_run a called function (GPUs): inlined into the lane walks, NVIDIA's
## OpenCL compiler (H100, driver 580) miscounts the cut runs at S = 1 (decision 0055).
<%namespace name="metric" file="/common/_metric.mako"/>
<%namespace name="exact" file="/common/_exact.mako"/>
${metric.real_type(REAL)}
${exact.functions()}

inline int fdiv(const int a, const int b) { return a >= 0 ? a / b : -((b - 1 - a) / b); }
inline int cdiv(const int a, const int b) { return -fdiv(-a, b); }

/* v into difference bin (k, len): local when the work-group holds it, else global */
inline void add(__global int* h, __local int* lh, const int KL, const int k, const int len,
                const int v)
{
% if LB:
    const int kk = k - KL;
    if (kk >= 0 && kk < ${NK} && len <= ${LB}) { atomic_add(&lh[kk * ${LB} + len - 1], v); return; }
% endif
    atomic_add(&h[k * ${W} + len - 1], v);
}

/* run of length len whole in windows lo .. hi */
inline void whole(__global int* h, __local int* lh, const int KL, const int lo, const int hi,
                  const int len)
{
    if (lo > hi) return;
    add(h, lh, KL, lo, len, 1);
    add(h, lh, KL, hi + 1, len, -1);
}

/* Run [s, e] of a lane whose cells in window k are the rows kS .. kS + W - 1 - d (d: the
   diagonal, 0 for a column), windows klo .. khi holding the lane. `inside` bounds come
   from the caller (they differ for a column's white runs without WBORDER); cut runs are
   counted when `cuts`. */
${"__attribute__((noinline))" if OUTLINE else "inline"} void close_run(__global int* h, __local int* lh, const int KL, const int s,
                      const int e, const int lo_in, const int hi_in, const int klo,
                      const int khi, const int d, const int cuts)
{
    const int W = ${W}, S = ${S};
    whole(h, lh, KL, max(lo_in, klo), min(hi_in, khi), e - s + 1);
    if (!cuts) return;
    /* top cuts: s < kS <= e */
    for (int k = max(klo, fdiv(s, S) + 1), kt = min(khi, fdiv(e, S)); k <= kt; ++k) {
        const int len = min(e, k * S + W - 1 - d) - k * S + 1;
        whole(h, lh, KL, k, k, len);
    }
    /* bottom cuts: kS <= s <= kS + W - 1 - d < e */
    for (int k = max(klo, cdiv(s - W + 1 + d, S)), kt = min(khi, fdiv(min(s, e - W + d), S));
         k <= kt; ++k)
        whole(h, lh, KL, k, k, k * S + W - d - s);
}

/* a column j's run [s, e] of colour c (windows klo .. khi hold the column) */
inline void vertical_run(__global int* hb, __global int* hw, __local int* lb, __local int* lw,
                         const int KL, const int s, const int e, const int c, const int j,
                         const int klo, const int khi)
{
    const int W = ${W}, S = ${S};
    if (c || ${WBORDER})   /* whole where kS <= min(s, j) and max(e, j) <= kS + W - 1 */
        close_run(c ? hb : hw, c ? lb : lw, KL, s, e, cdiv(max(e, j) - W + 1, S),
                  fdiv(min(s, j), S), klo, khi, 0, 1);
    else                   /* white, not touching the window's top or bottom */
        close_run(hw, lw, KL, s, e, cdiv(max(e + 1, j) - W + 1, S), fdiv(min(s - 1, j), S),
                  klo, khi, 0, 0);
}

/* a diagonal d's black run [s, e] (rows i): whole where kS <= s and e + d <= kS + W - 1 */
inline void diagonal_run(__global int* hb, __local int* lb, const int KL, const int s,
                         const int e, const int d, const int nw)
{
    close_run(hb, lb, KL, s, e, cdiv(e + d - ${W} + 1, ${S}), fdiv(s, ${S}), 0, nw - 1, d, 1);
}

<%def name="cell(acc, i, other)">\
        real_t ${acc} = (real_t)0;
% for m in range(E):
        ${metric.step(METRIC, acc, "x[%s + %d]" % (i, m * TAU), other(m), FMA=FMA)}
% endfor
</%def>
<% NH = 2 if MODE == "vertical" else 1 %>
__kernel __attribute__((reqd_work_group_size(${WG}, 1, 1)))
void rqa_band_${MODE}(__global const real_t* restrict x,
${exact.args_auto()}\
                      const real_t thr, const int lane0,
                      const int nlanes, const int nw, const int w,
                      __global int* restrict hb, __global int* restrict hw)
{
    const int W = ${W}, S = ${S};
    const int lid = get_local_id(0);
    __local int lh[${max(NH * NK * LB, 1)}];
    __local int* lb = lh;
    __local int* lw = lh + ${NK * LB};
    for (int b = lid; b < ${NH * NK * LB}; b += ${WG}) lh[b] = 0;
    barrier(CLK_LOCAL_MEM_FENCE);
% if MODE == "vertical":
    const int j = lane0 + (int)get_global_id(0);
    const int KL = max(0, cdiv(lane0 + (int)get_group_id(0) * ${WG} - W + 1, S));
    const int klo = max(0, cdiv(j - W + 1, S)), khi = min(nw - 1, fdiv(j, S));
    if ((int)get_global_id(0) < nlanes && klo <= khi) {
        const int r0 = klo * S, r1 = khi * S + W;     /* rows of the windows holding j */
        real_t yj[${E}];
%   for m in range(E):
        yj[${m}] = x[j + ${m * TAU}];
%   endfor
        int cc = -1, s = r0;
        for (int i = r0; i < r1; ++i) {
${cell("acc", "i", lambda m: "yj[%d]" % m)}\
            int rec = (acc < thr) ? 1 : 0;
${exact.redo("rec", "acc - thr", "exb", "i", "j", 1, series=("xd64", "xd64"), pad=0, bounds=False)}\
%   if THEILER_MATRIX:
            rec = (i - j >= w || j - i >= w) ? rec : 0;
%   endif
            if (rec != cc) {
                if (cc >= 0) vertical_run(hb, hw, lb, lw, KL, s, i - 1, cc, j, klo, khi);
                cc = rec;
                s = i;
            }
        }
        if (cc >= 0) vertical_run(hb, hw, lb, lw, KL, s, r1 - 1, cc, j, klo, khi);
    }
% else:
    const int d = lane0 + (int)get_global_id(0);      /* cells (i, i + d) */
    const int i0 = (int)get_global_id(1) * ${CH};
    const int KL = max(0, cdiv(i0 - W + 1, S));
    const int r1 = (nw - 1) * S + W - d, iend = min(i0 + ${CH}, r1);
    if ((int)get_global_id(0) < nlanes && i0 < r1) {
        int cc = -1, s = i0, own = 0;
        if (i0 > 0 && i0 - 1 + d <= min((i0 - 1) / S, nw - 1) * S + W - 1) {
${cell("acc0", "(i0 - 1)", lambda m: "x[i0 - 1 + d + %d]" % (m * TAU))}\
            cc = (acc0 < thr) ? 1 : 0;                /* a run from the rows before */
${exact.redo("cc", "acc0 - thr", "exb", "i0 - 1", "i0 - 1 + d", 1, series=("xd64", "xd64"), pad=0, bounds=False)}\
        }
        int i = i0;
        for (; i < r1; ++i) {
            int rec = -1;                             /* -1: in no window, the lane breaks */
            if (i + d <= min(i / S, nw - 1) * S + W - 1) {
${cell("acc", "i", lambda m: "x[i + d + %d]" % (m * TAU))}\
                rec = (acc < thr) ? 1 : 0;
${exact.redo("rec", "acc - thr", "exb", "i", "i + d", 1, series=("xd64", "xd64"), pad=0, bounds=False)}\
            }
            if (rec != cc) {
                if (own && cc == 1) diagonal_run(hb, lb, KL, s, i - 1, d, nw);
                own = 0;
                if (i >= iend) break;                 /* the next work-item's run */
                cc = rec;
                s = i;
                own = rec >= 0;
            } else if (i >= iend && !(own && cc == 1)) {
                own = 0;
                break;
            }
        }
        if (own && cc == 1) diagonal_run(hb, lb, KL, s, i - 1, d, nw);
    }
% endif
% if LB:
    barrier(CLK_LOCAL_MEM_FENCE);
    for (int b = lid; b < ${NH * NK * LB}; b += ${WG}) {
        const int v = lh[b];
        if (v) {
            const int q = b % ${NK * LB};
            atomic_add(&(b < ${NK * LB} ? hb : hw)[(KL + q / ${LB}) * W + q % ${LB}], v);
        }
    }
% endif
}
