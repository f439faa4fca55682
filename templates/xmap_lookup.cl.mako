## params: K, REAL, ACC, WG, WEIGHT, TJ, VEC, LANES, LWG, PF, LB
## All-to-all cross mapping: one k-NN table per library series, reused for many
## targets, skill reduced on the device (no prediction is ever stored).
##
## pack: turns the k-NN tables (series-local kernel points or times, distances) of
##   libraries b0 + get_global_id(1) into the lookup weights w = exp(-d / d_min)
##   (the points are kept, -1 where none), and the weight sum per
##   query (0 when the query has no valid prediction), once per library. The
##   arithmetic is exactly simplex_lookup.cl.mako's `lookup` (same operations in
##   the same order), so the fused skill below reproduces pyedmcl.ccm bit for bit.
##   WEIGHT "ccm": zero distances get weight 1 (others 0) when d_min == 0 and a
##   query with fewer than K admissible neighbours predicts NaN (pyEDM CCM);
##   "simplex": d_min floored at 1e-6 (pyEDM Simplex).
## xmap_skill: one work-group per (TJ targets, packed library b): the table row of
##   each query is read once for TJ targets; it predicts every query (weighted average of the target at the neighbours' times + tshift)
##   and reduces Pearson rho against the target at obs[q] (< 0: no observation),
##   with the same per-work-item streaming statistics and pairwise merge tree as
##   simplex_lookup.cl.mako's `skill` (templates/_stats.mako). diag != 0 (embedding scans): library b
##   predicts its own series tgt[0] + b, written to column ocol[0].
##   WEIGHT "ccm" applies pyEDM CCM's rules: fewer than 3 pairs -> NaN, zero
##   variance -> 0.
##   VEC = 1 (CPUs): the TJ targets are the lanes of explicit vectors (PoCL does
##   not vectorise the work-item loop around the query loop); every lane runs the
##   scalar code's operations in the same order (the update becomes a per-lane
##   select), so the statistics, and rho, are bit-identical to VEC = 0.
##   LANES = 1 (GPUs): the targets are the work-items (LWG per work-group, TJ per
##   work-item, LWG apart): every work-item walks all queries of library b for its own
##   targets, so the table row is a uniform (broadcast) load, once per TJ targets, and the target values are read from `y` laid out time-major
##   (y[i * ldy + j] is target j's value at time i, j the position in tgt/ocol):
##   coalesced, where LANES = 0 gathers one scattered value per (query, neighbour).
##   WG keeps its meaning: the work-item streams over the WG query classes q = r (mod WG)
##   and merges them with the WG-leaf pairwise tree of LANES = 0, evaluated in
##   post-order with a stack (leaves in bit-reversed order), so rho is bit-identical.
##   Not for diag (one target per library).
##   PF = 1 (LANES = 0, VEC = 0; GPUs): software-pipelined query loop: the next query's
##   table row and target values are loaded while this one is computed (same values,
##   same operations: rho bit-identical to PF = 0); hides the latency of the target
##   gathers, which scatter when the series is noisy (neighbours of consecutive
##   queries far apart in time).
##   LB (LANES = 0; GPUs): LB libraries per work-group (local size (WG, LB)), all for
##   the same TJ targets, each with its own reduction; `nb` libraries in the launch
##   (a ragged last group computes a copy of library nb - 1 and writes nothing). The
##   work-groups resident on one SM then gather from LB times fewer target series,
##   which stay in its L1 (H100, N=5,000 x 3,780, E=5, noisy oscillators: 2.1 -> 0.9 s).
##   Scalar streams (VEC = 0, LANES = 0) keep only what rho needs, in fewer registers
##   (149 -> 128 on the H100 at TJ = 2: more work-groups per SM): see `upd`.
<%namespace name="metric" file="_metric.mako"/>
<%namespace name="stats" file="_stats.mako"/>
${metric.real_type(REAL)}
% if ACC == "double" and REAL != "double":
#pragma OPENCL EXTENSION cl_khr_fp64 : enable
% endif
typedef ${ACC} acc_t;
#define K ${K}
/* no implicit contraction: the same rounding on every runtime */
#pragma OPENCL FP_CONTRACT OFF

