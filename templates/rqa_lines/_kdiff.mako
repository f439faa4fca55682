## PROTOTYPE: NTHR > 1, WALK=3: the column walk of all NTHR thresholds at once.
<%!
def nbits(K):
    return (K).bit_length()
%>

## the black count planes C0.. of the K nested planes w0..w{K-1} (ulongVEC expressions)
<%def name="counts(T, planes)">\
<% K = NTHR; NB = nbits(K) %>\
% for b in range(NB):
<%
    step = 1 << b
    terms = []
    for j in range(1, K + 1):
        if j % (2 * step) == step:
            hi_ = planes[K - j]
            lo_ = planes[K - (j + step)] if j + step <= K else None
            terms.append("(%s & ~%s)" % (hi_, lo_) if lo_ else hi_)
%>\
            const ${T.ULV} C${b} = ${" | ".join(terms)};
% endfor
</%def>

<%def name="col(T)">\
<% K = NTHR; NB = nbits(K); UV, IV, ULV, LV, VEC = T.UV, T.IV, T.ULV, T.LV, T.VEC; W = PH + VEC %>\
        const ${LV} lidl = convert_${LV}(lid);
        const ${LV} lval = convert_${LV}(lvalid);
        const int cb = l0 - carry0;
        ${IV} cur = (${IV})${K};
% for k in range(K):
        ${IV} s${k};
        ${UV} np${k} = vload${VEC}(0, nptsk + ${k} * cstride + cb);
% endfor
% for k in reversed(range(K)):
        {
            const ${UV} v_ = vload${VEC}(0, vcarryk + ${k} * cstride + cb);
            const ${UV} w_ = vload${VEC}(0, wcarryk + ${k} * cstride + cb);
            s${k} = (${IV})(row0) - as_${IV}(v_ + w_);
            cur = VSELECT(cur, (${IV})${k}, v_ > (${UV})0u);
        }
