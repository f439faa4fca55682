## params: E, TAU, REAL, ACC, WG, NTB, PASS3
## version: 1
## S-map cross maps: library series s (embedded with E lags of TAU) predicts many target
## series at once, pyEDM's SMap(columns=s, target=t) for every target t.
##
## One work-item per (prediction row, library series of the launch). The weights
## w_j = exp(-theta d_j / dbar) and the local regressors z_j = x_j - x_p depend only on
## the library, so the weighted normal equations G = sum w_j^2 [1, z_j][1, z_j]^T are
## built and factored once per row (as smap.cl.mako does: centred on the prediction
## point, Jacobi-scaled Cholesky in ACC, the pivot and trace(G^-1) tests of _solve.mako
## sending the row to the host's SVD, status 1). The prediction, the intercept in
## these coordinates, is then e0^T G^-1 sum_j w_j^2 [1, z_j] y_j = sum_j h_j y_j with
## h_j = w_j^2 (r . [1, z_j]), r = G^-1 e0 (_hat.mako): the hat matrix row, the same for
## every target. Pass 3 streams the library once per NTB targets and accumulates
## sum_j h_j y_t(j + Tp) for each, in ACC.
##
## Library points: every lib_t outside |tj - tp| <= excl_r (the point itself when lib and
## pred overlap), minus the farthest when knn asks for it (pyEDM's knn = |lib| - 1 on a
## disjoint row), as smap.cl.mako's MODE "all". Status 2: no neighbour left.
## Outputs: out_pred[(b * n_tg + t) * n_pred + row] (NaN where status != 0, the host
## then solves or leaves it), out_status[b * n_pred + row].
<%namespace name="ties" file="/smap/_ties.mako"/>
<%namespace name="metric" file="/common/_metric.mako"/>
<%namespace name="hat" file="/smap/_hat.mako"/>
<%namespace name="red" file="/smap/_xmap_reduce.mako"/>
<%
N = E + 1                      # unknowns: intercept + E slopes
M = N + 1                      # with the rhs column (e0)
NENT = M * (M + 1) // 2
UNROLL_MAX = 136               # Gram entries unrolled (E <= 15)
if ACC not in ("double", "float"):
    raise ValueError("ACC must be double or float")
if PASS3 not in ("stream", "hat"):
    raise ValueError("PASS3 must be stream or hat")
%>
${metric.real_type(REAL)}
% if ACC == "double":
% if REAL != "double":
#pragma OPENCL EXTENSION cl_khr_fp64 : enable
% endif
typedef double acc_t;
#define PIVOT_TOL 1e-11
## float64 panels: rows only up to trace 1e8 (smap.cl.mako says why; here 3.5e-7 against
## pyEDM at traces to 1e11, oversampled Lorenz components, E 7); float32 panels keep 1e-11
#define INV_TOL ${"1e-8" if REAL == "double" else "1e-11"}
% else:
typedef float acc_t;
#define PIVOT_TOL 1e-5f
#define INV_TOL 1e-5f
% endif
#define N ${N}
#define M ${M}
${ties.macros()}\
#define IDX(k, l) ((k) * M - ((k) * ((k) - 1)) / 2 + ((l) - (k)))

## one library point j: tj, zj<k> (regressors centred on the prediction point), d, out
<%def name="point()">\
        const int tj = lib_t[j];
        real_t dacc = (real_t)0;
% for k in range(E):
        const real_t zr${k} = x[tj - ${k * TAU}] - xp${k};
        dacc += zr${k} * zr${k};
% endfor
        const acc_t d = (acc_t)sqrt(dacc);
        const int out = abs(tj - tp) <= excl_r;
</%def>