__kernel void pack(__global const int* restrict idx, __global const real_t* restrict dist,
                   const int nq, const int b0,
                   __global int* restrict tidx, __global acc_t* restrict tw,
                   __global acc_t* restrict tden, const int ldk, const int bstride,
                   const int row0)
{
    const int q = get_global_id(0);
    const int b = b0 + get_global_id(1);
    if (q >= nq) return;
    /* raw table of library get_global_id(1): rows of ldk entries, bstride per library
       (a k-NN table: K, nq * K; one E of a fused scan: KMAX, EMAX * nq * KMAX) */
    const size_t o = (size_t)get_global_id(1) * (uint)bstride + (size_t)(row0 + q) * ldk;
    /* packed: k-major per library (entry k of query q at b * nq * K + k * nq + q), so
       consecutive queries' entries are adjacent: coalesced reads in xmap_skill */
    const size_t t = (size_t)b * nq * K + q;
    const real_t dmin_raw = dist[o];
% if WEIGHT == "simplex":
    const real_t dmin = fmax(dmin_raw, (real_t)1e-6);
% endif
    acc_t den = 0;
% for k in range(K):
    {
        const int l = idx[o + ${k}];
        const real_t d = dist[o + ${k}];
        acc_t w = 0;
        if (l >= 0) {
% if WEIGHT == "simplex":
            w = exp(-(acc_t)d / (acc_t)dmin);
% else:
            w = dmin_raw > 0 ? exp(-(acc_t)d / (acc_t)dmin_raw) : (d == 0 ? (acc_t)1 : (acc_t)0);
% endif
            den += w;
        }
        tidx[t + (size_t)${k} * nq] = l >= 0 ? l : -1;
        tw[t + (size_t)${k} * nq] = w;
    }
% endfor
% if WEIGHT == "ccm":
    tden[(size_t)b * nq + q] = (den > 0 && idx[o + K - 1] >= 0) ? den : (acc_t)0;
% else:
    tden[(size_t)b * nq + q] = den > 0 ? den : (acc_t)0;
% endif
}

${stats.functions()}
% if LANES:
<% LOG = WG.bit_length() - 1 %>\
__kernel __attribute__((reqd_work_group_size(${LWG}, 1, 1)))
void xmap_skill(__global const int* restrict tidx, __global const acc_t* restrict tw,
                __global const acc_t* restrict tden, const int nq,
                __global const real_t* restrict y, const int ldy, const int tshift,
                __global const int* restrict tgt, __global const int* restrict ocol,
                const int ntg, __global const int* restrict obs,
                __global float* restrict out, const int ldo, const int orow, const int diag,
                const int nb)
{
    /* targets j0 + t * LWG, t < TJ: the table row is loaded once for TJ targets and
       every read of a target value stays coalesced over the work-group */
    const int j0 = get_group_id(0) * ${LWG * TJ} + get_local_id(0);
    const int b = get_group_id(1);
    __global const int* ib = tidx + (size_t)b * nq * K;
    __global const acc_t* wb = tw + (size_t)b * nq * K;
    __global const acc_t* db = tden + (size_t)b * nq;
% for t in range(TJ):
    __global const real_t* y${t} = y + min(j0 + ${t * LWG}, ntg - 1);
    /* merge statistics of the finished subtrees (at most one per tree level) */
    acc_t stk${t}[${LOG + 1}][8];
% endfor
    int sp = 0;
    for (int c = 0; c < ${WG}; ++c) {
        int r = 0;  /* leaf c of the post-order walk: query class bitrev(c) */
        for (int i = 0; i < ${LOG}; ++i) r |= ((c >> i) & 1) << (${LOG - 1} - i);
% for t in range(TJ):
        acc_t s${t}[10] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0};
% endfor
        for (int q = r; q < nq; q += ${WG}) {
            const int to = obs[q];
            const acc_t den = db[q];
% for k in range(K):
            const int l${k} = ib[(size_t)${k} * nq + q];
            const acc_t w${k} = wb[(size_t)${k} * nq + q];
% endfor
% for t in range(TJ):
            {
                acc_t num = 0;
%   for k in range(K):
                if (l${k} >= 0) num += w${k} * (acc_t)y${t}[(size_t)(l${k} + tshift) * ldy];
%   endfor
                const real_t pr = den > 0 ? (real_t)(num / den) : (real_t)NAN;
                const acc_t p = pr;
                if (to >= 0 && isfinite(p)) ${stats.update("s%d" % t, "p", "(acc_t)y%d[(size_t)to * ldy]" % t)}
            }
% endfor
        }
% for t in range(TJ):
        stats_finish(s${t}, stk${t}[sp]);
% endfor
        ++sp;
        /* a finished subtree per trailing one bit of c: merge (left, right) */
        for (int m = c; m & 1; m >>= 1) {
% for t in range(TJ):
            stats_merge(stk${t}[sp - 2], stk${t}[sp - 1]);
% endfor
            --sp;
        }
    }
