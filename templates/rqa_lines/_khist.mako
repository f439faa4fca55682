## NTHR > 1 (rqa_lines.cl.mako): NTHR sorted thresholds decided in one launch, each with
## its own histograms, carries and column words. This part holds what the line walks of
## threshold kt see: the kernel arguments NTHR adds, the K histograms' prologue and
## epilogue, and the per-threshold names. A threshold's walk is the one-threshold code
## itself (_lanewalk, _runs, _sym, _diagonal) in a block that redeclares the names it
## reads (ph_v, lh_v, hist_v, dcarry, sbits, ...) as threshold kt's slices of the K-fold
## arrays (C block scope: the inner declaration hides the kernel's). Import with
## <%namespace name="khist" file="/rqa_lines/_khist.mako"/>.

## The values NTHR takes with the others (raises ValueError otherwise; renders nothing).
<%def name="check()"><%
    if NTHR < 1 or (NTHR > 1 and MODE not in ("vertical", "diagonal", "horizontal",
                                                  "collect", "symjoin")):
        raise ValueError("NTHR must be >= 1; NTHR > 1 for MODE vertical, diagonal, horizontal, "
                         "collect or symjoin")
    if NTHR > 1 and MODE not in ("collect", "symjoin") and (
            BITS != 2 or not SHARE or PACK or UNR or PLANES or HCH or SHFL or DMAJ or JOINT or PERCOL):
        raise ValueError("NTHR > 1 needs BITS=2 and SHARE=1, and no PACK, UNR, PLANES, HCH, "
                         "SHFL, DMAJ, JOINT or PERCOL")
    if NTHR > 1 and PH > HBINS:
        raise ValueError("NTHR > 1 needs PH <= HBINS (each threshold's private bins merge "
                         "into its local ones)")
%></%def>

## The kernel arguments NTHR > 1 adds after the others: the thresholds (working real type,
## ascending), the strides of threshold kt's carries (cstride: a task's carry buffers, or
## the rows of hhead/htail), 32-bit histograms (hstride) and column-word planes (pstride,
## SHARE); EXACT: the float64 thresholds and the bounds of each.
<%def name="args()">\
% if NTHR > 1:
                 , __global const real_t* restrict thrk   /* NTHR: the thresholds */
                 , const int cstride, const int hstride, const int pstride
%   if EXACT:
                 , __global const double* restrict thr64k, __global const float* restrict exbk
%   endif
% endif
</%def>

## Prologue (instead of hist.setup): the K local histograms (lh_vk, lh_wk or lh_dk: HBINS
## bins each), the K private ones (ph_vwk or ph_vk/ph_wk, or ph_dk) and n_isok; aliases
## of the arguments that threshold kt's names hide (hist_vk, dcarryk, sbitsk, ...).
<%def name="setup()">\
<% side = MODE != "diagonal"; nph = (2 * (PH + VEC) if side else PH + VEC) if WALK == 3 else max(PH, 1) %>\
% if side:
    __local uint lh_vk[${NTHR * HBINS}];
    __local uint lh_wk[${NTHR * HBINS}];
    for (int b = get_local_id(0); b < ${NTHR * HBINS}; b += ${WG}) { lh_vk[b] = 0u; lh_wk[b] = 0u; }
    __global uint* const hist_vk = hist_v;
    __global uint* const hist_wk = hist_w;
% else:
    __local uint lh_dk[${NTHR * HBINS}];
    for (int b = get_local_id(0); b < ${NTHR * HBINS}; b += ${WG}) lh_dk[b] = 0u;
    __global uint* const hist_dk = hist_d;
    __global uint* const dcarryk = dcarry;
% endif
% if MODE == "vertical":
    __global uint* const vcarryk = vcarry;
    __global uint* const wcarryk = wcarry;
    __global uint* const nptsk = npts;
% elif MODE == "horizontal":
    __global uint* const hheadk = hhead;
    __global uint* const htailk = htail;
% endif
% if SHARE:
    __global ulong* const sbitsk = sbits;
% endif
    barrier(CLK_LOCAL_MEM_FENCE);
% if not side:
    uint ph_dk[${NTHR * nph}];
% elif WALK == 3:
    uint ph_vwk[${NTHR * nph}];
% else:
    uint ph_vk[${NTHR * nph}], ph_wk[${NTHR * nph}];
