## MODE "diagonal" of rqa_lines: the kernel body of a work-item owning the VEC diagonals
## k = l0 .. l0 + VEC - 1 (lid: their k, lvalid: inside the launch). It walks the rows of
## the launch (cell (i, i + k) is valid for 0 <= i + k < n_cols) and carries per diagonal
## its open run (dcarry). SHARE: the 64-row words are gathered from the column words the
## vertical launch of the row block stored; BITS: computed 32 or 64 rows per bit word;
## else cell by cell. Runs are walked word by word (diag_runs) or cell by cell. SHFL's and
## DMAJ's walks are in _shfl.mako and _dmaj.mako.
## T: the names of _names.mako.
## Import with <%namespace name="diagonal" file="/rqa_lines/_diagonal.mako"/>.
<%namespace name="rec" file="/rqa_lines/_recurrence.mako"/>
<%namespace name="fix" file="/rqa_lines/_exactfix.mako"/>
<%namespace name="lanewalk" file="/rqa_lines/_lanewalk.mako"/>
<%namespace name="shfl" file="/rqa_lines/_shfl.mako"/>
<%namespace name="dmaj" file="/rqa_lines/_dmaj.mako"/>
<%namespace name="kskip" file="/rqa_lines/_kskip.mako"/>
<%namespace name="kgather" file="/rqa_lines/_kgather.mako"/>

<%def name="body(T)">\
<% UV, IV, WB, ULV, VEC = T.UV, T.IV, T.WB, T.ULV, T.VEC %>\
        /* diagonal k: cell (i, i + k) is valid for 0 <= i + k < n_cols (and i < n_rows) */
% if DMAJ:
${dmaj.body_dmaj(T)}\
% elif SHARE and SHFL:
${shfl.body_shfl(T)}\
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
%     elif NTHR > 1 and VEC % 8 == 0:
            __global const ulong* sw = sbits + ((ib - row0) >> 6) * sstride + SPAD + ib + l0;
${kgather.shear(T)}\
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
%     if WALK == 3 and NTHR > 1:
${kskip.diag_if(T, "dw", "nb", "lvalid", "drv")}\
${lanewalk.diag_walk(T, "dw", "nb", "lvalid", "drv")}\
${kskip.diag_else(T, "nb", "lvalid", "drv")}\
%     elif WALK == 3:
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
