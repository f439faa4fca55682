## params: E, TAU, METRIC, REAL, ACC, VARIANT, WG, MODE, PV, UNROLL
## S-map: one small weighted least-squares problem per (prediction point, theta).
##
## For prediction point p (time tp, embedded vector xp) and library points j
## (times tj, embedded vectors xj, targets yj = y[tj + Tp], centred on the host),
## pyEDM's S-map minimises sum_j w_j^2 (c0 + c . xj - yj)^2 with
## w_j = exp(-theta d_j / dbar), d_j the Euclidean distance and dbar the mean of
## d over the neighbours used. We solve it in coordinates centred on xp
## (z_j = xj - xp), so the prediction is the intercept itself and the intercept
## column is far better conditioned; the host converts back to pyEDM's C0.
##
## Pass 1 streams the library once for sum/count/max of d (the mean distance, and
## the farthest neighbour, which pyEDM's default knn = |lib| - 1 drops when nothing
## else was excluded). Pass 2 streams it again and accumulates the upper triangle
## of sum a a^T for the augmented vector a = w [1, z_1..z_E, y] (the normal
## equations and their right-hand side), plus sum w, w y, w y^2 for pyEDM's
## prediction variance. The (E+1)x(E+1) system is Jacobi-scaled and solved by
## Cholesky in ACC precision: "double", "float", or "df" (double-float: float32
## (hi, lo) pairs, Dot2-style accumulation and a df Cholesky, for devices without
## fp64); a pivot below PIVOT_TOL marks the row (status 1) for the host's SVD
## least-squares fallback, which has pyEDM's exact semantics.
##
## MODE "all": every library point outside |tj - tp| <= excl_r (which removes the
## point itself when lib and pred overlap), minus the farthest if knn asks for it.
## MODE "table": the neighbours are given per row (nbr[row*K + q], lib positions,
## -1 = none), already filtered the pyEDM way.
##
## VARIANT "item": one work-item per PV rows (PV = SIMD lanes: every lane solves
## its own problem with vector accumulators; library values are scalar loads
## broadcast to all lanes), private accumulators (CPUs). VARIANT "group": one work-group per
## (row, theta); a tile of WG library points' augmented vectors is staged in
## local memory and each work-item owns one or more (entry, part) slots of the
## Gram matrix, so no per-thread 250-value accumulators are needed (GPUs).
<%namespace name="metric" file="_metric.mako"/>
<%
N = E + 1                      # unknowns: intercept + E slopes
M = N + 1                      # augmented with the target
NENT = M * (M + 1) // 2        # upper triangle of a a^T
def idx(k, l):
    return k * M - k * (k - 1) // 2 + (l - k)
