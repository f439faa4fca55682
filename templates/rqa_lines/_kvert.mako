## NTHR > 1, MODE "vertical" of rqa_lines: the work-item of the VEC columns l0 .. l0 +
## VEC - 1 computes each cell's distance once and decides it against the NTHR thresholds
## (th0 < th1 < ...), packing NTHR bit words per 64-row word; then each threshold's words
## are stored (SHARE: plane kt of the column words) and walked with its own carries and
## histograms (the one-threshold walks: _lanewalk's for WALK=3, else _runs' column_runs).
## The words come from _kpack.mako (EXACT: one near flag per cell for all thresholds,
## a flagged cell decided in double against each).
## BITS=2 (64-row words), no PACK, UNR, PLANES, DMAJ, JOINT or PERCOL (the template refuses
## them). T: the names of _names.mako.
## Import with <%namespace name="kvert" file="/rqa_lines/_kvert.mako"/>.
<%namespace name="rec" file="/rqa_lines/_recurrence.mako"/>
<%namespace name="kpack" file="/rqa_lines/_kpack.mako"/>
<%namespace name="lanewalk" file="/rqa_lines/_lanewalk.mako"/>
<%namespace name="khist" file="/rqa_lines/_khist.mako"/>
<%namespace name="kskip" file="/rqa_lines/_kskip.mako"/>

<%def name="body(T)">\
<% RV, VEC = T.RV, T.VEC %>\
        /* column coordinates and the thresholds are fixed for the whole walk */
${rec.coords(T, "l0")}\
${kpack.setup(T)}\
% if SYM:
        /* rows i < j of some lane only (the words below are never read) */
        const int iend = IMIN(row0 + nrows, l0 + ${VEC - 1});
% else:
        const int iend = row0 + nrows;
% endif
        uint ba[${NTHR * 2 * VEC}];   /* threshold kt's half h of lane l: ba[(2 kt + h) VEC + l] */
% if WALK == 3:
${lanes(T)}\
% else:
${scalar(T)}\
% endif
</%def>

## WALK=3: threshold kt's carries in vector registers (vrk[kt], ...), its words walked for
## all lanes at once.
<%def name="lanes(T)">\
<% UV, ULV, LV, VEC = T.UV, T.ULV, T.LV, T.VEC %>\
        ${UV} vrk[${NTHR}], wrk[${NTHR}], npk[${NTHR}];
        ${ULV} n1k[${NTHR}];
        for (int kt = 0; kt < ${NTHR}; ++kt) {
            const int c = kt * cstride + l0 - carry0;
            vrk[kt] = vload${VEC}(0, vcarryk + c);
            wrk[kt] = vload${VEC}(0, wcarryk + c);
            npk[kt] = vload${VEC}(0, nptsk + c);
            n1k[kt] = (${ULV})0UL;
        }
        const ${LV} lidl = convert_${LV}(lid);
        const ${LV} lval = convert_${LV}(lvalid);   /* -1: lane inside the launch */
        for (int ib = row0; ib < iend; ib += 64) {
            const int nb = IMIN(64, row0 + nrows - ib);
${kpack.halves(T)}\
% if SYM:
            /* rows above the diagonal of each lane */
            const ${LV} nbl = VCLAMPI(lidl - (${LV})(ib), (${LV})0, (${LV})(nb)) & lval;
% else:
            const ${LV} nbl = (${LV})(nb) & lval;
% endif
            #pragma unroll 1
            for (int kt = 0; kt < ${NTHR}; ++kt) {
                const ${ULV} wd = convert_${ULV}(vload${VEC}(2 * kt, ba)) | (convert_${ULV}(vload${VEC}(2 * kt + 1, ba)) << 32);
% if SHARE:
                {   /* plane kt of the column words, columns a diagonal launch can read */
                    __global ulong* sp = sbitsk + kt * pstride + ((ib - row0) >> 6) * sstride + SPAD + l0;
                    if (t0 + ${VEC} <= nlanes${"" if SYM else " && l0 > row0 + skmin - 64"}) {
                        vstore${VEC}(wd, 0, sp);
                    } else {
                        ulong wa[${VEC}];
                        vstore${VEC}(wd, 0, wa);
                        for (int l = 0; l < ${VEC}; ++l)
                            if (t0 + l < nlanes && ${"1" if SYM else "l0 + l > row0 + skmin - 64"}) sp[l] = wa[l];
                    }
                }
% endif
                {
${khist.names(carries=False)}\
                    ${UV} vr = vrk[kt], wr = wrk[kt], np = npk[kt];
                    ${ULV} n1v = n1k[kt];
${kskip.col_if(T, "wd", "nbl", "vr")}\
${lanewalk.walk(T, "wd", "nbl", vr="vr", wr="wr", np="np", wcount=None if WBORDER else "np_before > (%s)0u" % UV)}\
${kskip.col_else(T, "nbl", "vr", "wr", "np")}\
                    vrk[kt] = vr; wrk[kt] = wr; npk[kt] = np; n1k[kt] = n1v;
                }
            }
        }
        for (int kt = 0; kt < ${NTHR}; ++kt) {
            const int c = kt * cstride + l0 - carry0;
            vstore${VEC}(vrk[kt], 0, vcarryk + c);
            vstore${VEC}(wrk[kt], 0, wcarryk + c);
            vstore${VEC}(npk[kt], 0, nptsk + c);
            const ${ULV} n1v = n1k[kt];
            n_isok[kt] += ${" + ".join("(uint)%s" % T.lane("n1v", l) for l in range(VEC))};
        }
