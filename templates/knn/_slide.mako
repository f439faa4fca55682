## knn.cl.mako, VARIANT "rows" with SLIDE = U > 0: a contiguous library (library index
## i is point lib[0] + i), NC = 1, a window span (E - 1) * TAU of at most SPAN_MAX (the
## host checks; see KnnKernel.params_for). Library point lp0 + i has coordinates
## x[lp0 + i + k * TAU], so a tile of TILE points needs only the TILE + (E - 1) * TAU raw
## values x[lp0 + base ..], not E x TILE coordinates: the tile is a vector array sv of
## raw values, and the points are scanned in blocks of U consecutive ones. A block reads
## its U + (E - 1) * TAU values
## with aligned vector loads (float4 / double2, broadcast to every work-item) into
## registers and computes its U distances from them (a handful of local loads per
## U pairs instead of E per pair: at large L the rows variant is bound by its local
## loads, E per pair).
##
## The arithmetic of every pair is the plain rows variant's (the same terms in the
## same order, newest coordinate first, the same EA chunks), so the table is the same
## bit for bit. Early abandoning is decided per block: the next chunk of all U pairs
## is computed when any of them is still at or below the query's k-th distance as it
## was at the start of the block, `thr` (partial sums only grow, so a pair above thr
## never enters). Pairs at or below thr after the last chunk are offered one by one
## from a bit mask: their distance recomputed from the tile (the same sum, so the same
## value) and checked against the current list exactly as the plain variant does
## (exclusion radius, tie order, insertion). One insertion network in the code, not U.
## Points past the last full block (a partial last tile) take the plain per-pair path
## on the same tile. SPLIT > 1: work-item sp of a query takes blocks sp, sp + SPLIT, ...
## (and points likewise past the blocks); the lists merge as in the plain variant.
<%namespace name="metric" file="/common/_metric.mako"/>
<%namespace name="parts" file="/knn/_parts.mako"/>
<%!
#: the largest window span (E - 1) * TAU: a block holds SLIDE + span values in registers
SPAN_MAX = 48


def vec_width(real):
    """Values per aligned local vector load (16 bytes)."""
    return 2 if real == "double" else 4
%>

## the tile (raw values) and the library's first point
<%def name="decl()">\
<%
    if (NC != 1 or (E - 1) * TAU > SPAN_MAX or SLIDE % vec_width(REAL) or TILE % (SLIDE * SPLIT)
            or SLIDE > 32 or SLIDE & (SLIDE - 1)):
        raise ValueError("SLIDE=%d needs NC=1, (E-1)*TAU <= %d, a power of 2 from %d to 32, "
                         "SLIDE x SPLIT dividing TILE=%d (got E=%d, TAU=%d, NC=%d, SPLIT=%d)"
                         % (SLIDE, SPAN_MAX, vec_width(REAL), TILE, E, TAU, NC, SPLIT))
    VW = vec_width(REAL)
%>\
    __local ${REAL}${VW} sv[${-(-(TILE + (E - 1) * TAU) // VW)}];
    __local const real_t* const s = (__local const real_t*)sv;
    const int lp0 = nl > 0 ? lib[0] : 0;
</%def>

## the values of the tile at library index `base` into sv (zeros past the series' end)
<%def name="load()">\
<% VW = vec_width(REAL); NV = -(-(TILE + (E - 1) * TAU) // VW) * VW %>\
        barrier(CLK_LOCAL_MEM_FENCE);
        {
            const int nv = nl - base + ${(E - 1) * TAU};
            __local real_t* const sw = (__local real_t*)sv;
            for (int i = lid; i < ${NV}; i += ${WG})
                sw[i] = i < nv ? x[lp0 + base + i] : (real_t)0;
        }
        barrier(CLK_LOCAL_MEM_FENCE);
</%def>

## the scan of one tile: blocks of U points, then the rest one by one
<%def name="scan()">\
<%
    U = SLIDE
    VW = vec_width(REAL)
    NW = -(-(U + (E - 1) * TAU) // VW)
    CH = EA if EA > 0 else E
    chunks = list(range(0, E, CH))
    def val(i):
        return "w%d.s%d" % (i // VW, i % VW)
    def any_le(thr):
        return " | ".join("(a%d <= %s)" % (u, thr) for u in range(U))
%>\
        const int cnt = min(${TILE}, nl - base);
        const int tb = cnt & ${-U};  /* the end of the tile's whole blocks */
        for (int t0 = ${"sp * %d" % U if SPLIT > 1 else "0"}; t0 < tb; t0 += ${U * SPLIT}) {
            __local const ${REAL}${VW}* const sb = sv + t0 / ${VW};
% for j in range(NW):
            const ${REAL}${VW} w${j} = sb[${j}];
% endfor
            const real_t thr = ${parts.limit()};
% for u in range(U):
            real_t a${u} = (real_t)0;
% endfor
            int hit;
% for c0 in chunks:
%   if c0 > 0:
            if (hit) {
%   endif
%   for k in range(c0, min(E, c0 + CH)):
%     for u in range(U):
            ${metric.step(METRIC, "a%d" % u, val(u + (E - 1 - k) * TAU), "qv[%d]" % (E - 1 - k), FMA)}
%     endfor
%   endfor
            hit = ${any_le("thr")};
% endfor
            if (hit) {
                /* the block's pairs at or below thr, offered in order */
                uint m = 0u;
% for u in range(U):
                if (a${u} <= thr) m |= ${"0x%xu" % (1 << u)};
% endfor
                while (m != 0u) {
                    const int t = t0 + 31 - (int)clz(m & (0u - m));
                    m &= m - 1u;
                    ${parts.offer("s[t + %d]", "lp0 + base + t", TAU)}\
                }
            }
% for c0 in chunks[1:]:
            }
% endfor
        }
        for (int t = tb${" + sp" if SPLIT > 1 else ""}; t < cnt; t += ${SPLIT}) {
            ${parts.offer("s[t + %d]", "lp0 + base + t", TAU)}\
        }
</%def>
