## MODE "bvertical" / "bdiagonal" of rqa_lines: auto-RQA of many series in one launch,
## one work-group per series (series s0 + group id), the whole recurrence matrix of its
## series walked by the group's work-items, VEC lanes at a time:
##   bvertical: every column j of the full n x n matrix, rows 0 .. n - 1 (the matrix is
##     symmetric, but each column walked whole needs no join through the diagonal): the
##     black and white vertical lines and the recurrences;
##   bdiagonal: the diagonals k = max(w, 1) .. n - 1 above the main one (the host doubles
##     them and adds the main diagonal, as for a single series).
## Series s starts at xs[soff[s]] (soff[s] >= 64: zeros before the first, values of other
## series or zeros after every series, so lane loads past a series' end stay inside the
## buffer; such cells are masked) and has sn[s] embedded points, its own threshold
## sthr[s] (EXACT: the raw float64 series at the same offsets in xs64, sthr64[s], the
## bound sexb[s]). A cell is decided by the same code as the single-series kernels
## (_recurrence.mako, _exactfix.mako), so a series' histograms equal those of its own
## run bit for bit. Every line of a series fits its local histograms (n < hstride <=
## HBINS); group g writes all hstride bins of its series (no zeroing by the host):
## hv/hw/hd[g * hstride + length - 1], nrec[g].
## Needs BITS > 0 and none of SHARE, SYM, JOINT, PERCOL, DMAJ (one series per group, no
## shared words). T: the names of _names.mako.
## Import with <%namespace name="batch" file="/rqa_lines/_batch.mako"/>.
<%namespace name="rec" file="/rqa_lines/_recurrence.mako"/>
<%namespace name="lanewalk" file="/rqa_lines/_lanewalk.mako"/>

<%def name="kernel(T)">\
<%
    if not BITS or SHARE or SYM or JOINT or PERCOL or DMAJ or PLANES or SHFL:
        raise ValueError("MODE %s needs BITS > 0 and no SHARE, SYM, JOINT, PERCOL, DMAJ, "
                         "PLANES or SHFL" % MODE)
    UV, IV, VEC = T.UV, T.IV, T.VEC
    vert = MODE == "bvertical"
%>\
__kernel __attribute__((reqd_work_group_size(${WG}, 1, 1)))
void rqa_${MODE}(__global const real_t* restrict xs,    /* every series (see _batch.mako) */
                 __global const int* restrict soff,      /* series s: its first value */
                 __global const int* restrict sn,        /* its embedded points */
                 __global const real_t* restrict sthr,   /* its threshold */
% if EXACT:
                 __global const double* restrict xs64,   /* EXACT: raw float64 series */
                 __global const double* restrict sthr64, /* EXACT: float64 thresholds */
                 __global const float* restrict sexb,    /* EXACT: bounds B */
% endif
                 const int w, const int s0, const int hstride,
% if vert:
                 __global uint* restrict hv, __global uint* restrict hw,
                 __global uint* restrict nrec)
% else:
                 __global uint* restrict hd)
