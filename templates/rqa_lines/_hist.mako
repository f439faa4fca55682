## Histogram accumulation of rqa_lines: a closed line of length len goes to the private
## per-work-item histogram (len <= PH), the work-group-local one (len <= HBINS) or the
## launch's 32-bit global one; local (and private) counts are merged once per work-group,
## and the host folds the 32-bit counts into 64-bit totals (rqa_accumulate).
## Import with <%namespace name="hist" file="/rqa_lines/_hist.mako"/>.
<%namespace name="kc" file="/rqa_lines/_kcollect.mako"/>

<%def name="hist_add()">\
inline void hist_add(uint* ph, __local uint* lh, __global uint* gh, const uint len)
{
% if PH:
    if (len <= ${PH}u) ph[len - 1u] += 1u;
    else
% endif
    if (len <= ${HBINS}u) atomic_inc(&lh[len - 1u]);
    else atomic_inc(&gh[len - 1u]);
}
</%def>

## Kernel prologue: zeroed local histograms (lh_v, lh_w or lh_d), private ones (ph_*)
## and n_iso, the lines of length 1 counted by popcount.
<%def name="setup()">\
% if MODE != "diagonal":
    __local uint lh_v[${HBINS}];
    __local uint lh_w[${HBINS}];
    for (int b = get_local_id(0); b < ${HBINS}; b += ${WG}) { lh_v[b] = 0u; lh_w[b] = 0u; }
% else:
    __local uint lh_d[${HBINS}];
    for (int b = get_local_id(0); b < ${HBINS}; b += ${WG}) lh_d[b] = 0u;
% endif
    barrier(CLK_LOCAL_MEM_FENCE);
    /* private histograms: set up after the barrier, so that they are not live across one
       (PoCL then keeps them on the work-item's stack, not in a per-work-group array) */
% if WALK == 3:
    /* WALK=3: a spare bin per lane after each histogram; black and white bins in one
       array, so that one increment per lane takes either */
    uint ph_vw[${2 * (PH + VEC)}], ph_d[${PH + VEC}];
    uint* const ph_v = ph_vw;
    uint* const ph_w = ph_vw + ${PH + VEC};
% else:
    uint ph_v[${max(PH, 1)}], ph_w[${max(PH, 1)}], ph_d[${max(PH, 1)}];
% endif
% if PH:
<% nz = PH + (VEC if WALK == 3 else 0) %>\
    for (int b = 0; b < ${nz}; ++b) { ${"ph_d[b] = 0u;" if MODE == "diagonal" else "ph_v[b] = 0u; ph_w[b] = 0u;"} }
% endif
    uint n_iso = 0u;   /* WALK, PH: lines of length 1 counted by popcount, added to bin 1 */
</%def>

## Kernel epilogue: private counts (and n_iso) into the local histograms, local ones into
## the launch's global histograms.
<%def name="merge()">\
% if PH:
    ${"ph_d" if MODE == "diagonal" else "ph_v"}[0] += n_iso;
    for (int b = 0; b < ${PH}; ++b) {
%   if MODE != "diagonal":
        if (ph_v[b]) atomic_add(&lh_v[b], ph_v[b]);
        if (ph_w[b]) atomic_add(&lh_w[b], ph_w[b]);
%   else:
        if (ph_d[b]) atomic_add(&lh_d[b], ph_d[b]);
%   endif
    }
% endif
% if DPAIR and not PH:
    if (n_iso) atomic_add(&${"lh_d" if MODE == "diagonal" else "lh_v"}[0], n_iso);   /* DPAIR */
% endif
    barrier(CLK_LOCAL_MEM_FENCE);
% if MODE != "diagonal":
    for (int b = get_local_id(0); b < ${HBINS}; b += ${WG}) {
        if (lh_v[b]) atomic_add(&hist_v[b], lh_v[b]);
        if (lh_w[b]) atomic_add(&hist_w[b], lh_w[b]);
    }
% else:
    for (int b = get_local_id(0); b < ${HBINS}; b += ${WG}) {
        if (lh_d[b]) atomic_add(&hist_d[b], lh_d[b]);
    }
% endif
</%def>

## rqa_accumulate (fold) and rqa_add_runs (open runs of the carryovers into a histogram).
<%def name="accumulate()">\
/* Fold a launch's 32-bit histogram into the 64-bit total and clear it. */
__kernel void rqa_accumulate(__global uint* restrict h32, __global ulong* restrict h64, const int n${kc.args("hs")})
{
${kc.shift(("h32", "hs"), ("h64", "hs"))}\
    const int b = get_global_id(0);
    if (b < n) {
        const uint c = h32[b];
        if (c) { h64[b] += (ulong)c; h32[b] = 0u; }
    }
}