% endif
% if PH:
    for (int b = 0; b < ${NTHR * nph}; ++b) { ${"ph_dk[b] = 0u;" if not side else "ph_vwk[b] = 0u;" if WALK == 3 else "ph_vk[b] = 0u; ph_wk[b] = 0u;"} }
% endif
    uint n_isok[${NTHR}];
    for (int kt = 0; kt < ${NTHR}; ++kt) n_isok[kt] = 0u;
</%def>

## Threshold kt's names in a block: its private, local and global histograms (and n_iso,
## zero: the caller adds it into n_isok[kt] at the block's end); `carries`: its carry
## buffers and column words too (the diagonal and horizontal bodies read them by name).
<%def name="names(carries=True)">\
<% side = MODE != "diagonal"; nph = (2 * (PH + VEC) if side else PH + VEC) if WALK == 3 else max(PH, 1) %>\
% if side:
%   if WALK == 3:
            uint* const ph_vw = ph_vwk + kt * ${nph};
            uint* const ph_v = ph_vw;
            uint* const ph_w = ph_vw + ${PH + VEC};
%   else:
            uint* const ph_v = ph_vk + kt * ${nph};
            uint* const ph_w = ph_wk + kt * ${nph};
%   endif
            __local uint* const lh_v = lh_vk + kt * ${HBINS};
            __local uint* const lh_w = lh_wk + kt * ${HBINS};
            __global uint* const hist_v = hist_vk + kt * hstride;
            __global uint* const hist_w = hist_wk + kt * hstride;
% else:
            uint* const ph_d = ph_dk + kt * ${nph};
            __local uint* const lh_d = lh_dk + kt * ${HBINS};
            __global uint* const hist_d = hist_dk + kt * hstride;
% endif
% if carries and MODE == "diagonal":
            __global uint* const dcarry = dcarryk + kt * cstride;
% elif carries and MODE == "horizontal":
            __global uint* const hhead = hheadk + kt * cstride;
            __global uint* const htail = htailk + kt * cstride;
% endif
% if carries and SHARE:
            __global ulong* const sbits = sbitsk + kt * pstride;
% endif
            uint n_iso = 0u;
</%def>

## Epilogue (instead of hist.merge): each threshold's private counts (and n_isok) into its
## local histogram, the local ones into the launch's global histograms.
<%def name="merge()">\
<% side = MODE != "diagonal"; nph = (2 * (PH + VEC) if side else PH + VEC) if WALK == 3 else max(PH, 1) %>\
% if PH:
    for (int kt = 0; kt < ${NTHR}; ++kt) {
%   if side:
        uint* const pv = ${"ph_vwk" if WALK == 3 else "ph_vk"} + kt * ${nph};
        uint* const pw = ${"ph_vwk + %d" % (PH + VEC) if WALK == 3 else "ph_wk"} + kt * ${nph};
        pv[0] += n_isok[kt];
        for (int b = 0; b < ${PH}; ++b) {
            if (pv[b]) atomic_add(&lh_vk[kt * ${HBINS} + b], pv[b]);
            if (pw[b]) atomic_add(&lh_wk[kt * ${HBINS} + b], pw[b]);
        }
%   else:
        uint* const pd = ph_dk + kt * ${nph};
        pd[0] += n_isok[kt];
        for (int b = 0; b < ${PH}; ++b)
            if (pd[b]) atomic_add(&lh_dk[kt * ${HBINS} + b], pd[b]);
%   endif
    }
% elif DPAIR:
    for (int kt = 0; kt < ${NTHR}; ++kt)
        if (n_isok[kt]) atomic_add(&${"lh_dk" if MODE == "diagonal" else "lh_vk"}[kt * ${HBINS}], n_isok[kt]);
% endif
    barrier(CLK_LOCAL_MEM_FENCE);
    for (int kt = 0; kt < ${NTHR}; ++kt)
        for (int b = get_local_id(0); b < ${HBINS}; b += ${WG}) {
% if side:
            if (lh_vk[kt * ${HBINS} + b]) atomic_add(&hist_vk[kt * hstride + b], lh_vk[kt * ${HBINS} + b]);
            if (lh_wk[kt * ${HBINS} + b]) atomic_add(&hist_wk[kt * hstride + b], lh_wk[kt * ${HBINS} + b]);
% else:
            if (lh_dk[kt * ${HBINS} + b]) atomic_add(&hist_dk[kt * hstride + b], lh_dk[kt * ${HBINS} + b]);
% endif
        }
</%def>
