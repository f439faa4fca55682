## S-map part: the cross-map kernel's reductions (smap_xmap.cl.mako): every pair's rho,
## and for PASS3 "hat" the product of the hat rows with the targets.
## rho of every (library, target) of a launch: one work-group per pair reduces the sums
## of the rows where the prediction is finite and the target time observed (seen[row]),
## in acc_t over the centred panel: Pearson's rho as numpy.corrcoef of those pairs.
<%def name="rho_kernel()">\
__kernel __attribute__((reqd_work_group_size(${WG}, 1, 1)))
void smap_xmap_rho(__global const real_t* restrict X, const int n,
                   __global const int* restrict pred_t, __global const int* restrict seen,
                   const int n_pred, __global const int* restrict tgt, const int n_tg,
                   const int Tp, __global const acc_t* restrict pred,
                   __global acc_t* restrict out_rho)
{
    const int pair = get_group_id(0);   /* b * n_tg + t */
    const int lid = get_local_id(0);
    __global const acc_t* p = pred + (size_t)pair * n_pred;
    __global const real_t* y = X + (size_t)tgt[pair % n_tg] * n + Tp;
    acc_t s[6] = {(acc_t)0, (acc_t)0, (acc_t)0, (acc_t)0, (acc_t)0, (acc_t)0};
    for (int row = lid; row < n_pred; row += ${WG}) {
        const acc_t v = p[row];
        if (!seen[row] || !isfinite(v)) continue;
        const acc_t o = (acc_t)y[pred_t[row]];
        s[0] += (acc_t)1; s[1] += v; s[2] += o;
        s[3] += v * v; s[4] += o * o; s[5] += v * o;
    }
    __local acc_t red[6 * ${WG}];
    for (int q = 0; q < 6; ++q) red[q * ${WG} + lid] = s[q];
    barrier(CLK_LOCAL_MEM_FENCE);
    for (int h = ${WG} / 2; h > 0; h /= 2) {
        if (lid < h)
            for (int q = 0; q < 6; ++q) red[q * ${WG} + lid] += red[q * ${WG} + lid + h];
        barrier(CLK_LOCAL_MEM_FENCE);
    }
    if (lid == 0) {
        const acc_t c = red[0];
        const acc_t mp = red[${WG}] / c, mo = red[2 * ${WG}] / c;
        const acc_t vp = red[3 * ${WG}] - c * mp * mp, vo = red[4 * ${WG}] - c * mo * mo;
        const acc_t cv = red[5 * ${WG}] - c * mp * mo;
        out_rho[pair] = c < (acc_t)2 ? (acc_t)NAN : cv / sqrt(vp * vo);
    }
}
</%def>

## pred[b][t][row] = sum_j hat[b][j][row] y_t(lib_t[j] + Tp): a tile of TR rows x TT
## targets a work-group, RPT x TPT a work-item, TJ library points a step through local
## memory; j ascends with one accumulator, as the streaming pass 3 sums.
<%def name="gemm_kernel()">\
<%
TR, TT, TJ, RPT, TPT = 64, 32, 16, 4, 4
GR, GT = TR // RPT, TT // TPT
%>
__kernel __attribute__((reqd_work_group_size(${GR}, ${GT}, 1)))
void smap_xmap_gemm(__global const acc_t* restrict hat, __global const real_t* restrict X,
                    const int n, __global const int* restrict lib_t, const int n_lib,
                    const int n_pred, __global const int* restrict tgt, const int n_tg,
                    const int Tp, __global const int* restrict status,
                    __global acc_t* restrict out_pred)
{
    const int b = get_global_id(2);
    const int r0 = get_group_id(0) * ${TR}, t0 = get_group_id(1) * ${TT};
    const int lr = get_local_id(0), lt = get_local_id(1);
    const int lid = lt * ${GR} + lr;
    __local acc_t Hs[${TJ}][${TR}];
    __local acc_t Ys[${TJ}][${TT}];
    __global const acc_t* hb = hat + (size_t)b * n_lib * n_pred;
    acc_t c[${RPT}][${TPT}];
    for (int i = 0; i < ${RPT}; ++i)
        for (int u = 0; u < ${TPT}; ++u) c[i][u] = (acc_t)0;
    for (int j0 = 0; j0 < n_lib; j0 += ${TJ}) {
        for (int e = lid; e < ${TJ * TR}; e += ${GR * GT}) {
            const int jj = e / ${TR}, rr = e % ${TR}, j = j0 + jj, r = r0 + rr;
            Hs[jj][rr] = (j < n_lib && r < n_pred) ? hb[(size_t)j * n_pred + r] : (acc_t)0;
        }
        for (int e = lid; e < ${TJ * TT}; e += ${GR * GT}) {
            const int jj = e / ${TT}, tt = e % ${TT}, j = j0 + jj, t = t0 + tt;
            Ys[jj][tt] = (j < n_lib && t < n_tg)
                ? (acc_t)X[(size_t)tgt[t] * n + lib_t[j] + Tp] : (acc_t)0;
        }
        barrier(CLK_LOCAL_MEM_FENCE);
        const int jn = min(${TJ}, n_lib - j0);
        for (int jj = 0; jj < jn; ++jj) {
            acc_t hv[${RPT}], yv[${TPT}];
% for i in range(RPT):
            hv[${i}] = Hs[jj][lr + ${i * GR}];
% endfor
% for u in range(TPT):
            yv[${u}] = Ys[jj][lt + ${u * GT}];
% endfor
% for i in range(RPT):
%   for u in range(TPT):
            c[${i}][${u}] += hv[${i}] * yv[${u}];
%   endfor
% endfor
        }
        barrier(CLK_LOCAL_MEM_FENCE);
    }
    for (int i = 0; i < ${RPT}; ++i) {
        const int row = r0 + lr + i * ${GR};
        if (row >= n_pred) continue;
        const int bad = status[(size_t)b * n_pred + row];
        for (int u = 0; u < ${TPT}; ++u) {
            const int t = t0 + lt + u * ${GT};
            if (t < n_tg)
                out_pred[((size_t)b * n_tg + t) * n_pred + row] = bad ? (acc_t)NAN : c[i][u];
        }
    }
}
</%def>
