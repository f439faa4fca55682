## S-map part: VARIANT "gemm" (MODE "all", ACC "double", NENT <= 256), three kernels.
## The group variant sums a = w [1, z, y] with z = x_j - x_p centred on each prediction
## point, so no two rows share a product. Here the Gram matrix of row p is
## T_p S_p T_p^T, where S_p = sum_j w_pj^2 b_j b_j^T with b_j = [1, x_j, y_j] in the
## uploaded coordinates (the series' mean removed on the host), and T_p is the shift by
## x_p. S_p for every row is one matrix product W B with W[p, j] = w_pj^2 and B[j, (k, l)]
## = b_jk b_jl: a work-group takes QT = 32 rows x all NENT entries (padded to PT, a
## multiple of 32), and a work-item a 4 x PT / 32 register tile of it.
##
##  - smap_pass1: _group.mako's pass 1, a work-group a (row, theta): scale, skip, status.
##  - smap_moments: S and (sum w, sum w y, sum w y^2) for QT rows a work-group.
##  - smap_solve: G = T S T^T and its Cholesky, a work-group a (row, theta)
##    (_gemm_solve.mako).
##
## The shift cancels digits where a row's neighbours are close to x_p relative to |x_p|.
## F = max_k S_kk / G_kk bounds how much larger the rounding of G's Jacobi-scaled entries
## is than that of the group variant's sums. So the trace test asks tr(G^-1) F < 1 /
## INV_TOL: a kept row has the group variant's error bound, and the others go to the
## host's SVD.
<%namespace name="metric" file="/common/_metric.mako"/>
<%namespace name="group" file="/smap/_group.mako"/>
<%namespace name="gsolve" file="/smap/_gemm_solve.mako"/>
<%!
QT, LT = 32, 16      # rows a work-group, library points a step
%>

