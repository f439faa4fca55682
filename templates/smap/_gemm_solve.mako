## S-map part: the gemm variant's solves (_gemm.mako), a work-group a (row, theta). The
## row's moments S are shifted to its prediction point (G = T S T^T), Jacobi-scaled and
## factored by a right-looking Cholesky whose row and trailing updates the work-group
## shares (the group variant's one work-item Cholesky left most of a launch idle); the
## trace test takes U^-T's columns a work-item each. The numerics are _solve.mako's
## solve(): a pivot below PIVOT_TOL, or tr(G^-1) above 1 / INV_TOL, sends the row to the
## host (status 1); a row that passes the trace test only without the shift's factor F
## (tr(G^-1) F above 1 / INV_TOL), fails a pivot where F > 2, or whose diagonal the shift
## cancelled to <= 0, is status 4: the host solves it again on the device in centred sums
## (the group variant).
<%namespace name="solver" file="/smap/_solve.mako"/>
<%def name="kernel(N, M, NENT, PT)">\
__kernel __attribute__((reqd_work_group_size(${WG}, 1, 1)))
void smap_solve(__global const real_t* restrict x, __global const int* restrict pred_t,
                const int n_pred, const acc_t ridge, __global const acc_t* restrict S,
                __global const acc_t* restrict sums, __global acc_t* restrict out_pred,
                __global acc_t* restrict out_coef, __global acc_t* restrict out_var,
                __global int* restrict out_status)
{
    const int row = get_group_id(0);
    const int ti = get_group_id(1);
    const int lid = get_local_id(0);
    const size_t o = (size_t)ti * n_pred + row;
    const int status0 = out_status[o];
    barrier(CLK_GLOBAL_MEM_FENCE);   /* every work-item has read it before lid 0 writes */
    if (status0) {          /* uniform across the work-group */
        if (lid == 0) ${solver.empty_row()}
        return;
    }
    __local acc_t G[${NENT}], dd[${M}], sc[${N}], red[${WG}];
    __local int bad;
    const int tp = pred_t[row];
    __global const acc_t* Sr = S + o * ${PT};
    if (lid < ${M}) {   /* (kk clamped: a load the compiler speculates stays in bounds) */
        const int kk = clamp(lid - 1, 0, ${E - 1});
        const acc_t v = (acc_t)x[tp * ${NC} + COORD[kk]];
        dd[lid] = lid == 0 || lid == ${N} ? (acc_t)0 : v;
    }
    if (lid == 0) bad = 0;
    barrier(CLK_LOCAL_MEM_FENCE);
    for (int e = lid; e < ${NENT}; e += ${WG}) {
        const int k = KA[e], l = KB[e];
        /* a = b - dd b_0: G_kl = S_kl - dd_k S_0l - dd_l S_0k + dd_k dd_l S_00 */
        acc_t g = Sr[e] - dd[k] * Sr[l] - dd[l] * Sr[k] + dd[k] * dd[l] * Sr[0];
        if (k == l && k > 0 && k < ${N}) g += ridge;
        G[e] = g;
    }
    barrier(CLK_LOCAL_MEM_FENCE);
    /* F: how much the shift cancelled (the largest S_kk / G_kk); the Jacobi scales */
    acc_t F = (acc_t)1;
    for (int k = 1; k < ${N}; ++k) {
        const acc_t g = G[IDX(k, k)];
        F = g > (acc_t)0 ? fmax(F, Sr[IDX(k, k)] / g) : F;
    }
    if (lid < ${N}) {   /* a diagonal the shift cancelled to <= 0: to be solved centred */
        const acc_t g = G[IDX(lid, lid)];
        if (!(g > (acc_t)0)) atomic_max(&bad, lid > 0 && Sr[IDX(lid, lid)] > (acc_t)0 ? 4 : 1);
        sc[lid] = g > (acc_t)0 ? (acc_t)1 / sqrt(g) : (acc_t)0;
    }
    barrier(CLK_LOCAL_MEM_FENCE);
    int status = bad;
    if (!status) {
        for (int e = lid; e < ${NENT}; e += ${WG}) {
            const int k = KA[e], l = KB[e];
            if (k < ${N}) G[e] *= sc[k] * (l < ${N} ? sc[l] : (acc_t)1);
        }
        barrier(CLK_LOCAL_MEM_FENCE);
        for (int k = 0; k < ${N}; ++k) {
            const acc_t dk = G[IDX(k, k)];
            if (!(dk > (acc_t)PIVOT_TOL)) { status = F > (acc_t)2 ? 4 : 1; break; }   /* uniform */
            const acc_t u = sqrt(dk);
            barrier(CLK_LOCAL_MEM_FENCE);      /* everyone has read the pivot */
            for (int l = k + lid; l < ${M}; l += ${WG})   /* l == N: the rhs' forward step */
                G[IDX(k, l)] = l == k ? u : G[IDX(k, l)] / u;
            barrier(CLK_LOCAL_MEM_FENCE);
            for (int e = lid; e < ${NENT}; e += ${WG}) {
                const int i = KA[e], l = KB[e];
                if (i > k && i < ${N}) G[e] -= G[IDX(k, i)] * G[IDX(k, l)];
            }
            barrier(CLK_LOCAL_MEM_FENCE);
        }
    }
    if (!status) {   /* tr(G^-1) = ||U^-T||_F^2: column j of U^-T by work-item j */
        acc_t tr = (acc_t)0;
        if (lid < ${N}) {
            acc_t w[${N}];
            for (int i = lid; i < ${N}; ++i) {
                acc_t s = i == lid ? (acc_t)1 : (acc_t)0;
                for (int k = lid; k < i; ++k) s -= G[IDX(k, i)] * w[k];
                w[i] = s / G[IDX(i, i)];
                tr += w[i] * w[i];
            }
        }
        red[lid] = tr;
        barrier(CLK_LOCAL_MEM_FENCE);
% for s in [2 ** i for i in range(20) if 2 ** i < WG][::-1]:
        if (lid < ${s}) red[lid] += red[lid + ${s}];
        barrier(CLK_LOCAL_MEM_FENCE);
% endfor
        if (!(red[0] * (acc_t)INV_TOL < (acc_t)1)) status = 1;
        else if (!(red[0] * F * (acc_t)INV_TOL < (acc_t)1)) status = 4;
    }
    if (lid == 0) {
        if (!status) {
            const acc_t sw = sums[3 * o], swy = sums[3 * o + 1], swyy = sums[3 * o + 2];
            acc_t c[${N}];
            for (int k = ${N - 1}; k >= 0; --k) {
                acc_t s = G[IDX(k, ${N})];
                for (int l = k + 1; l < ${N}; ++l) s -= G[IDX(k, l)] * c[l];
                c[k] = s / G[IDX(k, k)];
            }
            for (int k = 0; k < ${N}; ++k) {
                c[k] *= sc[k];
                out_coef[o * N + k] = c[k];
            }
            out_pred[o] = c[0];
            out_var[o] = (swyy - (acc_t)2 * c[0] * swy + c[0] * c[0] * sw) / sw;
        } else {
${solver.nan_outputs(" " * 12)}\
        }
        out_status[o] = status;
    }
}
</%def>
