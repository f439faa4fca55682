## The lookup template's float32 check (simplex_lookup.cl.mako, CHECK) and the patch of
## its float64 redo; reads K, KS from the template's context and the lookup kernel's
## locals (q, j, b, o, mu, den, dmin, dmin_raw, w<k>, y<k>) and arguments.
##
## CHECK (float32 Simplex, WEIGHT "simplex"): lookup also writes flag[b][j][q] = 1 where
## float32's first-order error bound on the prediction exceeds thr[j] (target j's
## tolerance in data units; units[j], the first nt of the targets' units, one array: thr,
## span, and RESOLVE's shift and scale, nt each); the caller recomputes those queries in
## float64; with `ties` set (decimal data: pyedmcl/edm/simplex_ties.py) also wherever the
## K-th and the next neighbour lie within float32's rounding, whatever the bound. The bound
## (pyedmcl/edm/row_check.py, decision 0089): a float32 distance d_i is within
## D_i = 2u (2 |q| + erel d_i) of the exact one (u = 2^-24, |q| the query point's norm,
## erel = E + 4), which moves w_i / W, so the prediction mu by at most
## sum_i w_i / W |y_i - mu| (D_i + d_i D_0 / d_0) / f (the last term where the nearest
## distance d_0 is the scale f, not the 1e-6 floor), plus w_i / W span[j] for each
## neighbour i within D_i + D_K of the table's extra one, K (float32 may rank either
## first, or any point tied with them: span[j] = units[nt + j] is target j's max - min).
##
## nflag[0] (zeroed by the caller) counts the flagged queries and flagq[0 .. cap-1] lists
## them (in no order), so that the caller reads count and list with the skill, and the
## flags only where more than cap are listed. Both, and RESOLVE's list, are parts of one
## int array `report` (report_parts(); the host reads it in one copy:
## pyedmcl.primitives.lookup.CheckedLookup): nflag = report[0..1] (flagged queries,
## resolved predictions), flagq = report[2 .. 2 + cap - 1], resolved the doubles from
## int (3 + cap) & ~1 (even: 8-byte aligned; the host's resolved_at) on, 4 a slot.
##
## Several targets (nt > 1; `seen`, 1 + cap + nq ints zeroed by the caller, unread where
## nt is 1): a query is listed once whatever the targets flagged, by the first of them
## to set its mark (marks[q] bit 0), so that a tie flagging a query for each of 20,000
## targets takes one slot, not 20,000; and RESOLVE lists each query it resolved once
## (bit 1; count seen[0], list seen[1 .. cap]; lookup/_resolve.mako): where its
## predictions overflow their list, the host takes the rows from the two lists, not from
## the flags.
##
## RESOLVE: flagged predictions redone in the lookup where the table suffices
## (lookup/_resolve.mako); only the others are counted and listed.
##
## patch: the float64 redo's predictions (and variances) p64 / v64 (ACC, (nt, m), of the
## queries rows[0 .. m-1]) into pred / var (nt, nq) in the kernel's units: (p - shift[j])
## / scale[j] and v / scale[j]^2 rounded to real_t, as the host's Affine.forward and a
## float32 array's assignment do; the skill then runs on the patched predictions.
##
## select_flagged: the flagged queries' first cap entries (the report's flagq, count
## nflag) as the device redo's queries (pyedmcl/edm/row_redo.py): rsel[i] = the query (-1 past the
## count: a slot the patch skips), qsel[i] = its point (query 0's for a -1 slot, so that
## the float64 k-NN of a fixed cap queries reads valid points). No host round trip.
##
## merge_lists (a program of REAL double): the float64 redo's k-NN tables of the library
## in lists (lists, nq, kin) merged into one (1, nq, k) in the k-NN kernel's order
## (distance, |p - l|, l; -1 / inf where none), a point listed twice taken once: the
## host's row_check.merge_tables on the device. The kernel ranked squares and stored
## roots: where two of a query's first k + 1 candidates share a finite root, the order
## cannot be read here and tie[0] is set (the caller then takes the single launch).

## the report's parts as the kernel's locals nflag, flagq and (RESOLVE) resolved
<%def name="report_parts()">\
    volatile __global int* const nflag = report;
    __global int* const flagq = (__global int*)report + 2;
    volatile __global int* const marks = seen + 1 + cap;  /* (nt > 1) */
% if RESOLVE:
    __global double* const resolved = (__global double*)((__global int*)report + ((3 + cap) & ~1));
% endif
</%def>