</%def>

## WALK < 3: lane by lane, threshold by threshold (column_runs of _runs.mako).
<%def name="scalar(T)">\
<% VEC = T.VEC %>\
        uint vra[${NTHR * VEC}], wra[${NTHR * VEC}], npa[${NTHR * VEC}];
        for (int q = 0; q < ${NTHR * VEC}; ++q) {
            const int c = (q / ${VEC}) * cstride + l0 - carry0 + q % ${VEC};
            vra[q] = vcarryk[c]; wra[q] = wcarryk[c]; npa[q] = nptsk[c];
        }
        for (int ib = row0; ib < iend; ib += 64) {
            const int nb = IMIN(64, row0 + nrows - ib);
${kpack.halves(T)}\
            for (int kt = 0; kt < ${NTHR}; ++kt) {
${khist.names(carries=False)}\
                for (int l = 0; l < ${VEC}; ++l)
                    if (t0 + l < nlanes) {
                        const ulong wd = ((ulong)ba[(2 * kt + 1) * ${VEC} + l] << 32) | (ulong)ba[2 * kt * ${VEC} + l];
% if SHARE:
                        /* plane kt: only columns a diagonal launch of this row block can read */
                        if (${"1" if SYM else "l0 + l > row0 + skmin - 64"})
                            sbitsk[kt * pstride + ((ib - row0) >> 6) * sstride + SPAD + l0 + l] = wd;
% endif
                        const int q = kt * ${VEC} + l;
% if SYM:
                        const int nbj = IMIN(nb, l0 + l - ib);   /* rows above the diagonal */
                        if (nbj > 0)
                            column_runs(wd, nbj, &vra[q], &wra[q], &npa[q], ph_v, lh_v, hist_v, ph_w, lh_w, hist_w, &n_iso);
% else:
                        column_runs(wd, nb, &vra[q], &wra[q], &npa[q], ph_v, lh_v, hist_v, ph_w, lh_w, hist_w, &n_iso);
% endif
                    }
                n_isok[kt] += n_iso;
            }
        }
        for (int q = 0; q < ${NTHR * VEC}; ++q) {
            const int c = (q / ${VEC}) * cstride + l0 - carry0 + q % ${VEC};
            vcarryk[c] = vra[q]; wcarryk[c] = wra[q]; nptsk[c] = npa[q];
        }
</%def>
