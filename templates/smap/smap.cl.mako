## params: E, TAU, METRIC, REAL, ACC, VARIANT, WG, MODE, PV, UNROLL, NC, SPLIT, RB
## version: 1
## legacy-hashes: 9f49ff6482c790c2
## S-map: one small weighted least-squares problem per (prediction point, theta).
## NC > 1: x is a row-major (rows, NC) matrix and the E regressors are E / NC lags of
## each column in pyEDM's Embed order (every column at lag 0, then at lag 1, ...;
## common/_points.mako).
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
## fp64); a pivot below PIVOT_TOL, or trace(G^-1) of the scaled system above 1 / INV_TOL
## (an estimate of its condition within a factor N), marks the row (status 1) for the
## host's least squares, which has pyEDM's exact semantics (pyedmcl/edm/smap_host.py).
##
## MODE "all": every library point outside |tj - tp| <= excl_r (which removes the
## point itself when lib and pred overlap), minus the farthest if knn asks for it.
## MODE "table": the neighbours are given per row (nbr[row*K + q], lib positions,
## -1 = none), already filtered the pyEDM way.
##
## VARIANT "item": one work-item per PV rows (PV = SIMD lanes: every lane solves
## its own problem with vector accumulators; library values are scalar loads
## broadcast to all lanes), private accumulators (CPUs); with SPLIT > 1 (PV = 1), SPLIT
## work-items share a row, each streaming every SPLIT-th library point, and combine
## their sums through local memory (_split.mako: GPUs, which need more work-items than
## rows to hide latency). VARIANT "group": one work-group per
## (row, theta); a tile of WG library points' augmented vectors is staged in
## local memory and each work-item owns one or more (entry, part) slots of the
## Gram matrix, so no per-thread 250-value accumulators are needed (GPUs); RB: the
## edge of the blocks of Gram entries a work-item holds in registers (_group.mako).
## VARIANT "gemm" (MODE "all", ACC "double", E <= 20): the Gram matrices of all rows as
## one matrix product of shared, uncentred terms, shifted to each prediction point after
## (three kernels, _gemm.mako).
## Parts: _item.mako and _group.mako (the two variants' bodies), _gram_blocks.mako (the
## group variant's register blocks), _gemm.mako, _split.mako (the item variant's SPLIT combination),
## _solve.mako (the Cholesky solve of one problem), _df.mako (double-float arithmetic,
## Gram updates).
<%namespace name="ties" file="/smap/_ties.mako"/>
<%namespace name="metric" file="/common/_metric.mako"/>
<%namespace name="dfa" file="/smap/_df.mako"/>
<%namespace name="item" file="/smap/_item.mako"/>
<%namespace name="group" file="/smap/_group.mako"/>
<%namespace name="gb" file="/smap/_gram_blocks.mako"/>
<%namespace name="gemm" file="/smap/_gemm.mako"/>
<%namespace name="gb" file="/smap/_gram_blocks.mako"/>
<%namespace name="gemm" file="/smap/_gemm.mako"/>
<%
N = E + 1                      # unknowns: intercept + E slopes
M = N + 1                      # augmented with the target
NENT = M * (M + 1) // 2        # upper triangle of a a^T
def idx(k, l):
    return k * M - k * (k - 1) // 2 + (l - k)
pairs = [(k, l) for k in range(M) for l in range(k, M)]
assert all(idx(k, l) == i for i, (k, l) in enumerate(pairs))
if MODE not in ("all", "table"):
    raise ValueError("MODE must be all or table")
if VARIANT not in ("item", "group", "gemm"):
    raise ValueError("VARIANT must be item, group or gemm")
if SPLIT not in (1, 2, 4, 8):
    raise ValueError("SPLIT must be 1, 2, 4 or 8")
if SPLIT > 1 and (VARIANT != "item" or PV != 1 or WG % SPLIT):
    raise ValueError("SPLIT > 1 needs VARIANT item, PV 1 and WG a multiple of SPLIT")
if RB not in (1, 2, 3, 4) or (RB > 1 and VARIANT != "group"):
    raise ValueError("RB must be 1, 2, 3 or 4, and 1 unless VARIANT is group")
%>
${metric.real_type(REAL)}
% if ACC == "double":
% if REAL != "double":
#pragma OPENCL EXTENSION cl_khr_fp64 : enable
% endif
typedef double acc_t;
#define PIVOT_TOL 1e-11
## float64 series: a trace above 1e8 leaves a slope's error above 1e-6 and a prediction's
## above 1e-9 relative to pyEDM (measured 2.3e-6 and 1.1e-9 at traces up to 1e9, 1e-4 and
## 2.5e-8 up to 1e11: Lorenz sampled at 0.02, E 7, tau 1); the host solves such rows to
## rounding. float32 series keep 1e-11: their storage's rounding bounds their error there.
#define INV_TOL ${"1e-8" if REAL == "double" else "1e-11"}
% elif ACC == "df":
typedef float acc_t;
#define PIVOT_TOL 1e-10f
#define INV_TOL 1e-10f
${dfa.functions()}
% else:
typedef float acc_t;
#define PIVOT_TOL 1e-5f
#define INV_TOL 1e-5f
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
${ties.macros()}\
#define IDX(k, l) ((k) * M - ((k) * ((k) - 1)) / 2 + ((l) - (k)))

% if VARIANT != "item":
${gb.tables(M)}
% endif
% if VARIANT == "gemm":
${gemm.kernels(N, M, NENT)}
% else:

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
${item.body(N, M, NENT, pairs)}
% else:
${group.body(N, M, NENT)}
% endif
}
% endif