__kernel __attribute__((reqd_work_group_size(${WG}, 1, 1)))
void smap_xmap(__global const real_t* restrict X, const int n, const int lib0,
               __global const int* restrict lib_t, const int n_lib,
               __global const int* restrict pred_t, const int n_pred,
               __global const int* restrict tgt, const int n_tg, const int Tp,
               const acc_t theta, const int excl_r, const int knn,
               __global acc_t* restrict out_pred, __global int* restrict out_status,
               __global acc_t* restrict hat)
{
    const int row = get_global_id(0);
    const int b = get_global_id(1);
    if (row >= n_pred) return;
    __global const real_t* x = X + (size_t)(lib0 + b) * n;
    const int tp = pred_t[row];
% for k in range(E):
    const real_t xp${k} = x[tp - ${k * TAU}];
% endfor

    /* pass 1: mean distance, count, farthest neighbour */
    acc_t dsum = (acc_t)0, dmax = (acc_t)-1, d2 = (acc_t)-1;   /* d2: the runner-up's */
    int cnt = 0, jmax = -1;
    for (int j = 0; j < n_lib; ++j) {
${point()}
        if (!out) {
            dsum += d;
            ++cnt;
            if (d >= dmax) { d2 = dmax; dmax = d; jmax = j; }
            else d2 = fmax(d2, d);
        }
    }
    const int drop = cnt - min(knn, cnt);
    if (drop > 0) dsum -= dmax;
    const int skip = drop > 0 ? jmax : -1;
    const int cnt_used = cnt - drop;
    const acc_t scale = theta == (acc_t)0 ? (acc_t)0 : theta / (dsum / (acc_t)cnt_used);
    /* a dropped farthest point within rounding of the runner-up (TIED, _ties.mako):
       the host decides which (status 1) */
    int status = cnt_used <= 0 ? 2 : (drop > 1 ? 3 : (drop == 1 && TIED(dmax, d2) ? 1 : 0));

    /* pass 2: the library's weighted normal equations (w^2 [1, z] [1, z]^T) */
    acc_t G[${NENT}];
    for (int i = 0; i < ${NENT}; ++i) G[i] = (acc_t)0;
    acc_t r[N];
    if (!status) {
        for (int j = 0; j < n_lib; ++j) {
${point()}
            const acc_t w = (out || j == skip) ? (acc_t)0 : exp(-scale * d);
            acc_t a[N];
            a[0] = w;
% for k in range(E):
            a[${k + 1}] = w * (acc_t)zr${k};
% endfor
% if N * (N + 1) // 2 <= UNROLL_MAX:
% for k in range(N):
%   for l in range(k, N):
            G[${k * M - k * (k - 1) // 2 + (l - k)}] += a[${k}] * a[${l}];
%   endfor
% endfor
% else:
            /* rolled: a large E's unrolled update costs long builds, not speed */
            for (int k = 0; k < N; ++k)
                for (int l = k; l < N; ++l) G[IDX(k, l)] += a[k] * a[l];
% endif
        }
${hat.inverse_e0("G", "r")}
    }
    out_status[(size_t)b * n_pred + row] = status;

% if PASS3 == "stream":
    /* pass 3: every target's prediction sum_j h_j y_t(tj + Tp), NTB targets a stream */
    for (int t0 = 0; t0 < n_tg; t0 += ${NTB}) {
        acc_t s[${NTB}];
        size_t yo[${NTB}];
        for (int u = 0; u < ${NTB}; ++u) {
            s[u] = (acc_t)0;
            yo[u] = (size_t)tgt[min(t0 + u, n_tg - 1)] * n + Tp;
        }
        if (!status) {
            for (int j = 0; j < n_lib; ++j) {
${point()}
                const acc_t w = (out || j == skip) ? (acc_t)0 : exp(-scale * d);
                acc_t h = r[0];
% for k in range(E):
                h += r[${k + 1}] * (acc_t)zr${k};
% endfor
                h *= w * w;
% for u in range(NTB):
                s[${u}] += h * (acc_t)X[yo[${u}] + tj];
% endfor
            }
        }
        for (int u = 0; u < ${NTB} && t0 + u < n_tg; ++u)
            out_pred[((size_t)b * n_tg + t0 + u) * n_pred + row] = status ? (acc_t)NAN : s[u];
    }
% else:
    /* pass 3: the hat row, for the GEMM (zeros where the row has no fit here) */
    __global acc_t* hb = hat + (size_t)b * n_lib * n_pred + row;
    for (int j = 0; j < n_lib; ++j) {
        acc_t h = (acc_t)0;
        if (!status) {
${point()}
            const acc_t w = (out || j == skip) ? (acc_t)0 : exp(-scale * d);
            h = r[0];
% for k in range(E):
            h += r[${k + 1}] * (acc_t)zr${k};
% endfor
            h *= w * w;
        }
        hb[(size_t)j * n_pred] = h;
    }
% endif
}

${red.rho_kernel()}
% if PASS3 == "hat":
${red.gemm_kernel()}
% endif