<%def name="kernels(N, M, NENT)">\
<%
PT = 32 * -(-NENT // 32)     # entries padded to the 32 columns of work-items (gemm_entries)
JT = PT // 32                # entries a work-item
XQS = E | 1                  # the rows' states' stride in xq: odd, so the 32 rows a warp
                             # reads at once lie in 32 banks (E 20: 4-way conflicts)
if PT > 256 or ACC != "double" or MODE != "all":
    raise ValueError("VARIANT gemm needs ACC double, MODE all and (E + 2)(E + 3) / 2 <= 256")
%>\
/* coordinate k of the state at row T: x[T * NC + COORD[k]] (lag k / NC of column k % NC) */
__constant int COORD[${E}] = {${", ".join(str(k % NC - (k // NC) * TAU * NC) for k in range(E))}};

__kernel __attribute__((reqd_work_group_size(${WG}, 1, 1)))
void smap_pass1(__global const real_t* restrict x, __global const int* restrict lib_t,
                const int n_lib, __global const int* restrict pred_t, const int n_pred,
                __global const acc_t* restrict thetas, const int excl_r, const int knn,
                __global acc_t* restrict scales, __global int* restrict skips,
                __global int* restrict out_status)
{
    const int row = get_group_id(0);
    const int ti = get_group_id(1);
    const int lid = get_local_id(0);
    __local real_t xp[${E}];
    __local acc_t redA[${WG}], redB[${WG}], redC[${WG}];
    __local int redI[${WG}], redJ[${WG}];
    const acc_t theta = thetas[ti];
    const int tp = pred_t[row];
    if (lid < ${E}) xp[lid] = x[tp * ${NC} + COORD[lid]];
    barrier(CLK_LOCAL_MEM_FENCE);
${group.pass1(True)}\
    if (lid == 0) {
        const size_t o = (size_t)ti * n_pred + row;
        out_status[o] = 0; scales[o] = scale; skips[o] = skip;
    }
}

__kernel __attribute__((reqd_work_group_size(256, 1, 1)))
void smap_moments(__global const real_t* restrict x, __global const real_t* restrict ylib,
                  __global const int* restrict lib_t, const int n_lib,
                  __global const int* restrict pred_t, const int n_pred, const int excl_r,
                  __global const acc_t* restrict scales, __global const int* restrict skips,
                  __global const int* restrict out_status, __global acc_t* restrict S,
                  __global acc_t* restrict sums)
{
    const int lid = get_local_id(0);
    const int ti = get_group_id(1);
    const int row0 = get_group_id(0) * ${QT};
    __local real_t xq[${QT * XQS}], xl[${LT * E}];
    __local acc_t sq[${QT}], bl[${LT * M}], W[${LT * QT if LT * PT >= 768 else 768}], B[${LT * PT}];
    __local int tq[${QT}], kq[${QT}];
    /* (no div/rem pairs of a non-power of two below: LLVM would insert a freeze that
       Oclgrind cannot check) */
    if (lid < ${QT}) {   /* the block's rows: states, scales, dropped points, times */
        const int row = row0 + lid;
        const int tp = row < n_pred ? pred_t[row] : ${(E - 1) * TAU};
        for (int k = 0; k < ${E}; ++k) xq[lid * ${XQS} + k] = x[tp * ${NC} + COORD[k]];
        const size_t o = (size_t)ti * n_pred + row;
        const int ok = row < n_pred && out_status[o] == 0;
        sq[lid] = ok ? scales[o] : (acc_t)0;
        kq[lid] = ok ? skips[o] : -2;          /* -2: no row (every weight 0) */
        tq[lid] = tp;
    }
    /* the register tile: rows qg + 8 i, entries pg + 32 j; the weights: row q = lid % QT,
       points l = lid / QT + 8 h */
    const int qg = lid >> 5, pg = lid & 31, wq = lid & ${QT - 1}, wl = lid >> ${QT.bit_length() - 1};
    acc_t acc[4][${JT}];
    for (int i = 0; i < 4; ++i)
        for (int j = 0; j < ${JT}; ++j) acc[i][j] = (acc_t)0;
    acc_t sw = (acc_t)0, swy = (acc_t)0, swyy = (acc_t)0;
    /* One step: the fill (bl, xl), a barrier, the weights and products (W, B; they read
       bl, xl), a barrier, the products' sums (they read W, B). The next fill needs no
       barrier of its own: every reader of bl and xl passed the second barrier already,
       and the barrier after it keeps W and B until every sum of the step is done. */
    for (int base = 0; base < n_lib; base += ${LT}) {
        {
            const int l = lid & ${LT - 1}, j = base + l;
            const int tj = j < n_lib ? lib_t[j] : 0;
            for (int k = lid >> ${LT.bit_length() - 1}; k < ${M}; k += ${256 // LT}) {
                acc_t v = (acc_t)0;
                if (j < n_lib) {
                    if (k == 0) v = (acc_t)1;
                    else if (k == ${N}) v = (acc_t)ylib[j];
                    else {
                        const int kk = clamp(k - 1, 0, ${E - 1});   /* (in bounds if hoisted) */
                        const real_t xv = x[tj * ${NC} + COORD[kk]];
                        xl[l * ${E} + kk] = xv;
                        v = (acc_t)xv;
                    }
                }
                bl[l * ${M} + k] = v;
            }
        }
        barrier(CLK_LOCAL_MEM_FENCE);
% for h in range(LT * QT // 256):
        {
            const int l = wl + ${h * (256 // QT)}, j = base + l;
            acc_t w = (acc_t)0;
            if (j < n_lib && kq[wq] != -2 && j != kq[wq] && abs(lib_t[j] - tq[wq]) > excl_r) {
                real_t _acc = (real_t)0;
% for k in range(E):
                ${metric.step(METRIC, "_acc", "xl[l * %d + %d]" % (E, k), "xq[wq * %d + %d]" % (XQS, k))}
% endfor
                const real_t d = ${metric.finish(METRIC, "_acc")};
                w = exp(-sq[wq] * (acc_t)d);
                const acc_t yv = bl[l * ${M} + ${N}];
                sw += w; swy += w * yv; swyy += w * yv * yv;
            }
            W[l * ${QT} + wq] = w * w;
        }
% endfor
        if (lid < ${PT}) {
            const int ka = lid < ${NENT} ? KA[lid] : 0, kb = lid < ${NENT} ? KB[lid] : 0;
            for (int l = 0; l < ${LT}; ++l)
                B[l * ${PT} + lid] = lid < ${NENT} ? bl[l * ${M} + ka] * bl[l * ${M} + kb] : (acc_t)0;
        }
        barrier(CLK_LOCAL_MEM_FENCE);
        for (int l = 0; l < ${LT}; ++l) {
            acc_t wv[4], bv[${JT}];
            for (int i = 0; i < 4; ++i) wv[i] = W[l * ${QT} + qg + 8 * i];
            for (int j = 0; j < ${JT}; ++j) bv[j] = B[l * ${PT} + pg + 32 * j];
            for (int i = 0; i < 4; ++i)
                for (int j = 0; j < ${JT}; ++j) acc[i][j] = fma(wv[i], bv[j], acc[i][j]);
        }
    }
    for (int i = 0; i < 4; ++i) {
        const int row = row0 + qg + 8 * i;
        if (row < n_pred)
            for (int j = 0; j < ${JT}; ++j) {
                const int e = pg + 32 * j;
                if (e < ${NENT}) S[((size_t)ti * n_pred + row) * ${PT} + e] = acc[i][j];
            }
    }
    /* the weights' sums: the 256 / QT work-items of each row */
    barrier(CLK_LOCAL_MEM_FENCE);
<% R = "B" if LT * PT >= 768 else "W" %>\
    ${R}[lid] = sw; ${R}[256 + lid] = swy; ${R}[512 + lid] = swyy;
    barrier(CLK_LOCAL_MEM_FENCE);
    if (lid < ${QT} && row0 + lid < n_pred) {
        acc_t a = (acc_t)0, b = (acc_t)0, c = (acc_t)0;
        for (int h = 0; h < ${256 // QT}; ++h) {
            a += ${R}[h * ${QT} + lid]; b += ${R}[256 + h * ${QT} + lid]; c += ${R}[512 + h * ${QT} + lid];
        }
        const size_t o = (size_t)ti * n_pred + row0 + lid;
        sums[3 * o] = a; sums[3 * o + 1] = b; sums[3 * o + 2] = c;
    }
}

${gsolve.kernel(N, M, NENT, PT)}\
</%def>
