## Defs shared by the variants of knn.cl.mako (rows, cols, vec): the kernel's
## arguments and batch offset, the distance with early abandoning, the tile loop, the
## merge of SPLIT partial lists and the output of a register list.
## Reads the template's parameters (E, TAU, K, METRIC, EA, TILE, ORD, FMA, NEAR) from the context.
##
## NEAR > 0 (the rows variant): offer() keeps the list's last NEAR entries for near-ties
## of entry K - 1 - NEAR and abandons against their margin `lim` (_near.mako).
<%namespace name="metric" file="/common/_metric.mako"/>
<%namespace name="topk" file="/common/_topk.mako"/>
<%namespace name="near" file="/knn/_near.mako"/>

## real_t ACC = distance of A % k and B % k over the E coordinates, newest first;
## EA > 0: chunks of EA coordinates, the rest skipped once ACC > THR; A takes coordinate
## k's offset k * STEP (SLIDE's raw-value tile: STEP = TAU), B takes k
<%def name="distance(ACC, A, B, THR, STEP=1)">\
<% CH = EA if EA > 0 else E %>\
real_t ${ACC} = (real_t)0;
% for c0 in range(0, E, CH):
%   if c0 > 0:
            if (${ACC} <= ${THR}) {
%   endif
%   for k in range(c0, min(E, c0 + CH)):
            ${metric.step(METRIC, ACC, A % ((E - 1 - k) * STEP), B % (E - 1 - k), FMA)}
%   endfor
% endfor
% for c0 in range(CH, E, CH):
            }
% endfor
</%def>

## a register-list query's offer of the library point at tile position T: its
## distance (A % k: the point's coordinate k, early abandoning against the list's
## last entry), then exclusion radius, tie order and insertion; L: the point; STEP: as
## for distance()
<%def name="offer(A, L, STEP=1)">\
<% LIM = "lim" if NEAR else "bd%d" % (K - 1) %>\
${distance("acc", A, "qv[%d]", LIM, STEP)}
            if (acc <= ${LIM}) {
                const int l = ${L};
                const int key = tie_key(p, l);
% if NEAR:
                if (dist_rows(p, l) > radius) {
                    /* the first K - NEAR entries, then the one they displace offered to
                       the near-ties only where it lies within the new margin (rare: a
                       branch, not NEAR more steps; limits only shrink, so what lies
                       beyond it now never returns within it) */
                    real_t cd = acc; int ci = l; int ck = key;
${topk.insert_steps(0, K - NEAR)}\
                    const real_t m = near_limit(bd${K - 1 - NEAR}, INFINITY, ${near.attr.near_q(NEAR, SPLIT)});
                    if (ci >= 0 && cd <= m) {
${near.insert()}\
                    }
                    lim = fmin(${near.attr.near_entry(NEAR - 1, K, NEAR, SPLIT)[0]}, m);
                }
% else:
                if (dist_rows(p, l) > radius
                    && (acc < bd${K - 1} || key < tie_key(p, bi${K - 1}) || bi${K - 1} < 0)) {
                    ${topk.insert_reg(K, 'acc', 'l', 'key')}
                }
% endif
            }
</%def>

## the acceptance limit of a query's register list: its last entry, or with NEAR the
## register `lim` (near_limit() of the list, kept by offer())
<%def name="limit()">${"lim" if NEAR else "bd%d" % (K - 1)}</%def>

## the query's entry k into its output row at o (register or local NEAR entry)
<%def name="store_entry(k)">\
% if k >= near.attr.reg_entries(K, NEAR, SPLIT):
<% D, I = near.attr.near_entry(k - near.attr.reg_entries(K, NEAR, SPLIT), K, NEAR, SPLIT) %>\
        out_idx[o + ${k}] = ${I};
        out_dist[o + ${k}] = ${I} < 0 ? INFINITY : ${metric.finish(METRIC, D)};
% else:
${store(k)}\
% endif
</%def>

<%def name="knn_args()">\
__global const real_t* restrict x, const int xoff, const int xstride,
         __global const int* restrict qpts, const int nq,
         __global const int* restrict lpts, const int nl, const int lstride,
         const int radius,
         __global int* restrict out_idx, __global real_t* restrict out_dist\
</%def>

