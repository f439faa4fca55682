## MODE "diagonal" of rqa_lines: the kernel body of a work-item owning the VEC diagonals
## k = l0 .. l0 + VEC - 1 (lid: their k, lvalid: inside the launch). It walks the rows of
## the launch (cell (i, i + k) is valid for 0 <= i + k < n_cols) and carries per diagonal
## its open run (dcarry). SHARE: the 64-row words are gathered from the column words the
## vertical launch of the row block stored; BITS: computed 32 or 64 rows per bit word;
## else cell by cell. Runs are walked word by word (diag_runs) or cell by cell.
## T: the names of _names.mako.
## Import with <%namespace name="diagonal" file="/rqa_lines/_diagonal.mako"/>.
<%namespace name="rec" file="/rqa_lines/_recurrence.mako"/>
<%namespace name="fix" file="/rqa_lines/_exactfix.mako"/>
<%namespace name="lanewalk" file="/rqa_lines/_lanewalk.mako"/>

<%def name="body(T)">\
<% UV, IV, WB, ULV, VEC = T.UV, T.IV, T.WB, T.ULV, T.VEC %>\
        /* diagonal k: cell (i, i + k) is valid for 0 <= i + k < n_cols (and i < n_rows) */
% if DMAJ:
${body_dmaj(T)}\
% elif SHARE and SHFL:
${body_shfl(T)}\
% elif SHARE:
        /* gather each diagonal's 64-row word from the column words the vertical launch
           stored: bit r of diagonal k is bit r of column ib + r + k. Words are aligned to
           row0 like the vertical ones; cells outside the matrix read the zero padding
           (a diagonal run ending at the border closes there: same histogram). */
%     if WALK == 3:
        ${UV} drv = vload${VEC}(0, dcarry + l0 - carry0);
        ${ULV} n1v = (${ULV})0UL;
%     else:
        uint dra[${VEC}];
        for (int l = 0; l < ${VEC}; ++l) dra[l] = dcarry[l0 - carry0 + l];
%     endif
        const int klast = l0 + ${VEC - 1};
        const int ibs = IMAX(row0, -klast);
        const int ie = IMIN(row0 + nrows, n_cols - l0);
        for (int ib = row0 + ((ibs - row0) & ~63); ib < ie; ib += 64) {
            const int nb = IMIN(64, row0 + nrows - ib);
%     if PLANES:
            /* PLANES: bit r of the low (r < 32) or high plane of column ib + r + k */
            __global const uint* sw = sbits + 2 * ((ib - row0) >> 6) * sstride + SPAD + ib + l0;
            uint dlo = 0u, dhi = 0u;
            if (nb == 64) {   /* full word: constant trip counts, unrolled by the compiler */
                for (int r = 0; r < 32; ++r) dlo |= sw[r] & (1u << r);
                for (int r = 0; r < 32; ++r) dhi |= sw[sstride + 32 + r] & (1u << r);
            } else {
                for (int r = 0; r < IMIN(nb, 32); ++r) dlo |= sw[r] & (1u << r);
                for (int r = 32; r < nb; ++r) dhi |= sw[sstride + r] & (1u << (r - 32));
            }
            const ulong dw = ((ulong)dhi << 32) | (ulong)dlo;
%     else:
            __global const ulong* sw = sbits + ((ib - row0) >> 6) * sstride + SPAD + ib + l0;
            ${ULV} dw = (${ULV})0UL;
            if (nb == 64) {   /* full word: constant trip count, unrolled by the compiler */
                for (int r = 0; r < 64; ++r)
                    dw |= ${"sw[r]" if VEC == 1 else "RQA_VLOAD_UL(sw + r)"} & (${ULV})(1UL << r);
            } else {
                for (int r = 0; r < nb; ++r)
                    dw |= ${"sw[r]" if VEC == 1 else "RQA_VLOAD_UL(sw + r)"} & (${ULV})(1UL << r);
            }
%     endif
%     if WALK == 3:
${lanewalk.diag_walk(T, "dw", "nb", "lvalid", "drv")}\
%     elif VEC == 1:
            if (t0 < nlanes) diag_runs(dw, nb, &dra[0], ph_d, lh_d, hist_d, &n_iso);
%     else:
            ulong da[${VEC}];
            vstore${VEC}(dw, 0, da);
            for (int l = 0; l < ${VEC}; ++l)
                if (t0 + l < nlanes) diag_runs(da[l], nb, &dra[l], ph_d, lh_d, hist_d, &n_iso);
%     endif
        }
