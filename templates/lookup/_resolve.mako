## The lookup template's RESOLVE part (simplex_lookup.cl.mako; reads K, E, TAU, FMA,
## VARIANCE from the template's context): the function `resolve` that check's bound()
## calls for a flagged prediction.
##
## RESOLVE (with CHECK, KS = K + 2, fp64): a flagged prediction is redone here when the
## float64 call's K neighbours must lie among the table's first K + 1: the (K + 2)-th
## float32 distance less its D exceeds every first K + 1 distance plus its D (every other
## point lies at least as far in float32: the exact distances keep that order). The
## table's entries K and K + 1 may be empty where no point lies within its margin
## (the k-NN's NEAR contract, knn.cl.mako): the margin, RESOLVE_WIDTHS bounds past entry
## K - 1, then stands for the (K + 2)-th distance, and an empty entry K leaves the first
## K candidates. Those candidates' distances are then computed
## as the float64 k-NN kernel does (x64: the float64 call's series; coordinates newest
## first, FMA as the job's, contraction off), ordered by (distance, |p - l|, l), and the
## first K weighed as the float64 lookup does (y64: its targets, the same ldy and tshift);
## the prediction and variance are written in the kernel's units as patch writes them
## (the targets' shift and scale: units[2 nt + j], units[3 nt + j]), and listed with its query, target and float64 values (resolved, 4
## doubles a slot, count nflag[1]; past cap slots it stays flagged). Such a prediction is
## not flagged: only the others are counted and redone by the host (their float64 k-NN). Near-ties at the K-th place of continuous
## data resolve here; decimal data's wider ties may not. Nor is a prediction whose float64
## K-th and (K + 1)-th distances lie within PYEDM_TIE_WIDTH of each other: pyEDM may rank
## them otherwise, and the host decides such rows by its rule (pyedmcl/edm/simplex_ties.py).
##
## Several targets (nt > 1): the first of a query's resolved predictions lists the query
## (check's seen list) and records its float64 neighbours (recs, 1 + 2K doubles a slot:
## their count, points and squared distances). Where the resolved predictions overflow
## their list, the host takes every target of a flagged row from the float64 call (a
## row of 20,000 targets resolved for a few of them): resolve_rows, launched behind the
## lookup, then weighs every target of each recorded query as resolve does, writes the
## predictions (and variances) in the kernel's units and their float64 values p64 / v64
## ((rows_cap, nt), slot s the list's s-th query) before the skill, so that no float64
## k-NN nor a second skill runs for those rows. It does nothing where the list held the
## predictions (report[1] <= cap) or the rows exceed rows_cap (all are redone by the host).

## the function (before the lookup kernel): 1 where prediction (b, j, q) was redone
## from the float64 distances of the table's first K + 1 candidates, else 0
<%def name="resolve_fn()">\
% if RESOLVE:
/* the bounds past the table's entry K - 1 within which its k-NN kernel keeps every
   point (NEAR_WIDTHS of knn/_near.mako, 16, less the float32 rounding of its limit) */
#define RESOLVE_WIDTHS 12
/* pyedmcl/edm/simplex_ties.py's tie_width(E): float64 distances at the knn-th place
   this close may be ordered otherwise by pyEDM */
#define PYEDM_TIE_WIDTH ${"%r" % (4.0 * (E + 4) * 2.0 ** -53)}

/* the float64 k-NN kernel's distance (squared) of kernel points l and p */
inline double exact_acc(__global const double* restrict x, const int l, const int p)
{
    double acc = 0;
%   for m in reversed(range(E)):
    {
        const double _d = x[l + ${m * TAU}] - x[p + ${m * TAU}];
%     if FMA:
        acc = fma(_d, _d, acc);
%     else:
        acc += _d * _d;
%     endif
    }
%   endfor
    return acc;
}

/* whether candidate (a, c, l) comes after (a0, c0, l0) in the k-NN kernel's order */
inline int exact_after(const double a, const int c, const int l,
                       const double a0, const int c0, const int l0)
{
    return a > a0 || (a == a0 && (c > c0 || (c == c0 && l > l0)));
}