/* Runs a carryover buffer holds open after the last row block (lengths; 0: none) into a
   32-bit histogram (index length - 1), so that the host reads histograms only: the n
   entries from i0 on (a row range's diagonals that end inside it). */
__kernel void rqa_add_runs(__global const uint* restrict runs, const int i0, const int n,
                           __global uint* restrict h32${kc.args("rs", "hs")})
{
${kc.shift(("runs", "rs"), ("h32", "hs"))}\
    const int i = get_global_id(0);
    if (i < n) {
        const uint r = runs[i0 + i];
        if (r) atomic_inc(&h32[r - 1u]);
    }
}
</%def>

## MODE "collect" (the whole program; it depends on no other template value): a run's
## 64-bit totals made ready for the host to read only their used bins, and the column
## tasks' recurrence counts summed.
<%def name="collect_kernel()">\
/* The end of a run, one work-item per bin b: where `merge` is set, SYM's row-walk totals
   (hv, hw: their own histograms while the row walks ran beside the vertical launches)
   are added into the vertical and white totals; then ext[0..2] (zeroed by the host)
   become one past the last nonzero bin of d, v and w, so that the host reads those bins
   only (a few thousand of N: the longest line of each kind). */
__kernel void rqa_collect(__global const ulong* restrict d, __global ulong* restrict v,
                          __global ulong* restrict w, __global const ulong* restrict hv,
                          __global const ulong* restrict hw, const int merge, const int n,
                          __global uint* restrict ext${kc.args("hs")})
{
${kc.shift(("d", "hs"), ("v", "hs"), ("w", "hs"), ("hv", "hs"), ("hw", "hs"), ("ext", "3"))}\
    const int b = get_global_id(0);
    if (b >= n)
        return;
    ulong cv = v[b], cw = w[b];
    if (merge) {
        const ulong av = hv[b], aw = hw[b];
        if (av) { cv += av; v[b] = cv; }
        if (aw) { cw += aw; w[b] = cw; }
    }
    const uint end = (uint)b + 1u;
    if (d[b]) atomic_max(&ext[0], end);
    if (cv) atomic_max(&ext[1], end);
    if (cw) atomic_max(&ext[2], end);
}

/* The nonzero bins of a run's totals d, v and w (after rqa_collect), as (bin, count)
   pairs in no particular order: kind q's first `cap` at bq[i], cq[i], and ext[3 + q]
   (zeroed by the host) counting them all; beyond `cap` nothing is written and the host
   reads that total whole. The host then reads a few thousand pairs instead of every
   bin up to the longest line (a random walk's diagonals: N bins, ~500 of them nonzero). */
__kernel void rqa_sparse(__global const ulong* restrict d, __global const ulong* restrict v,
                         __global const ulong* restrict w, const int n, const uint cap,
                         __global uint* restrict ext,
                         __global uint* restrict bd, __global ulong* restrict cd,
                         __global uint* restrict bv, __global ulong* restrict cv,
                         __global uint* restrict bw, __global ulong* restrict cw)
{
    const int b = get_global_id(0);
    if (b >= n)
        return;
    const ulong x = d[b], y = v[b], z = w[b];
    if (x) { const uint at = atomic_inc(&ext[3]); if (at < cap) { bd[at] = (uint)b; cd[at] = x; } }
    if (y) { const uint at = atomic_inc(&ext[4]); if (at < cap) { bv[at] = (uint)b; cv[at] = y; } }
    if (z) { const uint at = atomic_inc(&ext[5]); if (at < cap) { bw[at] = (uint)b; cw[at] = z; } }
}

/* The recurrences a column task counted (its npts carry), summed on the device: entries
   i0 .. i0 + n - 1 of `a`, 1024 per work-group, into sums[group] (64-bit), so that the
   host reads n / 1024 sums instead of n counts. */
__kernel __attribute__((reqd_work_group_size(64, 1, 1)))
void rqa_count_sums(__global const uint* restrict a, const int i0, const int n,
                    __global ulong* restrict sums${kc.args("as", "ss")})
{
${kc.shift(("a", "as"), ("sums", "ss"))}\
    __local ulong part[64];
    const int lid = get_local_id(0), base = get_group_id(0) * 1024;
    ulong c = 0UL;
    for (int k = 0; k < 16; ++k) {
        const int i = base + k * 64 + lid;
        if (i < n) c += (ulong)a[i0 + i];
    }
    part[lid] = c;
    barrier(CLK_LOCAL_MEM_FENCE);
    for (int s = 32; s > 0; s >>= 1) {
        if (lid < s) part[lid] += part[lid + s];
        barrier(CLK_LOCAL_MEM_FENCE);
    }
    if (lid == 0) sums[get_group_id(0)] = part[0];
}
</%def>