pairs = [(k, l) for k in range(M) for l in range(k, M)]
assert all(idx(k, l) == i for i, (k, l) in enumerate(pairs))
if VARIANT == "group":
    NPART = max(1, WG // NENT)
    NSLOT = NENT * NPART
    SPT = (NSLOT + WG - 1) // WG
    TILE_LEN = max(WG * M, 2 * NSLOT if ACC == "df" else NSLOT)
if MODE not in ("all", "table"):
    raise ValueError("MODE must be all or table")
if VARIANT not in ("item", "group"):
    raise ValueError("VARIANT must be item or group")
%>
${metric.real_type(REAL)}
% if ACC == "double":
% if REAL != "double":
#pragma OPENCL EXTENSION cl_khr_fp64 : enable
% endif
typedef double acc_t;
#define PIVOT_TOL 1e-11
% elif ACC == "df":
typedef float acc_t;
#define PIVOT_TOL 1e-10f
/* double-float ("df") arithmetic on (hi, lo) float pairs, ~44-bit significands:
   error-free transformations (Knuth TwoSum, fma TwoProduct; Dekker, Shewchuk) */
float2 df_qts(float a, float b) { const float s = a + b; return (float2)(s, b - (s - a)); }
float2 df_ts(float a, float b)
{
    const float s = a + b, bb = s - a;
    return (float2)(s, (a - (s - bb)) + (b - bb));
}
float2 df_add(float2 a, float2 b)
{
    float2 s = df_ts(a.x, b.x);
    const float2 t = df_ts(a.y, b.y);
    s.y += t.x;
    s = df_qts(s.x, s.y);
    s.y += t.y;
    return df_qts(s.x, s.y);
}
float2 df_sub(float2 a, float2 b) { return df_add(a, (float2)(-b.x, -b.y)); }
float2 df_mul(float2 a, float2 b)
{
    const float p = a.x * b.x;
    float e = fma(a.x, b.x, -p);
    e += a.x * b.y + a.y * b.x;
    return df_qts(p, e);
}
float2 df_div(float2 a, float2 b)
{
    const float q1 = a.x / b.x;
    float2 r = df_sub(a, df_mul(b, (float2)(q1, 0.0f)));
    const float q2 = r.x / b.x;
    r = df_sub(r, df_mul(b, (float2)(q2, 0.0f)));
    return df_add(df_qts(q1, q2), (float2)(r.x / b.x, 0.0f));
}
float2 df_sqrt(float2 a)
{
    const float x = sqrt(a.x);
    const float2 r = df_sub(a, df_mul((float2)(x, 0.0f), (float2)(x, 0.0f)));
    return df_qts(x, r.x / (2.0f * x));
}
% else:
typedef float acc_t;
#define PIVOT_TOL 1e-5f
% endif
% if PV > 1:
typedef ${REAL}${PV} realV;
typedef ${"float" if ACC == "df" else ACC}${PV} accV;
typedef ${"long" if ACC == "double" else "int"}${PV} maskV;
% else:
typedef real_t realV;
typedef acc_t accV;
typedef int maskV;
% endif
#define N ${N}
#define M ${M}
#define IDX(k, l) ((k) * M - ((k) * ((k) - 1)) / 2 + ((l) - (k)))


<%def name="lane(e, l)">${e if PV == 1 else "(%s).s%x" % (e, l)}</%def>
<%def name="sel(A, B, cond)">((${cond}) ? (accV)(${A}) : (accV)(${B}))</%def>
<%def name="sel2(a, b, cond)">((${cond}) ? (accV)(${b}) : (accV)(${a}))</%def>
<%def name="cvt(e)">convert_${"float" if ACC == "df" else ACC}${PV if PV > 1 else ""}(${e})</%def>

## One Gram update G += x * y: a plain fma, or (df) Ogita-Rump-Oishi Dot2: the
## product's rounding error (fma) and the sum's (TwoSum) go to the lo part.
<%def name="accum(T, hi, lo, x, y)">\
% if ACC == "df":
{ const ${T} _p = (${x}) * (${y}); const ${T} _pe = fma(${x}, ${y}, -_p);
  const ${T} _s = ${hi} + _p; const ${T} _bb = _s - ${hi};
  ${lo} += _pe + ((${hi} - (_s - _bb)) + (_p - _bb)); ${hi} = _s; }\
% else:
${hi} += (${x}) * (${y});\
% endif
</%def>

## One library point for every lane of the item variant: xj<k> (scalars in
## "all" mode, per-lane vectors in "table" mode), d (accV distance), yv, out (mask
## of lanes for which the point is excluded).
<%def name="vec_point()">\
% if MODE == "all":
        const int tj = lib_t[j];
%   for k in range(E):
        const real_t xj${k} = x[tj - ${k * TAU}];
%   endfor
        const accV yv = (accV)((acc_t)ylib[j]);
        const maskV out = fabs((accV)((acc_t)tj) - tpv) <= excl;
% else:
        const int j = q;
%   for k in range(E):
        realV xj${k};
%   endfor
        accV yv;
        maskV out;
%   for l in range(PV):
        {
            const int r = min(row0 + ${l}, n_pred - 1);
            const int jl = nbr[(size_t)r * K + q];
            const int jj = max(jl, 0);
            const int tj = lib_t[jj];
%     for k in range(E):
            ${lane("xj%d" % k, l)} = x[tj - ${k * TAU}];
%     endfor
            ${lane("yv", l)} = (acc_t)ylib[jj];
            ${lane("out", l)} = jl < 0 ? ${-1 if PV > 1 else 1} : 0;
        }
%   endfor
% endif
        realV dacc = (realV)(0);
% for k in range(E):
        {
            const realV df = xj${k} - xp[${k}];
% if METRIC == "euclidean":
            dacc += df * df;
% elif METRIC == "maximum":
            dacc = fmax(dacc, fabs(df));
% elif METRIC == "manhattan":
            dacc += fabs(df);
% else:
<% raise ValueError("unknown METRIC %r" % METRIC) %>
% endif
        }
% endfor
        const accV d = ${cvt("sqrt(dacc)" if METRIC == "euclidean" else "dacc")};
</%def>

<%def name="distance(out, tj)">\
    real_t ${out};
    {
        real_t _acc = (real_t)0;
% for k in range(E):
        ${metric.step(METRIC, "_acc", "x[%s - %d]" % (tj, k * TAU), "xp[%d]" % k)}
% endfor
        ${out} = ${metric.finish(METRIC, "_acc")};
    }
</%def>

## The neighbour loop header: defines j (lib position) and tj, skips excluded points.
<%def name="for_neighbours(start, step)">\
% if MODE == "all":
    for (int j = ${start}; j < n_lib; j += ${step}) {
        const int tj = lib_t[j];
        if (abs(tj - tp) <= excl_r) continue;
% else:
    for (int q = ${start}; q < K; q += ${step}) {
        const int j = nbr[(size_t)row * K + q];
        if (j < 0) continue;
        const int tj = lib_t[j];
% endif
</%def>

## Solve the Jacobi-scaled normal equations held in G (upper triangle, IDX) and
## write prediction (centred), coefficients (centred), variance and status.
<%def name="solve(G, sw, swy, swyy)">\
    {
        const size_t o = (size_t)ti * n_pred + row;
        int status = 0;
        acc_t sc[N];
        for (int k = 0; k < N; ++k) {
            const acc_t g = ${G}[IDX(k, k)] + (k > 0 ? ridge : (acc_t)0);
            if (!(g > (acc_t)0)) status = 1;
            sc[k] = status ? (acc_t)0 : (acc_t)1 / sqrt(g);
            ${G}[IDX(k, k)] = g;
        }
        acc_t c[N];
        if (!status) {
            for (int k = 0; k < N; ++k)
                for (int l = k; l < M; ++l)
                    ${G}[IDX(k, l)] *= sc[k] * (l < N ? sc[l] : (acc_t)1);
            for (int k = 0; k < N && !status; ++k) {
                acc_t dk = ${G}[IDX(k, k)];
                for (int i = 0; i < k; ++i) dk -= ${G}[IDX(i, k)] * ${G}[IDX(i, k)];
                if (!(dk > (acc_t)PIVOT_TOL)) { status = 1; break; }
                const acc_t u = sqrt(dk);
                ${G}[IDX(k, k)] = u;
                for (int l = k + 1; l < M; ++l) {   /* l == N: forward substitution of the rhs */
                    acc_t s = ${G}[IDX(k, l)];
                    for (int i = 0; i < k; ++i) s -= ${G}[IDX(i, k)] * ${G}[IDX(i, l)];
                    ${G}[IDX(k, l)] = s / u;
                }
            }
        }
        if (!status) {
            for (int k = N - 1; k >= 0; --k) {
                acc_t s = ${G}[IDX(k, N)];
                for (int l = k + 1; l < N; ++l) s -= ${G}[IDX(k, l)] * c[l];
                c[k] = s / ${G}[IDX(k, k)];
            }
            for (int k = 0; k < N; ++k) {
                c[k] *= sc[k];
                out_coef[o * N + k] = c[k];
            }
            const acc_t p = c[0];
            out_pred[o] = p;
            out_var[o] = (${swyy} - (acc_t)2 * p * ${swy} + p * p * ${sw}) / ${sw};
        } else {
            for (int k = 0; k < N; ++k) out_coef[o * N + k] = (acc_t)NAN;
            out_pred[o] = (acc_t)NAN;
            out_var[o] = (acc_t)NAN;
        }
        out_status[o] = status;
    }
</%def>

## The df twin of solve(): G holds float2 (hi, lo) entries; the Jacobi scaling is
## by powers of two, so it is exact in df arithmetic.
<%def name="solve_df(G, sw, swy, swyy)">\
    {
        const size_t o = (size_t)ti * n_pred + row;
        int status = 0;
        float sc[N];
        for (int k = 0; k < N; ++k) {
            const float2 g = k > 0 ? df_add(${G}[IDX(k, k)], (float2)(ridge, 0.0f)) : ${G}[IDX(k, k)];
            if (!(g.x > 0.0f)) status = 1;
            sc[k] = status ? 0.0f : ldexp(1.0f, -(ilogb(g.x) / 2));
            ${G}[IDX(k, k)] = g;
        }
        float2 c[N];
        if (!status) {
            for (int k = 0; k < N; ++k)
                for (int l = k; l < M; ++l) {
                    const float f = sc[k] * (l < N ? sc[l] : 1.0f);   /* a power of two: exact */
                    ${G}[IDX(k, l)] *= f;
                }
            for (int k = 0; k < N && !status; ++k) {
                float2 dk = ${G}[IDX(k, k)];
                for (int i = 0; i < k; ++i) dk = df_sub(dk, df_mul(${G}[IDX(i, k)], ${G}[IDX(i, k)]));
                if (!(dk.x > PIVOT_TOL)) { status = 1; break; }
                const float2 u = df_sqrt(dk);
                ${G}[IDX(k, k)] = u;
                for (int l = k + 1; l < M; ++l) {
                    float2 t = ${G}[IDX(k, l)];
                    for (int i = 0; i < k; ++i) t = df_sub(t, df_mul(${G}[IDX(i, k)], ${G}[IDX(i, l)]));
                    ${G}[IDX(k, l)] = df_div(t, u);
                }
            }
        }
        if (!status) {
            for (int k = N - 1; k >= 0; --k) {
                float2 t = ${G}[IDX(k, N)];
                for (int l = k + 1; l < N; ++l) t = df_sub(t, df_mul(${G}[IDX(k, l)], c[l]));
                c[k] = df_div(t, ${G}[IDX(k, k)]);
            }
            for (int k = 0; k < N; ++k) out_coef[o * N + k] = (c[k].x + c[k].y) * sc[k];
            const float p = (c[0].x + c[0].y) * sc[0];
            out_pred[o] = p;
            out_var[o] = (${swyy} - 2.0f * p * ${swy} + p * p * ${sw}) / ${sw};
        } else {
            for (int k = 0; k < N; ++k) out_coef[o * N + k] = (acc_t)NAN;
            out_pred[o] = (acc_t)NAN;
            out_var[o] = (acc_t)NAN;
        }
        out_status[o] = status;
    }
</%def>

<%def name="empty_row()">\
    {
        const size_t o = (size_t)ti * n_pred + row;
        for (int k = 0; k < N; ++k) out_coef[o * N + k] = (acc_t)NAN;
        out_pred[o] = (acc_t)NAN;
        out_var[o] = (acc_t)NAN;
        out_status[o] = status0;
    }
</%def>

% if VARIANT == "group":
/* Gram entry -> (row, column) of the augmented upper triangle */
__constant ushort KA[${NENT}] = {${", ".join(str(k) for k, l in pairs)}};
__constant ushort KB[${NENT}] = {${", ".join(str(l) for k, l in pairs)}};
% endif

__kernel __attribute__((reqd_work_group_size(${WG}, 1, 1)))
void smap(__global const real_t* restrict x, __global const real_t* restrict ylib,
          __global const int* restrict lib_t, const int n_lib,
          __global const int* restrict pred_t, const int n_pred,
          __global const acc_t* restrict thetas, const int excl_r, const int knn,
          __global const int* restrict nbr, const int K, const acc_t ridge,
          __global acc_t* restrict out_pred, __global acc_t* restrict out_coef,
          __global acc_t* restrict out_var, __global int* restrict out_status)
{
% if VARIANT == "item":
    ## PV prediction points per work-item, one per SIMD lane (accV = acc_t PV-vector);
    ## library values are scalar loads broadcast to every lane, so no gathers.
    const int row0 = get_global_id(0) * ${PV};
    const int ti = get_global_id(1);
    if (row0 >= n_pred) return;
    const accV theta = (accV)(thetas[ti]);
    accV tpv;
    realV xp[${E}];
% for l in range(PV):
    {
        const int r = min(row0 + ${l}, n_pred - 1);
        const int tp = pred_t[r];
        ${lane("tpv", l)} = (acc_t)tp;
%   for k in range(E):
        ${lane("xp[%d]" % k, l)} = x[tp - ${k * TAU}];
%   endfor
    }
% endfor
    const accV excl = (accV)((acc_t)excl_r);

    /* pass 1: mean distance, count, farthest neighbour (per lane) */
    accV dsum = (accV)(0), cnt = (accV)(0), dmax = (accV)(-1), jmax = (accV)(-1);
% if MODE == "all":
    for (int j = 0; j < n_lib; ++j) {
% else:
    for (int q = 0; q < K; ++q) {
        ## the table is per row, so every lane reads its own neighbour
% endif
        ${vec_point()}
        const accV dd = ${sel("-1", "d", "out")};
        dsum += ${sel("0", "d", "out")};
        cnt += ${sel("0", "1", "out")};
        const maskV up = dd >= dmax;
        dmax = ${sel2("dmax", "dd", "up")};
        jmax = ${sel2("jmax", "(accV)((acc_t)j)", "up")};
    }
% if MODE == "all":
    const accV drop = cnt - fmin((accV)((acc_t)knn), cnt);
% else:
    const accV drop = (accV)(0);
% endif
    const maskV dropped = drop > (accV)(0);
    dsum = ${sel2("dsum", "dsum - dmax", "dropped")};
    const accV cnt_used = cnt - drop;
    const accV skip = ${sel2("(accV)(-1)", "jmax", "dropped")};
    const accV scale = ${sel2("theta / (dsum / cnt_used)", "(accV)(0)", "theta == (accV)(0)")};

    /* pass 2: weighted normal equations, one problem per lane */
    accV G[${NENT}];
% for i in range(NENT):
    G[${i}] = (accV)(0);
% endfor
% if ACC == "df":
    accV Glo[${NENT}];
% for i in range(NENT):
    Glo[${i}] = (accV)(0);
% endfor
% endif
    accV sw = (accV)(0), swy = (accV)(0), swyy = (accV)(0);
% if MODE == "all":
    for (int j = 0; j < n_lib; ++j) {
% else:
    for (int q = 0; q < K; ++q) {
% endif
        ${vec_point()}
        const accV w = ${sel("0", "exp(-scale * d)", "out || ((accV)((acc_t)j) == skip)")};
        sw += w; swy += w * yv; swyy += w * yv * yv;
        accV a[${M}];
        a[0] = w;
% for k in range(E):
        a[${k + 1}] = w * ${cvt("xj%d - xp[%d]" % (k, k))};
% endfor
        a[${N}] = w * yv;
% if UNROLL:
% for i, (k, l) in enumerate(pairs):
        ${accum("accV", "G[%d]" % i, "Glo[%d]" % i, "a[%d]" % k, "a[%d]" % l)}
% endfor
% else:
        /* rolled: the accumulators live in memory (L1) either way once NENT * PV is
           large, and the unrolled body would cost tens of seconds of compile time */
        for (int k = 0, i = 0; k < ${M}; ++k) {
            const accV ak = a[k];
            for (int l = k; l < ${M}; ++l, ++i) ${accum("accV", "G[i]", "Glo[i]", "ak", "a[l]")}
        }
% endif
    }
    /* spill the lanes to scalars once, then one (not PV) copy of the solver code */
% if PV > 1:
    acc_t Gl[${NENT * PV}], sl[${4 * PV}], dl[${PV}];
    for (int i = 0; i < ${NENT}; ++i) vstore${PV}(G[i], i, Gl);
% if ACC == "df":
    acc_t Gll[${NENT * PV}];
    for (int i = 0; i < ${NENT}; ++i) vstore${PV}(Glo[i], i, Gll);
% endif
    vstore${PV}(sw, 0, sl); vstore${PV}(swy, 1, sl); vstore${PV}(swyy, 2, sl);
    vstore${PV}(cnt_used, 3, sl); vstore${PV}(drop, 0, dl);
% endif
    for (int l = 0; l < ${PV}; ++l) {
        const int row = row0 + l;
        if (row >= n_pred) break;
% if PV > 1:
        const acc_t cnt_l = sl[3 * ${PV} + l], drop_l = dl[l];
% else:
        const acc_t cnt_l = cnt_used, drop_l = drop;
% endif
        const int status0 = cnt_l <= (acc_t)0 ? 2 : (drop_l > (acc_t)1 ? 3 : 0);
        if (status0) ${empty_row()}
        else {
% if ACC == "df":
            float2 Gs[${NENT}];
%   if PV > 1:
            for (int i = 0; i < ${NENT}; ++i) Gs[i] = df_qts(Gl[i * ${PV} + l], Gll[i * ${PV} + l]);
            const acc_t sw_l = sl[l], swy_l = sl[${PV} + l], swyy_l = sl[${2 * PV} + l];
%   else:
            for (int i = 0; i < ${NENT}; ++i) Gs[i] = df_qts(G[i], Glo[i]);
            const acc_t sw_l = sw, swy_l = swy, swyy_l = swyy;
%   endif
            ${solve_df("Gs", "sw_l", "swy_l", "swyy_l")}
% else:
            acc_t Gs[${NENT}];
%   if PV > 1:
            for (int i = 0; i < ${NENT}; ++i) Gs[i] = Gl[i * ${PV} + l];
            const acc_t sw_l = sl[l], swy_l = sl[${PV} + l], swyy_l = sl[${2 * PV} + l];
%   else:
            for (int i = 0; i < ${NENT}; ++i) Gs[i] = G[i];
            const acc_t sw_l = sw, swy_l = swy, swyy_l = swyy;
%   endif
            ${solve("Gs", "sw_l", "swy_l", "swyy_l")}
% endif
        }
    }
% else:
    ## ----------------------------------------------------------- group variant
    const int row = get_group_id(0);
    const int ti = get_group_id(1);
    const int lid = get_local_id(0);
    __local real_t xp[${E}];
    __local acc_t tile[${TILE_LEN}];
    __local acc_t redA[${WG}], redB[${WG}], redC[${WG}];
    __local int redI[${WG}], redJ[${WG}];
    __local ${"float2" if ACC == "df" else "acc_t"} G[${NENT}];
    const acc_t theta = thetas[ti];
    const int tp = pred_t[row];
    if (lid < ${E}) xp[lid] = x[tp - lid * ${TAU}];
    barrier(CLK_LOCAL_MEM_FENCE);

    /* pass 1 */
    acc_t dsum = (acc_t)0, dmax = (acc_t)-1;
    int cnt = 0, jmax = -1;
    ${for_neighbours("lid", WG)}
        ${distance("d", "tj")}
        dsum += (acc_t)d;
        ++cnt;
        if ((acc_t)d > dmax || ((acc_t)d == dmax && j > jmax)) { dmax = (acc_t)d; jmax = j; }
    }
    redA[lid] = dsum; redB[lid] = dmax; redI[lid] = cnt; redJ[lid] = jmax;
    barrier(CLK_LOCAL_MEM_FENCE);
% for s in [2 ** i for i in range(20) if 2 ** i < WG][::-1]:
    if (lid < ${s}) {
        redA[lid] += redA[lid + ${s}];
        redI[lid] += redI[lid + ${s}];
        const acc_t m2 = redB[lid + ${s}];
        const int j2 = redJ[lid + ${s}];
        if (m2 > redB[lid] || (m2 == redB[lid] && j2 > redJ[lid])) { redB[lid] = m2; redJ[lid] = j2; }
    }
    barrier(CLK_LOCAL_MEM_FENCE);
% endfor
    dsum = redA[0]; cnt = redI[0]; dmax = redB[0]; jmax = redJ[0];
    barrier(CLK_LOCAL_MEM_FENCE);   /* everyone has read before redA.. are reused */
% if MODE == "all":
    const int drop = cnt - min(knn, cnt);
% else:
    const int drop = 0;
% endif
    const int status0 = cnt - drop <= 0 ? 2 : (drop > 1 ? 3 : 0);
    if (status0) {          /* uniform across the work-group */
        if (lid == 0) ${empty_row()}
        return;
    }
    if (drop) { dsum -= dmax; --cnt; }
    const int skip = drop ? jmax : -1;
    const acc_t scale = theta == (acc_t)0 ? (acc_t)0 : theta / (dsum / (acc_t)cnt);

    /* pass 2: tiles of WG library points; slot s = part * NENT + entry */
    acc_t acc[${SPT}];
% for q in range(SPT):
    acc[${q}] = (acc_t)0;
% endfor
% if ACC == "df":
    acc_t acclo[${SPT}];
% for q in range(SPT):
    acclo[${q}] = (acc_t)0;
% endfor
% endif
    /* each work-item's slots, decoded once: (entry row, entry column, part) */
    int ska[${SPT}], skb[${SPT}], spart[${SPT}];
% for q in range(SPT):
    {
        const int s = min(lid + ${q * WG}, ${NSLOT - 1});
        /* no div/rem pair: LLVM would insert a freeze that Oclgrind cannot check */
        const int part = ${"0" if NPART == 1 else "s / %d" % NENT};
        const int e = s - part * ${NENT};
        ska[${q}] = KA[e]; skb[${q}] = KB[e]; spart[${q}] = part;
    }
% endfor
    acc_t sw = (acc_t)0, swy = (acc_t)0, swyy = (acc_t)0;
% if MODE == "all":
    const int n_items = n_lib;
% else:
    const int n_items = K;
% endif
    for (int base = 0; base < n_items; base += ${WG}) {
        {
            const int q = base + lid;
            acc_t a[${M}];
% for k in range(M):
            a[${k}] = (acc_t)0;
% endfor
% if MODE == "all":
            const int j = q;
            if (q < n_items) {
% else:
            const int j = q < n_items ? nbr[(size_t)row * K + q] : -1;
            if (j >= 0) {
% endif
                const int tj = lib_t[j];
% if MODE == "all":
                if (abs(tj - tp) > excl_r && j != skip) {
% else:
                {
% endif
                    ${distance("d", "tj")}
                    const acc_t w = exp(-scale * (acc_t)d);
                    const acc_t yv = (acc_t)ylib[j];
                    sw += w; swy += w * yv; swyy += w * yv * yv;
                    a[0] = w;
% for k in range(E):
                    a[${k + 1}] = w * (acc_t)(x[tj - ${k * TAU}] - xp[${k}]);
% endfor
                    a[${N}] = w * yv;
                }
            }
% for k in range(M):
            tile[lid * ${M} + ${k}] = a[${k}];
% endfor
        }
        barrier(CLK_LOCAL_MEM_FENCE);
% for q in range(SPT):
%   if (q + 1) * WG > NSLOT:
        if (lid + ${q * WG} < ${NSLOT}) {
%   else:
        {
%   endif
            acc_t t_acc = acc[${q}];
% if ACC == "df":
            acc_t t_lo = acclo[${q}];
% endif
            for (int t = spart[${q}]; t < ${WG}; t += ${NPART})
                ${accum("acc_t", "t_acc", "t_lo", "tile[t * %d + ska[%d]]" % (M, q), "tile[t * %d + skb[%d]]" % (M, q))}
            acc[${q}] = t_acc;
% if ACC == "df":
            acclo[${q}] = t_lo;
% endif
        }
% endfor
        barrier(CLK_LOCAL_MEM_FENCE);
    }
    /* combine the parts of each entry, and the variance sums */
% for q in range(SPT):
%   if (q + 1) * WG > NSLOT:
    if (lid + ${q * WG} < ${NSLOT}) {
%   else:
    {
%   endif
        tile[lid + ${q * WG}] = acc[${q}];
% if ACC == "df":
        tile[${NSLOT} + lid + ${q * WG}] = acclo[${q}];
% endif
    }
% endfor
    redA[lid] = sw; redB[lid] = swy; redC[lid] = swyy;
    barrier(CLK_LOCAL_MEM_FENCE);
    for (int e = lid; e < ${NENT}; e += ${WG}) {
% if ACC == "df":
        float2 s = (float2)(0.0f, 0.0f);
        for (int part = 0; part < ${NPART}; ++part)
            s = df_add(s, df_qts(tile[part * ${NENT} + e], tile[${NSLOT} + part * ${NENT} + e]));
        G[e] = s;
% else:
        acc_t s = (acc_t)0;
        for (int part = 0; part < ${NPART}; ++part) s += tile[part * ${NENT} + e];
        G[e] = s;
% endif
    }
% for s in [2 ** i for i in range(20) if 2 ** i < WG][::-1]:
    if (lid < ${s}) {
        redA[lid] += redA[lid + ${s}];
        redB[lid] += redB[lid + ${s}];
        redC[lid] += redC[lid + ${s}];
    }
    barrier(CLK_LOCAL_MEM_FENCE);
% endfor
    if (lid == 0) {
        sw = redA[0]; swy = redB[0]; swyy = redC[0];
% if ACC == "df":
        ${solve_df("G", "sw", "swy", "swyy")}
% else:
        ${solve("G", "sw", "swy", "swyy")}
% endif
    }
% endif
}