/* the float64 lookup (lookup, REAL double) of the first nk of the candidates (squared
   distances a, points li, in the k-NN kernel's order) for target row yj: weights,
   prediction mu and (VARIANCE) its variance, NaN without neighbours */
inline void weigh(const double* a, const int* li, const int nk, __global const double* yj,
                  double* mu_out, double* v_out)
{
    const double dmin = fmax(sqrt(a[0]), 1e-6);
    double num = 0, den = 0;
    for (int i = 0; i < nk; ++i) {
        const double w = exp(-sqrt(a[i]) / dmin);
        num += w * yj[li[i]];
        den += w;
    }
    const double mu = den > 0 ? num / den : (double)NAN;
%   if VARIANCE:
    double v = 0;
    for (int i = 0; i < nk; ++i) {
        const double w = exp(-sqrt(a[i]) / dmin);
        const double e = yj[li[i]] - mu;
        v += w * e * e;
    }
    *v_out = den > 0 ? v / den : (double)NAN;
%   else:
    *v_out = (double)NAN;
%   endif
    *mu_out = mu;
}

int resolve(__global const int* restrict idx, __global const real_t* restrict dist,
            const size_t o, const int q, const int j, const int b, const int nq, const int nt,
            const acc_t u2, const acc_t qn2, const acc_t erel,
            __global const double* restrict x64, __global const double* restrict y64,
            const int ldy, const int tshift, __global const int* restrict qpts,
            __global const double* restrict units,
            __global real_t* restrict pred, __global real_t* restrict var,
            volatile __global int* restrict nflag, __global double* restrict resolved,
            const int cap, volatile __global int* seen, __global double* restrict recs)
{
    /* m: the candidates 0..m-1 certain to hold the float64 call's K, the first K when
       the next one clears them by the distances' bound, else K + 1 when the one after
       does. A missing entry K or K + 1 says no point lies within the k-NN table's
       margin (the NEAR contract, knn.cl.mako), of which RESOLVE_WIDTHS bounds past
       entry K - 1 are sure: the margin then stands for the next distance */
    const acc_t dk = (acc_t)dist[o + K - 1];
    const acc_t margin = dk + RESOLVE_WIDTHS * u2 * (qn2 + erel * dk);
    acc_t top = 0;
    for (int i = 0; i < K; ++i) {
        const acc_t di = (acc_t)dist[o + i];
        const acc_t hi = di + u2 * (qn2 + erel * di);
        top = hi > top ? hi : top;
    }
    const int has_k = idx[o + K] >= 0;
    acc_t db = has_k ? (acc_t)dist[o + K] : margin;
    int m = K;
    /* (fewer than K admissible points: all of them in the table) */
    if (idx[o + K - 1] >= 0 && !(db - u2 * (qn2 + erel * db) > top)) {
        if (!has_k)
            return 0;
        top = fmax(top, db + u2 * (qn2 + erel * db));
        db = idx[o + K + 1] >= 0 ? (acc_t)dist[o + K + 1] : margin;
        if (!(db - u2 * (qn2 + erel * db) > top))
            return 0;  /* another point may be among the float64 call's K */
        m = K + 1;
    }
    const int p = qpts[q];
    double a[K + 1];
    int li[K + 1], ci[K + 1];
    int n = 0;
    for (int i = 0; i < m; ++i) {  /* insertion in the kernel's order */
        const int l = idx[o + i];
        if (l < 0) break;
        const double acc = exact_acc(x64, l, p);
        const int c = p > l ? p - l : l - p;
        int s = n;
        for (; s > 0 && exact_after(a[s - 1], ci[s - 1], li[s - 1], acc, c, l); --s) {
            a[s] = a[s - 1]; ci[s] = ci[s - 1]; li[s] = li[s - 1];
        }
        a[s] = acc; ci[s] = c; li[s] = l;
        ++n;
    }
    /* a tie at the K-th place that pyEDM may decide otherwise (the float64 call's ties
       kernel, lookup/_ties.mako, flags it): left flagged, for the host's rule */
    if (n > K) {  /* the float64 call's (K + 1)-th is a[K] */
        const double b1 = sqrt(a[K]);
        if (b1 - sqrt(a[K - 1]) <= PYEDM_TIE_WIDTH * b1)
            return 0;
    } else if (n == K) {  /* it lies at least at the cleared bound below db */
        const double lb = (double)(db - u2 * (qn2 + erel * db));
        if (!(lb - PYEDM_TIE_WIDTH * lb > sqrt(a[K - 1])))
            return 0;
    }
    const int nk = n < K ? n : K;
    double mu, v64;
    weigh(a, li, nk, y64 + (size_t)j * ldy + tshift, &mu, &v64);
    /* several targets: the query listed and its neighbours recorded, once */
    if (nt > 1 && !(atomic_or(seen + 1 + cap + q, 2) & 2)) {
        const int s = atomic_inc(seen);
        if (s < cap) {
            seen[1 + s] = q;
            __global double* const rec = recs + (size_t)s * (2 * K + 1);
            rec[0] = (double)nk;
            for (int i = 0; i < nk; ++i) {
                rec[1 + i] = (double)li[i];
                rec[1 + K + i] = a[i];
            }
        }
    }
    /* listed for the host (its values in data units); past the list the host reads the
       flags (2: resolved) and redoes every such row itself, whichever were listed */
    const int slot = atomic_inc(nflag + 1);
    if (slot >= cap) return 1;
    resolved[4 * (size_t)slot] = (double)q;
    resolved[4 * (size_t)slot + 1] = (double)j;
    resolved[4 * (size_t)slot + 2] = mu;
    resolved[4 * (size_t)slot + 3] = v64;
    const size_t out = ((size_t)b * nt + j) * nq + q;
    const double rshift = units[2 * nt + j], rscale = units[3 * nt + j];
    pred[out] = (real_t)((mu - rshift) / rscale);
%   if VARIANCE:
    var[out] = (real_t)(v64 / (rscale * rscale));
%   endif
    return 1;
}
% endif
</%def>