% endif
{
    const int s = s0 + (int)get_group_id(0);
    const int n = sn[s], n_rows = n, n_cols = n;
    __global const real_t* const x = xs + soff[s];    /* rows */
    __global const real_t* const y = x - ${VEC};      /* columns, as coords() reads them */
    const real_t thr = sthr[s];
% if EXACT:
    __global const double* const xd64 = xs64 + soff[s];
    __global const double* const yd64 = xd64 - ${VEC};
    __global const double* const x2d64 = xd64;
    __global const double* const y2d64 = yd64;
    const double thr64 = sthr64[s], thr264 = 0.0;
    const float exb = sexb[s];
% endif
${setup(T)}\
% if vert:
    for (int t0 = (int)get_local_id(0) * ${VEC}; t0 < n; t0 += ${WG * VEC}) {
        const int l0 = t0, nlanes = n;                 /* columns l0 .. */
% else:
    const int kmin = IMAX(w, 1);
    for (int t0 = (int)get_local_id(0) * ${VEC}; t0 < n - kmin; t0 += ${WG * VEC}) {
        const int l0 = kmin + t0, nlanes = n - kmin;  /* diagonals k = l0 .. */
% endif
% if VEC == 1:
        const ${IV} lid = l0;
        const ${IV} lvalid = (${IV})(t0 < nlanes);
% else:
        const ${IV} lid = (${IV})(l0) + (${IV})(${", ".join(str(l) for l in range(VEC))});
        const ${IV} lvalid = ((${IV})(t0) + (${IV})(${", ".join(str(l) for l in range(VEC))})) < (${IV})(nlanes);
% endif
% if vert:
${rec.coords(T, "l0")}\
${columns(T)}\
% else:
${diagonals(T)}\
% endif
    }
${merge(T)}\
}
</%def>

## The local histograms of the series (hstride bins used of HBINS), private ones as
## _hist.mako's setup declares them, the line-of-length-1 counters and (bvertical) the
## recurrence count.
<%def name="setup(T)">\
% if MODE == "bvertical":
    __global uint* const hist_v = hv + (size_t)get_group_id(0) * hstride;
    __global uint* const hist_w = hw + (size_t)get_group_id(0) * hstride;
    __local uint lh_v[${HBINS}];
    __local uint lh_w[${HBINS}];
    __local uint lnrec;
    for (int b = get_local_id(0); b < hstride; b += ${WG}) { lh_v[b] = 0u; lh_w[b] = 0u; }
    if (get_local_id(0) == 0) lnrec = 0u;
    uint nrec_i = 0u;
% else:
    __global uint* const hist_d = hd + (size_t)get_group_id(0) * hstride;
    __local uint lh_d[${HBINS}];
    for (int b = get_local_id(0); b < hstride; b += ${WG}) lh_d[b] = 0u;
% endif
    barrier(CLK_LOCAL_MEM_FENCE);
% if WALK == 3:
    uint ph_vw[${2 * (PH + VEC)}], ph_d[${PH + VEC}];
    uint* const ph_v = ph_vw;
    uint* const ph_w = ph_vw + ${PH + VEC};
% else:
    uint ph_v[${max(PH, 1)}], ph_w[${max(PH, 1)}], ph_d[${max(PH, 1)}];
% endif
% if PH:
    for (int b = 0; b < ${PH + (VEC if WALK == 3 else 0)}; ++b) { ${"ph_v[b] = 0u; ph_w[b] = 0u;" if MODE == "bvertical" else "ph_d[b] = 0u;"} }
% endif
    uint n_iso = 0u;   /* lines of length 1 counted by popcount (WALK, PH, DPAIR) */
</%def>

## Private counts into the local histograms, then the series' bins (all hstride of them)
## and recurrence count stored by the group.
<%def name="merge(T)">\
<% hs = (("ph_v", "lh_v"), ("ph_w", "lh_w")) if MODE == "bvertical" else (("ph_d", "lh_d"),) %>\
% if PH:
    ${hs[0][0]}[0] += n_iso;
    for (int b = 0; b < ${PH}; ++b) {
%   for ph, lh in hs:
        if (${ph}[b]) atomic_add(&${lh}[b], ${ph}[b]);
%   endfor
    }
% elif WALK or DPAIR:
    if (n_iso) atomic_add(&${hs[0][1]}[0], n_iso);
% endif
% if MODE == "bvertical":
    if (nrec_i) atomic_add(&lnrec, nrec_i);
% endif
    barrier(CLK_LOCAL_MEM_FENCE);
    for (int b = get_local_id(0); b < hstride; b += ${WG}) {
% if MODE == "bvertical":
        hist_v[b] = lh_v[b];
        hist_w[b] = lh_w[b];
% else:
        hist_d[b] = lh_d[b];
% endif
    }
% if MODE == "bvertical":
    if (get_local_id(0) == 0) nrec[get_group_id(0)] = lnrec;
% endif
</%def>

## bvertical: the VEC columns l0 .. of a work-item over all n rows, from empty carries;
## the runs open at the bottom are counted after the last word (a white one where
## WBORDER: it touches the border).
<%def name="columns(T)">\
<% UV, ULV, LV, VEC, WB = T.UV, T.ULV, T.LV, T.VEC, T.WB %>\
% if WALK == 3:
        ${UV} vr = (${UV})0u, wr = (${UV})0u, np = (${UV})0u;
        ${ULV} n1v = (${ULV})0UL;
        uint ba[${VEC * 2}];
        const ${LV} lval = convert_${LV}(lvalid);
        for (int ib = 0; ib < n; ib += 64) {
            const int nb = IMIN(64, n - ib);
<%rec:packed_halves T="${T}" args="xs, xoff">\
${rec.recurrent(T, xs=xs, xoff=xoff)}\
${rec.theiler(T)}\
</%rec:packed_halves>\
            const ${ULV} wd = convert_${ULV}(vload${VEC}(0, ba)) | (convert_${ULV}(vload${VEC}(1, ba)) << 32);
            const ${LV} nbl = (${LV})(nb) & lval;
${lanewalk.walk(T, "wd", "nbl", vr="vr", wr="wr", np="np", wcount=None if WBORDER else "np_before > (%s)0u" % UV)}\
        }
        uint vra[${VEC}], wra[${VEC}], npa[${VEC}];
        vstore${VEC}(vr, 0, vra); vstore${VEC}(wr, 0, wra); vstore${VEC}(np, 0, npa);
%   for l in range(VEC):
        n_iso += (uint)${T.lane("n1v", l)};
%   endfor
% else:
        uint vra[${VEC}], wra[${VEC}], npa[${VEC}], ba[${VEC * WB // 32}];
        for (int l = 0; l < ${VEC}; ++l) { vra[l] = 0u; wra[l] = 0u; npa[l] = 0u; }
        for (int ib = 0; ib < n; ib += ${WB}) {
            const int nb = IMIN(${WB}, n - ib);
<%rec:packed_halves T="${T}" args="xs, xoff">\
${rec.recurrent(T, xs=xs, xoff=xoff)}\
${rec.theiler(T)}\
</%rec:packed_halves>\
            for (int l = 0; l < ${VEC}; ++l)
                if (t0 + l < nlanes)
                    column_runs(${"((ulong)ba[%d + l] << 32) | (ulong)ba[l]" % VEC if BITS == 2 else "ba[l]"}, nb, &vra[l], &wra[l], &npa[l], ph_v, lh_v, hist_v, ph_w, lh_w, hist_w, &n_iso);
        }
% endif
        for (int l = 0; l < ${VEC}; ++l) {   /* runs open at the bottom border */
            if (vra[l]) hist_add(ph_v, lh_v, hist_v, vra[l]);
% if WBORDER:
            if (wra[l]) hist_add(ph_w, lh_w, hist_w, wra[l]);
% endif
            nrec_i += npa[l];
        }
</%def>

## bdiagonal: the VEC diagonals l0 .. of a work-item, cell (i, i + k) for i = 0 .. n - 1 - k
## (rows past a lane's end are masked: its run closes there); the run open at the end of
## the longest lane is counted after the last word.
<%def name="diagonals(T)">\
<% UV, ULV, IV, VEC, WB = T.UV, T.ULV, T.IV, T.VEC, T.WB %>\
        const int klast = l0 + ${VEC - 1};
        const int ie = n - l0;
% if WALK == 3:
        ${UV} drv = (${UV})0u;
        ${ULV} n1v = (${ULV})0UL;
        uint ba[${VEC * 2}];
% else:
        uint dra[${VEC}], ba[${VEC * WB // 32}];
        for (int l = 0; l < ${VEC}; ++l) dra[l] = 0u;
% endif
        for (int ib = 0; ib < ie; ib += ${WB}) {
            const int nb = IMIN(${WB}, ie - ib);
            const int inside = ib + nb - 1 + klast < n;   /* every lane's cells in the matrix */
<%rec:packed_halves T="${T}" args="xs, xoff">\
${rec.coords(T, "i + l0")}\
${rec.recurrent(T, xs=xs, xoff=xoff)}\
                if (!inside) {
                    const ${IV} jj = (${IV})(i) + lid;
                    rec &= jj < (${IV})(n_cols);
                }
</%rec:packed_halves>\
% if WALK == 3:
            const ${ULV} dw = convert_${ULV}(vload${VEC}(0, ba)) | (convert_${ULV}(vload${VEC}(1, ba)) << 32);
${lanewalk.diag_walk(T, "dw", "nb", "lvalid", "drv")}\
% else:
            for (int l = 0; l < ${VEC}; ++l)
                if (t0 + l < nlanes)
                    diag_runs(${"((ulong)ba[%d + l] << 32) | (ulong)ba[l]" % VEC if BITS == 2 else "ba[l]"}, nb, &dra[l], ph_d, lh_d, hist_d, &n_iso);
% endif
        }
% if WALK == 3:
        uint dra[${VEC}];
        vstore${VEC}(drv, 0, dra);
%   for l in range(VEC):
        n_iso += (uint)${T.lane("n1v", l)};
%   endfor
% endif
        for (int l = 0; l < ${VEC}; ++l)   /* the run open at the matrix's edge */
            if (dra[l]) hist_add(ph_d, lh_d, hist_d, dra[l]);
</%def>