%     if WALK == 3:
        vstore${VEC}(drv, 0, dcarry + l0 - carry0);
%       for l in range(VEC):
        n_iso += (uint)${T.lane("n1v", l)};
%       endfor
%     else:
        for (int l = 0; l < ${VEC}; ++l) dcarry[l0 - carry0 + l] = dra[l];
%     endif
% elif BITS:
        uint dra[${VEC}], ba[${VEC * WB // 32}];
        for (int l = 0; l < ${VEC}; ++l) dra[l] = dcarry[l0 - carry0 + l];
        const int klast = l0 + ${VEC - 1};
        const int ib0 = IMAX(row0, -klast);
        const int ie = IMIN(row0 + nrows, n_cols - l0);
        for (int ib = ib0; ib < ie; ib += ${WB}) {
            const int nb = IMIN(${WB}, ie - ib);
            /* every cell (i, i + k) of the word inside the matrix for every lane? */
            const int inside = (ib + l0 >= 0) && (ib + nb - 1 + klast < n_cols);
<%rec:packed_halves T="${T}" args="xs, xoff">\
${rec.coords(T, "i + l0")}\
${rec.recurrent(T, xs=xs, xoff=xoff)}\
                if (!inside) {   /* word reaches past the matrix for some lane */
                    const ${IV} jj = (${IV})(i) + lid;
                    rec &= (jj >= (${IV})0) & (jj < (${IV})(n_cols));
                }
${rec.joint(T)}\
</%rec:packed_halves>\
            for (int l = 0; l < ${VEC}; ++l)
                if (t0 + l < nlanes) diag_runs(${"((ulong)ba[%d + l] << 32) | (ulong)ba[l]" % VEC if BITS == 2 else "ba[l]"}, nb, &dra[l], ph_d, lh_d, hist_d, &n_iso);
        }
        for (int l = 0; l < ${VEC}; ++l) dcarry[l0 - carry0 + l] = dra[l];
% else:
%   if VEC == 1:
        ${UV} dr = dcarry[l0 - carry0];
%   else:
        ${UV} dr = vload${VEC}(0, dcarry + l0 - carry0);
%   endif
        const int klast = l0 + ${VEC - 1};
        const int ib = IMAX(row0, -klast);
        const int ie = IMIN(row0 + nrows, n_cols - l0);
        for (int i = ib; i < ie; ++i) {
${rec.coords(T, "i + l0")}\
            const ${IV} jj = (${IV})(i) + lid;
            const ${IV} cvalid = lvalid & (jj >= (${IV})0) & (jj < (${IV})(n_cols));
${rec.recurrent(T, "cvalid & ")}\
${rec.joint(T)}\
            const ${IV} nrec = cvalid & ~rec;
%   if VEC == 1:
            if (nrec && dr > 0u) hist_add(ph_d, lh_d, hist_d, dr);
            dr = rec ? dr + 1u : (cvalid ? 0u : dr);
%   else:
            const ${IV} ed = nrec & (dr > (${UV})0u);
            if (any(ed)) {
%     for l in range(VEC):
                if (${T.lane("ed", l)}) hist_add(ph_d, lh_d, hist_d, ${T.lane("dr", l)});
%     endfor
            }
            dr = select(select(dr, (${UV})0u, nrec), dr + 1u, rec);
%   endif
        }
%   if VEC == 1:
        dcarry[l0 - carry0] = dr;
%   else:
        vstore${VEC}(dr, 0, dcarry + l0 - carry0);
%   endif
% endif
</%def>


## SHFL=1 (PLANES, VEC 1, WG a multiple of 32; NVIDIA; 2: the same through local
## memory, for tests on any device): the 32 work-items of a warp own
## the diagonals kw .. kw + 31 and build their 64-row words from the column planes
## together. Work-item l loads columns kw + l and kw + l + 32 of each plane (four
## coalesced loads a word, where the gather made 64), and a five-stage barrel shift
## through warp shuffles moves bit r of column kw + l + r into bit r of diagonal
## kw + l: stage s takes the bits r with bit s set from the column 2^s further on
## (RQA_SHFL, rqa_lines.cl.mako). Every work-item of the warp runs every word of the
## warp's rows (the shuffles need all 32); a work-item walks only its own words, the
## same words and bits as the gather.
<%def name="body_shfl(T)">\
        const int wl = t0 & 31;                  /* lane in the warp */
        const int kw = lane0 + (t0 - wl);        /* the warp's first diagonal */
        const int mine = t0 < nlanes;
        uint dr = mine ? dcarry[l0 - carry0] : 0u;
        const int ibo = row0 + ((IMAX(row0, -l0) - row0) & ~63);   /* this diagonal's words */
        const int ieo = IMIN(row0 + nrows, n_cols - l0);
% if SHFL == 2:
        /* SHFL=2: shuffles through local memory (shx), a barrier each: the group's words */
        const int kg = lane0 + (t0 - (int)get_local_id(0)), kl = kg + ${WG - 1};
% else:
        const int kg = kw, kl = kw + 31;
% endif
        const int ie = IMIN(row0 + nrows, n_cols - kg);           /* the warp's words */
        /* the next word's plane values are loaded before this word's shuffles */
        int ib = row0 + ((IMAX(row0, -kl) - row0) & ~63);
        uint nlo_a = 0u, nlo_b = 0u, nhi_a = 0u, nhi_b = 0u;
        if (ib < ie) {
${plane_loads("ib")}\
        }
        for (; ib < ie; ib += 64) {
            const int nb = IMIN(64, row0 + nrows - ib);
            uint lo_a = nlo_a, lo_b = nlo_b, hi_a = nhi_a, hi_b = nhi_b;
            if (ib + 64 < ie) {
${plane_loads("ib + 64")}\
            }
% for s, m in enumerate(("0xAAAAAAAAu", "0xCCCCCCCCu", "0xF0F0F0F0u", "0xFF00FF00u", "0xFFFF0000u")):
            {   /* stage ${s}: bits r with r & ${1 << s} from ${1 << s} columns on */
                const int from = (wl + ${1 << s}) & 31;
                const int wrap = wl + ${1 << s} >= 32;
                const uint la = RQA_SHFL(lo_a, from), lb = RQA_SHFL(lo_b, from);
                const uint ha = RQA_SHFL(hi_a, from), hb = RQA_SHFL(hi_b, from);
                lo_a = bitselect(lo_a, wrap ? lb : la, ${m});
                hi_a = bitselect(hi_a, wrap ? hb : ha, ${m});
%   if s < 4:
                lo_b = bitselect(lo_b, lb, ${m});   /* columns past 63 are never read */
                hi_b = bitselect(hi_b, hb, ${m});
%   endif
            }
% endfor
            if (mine && ib >= ibo && ib < ieo)
                diag_runs(((ulong)hi_a << 32) | (ulong)lo_a, nb, &dr, ph_d, lh_d, hist_d, &n_iso);
        }
        if (mine) dcarry[l0 - carry0] = dr;
</%def>

## SHFL: the plane values of the word at row `at` that work-item wl loads: columns
## kw + wl and kw + wl + 32 of the low plane, 32 further on of the high one (zero outside
## the buffer), into nlo_a, nlo_b, nhi_a, nhi_b.
<%def name="plane_loads(at)">\
            {
                const int c = SPAD + ${at} + kw + wl;    /* column kw + wl of the plane rows */
                __global const uint* sp = sbits + 2 * ((${at} - row0) >> 6) * sstride + c;
                nlo_a = (c >= 0 && c < sstride) ? sp[0] : 0u;
                nlo_b = (c + 32 >= 0 && c + 32 < sstride) ? sp[32] : 0u;
                nhi_a = (c + 32 >= 0 && c + 32 < sstride) ? sp[sstride + 32] : 0u;
                nhi_b = (c + 64 >= 0 && c + 64 < sstride) ? sp[sstride + 64] : 0u;
            }
</%def>


## DMAJ's cells of one 32-row half (hb): the row values xr from 16-byte loads at x + hb,
## the column values from `ybase` (this lane's diagonal: a lane without cells here reads
## inside the series, its bits masked later), the terms s(u) (the SPAN carried ones too on
## the half starting at `first`), each cell's bit shifted into D (declared zero by the
## caller) rows last to first, and the carried terms moved down for the next half.
<%def name="dmaj_cells(ybase, first)">\
<%
    SPAN = (E - 1) * TAU
    NS = 32 + SPAN
    XW = 4 if REAL == "float" else 2
    NX = -(-NS // XW) * XW
    def term(d):  # the coordinate term dist() sums (_recurrence.mako)
        return rec.attr.term(METRIC, d)
%>\
                    ${REAL} xr[${NX}];
                    {
                        __global const ${REAL}${XW}* xq = (__global const ${REAL}${XW}*)(x + hb);
% for q in range(NX // XW):
                        { const ${REAL}${XW} v = xq[${q}]; ${" ".join("xr[%d] = v.s%d;" % (q * XW + e, e) for e in range(XW))} }
% endfor
                    }
                    /* the column values of my diagonal (a lane without cells here reads
                       inside the series: its bits are masked) */
                    __global const real_t* const yb = ${ybase};
% if SPAN:
                    if (hb == ${first}) {   /* the first half: the carried terms too */
%   for u in range(SPAN):
                        { const real_t d = xr[${u}] - yb[${u}]; s[${u}] = ${term("d")}; }
%   endfor
                    }
% endif
% for u in range(NS - 1, SPAN - 1, -1):
                    { const real_t d = xr[${u}] - yb[${u}]; s[${u}] = ${term("d")}; }
% endfor
% for t in range(31, -1, -1):
                    {
                        real_t acc = s[${t}];
%   for m in range(1, E):
%     if METRIC == "maximum":
                        acc = (s[${t + m * TAU}] > acc) ? s[${t + m * TAU}] : acc;
%     else:
                        acc += s[${t + m * TAU}];
%     endif
%   endfor
                        D = (D << 1) | RQA_SIGN(acc - (real_t)thr);
% if EXACT == 2:
                        ND |= (uint)(fabs(acc - (real_t)thr) <= exb);
% elif EXACT:
                        ND = (ND << 1) | (uint)((acc - (real_t)thr <= exb) & (acc - (real_t)thr >= -exb));
% endif
                    }
% endfor
${fix.redo_dmaj()}\
% for u in range(SPAN):
                    s[${u}] = s[${u + 32}];
% endfor
</%def>


## DMAJ's barrel shift: the warp's 32 diagonal words D into column words, A (column
## hb + kw + wl: the diagonals' rows t <= wl) and B (column hb + kw + 32 + wl: rows t > wl);
## stage s moves the bits t with bit s set from the diagonal 2^s lower (RQA_SHFL: every
## work-item of the warp runs it).
<%def name="dmaj_barrel()">\
                    uint A = D, B = 0u;
% for st, msk in enumerate(("0xAAAAAAAAu", "0xCCCCCCCCu", "0xF0F0F0F0u", "0xFF00FF00u", "0xFFFF0000u")):
                    {
                        const int from = (wl - ${1 << st}) & 31;
                        const int wrap = wl < ${1 << st};
                        const uint as = RQA_SHFL(A, from), bs = RQA_SHFL(B, from);
                        A = bitselect(A, wrap ? 0u : as, ${msk});
                        B = bitselect(B, wrap ? as : bs, ${msk});
                    }
% endfor
</%def>


## DMAJ=1 (rqa_lines.cl.mako; MODE diagonal, the row block's first launch): work-item wl
## of a warp owns diagonal k = l0 and computes its cells (i, i + k) 32 rows a half: the
## terms s(u) = f(x[hb + u] - y[hb + k + u]) (f: square or magnitude), u < 32 + SPAN, of
## which the SPAN first carry over from the half before, so each cell costs one new term;
## cell hb + t is s(t) + s(t + TAU) + ... (maximum: their largest), summed in the direct
## distance's order, its bit the sign of the sum minus thr (PACK). Rows are taken last to
## first, as PACK's vertical launch takes them. The 64-row word of the two halves is
## walked (diag_runs), and each half's 32 diagonal words become column words by a
## five-stage barrel shift (RQA_SHFL): stage s moves the bits t with bit s set from the
## diagonal 2^s lower, so that bit t of virtual column c' (0 <= c' < 64, column
## hb + kw + c') holds diagonal kw + c' - t. Lane wl keeps columns wl (A, stored in sbits)
## and 32 + wl (B, stored in qbits): a column's word is sbits | qbits, the two warps that
## reach it giving one part each. The warp of the lowest diagonal (skmin) writes zeros
## into the qbits columns no warp below it fills. The row values are read 16 bytes at a
## time (rows start on 32-row boundaries; the series carry 36 zeros after them), a
## column value per term (scalar: the diagonals' offsets differ by one).
<%def name="body_dmaj(T)">\
<%
    SPAN = (E - 1) * TAU
    NS = 32 + SPAN
    if SPAN > 32:
        raise ValueError("DMAJ=1 keeps 32 + (E - 1) TAU terms in registers: (E - 1) TAU <= 32")
%>\
        const int wl = t0 & 31;
        const int kw = lane0 + (t0 - wl);                 /* the warp's first diagonal */
        const int mine = t0 < nlanes;
        uint dr = mine ? dcarry[l0 - carry0] : 0u;
% if SHFL == 2:
        const int kg = lane0 + (t0 - (int)get_local_id(0));   /* the group runs the shuffles */
% else:
        const int kg = kw;
% endif
        const int rend = IMIN(row0 + nrows, n_rows);
        const int ie = IMIN(rend, n_cols - kg);            /* rows any diagonal of kg.. has */
        const int iem = mine ? IMIN(rend, n_cols - l0) : row0;   /* my diagonal's rows */
        real_t s[${NS}];
        for (int ib = row0; ib < ie; ib += 64) {
            uint dh[2];
            #pragma unroll
            for (int h = 0; h < 2; ++h) {
                const int hb = ib + 32 * h;
                uint D = 0u;
% if EXACT:
                uint ND = 0u;   /* EXACT: the half's near cells */
% endif
                if (hb < ie) {
${dmaj_cells("y + %d + IMIN(hb + l0, n_cols - 1)" % VEC, "row0")}\
                    const int cnt = iem - hb;
                    D = cnt <= 0 ? 0u : (cnt >= 32 ? D : D & ((1u << cnt) - 1u));
                    /* the warp's diagonal words into column words (every work-item) */
${dmaj_barrel()}\
                    if (hb + kw < n_cols) {   /* columns from n_cols on are never read */
                        const int c = ((hb - row0) >> 5) * sstride + SPAD + hb + kw + wl;
                        sbits[c] = A;
                        qbits[c + 32] = B;
                        if (kw == skmin) qbits[c] = 0u;   /* no warp below fills these */
                    }
                }
                dh[h] = D;
            }
            const int nb = IMIN(64, iem - ib);
            if (mine && nb > 0)
                diag_runs(((ulong)dh[1] << 32) | (ulong)dh[0], nb, &dr, ph_d, lh_d, hist_d, &n_iso);
        }
        if (mine) dcarry[l0 - carry0] = dr;
</%def>
