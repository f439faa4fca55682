## params: K, REAL, ACC, WG, WEIGHT, VARIANCE, INL, KS, CHECK, FS, RESOLVE, E, TAU, FMA, NOFUSE
## version: 1
## legacy-hashes: bb31c34f23d69fa6
## Simplex lookup from a k-NN table, batched over targets, and skill reduced on
## the device.
##
## lookup: prediction of query q for target j from table b:
##   w_i = exp(-d_i / d_min), sum_i w_i y_j[idx_i + tshift] / sum_i w_i
## over the admissible neighbours (idx >= 0, finite distance); WEIGHT "ccm" sums
## w_i / sum_i w_i (rounded to real_t) times y in real_t instead (common/_lookup.mako's
## normalised weights, as xmap_lookup's map). WEIGHT selects
## pyEDM's zero-distance rule: "simplex" floors d_min at 1e-6 (pyEDM Simplex),
## "ccm" gives weight 1 to zero distances and 0 to the rest when d_min == 0
## and predicts NaN when fewer than K neighbours are admissible (pyEDM CCM).
## A query with no admissible neighbour predicts NaN.
##
## skill: one work-group per prediction row (written at row row0 + r of out, so
## several pipelines can share one output read back once) reduces Pearson rho, MAE and RMSE
## against the observations y_j[obs[q]] (obs[q] < 0: no observation) with a
## streaming shifted-sum update per work-item and pairwise (Chan et al.) merges in
## local memory (common/_stats.mako), in ACC precision: numerically stable, no
## prediction leaves the device. FS (CCM: pyedmcl.ccm, the null, as the map): every
## stream of a row shifts by its target's shift[j] (the target's first finite
## observation, pyedmcl.primitives.lookup.ccm_shifts), so the tree adds the streams' sums and
## one finish ends it (no merge per stream).
## KS: the table's row length (K, or K + 1 where CHECK reads the next neighbour).
## CHECK (float32 Simplex, WEIGHT "simplex"): lookup also bounds each prediction's
## float32 error and flags, counts and lists those beyond the tolerance (in one report
## array, read back in one copy); patch writes
## the float64 redo's values back (both in lookup/_check.mako).
## RESOLVE (with CHECK; E, TAU, FMA: the float64 k-NN's point shape and FMA choice):
## flagged predictions whose float64 neighbours lie in the table's first K + 1 are redone
## in the lookup (lookup/_check.mako).
## ties (a program of REAL double): the rows of a float64 table whose knn-th place pyEDM
## may decide otherwise (lookup/_ties.mako).
## NOFUSE (the host's choice, 1 on Intel's CPU runtime without AVX-512): CCM's normalised
## sums round each product on its own there (common/_lookup.mako's `add`).
## INL (the host's choice, 1 on PoCL): float32 data weigh with an inline double exp (PoCL
## calls its library's out of line; common/_lookup.mako), as xmap_lookup.cl.mako's pack.
<%namespace name="lk" file="/common/_lookup.mako"/>
<%namespace name="stats" file="/common/_stats.mako"/>
<%namespace name="ck" file="/lookup/_check.mako"/>
<%namespace name="rs" file="/lookup/_resolve.mako"/>
<%namespace name="ti" file="/lookup/_ties.mako"/>
${lk.prelude(REAL, ACC, K, INL)}
<% assert not RESOLVE or (CHECK and KS == K + 2 and ACC == "double") %>\
${rs.resolve_fn()}