<%def name="batch_setup()">\
/* batch b: series b (x offset xoff + b * xstride) and/or library list b (lpts + b * lstride) */
    const int b = get_global_id(1);
    x += (size_t)xoff + (size_t)b * xstride;
    __global const int* lib = lpts + (size_t)b * lstride;
</%def>

## helper functions of the tile order (ORD=1) and of NEAR's margin (_near.mako)
<%def name="functions()">\
${near.functions()}\
% if ORD:

/* position of point p in the ascending library (first member >= p) */
inline int lib_lower_bound(__global const int* lib, const int nl, const int p)
{
    if (nl == 0) return 0;
    /* a contiguous library (the usual case) holds p at p - lib[0]: one check */
    const int g = p - lib[0];
    if (g >= 0 && g < nl && lib[g] == p) return g;
    int lo = 0, hi = nl;
    while (lo < hi) {
        const int mid = (lo + hi) >> 1;
        if (lib[mid] < p) lo = mid + 1; else hi = mid;
    }
    return lo;
}
% endif
</%def>

## opens the loop over library tiles (base = first library index of the tile);
## ORD=1 starts at the tile of query QREF (see the header)
<%def name="tile_loop(QREF)">\
% if ORD:
    /* tiles nearest the group's queries first (ORD=1, see the header) */
    const int ntile = (nl + ${TILE - 1}) / ${TILE};
    const int ctile = min(lib_lower_bound(lib, nl, nq > 0 ? qpts[min((int)(${QREF}), nq - 1)] : 0) / ${TILE}, ntile - 1);
    for (int it = 0; it < ntile; ++it) {
        const int base = near_tile(it, ctile, ntile) * ${TILE};
% else:
    for (int base = 0; base < nl; base += ${TILE}) {
% endif
</%def>

## SPLIT work-items per query (sp = 0..SPLIT-1; QW queries per group, qi = this one):
## work-item sp = 0 takes the other lists' entries in order (each list is sorted, a
## library point is in one list only: the same top-k as one work-item). PACK: the
## lists are packed keys s{k}; else registers bd{k} / bi{k} (D: the name of the
## candidate distance)
<%def name="merge_split(QW, PACK, D)">\
% if PACK:
    __local ulong pk[${SPLIT - 1}][${QW}][K];
    if (sp > 0) {
% for k in range(K):
        pk[sp - 1][qi][${k}] = s${k};
% endfor
    }
    barrier(CLK_LOCAL_MEM_FENCE);
    if (sp == 0) {
        for (int o2 = 0; o2 < ${SPLIT - 1}; ++o2) {
            for (int j = 0; j < K; ++j) {
                ulong cv = pk[o2][qi][j];
                if (cv >= s${K - 1}) break;
                ${topk.insert_key(K)}
            }
        }
    }
% else:
    __local real_t pd[${SPLIT - 1}][${QW}][K];
    __local int pi[${SPLIT - 1}][${QW}][K];
    if (sp > 0) {
% for k in range(K):
        pd[sp - 1][qi][${k}] = bd${k}; pi[sp - 1][qi][${k}] = bi${k};
% endfor
    }
    barrier(CLK_LOCAL_MEM_FENCE);
    if (sp == 0) {
        for (int s2 = 0; s2 < ${SPLIT - 1}; ++s2) {
            for (int j = 0; j < K; ++j) {
                const real_t ${D} = pd[s2][qi][j];
                const int l = pi[s2][qi][j];
                if (l < 0) break;
                const int key = tie_key(p, l);
                if (${D} < bd${K - 1} || (${D} == bd${K - 1} && (bi${K - 1} < 0 || key < tie_key(p, bi${K - 1}))))
                    ${topk.insert_reg(K, D, 'l', 'key')}
                else
                    break;
            }
        }
    }
% endif
</%def>

## entry k of a query's register list bd{k}SF / bi{k}SF into its output row at o; RAW=1
## (given only then): the accumulated values, unfinished, for a merge of lists
## (merge.cl.mako) that orders them as the kernel did
<%def name="store(k, SF='')">\
        out_idx[o + ${k}] = bi${k}${SF};
% if context.get("RAW", 0):
        out_dist[o + ${k}] = bi${k}${SF} < 0 ? INFINITY : bd${k}${SF};
% else:
        out_dist[o + ${k}] = bi${k}${SF} < 0 ? INFINITY : ${metric.finish(METRIC, "bd%d%s" % (k, SF))};
% endif
</%def>