## the kernel (after the lookup kernel): every target of the recorded queries' rows
<%def name="rows_kernel()">\
% if RESOLVE:
__kernel void resolve_rows(__global const int* restrict report, const int cap,
                           __global const int* restrict seen,
                           __global const double* restrict recs, const int rows_cap,
                           const int nq, const int nt, __global const double* restrict y64,
                           const int ldy, const int tshift, __global const double* restrict units,
                           __global real_t* restrict pred, __global real_t* restrict var,
                           __global double* restrict p64, __global double* restrict v64)
{
    const int j = get_global_id(0);
    const int rows = seen[0];
    if (j >= nt || report[1] <= cap || rows > rows_cap)
        return;  /* the predictions listed one by one, or every row redone by the host */
    __global const double* const yj = y64 + (size_t)j * ldy + tshift;
    const double rshift = units[2 * nt + j], rscale = units[3 * nt + j];
    for (int s = 0; s < rows; ++s) {
        __global const double* const rec = recs + (size_t)s * (2 * K + 1);
        const int nk = (int)rec[0];
        double a[K];
        int li[K];
        for (int i = 0; i < nk; ++i) {
            li[i] = (int)rec[1 + i];
            a[i] = rec[1 + K + i];
        }
        double mu, v;
        weigh(a, li, nk, yj, &mu, &v);
        const size_t out = (size_t)j * nq + seen[1 + s];
        pred[out] = (real_t)((mu - rshift) / rscale);
        p64[(size_t)s * nt + j] = mu;
%   if VARIANCE:
        var[out] = (real_t)(v / (rscale * rscale));
        v64[(size_t)s * nt + j] = v;
%   endif
    }
}
% endif
</%def>