__kernel __attribute__((reqd_work_group_size(${WG}, 1, 1)))
void lookup(__global const int* restrict idx, __global const real_t* restrict dist,
            const int nq, __global const real_t* restrict y, const int ldy, const int nt,
<% check_args = (", __global const float* restrict qnorm, __global const acc_t* restrict units, "
                  "const acc_t erel, "
                  "__global uchar* restrict flag, volatile __global int* restrict report, "
                  "const int cap, volatile __global int* seen, const int ties") if CHECK else "" %>\
<% check_args += (", __global const double* restrict x64, __global const double* restrict y64, "
                  "__global const int* restrict qpts, __global double* restrict recs") if RESOLVE else "" %>\
            const int tshift, __global real_t* restrict pred, __global real_t* restrict var${check_args})
{
    const int q = get_global_id(0);
    const int j = get_global_id(1);
    const int b = get_global_id(2);
    if (q >= nq) return;
% if CHECK:
${ck.report_parts()}
% endif
    const size_t o = ((size_t)b * nq + q) * ${"K" if KS == K else KS};
    const real_t dmin_raw = dist[o];
    ${lk.dmin(WEIGHT)}
    __global const real_t* yj = y + (size_t)j * ldy + tshift;
<% assert not (CHECK and WEIGHT == "ccm") %>\
    acc_t ${"" if WEIGHT == "ccm" else "num = 0, "}den = 0;
% for k in range(K):
%   if CHECK:
    acc_t w${k} = 0, y${k} = 0;
%   elif WEIGHT == "ccm":
    acc_t w${k} = 0;
%   endif
    {
        const int l = idx[o + ${k}];
        const real_t d = dist[o + ${k}];
        if (l >= 0) {
            const acc_t w = ${lk.weight(WEIGHT, "d", REAL, ACC, INL)};
%   if CHECK:
            w${k} = w;
            y${k} = (acc_t)yj[l];
%   elif WEIGHT == "ccm":
            w${k} = w;
%   endif
%   if WEIGHT != "ccm":
            num += w * (acc_t)yj[l];
%   endif
            den += w;
        }
    }
% endfor
% if WEIGHT == "ccm":
    /* the normalised weights' real_t sum (common/_lookup.mako), as xmap_lookup's skill */
    real_t pn = 0;
%   for k in range(K):
    if (idx[o + ${k}] >= 0) ${lk.add("pn", capture(lk.norm, "w%d" % k, "den") + " * yj[idx[o + %d]]" % k, NOFUSE)}
%   endfor
    const acc_t mu = ${lk.valid(WEIGHT, "idx[o + K - 1] >= 0")} ? (acc_t)pn : (acc_t)NAN;
% else:
    const acc_t mu = ${lk.valid(WEIGHT, "idx[o + K - 1] >= 0")} ? num / den : (acc_t)NAN;
% endif
    pred[((size_t)b * nt + j) * nq + q] = (real_t)mu;
% if VARIANCE:
    /* pyEDM's Pred_Variance: weighted spread of the neighbours' targets */
    acc_t v = 0;
%   for k in range(K):
    {
        const int l = idx[o + ${k}];
        const real_t d = dist[o + ${k}];
        if (l >= 0) {
            const acc_t w = ${lk.weight(WEIGHT, "d", REAL, ACC, INL)};
            const acc_t e = (acc_t)yj[l] - mu;
            v += w * e * e;
        }
    }
%   endfor
    var[((size_t)b * nt + j) * nq + q] = den > 0 ? (real_t)(v / den) : (real_t)NAN;
% endif
% if CHECK:
${ck.bound()}
% endif
}

${rs.rows_kernel()}
${ck.patch()}
${ck.select()}
% if REAL == "double":
${ck.merge()}
${ti.ties()}
% endif
${stats.functions()}
__kernel __attribute__((reqd_work_group_size(${WG}, 1, 1)))
void skill(__global const real_t* restrict pred, const int nq,
           __global const real_t* restrict y, const int ldy, const int nt,
           __global const int* restrict obs, const int row0, __global acc_t* restrict out${", __global const acc_t* restrict shift" if FS else ""})
{
    const int r = get_group_id(0);
    __global acc_t* o = out + (size_t)(row0 + r) * 4;
    const int lid = get_local_id(0);
    const int j = r % nt;
    __global const real_t* pr = pred + (size_t)r * nq;
    __global const real_t* yj = y + (size_t)j * ldy;
    acc_t s[10] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0};
