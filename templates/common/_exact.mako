## EXACT=1 (float32 RQA kernels on a device with fp64): the cells whose float32 decision
## may differ from the float64 path's are redone in double exactly as the float64 kernel
## computes them, and decided by d64 < thr64 (pyedmcl/rqa/exact.py derives the bound B:
## a float32 cell with |fl32(acc - thr)| > B decides as float64 does). The kernel gets the
## raw float64 series (xd64 rows, yd64 columns padded like y; JOINT: x2d64, y2d64), the float64
## thresholds (thr64, thr264; PERCOL: tc64 per column, padded like tcol) and the bounds
## (exb, exb2; PERCOL: tcb per column). A cell costs one subtract and two compares more;
## the redo (E double differences) runs for the near cells only: ties on quantized data,
## a handful of cells on continuous data. EXACT=0: nothing here is emitted (the float64
## kernels, and float32 without the check).
## Every RQA family imports it: <%namespace name="exact" file="/common/_exact.mako"/>; the
## defs read E, TAU, METRIC, FMA and EXACT from the template's values.

## The double distance helpers (once per program, after FP_CONTRACT OFF): the float64
## kernel's dist() (rqa_lines/_recurrence.mako) in double, coordinate m of row point ia of
## a minus column point ib of b, terms summed from m = 0 (FMA: fma() after the first).
<%def name="functions(fma=None)">\
% if EXACT:
<% use_fma = context.get("FMA", 0) if fma is None else fma %>\
#pragma OPENCL EXTENSION cl_khr_fp64 : enable
#pragma OPENCL FP_CONTRACT OFF
/* EXACT: the float64 path's distance of a cell, in its order and roundings */
inline double rqa_exact_dist(__global const double* a, const int ia, __global const double* b,
                      const int ib)
{
    double acc;
% for m in range(E):
    {
        const double _d = a[ia + ${m * TAU}] - b[ib + ${m * TAU}];
%   if METRIC == "euclidean" and m > 0 and use_fma:
        acc = fma(_d, _d, acc);
%   elif METRIC == "euclidean":
        acc ${"=" if m == 0 else "+="} _d * _d;
%   elif METRIC == "maximum":
        const double _a = fabs(_d);
        acc = ${"_a" if m == 0 else "(_a > acc) ? _a : acc"};
%   else:
        acc ${"=" if m == 0 else "+="} fabs(_d);
%   endif
    }
% endfor
    return acc;
}

/* EXACT: the float64 decision of cell (i, j) (0 or 1), or `dflt` outside the matrix
   (a lane whose cell the caller masks anyway) */
inline uint rqa_exact_lt(__global const double* a, const int i, __global const double* b,
                  const int j, const double t64, const int n_rows, const int n_cols,
                  const uint dflt)
{
    if (i < 0 || i >= n_rows || j < 0 || j >= n_cols)
        return dflt;
    return rqa_exact_dist(a, i, b, j) < t64 ? 1u : 0u;
}
% endif
</%def>

## The kernel arguments EXACT adds to a kernel of one series (auto-recurrence: the band
## and network families): the raw float64 series (unpadded), its threshold and bound.
<%def name="args_auto()">\
% if EXACT:
    __global const double* restrict xd64, const double thr64, const float exb,   /* EXACT */
% endif
</%def>

## The kernel arguments EXACT adds to a kernel of a row and a column series (plots): the
## raw float64 series (unpadded), the threshold and bound.
<%def name="args_two()">\
% if EXACT:
                 __global const double* restrict xd64, __global const double* restrict yd64,
                 const double thr64, const float exb,   /* EXACT */
% endif
</%def>

## The kernel arguments EXACT adds (after the series and tcol, before thr).
<%def name="args(percol=False)">\
% if EXACT:
                 __global const double* restrict xd64,  /* EXACT: raw float64 rows */
                 __global const double* restrict yd64,  /* EXACT: raw float64 columns (padded like y) */
                 __global const double* restrict x2d64, /* EXACT, JOINT: the second pair */
                 __global const double* restrict y2d64,
%   if percol:
                 __global const double* restrict tc64,  /* EXACT, PERCOL: float64 thresholds */
                 __global const float* restrict tcb,    /* EXACT, PERCOL: their bounds */
%   endif
                 const double thr64, const double thr264,   /* EXACT: float64 thresholds */
                 const float exb, const float exb2,         /* EXACT: the bounds B */
% endif
</%def>

## Redo the near lanes of a decision: `lt` (declared by the caller: uint 0/1 for VEC 1 or
## PACK, else an int vector of -1/0 lanes) holds float32's acc < thr for the VEC lanes of
## row `row` and columns `col0` + l; `dd` is the float32 acc - thr (a value or vector),
## `b` the bound (scalar or lane vector), `pair` 2 for JOINT's second pair; `t64(l)`: an
## expression of lane l's float64 threshold (default thr64 / thr264). `pad`: y's left
## padding (the raw columns are laid out alike).
## `series`: the (rows, columns) arrays instead of the pair's, `pad` their columns' left
## padding (default VEC), `bounds` False: the caller's cells lie inside the matrix.
<%def name="redo(lt, dd, b, row, col0, vec, pair=1, t64=None, rv='float', series=None, pad=None, bounds=True)">\
% if EXACT:
<%
    a, bb = ("xd64", "yd64") if pair == 1 else ("x2d64", "y2d64")
    if series is not None:
        a, bb = series
    P = context.get("VEC", 1) if pad is None else pad
    def call(col, t, dflt):
        if not bounds:
            return "(rqa_exact_dist(%s, %s, %s + %d, %s) < %s ? 1u : 0u)" % (a, row, bb, P, col, t)
        return "rqa_exact_lt(%s, %s, %s + %d, %s, %s, n_rows, n_cols, %s)" % (a, row, bb, P, col, t, dflt)
    tdef = "thr64" if pair == 1 else "thr264"
    tl = (lambda l: tdef) if t64 is None else t64
%>\
%   if vec == 1:
            {   /* EXACT: a cell near the threshold decides as float64 does */
                const float _dd = ${dd};
                if (_dd <= ${b} && _dd >= -(${b}))
                    ${lt} = ${call(col0, tl(0), lt)};
            }
%   else:
            {   /* EXACT: lanes near the threshold decide as float64 does (rare: any() first;
                   the lanes then one by one through private arrays) */
                const ${rv}${vec} _dd = ${dd};
                const int${vec} _near = (_dd <= (${b})) & (_dd >= -(${b}));
                if (any(_near)) {
                    int _nl[${vec}], _rl[${vec}];
                    vstore${vec}(_near, 0, _nl);
                    vstore${vec}(${lt}, 0, _rl);
                    for (int _l = 0; _l < ${vec}; ++_l)
                        if (_nl[_l])
                            _rl[_l] = -(int)${call("(%s) + _l" % col0, tl("_l"), "(uint)(-_rl[_l])")};
                    ${lt} = vload${vec}(0, _rl);
                }
            }
%   endif
% endif
</%def>