## the bound of prediction (b, j, q), its flag, count and list entry
<%def name="bound()">\
    {
        const acc_t u2 = (acc_t)1.1920928955078125e-07;  /* 2u = 2^-23 */
        const acc_t qn2 = 2 * (acc_t)qnorm[q];
        const acc_t f = (acc_t)dmin;
        const acc_t d0 = (acc_t)dmin_raw;
        /* where the nearest distance is the scale, its error moves every weight */
        const acc_t g = dmin_raw >= (real_t)1e-6 ? u2 * (qn2 + erel * d0) / f : 0;
        acc_t bnd = 0;
%   for k in range(K):
        if (w${k} > 0)  /* an empty slot's distance is inf */
            bnd += w${k} * fabs(y${k} - mu) * (u2 * (qn2 + erel * (acc_t)dist[o + ${k}])
                                              + (acc_t)dist[o + ${k}] * g);
%   endfor
        bnd /= den * f;
%   if KS > K:
        int kth_tie = 0;  /* the K-th and the next one within rounding */
        if (idx[o + K] >= 0) {
            /* a neighbour float32 may rank in place of the next one (K + 1), or of any
               point as far within rounding, may be any other library point: its
               target can differ by the target's whole span */
            const acc_t db = (acc_t)dist[o + K];
%     for k in range(K):
            if (db - (acc_t)dist[o + ${k}] <= u2 * (2 * qn2 + erel * ((acc_t)dist[o + ${k}] + db))) {
                bnd += w${k} / den * units[nt + j];  /* span[j] */
%       if k == K - 1:
                kth_tie = 1;
%       endif
            }
%     endfor
        }
%   else:
        const int kth_tie = 0;
%   endif
        /* ties: a tie at the K-th place is the float64 call's to decide (pyEDM's rule
           where its float64 distances tie: pyedmcl/edm/simplex_ties.py), whatever it
           moves the prediction by */
        int flagged = den > 0 && (!(bnd <= units[j]) || (ties && kth_tie));  /* thr[j] */
        uchar mark = flagged ? 1 : 0;
% if RESOLVE:
        if (flagged && resolve(idx, dist, o, q, j, b, nq, nt, u2, qn2, erel, x64, y64, ldy,
                               tshift, qpts, units, pred, var, nflag, resolved, cap, seen,
                               recs)) {
            flagged = 0;
            mark = 2;  /* redone here */
        }
% endif
        flag[((size_t)b * nt + j) * nq + q] = mark;
        /* rare: listed for the host, which reads flag only past cap; of several targets
           by the first to mark the query */
        if (flagged && (nt == 1 || !(atomic_or(marks + q, 1) & 1))) {
            const int slot = atomic_inc(nflag);
            if (slot < cap) flagq[slot] = q;
        }

    }
</%def>

<%def name="patch()">\
__kernel void patch(__global real_t* restrict pred, __global real_t* restrict var,
                    const int nq, __global const int* restrict rows, const int m,
                    __global const acc_t* restrict p64, __global const acc_t* restrict v64,
                    __global const acc_t* restrict shift, __global const acc_t* restrict scale,
                    const int with_var)
{
    const int i = get_global_id(0);
    const int j = get_global_id(1);
    if (i >= m || rows[i] < 0) return;  /* < 0: an unused slot of select_flagged */
    const size_t o = (size_t)j * nq + rows[i];
    pred[o] = (real_t)((p64[(size_t)j * m + i] - shift[j]) / scale[j]);
    if (with_var)
        var[o] = (real_t)(v64[(size_t)j * m + i] / (scale[j] * scale[j]));
}
</%def>

<%def name="select()">\
__kernel void select_flagged(__global const int* restrict report, const int cap,
                             __global const int* restrict qpts,
                             __global int* restrict qsel, __global int* restrict rsel)
{
    const int i = get_global_id(0);
    if (i >= cap) return;
    const int n = report[0];  /* nflag[0]; the list flagq from report[2] on */
    const int r = i < n ? report[2 + i] : -1;
    rsel[i] = r;
    qsel[i] = qpts[r < 0 ? 0 : r];
}
</%def>

<%def name="merge()">\
/* whether candidate (d, c, l) comes after (d0, c0, l0) in the k-NN kernel's order */
inline int merge_after(const real_t d, const int c, const int l,
                       const real_t d0, const int c0, const int l0)
{
    return d > d0 || (d == d0 && (c > c0 || (c == c0 && l > l0)));
}

__kernel void merge_lists(__global const int* restrict idx, __global const real_t* restrict dist,
                          const int lists, const int nq, const int kin, const int k,
                          __global const int* restrict qpts, __global int* restrict oidx,
                          __global real_t* restrict odist, __global int* restrict tie)
{
    const int q = get_global_id(0);
    if (q >= nq) return;
    const int p = qpts[q];
    real_t pd = -INFINITY;  /* the last one taken; none yet */
    int pc = -1, pl = -1;
    for (int r = 0; r <= k; r++) {  /* the r-th distinct candidate, by selection */
        real_t bd = INFINITY;
        int bc = INT_MAX, bl = INT_MAX, found = 0;
        for (int b = 0; b < lists; b++) {
            const size_t o = ((size_t)b * nq + q) * kin;
            for (int i = 0; i < kin; i++) {
                const int l = idx[o + i];
                if (l < 0) continue;
                const real_t d = dist[o + i];
                const int c = p > l ? p - l : l - p;
                if (merge_after(d, c, l, pd, pc, pl) && (!found || merge_after(bd, bc, bl, d, c, l))) {
                    bd = d; bc = c; bl = l; found = 1;
                }
            }
        }
        if (!found) {  /* fewer than k + 1 candidates: the rest are none */
            for (int s = r; s < k; s++) {
                oidx[(size_t)q * k + s] = -1;
                odist[(size_t)q * k + s] = INFINITY;
            }
            return;
        }
        if (r > 0 && bd == pd && isfinite(bd))
            tie[0] = 1;
        if (r < k) {
            oidx[(size_t)q * k + r] = bl;
            odist[(size_t)q * k + r] = bd;
        }
        pd = bd; pc = bc; pl = bl;
    }
}
</%def>

