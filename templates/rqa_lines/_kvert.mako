## NTHR > 1, MODE "vertical" of rqa_lines: the work-item of the VEC columns l0 .. l0 +
## VEC - 1, in two phases. First, word by word, it computes each cell's distance once,
## decides it against the NTHR thresholds and stores each threshold's 64-row words (plane
## kt of the column words, every column of the launch). Then threshold by threshold it
## walks its columns' words from its plane with that threshold's carries and histograms
## (the one-threshold walks: _lanewalk's for WALK=3, else _runs' column_runs), the
## carries in registers across the row block as in a one-threshold launch (a walk of the
## K thresholds inside the word loop ran 2-5x slower per threshold on Intel's runtime).
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
<% UV, ULV, LV, VEC = T.UV, T.ULV, T.LV, T.VEC %>\
        /* column coordinates are fixed for the whole walk */
${rec.coords(T, "l0")}\
${kpack.setup(T)}\
% if SYM:
        /* rows i < j of some lane only (the words below are never read) */
        const int iend = IMIN(row0 + nrows, l0 + ${VEC - 1});
% else:
        const int iend = row0 + nrows;
% endif
        {   /* every threshold's words of the row block into its plane */
            uint ba[${NTHR * 2 * VEC}];   /* threshold kt's half h of lane l: ba[(2 kt + h) VEC + l] */
            for (int ib = row0; ib < iend; ib += 64) {
                const int nb = IMIN(64, row0 + nrows - ib);
${kpack.halves(T)}\
                __global ulong* sp = sbitsk + ((ib - row0) >> 6) * sstride + SPAD + l0;
                for (int kt = 0; kt < ${NTHR}; ++kt, sp += pstride) {
% if VEC == 1:
                    if (t0 < nlanes) sp[0] = ((ulong)ba[2 * kt + 1] << 32) | (ulong)ba[2 * kt];
% else:
                    const ${ULV} wd = convert_${ULV}(vload${VEC}(2 * kt, ba)) | (convert_${ULV}(vload${VEC}(2 * kt + 1, ba)) << 32);
                    if (t0 + ${VEC} <= nlanes) {
                        vstore${VEC}(wd, 0, sp);
                    } else {
                        ulong wa[${VEC}];
                        vstore${VEC}(wd, 0, wa);
                        for (int l = 0; l < ${VEC}; ++l)
                            if (t0 + l < nlanes) sp[l] = wa[l];
                    }
% endif
                }
            }
        }
% if WALK == 3:
${lanes(T)}\
% else:
${scalar(T)}\
% endif
</%def>

## WALK=3: threshold kt's columns walked from its plane, all lanes at once (the lanes past
## the launch read the plane's padding and walk no cell).
<%def name="lanes(T)">\
<% UV, ULV, LV, VEC = T.UV, T.ULV, T.LV, T.VEC %>\
        const ${LV} lidl = convert_${LV}(lid);
        const ${LV} lval = convert_${LV}(lvalid);   /* -1: lane inside the launch */
        #pragma unroll 1
        for (int kt = 0; kt < ${NTHR}; ++kt) {
${khist.names(carries=False)}\
            const int c = kt * cstride + l0 - carry0;
            ${UV} vr = vload${VEC}(0, vcarryk + c), wr = vload${VEC}(0, wcarryk + c);
            ${UV} np = vload${VEC}(0, nptsk + c);
            ${ULV} n1v = (${ULV})0UL;
            __global const ulong* sp = sbitsk + kt * pstride + SPAD + l0;
            for (int ib = row0; ib < iend; ib += 64, sp += sstride) {
                const int nb = IMIN(64, row0 + nrows - ib);
                const ${ULV} wd = vload${VEC}(0, sp);
% if SYM:
                /* rows above the diagonal of each lane */
                const ${LV} nbl = VCLAMPI(lidl - (${LV})(ib), (${LV})0, (${LV})(nb)) & lval;
% else:
                const ${LV} nbl = (${LV})(nb) & lval;
% endif
${kskip.col_if(T, "wd", "nbl", "vr")}\
${lanewalk.walk(T, "wd", "nbl", vr="vr", wr="wr", np="np", wcount=None if WBORDER else "np_before > (%s)0u" % UV)}\
${kskip.col_else(T, "nbl", "vr", "wr", "np")}\
            }
            vstore${VEC}(vr, 0, vcarryk + c); vstore${VEC}(wr, 0, wcarryk + c);
            vstore${VEC}(np, 0, nptsk + c);
            n_isok[kt] += ${" + ".join("(uint)%s" % T.lane("n1v", l) for l in range(VEC))};
        }
</%def>

## WALK < 3: threshold by threshold, lane by lane (column_runs of _runs.mako).
<%def name="scalar(T)">\
<% VEC = T.VEC %>\
        for (int kt = 0; kt < ${NTHR}; ++kt) {
${khist.names(carries=False)}\
            for (int l = 0; l < ${VEC}; ++l) {
                if (t0 + l >= nlanes)
                    break;
                const int c = kt * cstride + l0 - carry0 + l;
                uint vr = vcarryk[c], wr = wcarryk[c], np = nptsk[c];
                __global const ulong* sp = sbitsk + kt * pstride + SPAD + l0 + l;
                for (int ib = row0; ib < iend; ib += 64, sp += sstride) {
% if SYM:
                    const int nbj = IMIN(IMIN(64, row0 + nrows - ib), l0 + l - ib);   /* rows above the diagonal */
                    if (nbj > 0)
                        column_runs(*sp, nbj, &vr, &wr, &np, ph_v, lh_v, hist_v, ph_w, lh_w, hist_w, &n_iso);
% else:
                    column_runs(*sp, IMIN(64, row0 + nrows - ib), &vr, &wr, &np, ph_v, lh_v, hist_v, ph_w, lh_w, hist_w, &n_iso);
% endif
                }
                vcarryk[c] = vr; wcarryk[c] = wr; nptsk[c] = np;
            }
            n_isok[kt] += n_iso;
        }
</%def>