% if FS:
    s[1] = shift[j];  /* CCM: the target's shift (the host's ccm_shifts) */
    s[2] = shift[j];
% endif
    for (int q = lid; q < nq; q += ${WG}) {
        const int t = obs[q];
        if (t < 0) continue;
        const acc_t p = pr[q];
        if (!isfinite(p)) continue;
        ${stats.update("s", "p", "(acc_t)yj[t]", FS)}
    }
    __local acc_t red[${WG}][${10 if FS else 8}];
${stats.reduce("s", "red", WG, FS)}
    if (lid == 0) {
        const acc_t n = red[0][0];
        const acc_t den = sqrt(red[0][3] * red[0][4]);
        o[0] = den > 0 ? red[0][5] / den : (acc_t)NAN;
        o[1] = n > 0 ? red[0][6] / n : (acc_t)NAN;
        o[2] = n > 0 ? sqrt(red[0][7] / n) : (acc_t)NAN;
        o[3] = n;
    }
}

/* CCM: k-NN of sampled libraries + lookup fused (no k-NN table in memory).
 * srt/sdist: every query's full-library positions and finished distances in the
 * k-NN kernel's total order (distance, |p - l|, l); cnt[b][j]: multiplicity of
 * position j in sampled library b. The first K admissible members of the row are
 * that library's K nearest neighbours; weights and sums follow lookup exactly
 * (same formula, same order), so the prediction equals lookup on the k-NN table. */
__kernel __attribute__((reqd_work_group_size(${WG}, 1, 1)))
void subset_lookup(__global const int* restrict srt, __global const real_t* restrict sdist,
                   __global const uchar* restrict cnt, __global const int* restrict lpts,
                   __global const int* restrict qpts, const int nq, const int nl,
                   const int radius, __global const real_t* restrict y, const int tshift,
                   __global real_t* restrict pred)
{
    const int q = get_global_id(0);
    const int b = get_global_id(1);
    if (q >= nq) return;
    const int p = qpts[q];
    __global const int* row = srt + (size_t)q * nl;
    __global const real_t* drow = sdist + (size_t)q * nl;
    __global const uchar* c = cnt + (size_t)b * nl;
    __global const real_t* yt = y + tshift;
    acc_t ${"" if WEIGHT == "ccm" else "num = 0, "}den = 0;
    real_t dmin_raw = (real_t)0;
    int m = 0;
% if WEIGHT == "ccm":
    acc_t ws[K];   /* slot m's weight and target, for the normalised sum below */
    real_t vs[K];
% endif
    for (int t = 0; t < nl && m < K; ++t) {
        const int j = row[t];
        int cj = c[j];
        if (cj == 0) continue;
        const int l = lpts[j];
        if ((l > p ? l - p : p - l) <= radius) continue;
        const real_t d = drow[t];
        if (m == 0) dmin_raw = d;
        ${lk.dmin(WEIGHT)}
        const acc_t w = ${lk.weight(WEIGHT, "d", REAL, ACC, INL)};
% if WEIGHT != "ccm":
        const acc_t v = (acc_t)yt[l];
% endif
        for (; cj > 0 && m < K; --cj, ++m) {
% if WEIGHT == "ccm":
            ws[m] = w;
            vs[m] = yt[l];
% else:
            num += w * v;
% endif
            den += w;
        }
    }
% if WEIGHT == "ccm":
    real_t pn = 0;   /* as lookup: the normalised weights' real_t sum */
    for (int i = 0; i < m; ++i) ${lk.add("pn", capture(lk.norm, "ws[i]", "den") + " * vs[i]", NOFUSE)}
    const acc_t mu = ${lk.valid(WEIGHT, "m == K")} ? (acc_t)pn : (acc_t)NAN;
% else:
    const acc_t mu = ${lk.valid(WEIGHT, "m == K")} ? num / den : (acc_t)NAN;
% endif
    pred[(size_t)b * nq + q] = (real_t)mu;
}
