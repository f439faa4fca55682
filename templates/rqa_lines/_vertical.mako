## MODE "vertical" of rqa_lines: the kernel body of a work-item owning the VEC columns
## l0 .. l0 + VEC - 1 (lanes t0 ..; lid: their columns, lvalid: inside the launch). It
## walks rows row0 .. row0 + nrows - 1 and carries per column the open black run
## (vcarry), white run (wcarry) and recurrence count (npts). BITS: 32 or 64 rows per bit
## word, walked run by run (SHARE: the words are also stored for the diagonal launch of
## the row block; SYM: only the rows above the diagonal). T: the names of _names.mako.
## Import with <%namespace name="vertical" file="/rqa_lines/_vertical.mako"/>.
<%namespace name="rec" file="/rqa_lines/_recurrence.mako"/>
<%namespace name="lanewalk" file="/rqa_lines/_lanewalk.mako"/>

<%def name="body(T)">\
<% UV, IV, WT, WB, VEC = T.UV, T.IV, T.WT, T.WB, T.VEC %>\
% if DMAJ:
${body_dmaj(T)}\
% else:
        /* column coordinates are fixed for the whole walk */
${rec.coords(T, "l0")}\
% endif
% if DMAJ:
## (DMAJ: body_dmaj above is the whole walk)
% elif WALK == 3:
${body_lanes(T)}\
% elif BITS:
        uint vra[${VEC}], wra[${VEC}], npa[${VEC}], ba[${VEC * WB // 32}];
        for (int l = 0; l < ${VEC}; ++l) {
            vra[l] = vcarry[l0 - carry0 + l]; wra[l] = wcarry[l0 - carry0 + l];
            npa[l] = npts[l0 - carry0 + l];
        }
%   if SYM:
        /* rows i < j of some lane only (the words below are never read) */
        const int iend = IMIN(row0 + nrows, l0 + ${VEC - 1});
%   else:
        const int iend = row0 + nrows;
%   endif
        for (int ib = row0; ib < iend; ib += ${WB}) {
            const int nb = IMIN(${WB}, row0 + nrows - ib);
<%rec:packed_halves T="${T}" args="xs, xoff">\
${rec.recurrent(T, xs=xs, xoff=xoff)}\
${rec.joint(T)}\
${rec.theiler(T)}\
</%rec:packed_halves>\
            for (int l = 0; l < ${VEC}; ++l)
                if (t0 + l < nlanes) {
                    const ${WT} wd = ${"((ulong)ba[%d + l] << 32) | (ulong)ba[l]" % VEC if BITS == 2 else "ba[l]"};
%   if SHARE:
                    /* only columns a diagonal launch of this row block can read:
                       j >= row0 - 63 + skmin (e.g. the upper triangle, auto-RQA) */
%     if PLANES:
                    if (${"1" if SYM else "l0 + l > row0 + skmin - 64"}) {
                        __global uint* sp = sbits + 2 * ((ib - row0) >> 6) * sstride + SPAD + l0 + l;
                        sp[0] = (uint)wd;                /* the low plane of word w */
                        sp[sstride] = (uint)(wd >> 32);  /* the high plane */
                    }
%     else:
                    if (${"1" if SYM else "l0 + l > row0 + skmin - 64"})
                        sbits[((ib - row0) >> 6) * sstride + SPAD + l0 + l] = wd;
%     endif
%   endif
%   if SYM:
                    const int nbj = IMIN(nb, l0 + l - ib);   /* rows above the diagonal */
                    if (nbj > 0)
                        column_runs(wd, nbj, &vra[l], &wra[l], &npa[l], ph_v, lh_v, hist_v, ph_w, lh_w, hist_w, &n_iso);
%   else:
                    column_runs(wd, nb, &vra[l], &wra[l], &npa[l], ph_v, lh_v, hist_v, ph_w, lh_w, hist_w, &n_iso);
%   endif
                }
        }
        for (int l = 0; l < ${VEC}; ++l) {
            vcarry[l0 - carry0 + l] = vra[l]; wcarry[l0 - carry0 + l] = wra[l];
            npts[l0 - carry0 + l] = npa[l];
        }
% else:
%   if VEC == 1:
        ${UV} vr = vcarry[l0 - carry0], wr = wcarry[l0 - carry0], np = npts[l0 - carry0];
%   else:
        ${UV} vr = vload${VEC}(0, vcarry + l0 - carry0), wr = vload${VEC}(0, wcarry + l0 - carry0), np = vload${VEC}(0, npts + l0 - carry0);
%   endif
        for (int i = row0; i < row0 + nrows; ++i) {
${rec.recurrent(T, "lvalid & ")}\
${rec.joint(T)}\
${rec.theiler(T)}\
            const ${IV} nrec = lvalid & ~rec;
%   if VEC == 1:
            const int ev = (nrec && vr > 0u);
            const int ew = (rec && wr > 0u)${"" if WBORDER else " && np > 0u"};
            if (ev) hist_add(ph_v, lh_v, hist_v, vr);
            if (ew) hist_add(ph_w, lh_w, hist_w, wr);
            vr = rec ? vr + 1u : (lvalid ? 0u : vr);
            wr = rec ? 0u : (lvalid ? wr + 1u : wr);
            np += rec ? 1u : 0u;
%   else:
            const ${IV} ev = nrec & (vr > (${UV})0u);
            const ${IV} ew = rec & (wr > (${UV})0u)${"" if WBORDER else " & (np > (%s)0u)" % UV};
            if (any(ev | ew)) {
%     for l in range(VEC):
                if (${T.lane("ev", l)}) hist_add(ph_v, lh_v, hist_v, ${T.lane("vr", l)});
                if (${T.lane("ew", l)}) hist_add(ph_w, lh_w, hist_w, ${T.lane("wr", l)});
%     endfor
            }
            vr = select(select(vr, (${UV})0u, nrec), vr + 1u, rec);
            wr = select(select(wr, wr + 1u, nrec), (${UV})0u, rec);
            np = select(np, np + 1u, rec);
%   endif
        }
%   if VEC == 1:
        vcarry[l0 - carry0] = vr; wcarry[l0 - carry0] = wr; npts[l0 - carry0] = np;
%   else:
        vstore${VEC}(vr, 0, vcarry + l0 - carry0); vstore${VEC}(wr, 0, wcarry + l0 - carry0); vstore${VEC}(np, 0, npts + l0 - carry0);
%   endif
% endif
</%def>

## WALK=3: the VEC columns' carries in vector registers, each 64-row word walked for all
## lanes at once (_lanewalk.mako); SHARE stores the words with one vector store.
<%def name="body_lanes(T)">\
<% UV, ULV, LV, VEC = T.UV, T.ULV, T.LV, T.VEC %>\
        ${UV} vr = vload${VEC}(0, vcarry + l0 - carry0), wr = vload${VEC}(0, wcarry + l0 - carry0);
        ${UV} np = vload${VEC}(0, npts + l0 - carry0);
        ${ULV} n1v = (${ULV})0UL;
        uint ba[${VEC * 2}];
        const ${LV} lidl = convert_${LV}(lid);
        const ${LV} lval = convert_${LV}(lvalid);   /* -1: lane inside the launch */
%   if SYM:
        /* rows i < j of some lane only (the words below are never read) */
        const int iend = IMIN(row0 + nrows, l0 + ${VEC - 1});
%   else:
        const int iend = row0 + nrows;
%   endif
        for (int ib = row0; ib < iend; ib += 64) {
            const int nb = IMIN(64, row0 + nrows - ib);
<%rec:packed_halves T="${T}" args="xs, xoff">\
${rec.recurrent(T, xs=xs, xoff=xoff)}\
${rec.joint(T)}\
${rec.theiler(T)}\
</%rec:packed_halves>\
            const ${ULV} wd = convert_${ULV}(vload${VEC}(0, ba)) | (convert_${ULV}(vload${VEC}(1, ba)) << 32);
%   if SHARE:
            {   /* only columns a diagonal launch of this row block can read:
                   j >= row0 - 63 + skmin (e.g. the upper triangle, auto-RQA) */
                __global ulong* sp = sbits + ((ib - row0) >> 6) * sstride + SPAD + l0;
                if (t0 + ${VEC} <= nlanes${"" if SYM else " && l0 > row0 + skmin - 64"}) {
                    vstore${VEC}(wd, 0, sp);
                } else {
                    ulong wa[${VEC}];
                    vstore${VEC}(wd, 0, wa);
                    for (int l = 0; l < ${VEC}; ++l)
                        if (t0 + l < nlanes && ${"1" if SYM else "l0 + l > row0 + skmin - 64"}) sp[l] = wa[l];
                }
            }
%   endif
%   if SYM:
            /* rows above the diagonal of each lane */
            const ${LV} nbl = VCLAMPI(lidl - (${LV})(ib), (${LV})0, (${LV})(nb)) & lval;
%   else:
            const ${LV} nbl = (${LV})(nb) & lval;
%   endif
${lanewalk.walk(T, "wd", "nbl", vr="vr", wr="wr", np="np", wcount=None if WBORDER else "np_before > (%s)0u" % UV)}\
        }
        vstore${VEC}(vr, 0, vcarry + l0 - carry0); vstore${VEC}(wr, 0, wcarry + l0 - carry0);
        vstore${VEC}(np, 0, npts + l0 - carry0);
%   for l in range(VEC):
        n_iso += (uint)${T.lane("n1v", l)};
%   endfor
</%def>


## DMAJ=1 (rqa_lines.cl.mako): the column walk alone, over the words the row block's
## diagonal launch left: word w of column l0 is the OR of its two partial planes (sbits,
## qbits; low half in plane 2w, high half in 2w + 1), rows above the diagonal only (SYM).
<%def name="body_dmaj(T)">\
        uint vr = vcarry[l0 - carry0], wr = wcarry[l0 - carry0], np = npts[l0 - carry0];
        const int iend = IMIN(row0 + nrows, l0);   /* rows i < j */
        for (int ib = row0; ib < iend; ib += 64) {
            const int c = 2 * ((ib - row0) >> 6) * sstride + SPAD + l0;
            const uint lo = sbits[c] | qbits[c];
            const uint hi = (ib + 32 < iend) ? (sbits[c + sstride] | qbits[c + sstride]) : 0u;
            const int nbj = IMIN(IMIN(64, row0 + nrows - ib), l0 - ib);
            column_runs(((ulong)hi << 32) | (ulong)lo, nbj, &vr, &wr, &np, ph_v, lh_v, hist_v,
                        ph_w, lh_w, hist_w, &n_iso);
        }
        vcarry[l0 - carry0] = vr; wcarry[l0 - carry0] = wr; npts[l0 - carry0] = np;
</%def>
