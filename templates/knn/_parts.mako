## Defs shared by the variants of knn.cl.mako (rows, cols, vec): the kernel's
## arguments and batch offset, the distance with early abandoning, the tile loop, the
## merge of SPLIT partial lists and the output of a register list.
## Reads the template's parameters (E, TAU, K, METRIC, EA, TILE, ORD, FMA, NEAR) from the context.
##
## NEAR > 0 (register lists, euclidean: the rows variant; knn.cl.mako's header): the
## list's last NEAR entries take only candidates within NEAR_WIDTHS float32 distance
## bounds of entry K - 1 - NEAR, so its acceptance limit `lim` (limit()) is that
## margin once the list is full beyond it, not its last entry: near-ties of the
## (K - NEAR)-th neighbour are kept, farther points abandoned as early as without them.
<%namespace name="metric" file="/common/_metric.mako"/>
<%namespace name="topk" file="/common/_topk.mako"/>

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
                    const real_t m = near_limit(bd${K - 1 - NEAR}, INFINITY, ${near_q(NEAR, SPLIT)});
                    if (ci >= 0 && cd <= m) {
${near_insert()}\
                    }
                    lim = fmin(${near_entry(NEAR - 1, K, NEAR, SPLIT)[0]}, m);
                }
% else:
                if (dist_rows(p, l) > radius
                    && (acc < bd${K - 1} || key < tie_key(p, bi${K - 1}) || bi${K - 1} < 0)) {
                    ${topk.insert_reg(K, 'acc', 'l', 'key')}
                }
% endif
            }
</%def>

## NEAR entries in local memory (near_local: one query per work-item, SPLIT = 1; slots
## near_d / near_i of WG x NEAR, the query's 2 |q| in near_q): their updates are rare,
## and the registers they would hold are the scan's (NVIDIA caps the rows kernel at 64);
## else registers bd{k} / bi{k}, k >= K - NEAR, like the others
<%!
def near_local(NEAR, SPLIT):
    return bool(NEAR) and SPLIT == 1


def reg_entries(K, NEAR, SPLIT):
    """The register entries of a query's list: K, or K - NEAR where the rest are local."""
    return K - NEAR if near_local(NEAR, SPLIT) else K


def near_entry(i, K, NEAR, SPLIT):
    """Names of entry K - NEAR + i of the query's list: (distance, point)."""
    if near_local(NEAR, SPLIT):
        return "near_d[lid * %d + %d]" % (NEAR, i), "near_i[lid * %d + %d]" % (NEAR, i)
    return "bd%d" % (K - NEAR + i), "bi%d" % (K - NEAR + i)


def near_q(NEAR, SPLIT):
    return "near_q[lid]" if near_local(NEAR, SPLIT) else "nq2"
%>

## the displaced (cd, ci, ck) into the near entries
<%def name="near_insert()">\
% if near_local(NEAR, SPLIT):
% for i in range(NEAR):
<% D, I = near_entry(i, K, NEAR, SPLIT) %>\
                        {
                            const real_t td = ${D}; const int ti = ${I};
                            if (cd < td || (cd == td && (ti < 0 || ck < tie_key(p, ti)))) {
                                ${D} = cd; ${I} = ci; cd = td; ci = ti; ck = tie_key(p, ti);
                            }
                        }
% endfor
% else:
${topk.insert_steps(K - NEAR, K)}\
% endif
</%def>

## the acceptance limit of a query's register list: its last entry, or with NEAR the
## register `lim` (near_limit() of the list, kept by offer())
<%def name="limit()">${"lim" if NEAR else "bd%d" % (K - 1)}</%def>

## NEAR: the query's norm term nq2 = 2 |q| (float32 from its coordinates qv) and the
## limit `lim`, before the scan
<%def name="near_setup()">\
% if NEAR:
    real_t qss = (real_t)0;
%   for k in range(E):
    qss += qv[${k}] * qv[${k}];
%   endfor
    real_t lim = INFINITY;
%   if near_local(NEAR, SPLIT):
    __local real_t near_d[${WG * NEAR}];
    __local int near_i[${WG * NEAR}];
    __local real_t near_q[${WG}];
    near_q[lid] = 2 * sqrt(qss);
%     for i in range(NEAR):
    near_d[lid * ${NEAR} + ${i}] = INFINITY; near_i[lid * ${NEAR} + ${i}] = -1;
%     endfor
%   else:
    const real_t nq2 = 2 * sqrt(qss);
%   endif
% endif
</%def>

## NEAR: the list's last NEAR entries beyond the final margin (points that entered
## under a wider limit) emptied before the store: the output holds, past entry K - 1 -
## NEAR, exactly the neighbours within the margin, -1 / inf after them
<%def name="near_clear()">\
% if NEAR:
    {
        const real_t fin = near_limit(bd${K - 1 - NEAR}, INFINITY, ${near_q(NEAR, SPLIT)});
%   for i in range(NEAR):
<% D, I = near_entry(i, K, NEAR, SPLIT) %>\
        if (${D} > fin) ${I} = -1;
%   endfor
    }
% endif
</%def>

## the query's entry k into its output row at o (register or local NEAR entry)
<%def name="store_entry(k)">\
% if k >= reg_entries(K, NEAR, SPLIT):
<% D, I = near_entry(k - reg_entries(K, NEAR, SPLIT), K, NEAR, SPLIT) %>\
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

## helper functions of the tile order (ORD=1) and of NEAR's margin
<%def name="functions()">\
% if NEAR:
<%
    if METRIC != "euclidean" or not 0 < NEAR < K:
        raise ValueError("NEAR=%d needs METRIC euclidean and 0 < NEAR < K=%d (got %s)"
                         % (NEAR, K, METRIC))
%>\

/* NEAR: the acceptance limit (squared) of a list whose entry K - 1 - NEAR is a (squared,
   inf while the list is short), last its last entry: the distance d = sqrt(a) plus
   NEAR_WIDTHS times the float32 bound D(d) = 2u (2 |q| + (E + 4) d) (nq2 = 2 |q|), squared,
   or last if that is less. The lookup (lookup/_resolve.mako) counts on every point within
   RESOLVE_WIDTHS (< NEAR_WIDTHS, the rest the float32 rounding of this sum) of d to be in
   the list. Monotone in a: the limit never grows while the list fills. */
#define NEAR_WIDTHS 16
inline real_t near_limit(const real_t a, const real_t last, const real_t nq2)
{
    const real_t d = sqrt(a);
    const real_t m = d + (real_t)(NEAR_WIDTHS * 1.1920928955078125e-07) * (nq2 + (real_t)${E + 4} * d);
    return fmin(last, m * m);
}
% endif
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