% endfor
        ${IV} ppos = (${IV})(row0), plo = (${IV})0, phi = (${IV})0, pg = (${IV})(-1), pcol = (${IV})0;
        ${IV} lastpos = (${IV})(row0);
        const ${UV} spare_ = (${UV})(${PH}u) + (${UV})(${", ".join(str(l) for l in range(VEC))});
        __global const ulong* sp = sbitsk + SPAD + l0;
        for (int ib = row0; ib < iend; ib += 64, sp += sstride) {
            const int nb = IMIN(64, row0 + nrows - ib);
% if SYM:
            const ${LV} nbl = VCLAMPI(lidl - (${LV})(ib), (${LV})0, (${LV})(nb)) & lval;
% else:
            const ${LV} nbl = (${LV})(nb) & lval;
% endif
            const ${ULV} m_ = VSELECT(((${ULV})1 << as_${ULV}(nbl)) - (${ULV})1, ~(${ULV})0, nbl >= (${LV})64);
% for k in range(K):
            const ${ULV} w${k} = vload${VEC}(0, sp + ${k} * pstride) & m_;
% endfor
${counts(T, ["w%d" % k for k in range(K)])}\
            /* transitions: a cell whose count differs from the cell before it */
            const ${ULV} ccur = convert_${ULV}((${IV})${K} - cur);
            ${ULV} X = (${ULV})0;
% for b in range(NB):
            X |= C${b} ^ ((C${b} << 1) | ((ccur >> ${b}) & (${ULV})1));
% endfor
            X &= m_;
            ${UV} imask = (${UV})0u;
            while (VANY(convert_${IV}(X != (${ULV})0) | convert_${IV}(imask != (${UV})0u))) {
                const ${IV} adv = convert_${IV}(imask == (${UV})0u) & convert_${IV}(X != (${ULV})0);
                if (VANY(adv)) {
% for k in range(K):
                    s${k} = VSELECT(s${k}, ppos, adv & ((${IV})${k} >= plo) & ((${IV})${k} < phi));
% endfor
                    const ${ULV} lsb = X & ((${ULV})0 - X);
                    X = VSELECT(X, X ^ lsb, convert_${LV}(adv));
                    const ${IV} i = convert_${IV}(hibv(lsb)) & (${IV})63;
                    ${IV} c = (${IV})0;
% for b in range(NB):
                    c |= convert_${IV}((C${b} >> convert_${ULV}(i)) & (${ULV})1) << ${b};
% endfor
                    const ${IV} bl = (${IV})${K} - c;
                    const ${IV} lo = min(cur, bl), hi = max(cur, bl);
                    const ${IV} pos = (${IV})(ib) + i;
% for k in range(K):
                    np${k} += as_${UV}(VSELECT((${IV})0, pos - lastpos, adv & (cur <= (${IV})${k})));
% endfor
                    ${IV} neq = (${IV})0;
% for k in range(K - 1):
                    neq += VSELECT((${IV})0, (${IV})1, ((${IV})${k} >= lo) & (s${k} != s${K - 1}));
% endfor
                    const ${IV} top = hi == (${IV})${K};
                    const ${IV} g = lo + neq;
                    const ${IV} ihi = VSELECT(hi, g + (${IV})1, top);
                    imask = VSELECT(imask, ((${UV})1u << as_${UV}(ihi)) - ((${UV})1u << as_${UV}(lo)), adv);
                    pg = VSELECT(pg, VSELECT((${IV})(-1), g, top), adv);
                    pcol = VSELECT(pcol, cur < bl, adv);
                    plo = VSELECT(plo, lo, adv);
                    phi = VSELECT(phi, hi, adv);
                    lastpos = VSELECT(lastpos, pos, adv);
                    ppos = VSELECT(ppos, pos, adv);
                    cur = VSELECT(cur, bl, adv);
                }
                const ${IV} act = imask != (${UV})0u;
                const ${IV} k = (${IV})31 - as_${IV}(clz(imask & ((${UV})0u - imask)));
                ${IV} sk = s0;
% for k in range(1, K):
                sk = VSELECT(sk, s${k}, k == (${IV})${k});
% endfor
                const ${IV} len = ppos - sk;
                const ${IV} isp = k == pg;
% if WBORDER:
                const ${IV} go = act & (len > (${IV})0);
% else:
                const ${IV} go = act & (len > (${IV})0) & (pcol | (sk > (${IV})0));
% endif
                const ${IV} big = go & (len > (${IV})${PH});
                if (VANY(big)) {
% for l in range(VEC):
                    if (${T.lane("big", l)}) {
                        const int k_ = ${T.lane("k", l)};
                        const int c_ = ${T.lane("pcol", l)};
                        for (int kk = k_; kk < (${T.lane("isp", l)} ? ${K} : k_ + 1); ++kk) {
                            if (c_) hist_add(ph_vwk + kk * ${2 * W}, lh_vk + kk * ${HBINS}, hist_vk + kk * hstride, (uint)${T.lane("len", l)});
                            else hist_add(ph_vwk + kk * ${2 * W} + ${W}, lh_wk + kk * ${HBINS}, hist_wk + kk * hstride, (uint)${T.lane("len", l)});
                        }
                    }
% endfor
                }
                const ${UV} bin_ = VSELECT(spare_, as_${UV}((VSELECT((${IV})0, (${IV})${K}, isp) + k) * (${IV})${2 * W} + VSELECT((${IV})${W}, (${IV})0, pcol) + len - (${IV})1),
                                           go & ~big);
% for l in range(VEC):
                ph_vwk[${T.lane("bin_", l)}] += 1u;
% endfor
                imask &= imask - (${UV})1u;
            }
        }
        /* the last transition's starts; the open runs back into the carries */
% if SYM:
        const ${IV} endrow = clamp(lid, (${IV})(row0), (${IV})(row0 + nrows));
% else:
        const ${IV} endrow = (${IV})(row0 + nrows);
% endif
% for k in range(K):
        s${k} = VSELECT(s${k}, ppos, ((${IV})${k} >= plo) & ((${IV})${k} < phi));
        {
            const ${IV} blk_ = cur <= (${IV})${k};
            const ${UV} len_ = as_${UV}(endrow - s${k});
            np${k} += as_${UV}(VSELECT((${IV})0, endrow - lastpos, blk_));
            vstore${VEC}(VSELECT((${UV})0u, len_, blk_), 0, vcarryk + ${k} * cstride + cb);
            vstore${VEC}(VSELECT(len_, (${UV})0u, blk_), 0, wcarryk + ${k} * cstride + cb);
            vstore${VEC}(np${k}, 0, nptsk + ${k} * cstride + cb);
        }
% endfor
</%def>