% for t in range(TJ):
    if (j0 + ${t * LWG} < ntg) {
        const acc_t n = stk${t}[0][0];
        const acc_t sd = sqrt(stk${t}[0][3] * stk${t}[0][4]);
        acc_t rho = sd > 0 ? stk${t}[0][5] / sd : (acc_t)NAN;
% if WEIGHT == "ccm":
        if (n < 3) rho = (acc_t)NAN;
        else if (isnan(rho)) rho = 0;
% endif
        out[(size_t)(orow + b) * ldo + ocol[j0 + ${t * LWG}]] = (float)rho;
    }
% endfor
}
% else:
__kernel __attribute__((reqd_work_group_size(${WG}, ${LB}, 1)))
void xmap_skill(__global const int* restrict tidx, __global const acc_t* restrict tw,
                __global const acc_t* restrict tden, const int nq,
                __global const real_t* restrict y, const int ldy, const int tshift,
                __global const int* restrict tgt, __global const int* restrict ocol,
                const int ntg, __global const int* restrict obs,
                __global float* restrict out, const int ldo, const int orow, const int diag,
                const int nb)
{
    const int j0 = get_group_id(0) * ${TJ};
    const int lid = get_local_id(0);
    /* LB libraries per work-group (local dimension 1), all for the same TJ targets */
    const int bl = ${"get_local_id(1)" if LB > 1 else "0"};
    const int bg = get_group_id(1) * ${LB} + bl;
    const int b = min(bg, nb - 1);
    __global const int* ib = tidx + (size_t)b * nq * K;
    __global const acc_t* wb = tw + (size_t)b * nq * K;
    __global const acc_t* db = tden + (size_t)b * nq;
% for t in range(TJ):
    __global const real_t* y${t} = y + (size_t)(diag ? tgt[0] + b : tgt[min(j0 + ${t}, ntg - 1)]) * ldy;
% if not VEC:
    /* the stream of target t: the shifted sums of _stats.mako that rho needs (n, the
       shift Kp, Ko, S dp, S do, S dp^2, S do^2, S dp*do), n as an int and the shift in
       real_t: both hold the same values as the acc_t stream of stats.update (the
       shift is a prediction rounded to real_t and an observed value), in fewer
       registers; the error sums (MAE, RMSE) are not kept: the map reports rho */
    int n${t} = 0;
    real_t kp${t} = 0, ko${t} = 0;
    acc_t a${t}[5] = {0, 0, 0, 0, 0};
% endif
% endfor
## one pair (p, observation o: a real_t expression) into the stream of target t:
## stats.update's operations on the values rho needs
<%def name="upd(t, o)">\
{
                const real_t o_ = ${o};
                if (n${t} == 0) { kp${t} = pr; ko${t} = o_; }
                const acc_t dp_ = p - (acc_t)kp${t}, do_ = (acc_t)o_ - (acc_t)ko${t};
                n${t} += 1;
                a${t}[0] += dp_;
                a${t}[1] += do_;
                a${t}[2] += dp_ * dp_;
                a${t}[3] += do_ * do_;
                a${t}[4] += dp_ * do_;
            }
</%def>
% if VEC:
<% AV = "%s%d" % (ACC, TJ); LV = ("long" if ACC == "double" else "int") + str(TJ) %>\
    ${AV} S0 = (${AV})0, S1 = (${AV})0, S2 = (${AV})0, S3 = (${AV})0, S4 = (${AV})0,
        S5 = (${AV})0, S6 = (${AV})0, S7 = (${AV})0, S8 = (${AV})0, S9 = (${AV})0;
    for (int q = lid; q < nq; q += ${WG}) {
        const int to = obs[q];
        const acc_t den = db[q];
        /* no valid prediction (den 0: NaN) or no observation: no target counts it */
        if (!(den > 0) || to < 0) continue;
% for k in range(K):
        const int l${k} = ib[(size_t)${k} * nq + q];
        const acc_t w${k} = wb[(size_t)${k} * nq + q];
% endfor
        ${AV} num = (${AV})0;
% for k in range(K):
        if (l${k} >= 0) {
            const int i = l${k} + tshift;
            num += (${AV})w${k} * (${AV})(${", ".join("(acc_t)y%d[i]" % t for t in range(TJ))});
        }
% endfor
        ${AV} p = num / (${AV})den;
% if REAL != ACC:
        {   /* the prediction is rounded to real_t, as in the scalar code */
            acc_t* pl = (acc_t*)&p;
% for t in range(TJ):
            pl[${t}] = (acc_t)(real_t)pl[${t}];
% endfor
        }
% endif
        const ${AV} v = (${AV})(${", ".join("(acc_t)y%d[to]" % t for t in range(TJ))});
        const ${LV} ok = (p - p) == (${AV})0;  /* finite prediction */
        ${stats.update_vec("S", "p", "v", "ok", AV)}
    }
% for t in range(TJ):
    acc_t s${t}[10];
% for i in range(10):
    s${t}[${i}] = ((acc_t*)&S${i})[${t}];
% endfor
% endfor
% elif PF:
    /* software-pipelined: the next query's table row and target values are loaded
       while this one is computed (the same values and operations as PF = 0) */
    int nto = -1;
    acc_t nden = 0;
% for k in range(K):
    int nl${k} = -1;
    acc_t nw${k} = 0;
% for t in range(TJ):
    real_t ny${t}_${k} = 0;
% endfor
% endfor
% for t in range(TJ):
    real_t nyo${t} = 0;
% endfor
<%def name="fetch(qv)">\
        nto = obs[${qv}];
        nden = db[${qv}];
% for k in range(K):
        nl${k} = ib[(size_t)${k} * nq + ${qv}];
        nw${k} = wb[(size_t)${k} * nq + ${qv}];
% for t in range(TJ):
        ny${t}_${k} = nl${k} >= 0 ? y${t}[nl${k} + tshift] : (real_t)0;
% endfor
% endfor
% for t in range(TJ):
        nyo${t} = nto >= 0 ? y${t}[nto] : (real_t)0;
% endfor
</%def>
    if (lid < nq) {
${fetch("lid")}
    }
    for (int q = lid; q < nq; q += ${WG}) {
        const int to = nto;
        const acc_t den = nden;
% for k in range(K):
        const int l${k} = nl${k};
        const acc_t w${k} = nw${k};
% for t in range(TJ):
        const real_t yv${t}_${k} = ny${t}_${k};
% endfor
% endfor
% for t in range(TJ):
        const real_t yo${t} = nyo${t};
% endfor
        if (q + ${WG} < nq) {
${fetch("q + %d" % WG)}
        }
% for t in range(TJ):
        {
            acc_t num = 0;
%   for k in range(K):
            if (l${k} >= 0) num += w${k} * (acc_t)yv${t}_${k};
%   endfor
            const real_t pr = den > 0 ? (real_t)(num / den) : (real_t)NAN;
            const acc_t p = pr;
            if (to >= 0 && isfinite(p)) ${upd(t, "yo%d" % t)}
        }
% endfor
    }
% else:
    for (int q = lid; q < nq; q += ${WG}) {
        const int to = obs[q];
        const acc_t den = db[q];
% for k in range(K):
        const int l${k} = ib[(size_t)${k} * nq + q];
        const acc_t w${k} = wb[(size_t)${k} * nq + q];
% endfor
% for t in range(TJ):
        {
            acc_t num = 0;
%   for k in range(K):
            if (l${k} >= 0) num += w${k} * (acc_t)y${t}[l${k} + tshift];
%   endfor
            const real_t pr = den > 0 ? (real_t)(num / den) : (real_t)NAN;
            const acc_t p = pr;
            if (to >= 0 && isfinite(p)) ${upd(t, "y%d[to]" % t)}
        }
% endfor
    }
% endif
% if not VEC:
% for t in range(TJ):
    const acc_t s${t}[10] = {n${t}, kp${t}, ko${t}, a${t}[0], a${t}[1], a${t}[2], a${t}[3], a${t}[4],
                          0, 0};
% endfor
% endif
    __local acc_t red[${LB}][${WG}][8];
% for t in range(TJ):
    {
        acc_t m[8];
        stats_finish(s${t}, m);
        for (int i = 0; i < 8; ++i) red[bl][lid][i] = m[i];
    }
    barrier(CLK_LOCAL_MEM_FENCE);
%   for h in [2 ** e for e in range(20) if 2 ** e < WG][::-1]:
    if (lid < ${h}) {
        acc_t a[8], b2[8];
        for (int i = 0; i < 8; ++i) { a[i] = red[bl][lid][i]; b2[i] = red[bl][lid + ${h}][i]; }
        stats_merge(a, b2);
        for (int i = 0; i < 8; ++i) red[bl][lid][i] = a[i];
    }
    barrier(CLK_LOCAL_MEM_FENCE);
%   endfor
    if (lid == 0 && j0 + ${t} < ntg && bg < nb) {
        const acc_t n = red[bl][0][0];
        const acc_t sd = sqrt(red[bl][0][3] * red[bl][0][4]);
        acc_t rho = sd > 0 ? red[bl][0][5] / sd : (acc_t)NAN;
% if WEIGHT == "ccm":
        if (n < 3) rho = (acc_t)NAN;
        else if (isnan(rho)) rho = 0;
% endif
        out[(size_t)(orow + b) * ldo + ocol[j0 + ${t}]] = (float)rho;
    }
    barrier(CLK_LOCAL_MEM_FENCE);
% endfor
}
% endif
