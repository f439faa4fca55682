## DMAJ's diagonal-major cells of rqa_lines (MODE diagonal, the row block's first
## launch): cells along each diagonal from carried terms, barrel-shifted into column words.
## T: the names of _names.mako.
## Import with <%namespace name="dmaj" file="/rqa_lines/_dmaj.mako"/>.
<%namespace name="rec" file="/rqa_lines/_recurrence.mako"/>
<%namespace name="fix" file="/rqa_lines/_exactfix.mako"/>
<%namespace name="dseg" file="/rqa_lines/_dseg.mako"/>

## The squared (or max) distance `acc` of the half's cell t from the terms s(u): the sum
## (or maximum) over the E lags, in one order wherever it is computed.
<%def name="cell_acc(t)">\
                        real_t acc = s[${t}];
% for m in range(1, E):
%   if METRIC == "maximum":
                        acc = (s[${t + m * TAU}] > acc) ? s[${t + m * TAU}] : acc;
%   else:
                        acc += s[${t + m * TAU}];
%   endif
% endfor
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
${cell_acc(t)}\
                        D = (D << 1) | RQA_SIGN(acc - (real_t)thr);
% if EXACT == 2:
                        ND |= (uint)(fabs(acc - (real_t)thr) <= exb);
% elif EXACT:
                        ND = (ND << 1) | (uint)((acc - (real_t)thr <= exb) & (acc - (real_t)thr >= -exb));
% endif
                    }
% endfor
${fix.redo_dmaj(cell_acc)}\
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
## column value per term (scalar: the diagonals' offsets differ by one). DSEG > 1: over
## the rows of its segment only, the segment's head and tail left for MODE djoin
## (_dseg.mako).
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
${dseg.rows()}\
% if SHFL == 2:
        const int kg = lane0 + (t0 - (int)get_local_id(0));   /* the group runs the shuffles */
% else:
        const int kg = kw;
% endif
        const int ie = IMIN(rend, n_cols - kg);            /* rows any diagonal of kg.. has */
        const int iem = mine ? IMIN(rend, n_cols - l0) : rs;   /* my diagonal's rows */
        real_t s[${NS}];
        for (int ib = rs; ib < ie; ib += 64) {
            uint dh[2];
            #pragma unroll
            for (int h = 0; h < 2; ++h) {
                const int hb = ib + 32 * h;
                uint D = 0u;
% if EXACT:
                uint ND = 0u;   /* EXACT: the half's near cells */
% endif
                if (hb < ie) {
${dmaj_cells("y + %d + IMIN(hb + l0, n_cols - 1)" % VEC, "rs")}\
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
            if (mine && nb > 0) {
                ulong wd = ((ulong)dh[1] << 32) | (ulong)dh[0];
${dseg.strip_head("wd")}\
                diag_runs(wd, nb, &dr, ph_d, lh_d, hist_d, &n_iso);
            }
        }
${dseg.store("iem")}\
</%def>
