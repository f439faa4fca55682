## params: E, TAU, K, METRIC, REAL, WG, TILE, VARIANT, QB, EA, INS, FLAG, SPLIT, QQ, CB, FMA, ORD
## Fused time-delay embedding + distance + top-k (exact all-k-NN table).
##
## Query q is the raw-series window at kernel point qpts[q]:
## (x[p], x[p+TAU], ..., x[p+(E-1)*TAU]); the embedding is never materialised.
## The library (kernel points lpts[b*lstride .. b*lstride+nl-1], ascending)
## streams through local memory in tiles of TILE points shared by the work-group.
## Batches b = get_global_id(1), set by launch arguments (one compiled kernel):
## library lists (lstride = nl, xstride = 0: CCM's sampled libraries), or series
## (lstride = 0, xstride = series length: the all-to-all map builds the tables of
## many library series in one launch; x is offset by xoff + b * xstride, points
## and output indices are the series' own). Output row (b, q). Each work-item keeps
## its query's K best (distance, point) in registers (an unrolled insertion
## network, so no L x L matrix exists anywhere: O(nq * K) output).
##
## Exclusion: library point l is skipped for query p when |p - l| <= radius
## (radius 0 = leave-one-out self-exclusion; radius < 0 = none).
## Tie order (deterministic, pyEDM's Simplex order): distance, then |p - l|, then l.
## Rows with fewer than K admissible neighbours are padded with index -1 and
## distance +inf.
##
## Tile order (ORD, a caller's value, not tuned; _order.mako): ORD=0 visits the
## library tiles in ascending order; ORD=1 starts at the tile holding the group's
## middle query and then takes tiles by their distance from it (c, c+1, c-1, c+2,
## ...). The top-k of a total order does not depend on the order candidates arrive
## in, so the result is the same; in a sampled flow the nearest neighbours of a point
## lie mostly on its own stretch of trajectory, so the k-th distance is tight after
## the first tiles and far fewer candidates pass (in ascending order it shrinks a
## little on every approach of the orbit).
##
## Coordinates are summed newest-first (x_t, then x_{t-tau}, ...: coordinate index
## E-1 down to 0), so the squared distance at E extends the one at E-1 term by term
## and knn_scan.cl.mako's incremental tables for E = 1..Emax are bit-identical to
## this kernel's (contraction is off; FMA=1, a per-job choice, fuses each square
## into the sum with fma() in both kernels alike, see _metric.mako).
##
## Early abandoning (EA > 0): coordinates are summed in chunks of EA and the rest
## is skipped once the partial distance exceeds the query's current k-th best
## (partial sums only grow, so this is exact); for large E most library points
## are rejected after the first chunk.
##
## VARIANT "rows" (GPUs): SPLIT work-items per query (WG / SPLIT queries per
## group), each scanning every SPLIT-th point of each tile (broadcast reads) into
## its own register top-k; the SPLIT partial lists merge through local memory at
## the end (same total order, so the result does not depend on SPLIT). SPLIT > 1
## keeps a GPU busy when there are few queries.
## VARIANT "cols" (CPU SIMD): a work-group owns QB queries (coordinates in local
## memory); work-items are library points of the tile (TILE = WG * R), so the
## distance block is computed branch-free across SIMD lanes; a flag per query
## marks tiles holding a candidate below its current k-th distance, and only then
## is that row scanned and its candidates inserted: INS "reg" by the query's owner
## work-item into a register top-k (compare-swap network), INS "local" by one
## work-item for all QB queries into sorted top-k lists in local memory (a short
## shifting insertion: no SIMD lanes sit masked through a full network). FLAG=0
## replaces the per-query flag by a per-lane candidate bit mask stored
## unconditionally: the distance block is then free of conditional stores, which
## PoCL's loop vectoriser needs; Intel's vectoriser masks the flag stores fine (FLAG=1).
## INS "mask" (cols, FLAG=0, TILE <= 32): the lane bits are transposed into one
## candidate word per query (vectorised across queries), so the serial scan
## visits only candidate lanes.
## VARIANT "vec" (QB = SIMD width 4/8/16): one query per work-item over a
## local tile like "rows", but the distance block is written in explicit vectors
## of QB library points (PoCL 3.0 does not vectorise the cols variant's
## work-item loop here, and runs vload/any/fmin builtins as calls, so none is
## used); a vector is screened by its smallest lane against the k-th distance.
## float32 candidates go into a top-k of packed keys (distance bits << 32 | tie
## key), whose integer order is exactly (distance, |p - l|, l), with a
## branch-free min/max network; float64 uses the register insertion network.
## Options (GPUs): QQ queries per work-item share each tile vector (register
## blocking); SPLIT work-items per query as in "rows" (more work-items in flight
## when the queries alone leave the GPU short of them); CB > 0 buffers a
## work-item's float32 candidates in local memory and inserts them per tile (the
## SIMD group runs the network once per batch, not once per divergent lane).
## None of them changes the result.
## VARIANT "sorted" (CCM, many sampled subsets of one library; not tuned, only WG
## matters): kernel dist_full writes every query's (squared) distance to every
## point of the full library (same arithmetic as knn, so bit-identical values)
## and the finished distance;
## the host sorts each row by the same total order (distance, |p - l|, l);
## simplex_lookup's subset_lookup then takes, per query and per sampled library,
## the first K admissible members of that sorted row (exact: the K first members
## of a subset in a total order are its top-K) and predicts from them.
<%namespace name="metric" file="_metric.mako"/>
<%namespace name="order" file="_order.mako"/>\
${metric.real_type(REAL)}
#define K ${K}
<%def name="distance(ACC, A, B, THR)">\
<% CH = EA if EA > 0 else E %>\
real_t ${ACC} = (real_t)0;
% for c0 in range(0, E, CH):
%   if c0 > 0:
            if (${ACC} <= ${THR}) {
%   endif
%   for k in range(c0, min(E, c0 + CH)):
            ${metric.step(METRIC, ACC, A % (E - 1 - k), B % (E - 1 - k), FMA)}
%   endfor
% endfor
% for c0 in range(CH, E, CH):
            }
% endfor
</%def>\
<%def name="insert(D, L, KEY, SF='', P='p')">\
{
                    real_t cd = ${D}; int ci = ${L}; int ck = ${KEY};
% for k in range(K):
                    {
                        const bool sw = cd < bd${k}${SF} || (cd == bd${k}${SF} && (bi${k}${SF} < 0 || ck < tie_key(${P}, bi${k}${SF})));
                        const real_t td = bd${k}${SF}; const int ti = bi${k}${SF};
                        if (sw) { bd${k}${SF} = cd; bi${k}${SF} = ci; cd = td; ci = ti; ck = tie_key(${P}, ti); }
                    }
% endfor
}\
</%def>

<%def name="knn_args()">\
__global const real_t* restrict x, const int xoff, const int xstride,
         __global const int* restrict qpts, const int nq,
         __global const int* restrict lpts, const int nl, const int lstride,
         const int radius,
         __global int* restrict out_idx, __global real_t* restrict out_dist\
</%def>\
<%def name="batch_setup()">\
/* batch b: series b (x offset xoff + b * xstride) and/or library list b (lpts + b * lstride) */
    const int b = get_global_id(1);
    x += (size_t)xoff + (size_t)b * xstride;
    __global const int* lib = lpts + (size_t)b * lstride;
</%def>\
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
</%def>\

/* tie key of library point l for query p: |p - l| first, then the earlier point */
inline int tie_key(const int p, const int l) { return 2 * (l > p ? l - p : p - l) + (l > p); }
inline int dist_rows(const int p, const int l) { return l > p ? l - p : p - l; }
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

${order.near_tile()}
% endif

% if VARIANT == "rows":
__kernel __attribute__((reqd_work_group_size(${WG}, 1, 1)))
void knn(${knn_args()})
{
<% QW = WG // SPLIT %>
    const int lid = get_local_id(0);
    const int qi = lid % ${QW};
    const int sp = lid / ${QW};
    const int q = get_group_id(0) * ${QW} + qi;
    ${batch_setup()}
    __local real_t tile[${E}][${TILE}];
    __local int tidx[${TILE}];

    const bool active = q < nq;
    const int p = active ? qpts[q] : 0;
    real_t qv[${E}];
% for k in range(E):
    qv[${k}] = active ? x[p + ${k * TAU}] : (real_t)0;
% endfor
% for k in range(K):
    real_t bd${k} = INFINITY; int bi${k} = -1;
% endfor

${tile_loop("get_group_id(0) * %d + %d" % (QW, QW // 2))}\
        barrier(CLK_LOCAL_MEM_FENCE);
        for (int t = lid; t < ${TILE}; t += ${WG}) {
            const int li = base + t;
            const int lp = li < nl ? lib[li] : 0;
            tidx[t] = li < nl ? lp : -1;
% for k in range(E):
            tile[${k}][t] = x[lp + ${k * TAU}];
% endfor
        }
        barrier(CLK_LOCAL_MEM_FENCE);
        const int cnt = min(${TILE}, nl - base);
        for (int t = sp; t < cnt; t += ${SPLIT}) {
            ${distance("acc", "tile[%d][t]", "qv[%d]", "bd%d" % (K - 1))}
            if (acc <= bd${K - 1}) {
                const int l = tidx[t];
                const int key = tie_key(p, l);
                if (dist_rows(p, l) > radius
                    && (acc < bd${K - 1} || key < tie_key(p, bi${K - 1}) || bi${K - 1} < 0)) {
                    ${insert('acc', 'l', 'key')}
                }
            }
        }
    }
% if SPLIT > 1:
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
                const real_t acc = pd[s2][qi][j];
                const int l = pi[s2][qi][j];
                if (l < 0) break;
                const int key = tie_key(p, l);
                if (acc < bd${K - 1} || (acc == bd${K - 1} && (bi${K - 1} < 0 || key < tie_key(p, bi${K - 1}))))
                    ${insert('acc', 'l', 'key')}
                else
                    break;
            }
        }
    }
% endif
    if (active && sp == 0) {
        const size_t o = ((size_t)b * nq + q) * K;
% for k in range(K):
        out_idx[o + ${k}] = bi${k};
        out_dist[o + ${k}] = bi${k} < 0 ? INFINITY : ${metric.finish(METRIC, "bd%d" % k)};
% endfor
    }
}
% elif VARIANT == "cols":
<% R = TILE // WG %>
__kernel __attribute__((reqd_work_group_size(${WG}, 1, 1)))
void knn(${knn_args()})
{
    const int lid = get_local_id(0);
    const int q0 = get_group_id(0) * ${QB};
    ${batch_setup()}
    __local real_t qloc[${QB}][${E}];
    __local int qp[${QB}];
    __local real_t cand[${QB}][${TILE}];
    __local int cidx[${TILE}];
    __local real_t thr[${QB}];
    __local int flag[${QB}];
% if INS != "reg" and not FLAG:
    __local unsigned int lanebits[${TILE}];
% endif
% if INS == "mask":
    __local unsigned int qmask[${QB}];
% endif
% if INS != "reg":
    __local real_t topd[${QB}][K];
    __local int topi[${QB}][K];
    for (int i = lid; i < ${QB} * K; i += ${WG}) {
        topd[i / K][i % K] = INFINITY;
        topi[i / K][i % K] = -1;
    }
% endif

    for (int i = lid; i < ${QB}; i += ${WG}) {
        const int q = q0 + i;
        const int pp = q < nq ? qpts[q] : 0;
        qp[i] = q < nq ? pp : -1;
% for k in range(E):
        qloc[i][${k}] = x[pp + ${k * TAU}];
% endfor
        thr[i] = INFINITY;
        flag[i] = 0;
    }
% if INS == "reg":
    /* the owner work-item (lid < QB) keeps its query's k best in registers */
    const int p = lid < ${QB} ? qpts[min(q0 + lid, nq - 1)] : 0;
% for k in range(K):
    real_t bd${k} = INFINITY; int bi${k} = -1;
% endfor
% endif
    barrier(CLK_LOCAL_MEM_FENCE);

${tile_loop("q0 + %d" % (QB // 2))}\
% for r in range(R):
        {
            const int t = lid + ${r * WG};
            const int li = base + t;
            const int l = li < nl ? lib[li] : -1;
            const int lr = l < 0 ? 0 : l;
            cidx[t] = l;
% for k in range(E):
            const real_t c${k} = x[lr + ${k * TAU}];
% endfor
% if INS != "reg" and not FLAG:
            unsigned int bits = 0u;
% endif
% for i in range(QB):
            {
                ${distance("acc", "c%d", "qloc[" + str(i) + "][%d]", "thr[%d]" % i)}
                const bool ok = l >= 0 && acc <= thr[${i}] && dist_rows(qp[${i}], l) > radius;
                cand[${i}][t] = ok ? acc : INFINITY;
% if INS == "reg" or FLAG:
                if (ok) flag[${i}] = 1;
% else:
                bits |= ok ? ${"%du" % (1 << i)} : 0u;
% endif
            }
% endfor
% if INS != "reg" and not FLAG:
            lanebits[t] = bits;
% endif
        }
% endfor
        barrier(CLK_LOCAL_MEM_FENCE);
% if INS == "reg":
        if (lid < ${QB} && flag[lid]) {
            for (int t = 0; t < ${TILE}; ++t) {
                const real_t acc = cand[lid][t];
                if (acc <= bd${K - 1}) {
                    const int l = cidx[t];
                    const int key = tie_key(p, l);
                    if (acc < bd${K - 1} || bi${K - 1} < 0 || key < tie_key(p, bi${K - 1}))
                        ${insert('acc', 'l', 'key')}
                }
            }
            flag[lid] = 0;
            thr[lid] = bd${K - 1};
        }
% else:
% if INS == "mask":
        /* transpose the lane bits: query i's candidate lanes as one word (vectorised
           across queries), so the serial scan below visits candidates only */
        if (lid < ${QB}) {
            unsigned int m = 0u;
% for t in range(TILE):
            m |= ((lanebits[${t}] >> lid) & 1u) << ${t};
% endfor
            qmask[lid] = m;
        }
        barrier(CLK_LOCAL_MEM_FENCE);
% endif
        if (lid == 0) {
% if INS == "mask":
            for (int i = 0; i < ${QB}; ++i) {
                unsigned int m = qmask[i];
                if (!m) continue;
% elif not FLAG:
            unsigned int any = 0u;
            for (int t = 0; t < ${TILE}; ++t) any |= lanebits[t];
% endif
% if INS != "mask":
            for (int i = 0; i < ${QB}; ++i) {
% endif
% if FLAG:
                if (!flag[i]) continue;
                flag[i] = 0;
% elif INS != "mask":
                if (!((any >> i) & 1u)) continue;
% endif
                const int pq = qp[i];
                real_t kd = topd[i][K - 1];
                int ki = topi[i][K - 1];
% if INS == "mask":
                for (; m; m &= m - 1u) {
                    const int t = 31 - (int)clz(m & (0u - m));
% else:
                for (int t = 0; t < ${TILE}; ++t) {
% endif
% if not FLAG and INS != "mask":
                    if (!((lanebits[t] >> i) & 1u)) continue;
% endif
                    const real_t d = cand[i][t];
                    if (d > kd) continue;
                    const int l = cidx[t];
                    const int key = tie_key(pq, l);
                    if (d < kd || ki < 0 || key < tie_key(pq, ki)) {
                        int j = K - 1;
                        while (j > 0 && (d < topd[i][j - 1] || (d == topd[i][j - 1]
                               && (topi[i][j - 1] < 0 || key < tie_key(pq, topi[i][j - 1]))))) {
                            topd[i][j] = topd[i][j - 1];
                            topi[i][j] = topi[i][j - 1];
                            --j;
                        }
                        topd[i][j] = d;
                        topi[i][j] = l;
                        kd = topd[i][K - 1];
                        ki = topi[i][K - 1];
                    }
                }
                thr[i] = kd;
            }
        }
% endif
        barrier(CLK_LOCAL_MEM_FENCE);
    }
% if INS == "reg":
    const int q = q0 + lid;
    if (lid < ${QB} && q < nq) {
        const size_t o = ((size_t)b * nq + q) * K;
% for k in range(K):
        out_idx[o + ${k}] = bi${k};
        out_dist[o + ${k}] = bi${k} < 0 ? INFINITY : ${metric.finish(METRIC, "bd%d" % k)};
% endfor
    }
% else:
    for (int e = lid; e < ${QB} * K; e += ${WG}) {
        const int i = e / K, k = e % K, q = q0 + i;
        if (q < nq) {
            const int l = topi[i][k];
            out_idx[((size_t)b * nq + q) * K + k] = l;
            out_dist[((size_t)b * nq + q) * K + k] = l < 0 ? INFINITY : ${metric.finish(METRIC, "topd[i][k]")};
        }
    }
% endif
}
% elif VARIANT == "vec":
<% VW = QB %>
<% sf = (lambda i: "") if QQ == 1 else (lambda i: "_%d" % i) %>\
typedef ${REAL}${VW} realv_t;
#define EMPTY ((ulong)0x7F800000FFFFFFFFUL)
<%def name="flush(i)">\
{
            for (int f = 0; f < nb${sf(i)}; ++f) {
                ulong cv = cbuf${sf(i)}[f * ${WG} + lid];
                if (cv < s${K - 1}${sf(i)}) {
% for k in range(K):
                    { const ulong lo = cv < s${k}${sf(i)} ? cv : s${k}${sf(i)}; cv = cv < s${k}${sf(i)} ? s${k}${sf(i)} : cv; s${k}${sf(i)} = lo; }
% endfor
                }
            }
            nb${sf(i)} = 0;
        }\
</%def>\
__kernel __attribute__((reqd_work_group_size(${WG}, 1, 1)))
void knn(${knn_args()})
{
    const int lid = get_local_id(0);
% if QQ == 1 and SPLIT == 1:
    const int q = get_global_id(0);
% elif SPLIT > 1:
<% assert QQ == 1, "vec: SPLIT > 1 needs QQ = 1" %>\
    /* SPLIT work-items per query (WG / SPLIT queries per group), each scanning every
       SPLIT-th vector of each tile; the partial top-k lists merge at the end */
    const int qi = lid % ${WG // SPLIT};
    const int sp = lid / ${WG // SPLIT};
    const int q = get_group_id(0) * ${WG // SPLIT} + qi;
% else:
    /* QQ queries per work-item (WG apart): each local tile vector feeds QQ distances */
    const int q0 = get_group_id(0) * ${WG * QQ} + lid;
% endif
    ${batch_setup()}
    /* the tile as whole vectors (aligned), written point by point */
    __local realv_t tilev[${E}][${TILE // VW}];
    __local int tidx[${TILE}];

% for i in range(QQ):
% if QQ > 1:
    const int q${sf(i)} = q0 + ${i * WG};
% endif
    const bool active${sf(i)} = q${sf(i)} < nq;
    const int p${sf(i)} = active${sf(i)} ? qpts[q${sf(i)}] : 0;
% for k in range(E):
    const realv_t qv${k}${sf(i)} = (realv_t)(active${sf(i)} ? x[p${sf(i)} + ${k * TAU}] : (real_t)0);
% endfor
% endfor
<% PACK = REAL == "float" %>\
% if PACK:
    /* top-k as packed keys (distance bits << 32 | tie key): the order of the keys
       is the total order (distance, |p - l|, l), so insertion is a branch-free
       min/max network; an empty slot is EMPTY (distance +inf, key above any) */
% for i in range(QQ):
% for k in range(K):
    ulong s${k}${sf(i)} = EMPTY;
% endfor
% if CB:
    /* CB > 0: candidates that pass the (possibly stale) k-th key are appended to a
       per-work-item buffer and inserted when it is full and at the end of each
       tile: on a GPU the whole SIMD group runs the insertion network whenever one
       lane inserts, so batching a lane's insertions cuts the divergent work.
       Keys are unique, so the top-k does not depend on the insertion order. */
    __local ulong cbuf${sf(i)}[${CB * WG}];
    int nb${sf(i)} = 0;
% endif
% endfor
% else:
% for i in range(QQ):
% for k in range(K):
    real_t bd${k}${sf(i)} = INFINITY; int bi${k}${sf(i)} = -1;
% endfor
% endfor
% endif

${tile_loop("get_group_id(0) * %d + %d" % (WG * QQ // SPLIT, WG * QQ // SPLIT // 2))}\
        /* points of this tile, rounded up to whole vectors (a short library loads
           only what it has; padding lanes hold point -1) */
        const int cnt = nl - base < ${TILE} ? nl - base : ${TILE};
        const int cntv = (cnt + ${VW - 1}) / ${VW} * ${VW};
        barrier(CLK_LOCAL_MEM_FENCE);
        for (int t = lid; t < cntv; t += ${WG}) {
            const int li = base + t;
            const int lp = li < nl ? lib[li] : 0;
            tidx[t] = li < nl ? lp : -1;
% for k in range(E):
            ((__local real_t*)tilev[${k}])[t] = x[lp + ${k * TAU}];
% endfor
        }
        barrier(CLK_LOCAL_MEM_FENCE);
% if SPLIT > 1:
        for (int c = sp; c * ${VW} < cnt; c += ${SPLIT}) {
% else:
        for (int c = 0; c * ${VW} < cnt; ++c) {
% endif
            /* VW library points at once in explicit vectors (PoCL does not vectorise
               this loop across work-items); each lane does the same operations in the
               same order as the scalar kernels, so distances are identical */
% if QQ == 1:
            realv_t acc = (realv_t)0;
% for k in reversed(range(E)):
            ${capture(metric.step, METRIC, "acc", "tilev[%d][c]" % k, "qv%d" % k, FMA).replace("real_t _d", "realv_t _d")}
% endfor
% else:
% for i in range(QQ):
            realv_t acc${sf(i)} = (realv_t)0;
% endfor
% for k in reversed(range(E)):
            {
                const realv_t tv = tilev[${k}][c];
% for i in range(QQ):
                ${capture(metric.step, METRIC, "acc" + sf(i), "tv", "qv%d%s" % (k, sf(i)), FMA).replace("real_t _d", "realv_t _d")}
% endfor
            }
% endfor
% endif
% for i in range(QQ):
<% acc = "acc" + sf(i); s = lambda k: "s%d%s" % (k, sf(i)); bd = lambda k: "bd%d%s" % (k, sf(i)); bi = lambda k: "bi%d%s" % (k, sf(i)); pp = "p" + sf(i) %>\
            /* any lane a candidate: the smallest lane against the k-th distance, by a
               min tree of halves (PoCL 3.0 runs any()/fmin() as calls; Oclgrind's
               uninitialised-value plugin crashes on reductions of compare masks) */
<% w = VW; v = acc %>\
% while w > 1:
<% w //= 2 %>\
            const ${REAL}${w if w > 1 else ""} mn${w}${sf(i)} = ${v}.lo < ${v}.hi ? ${v}.lo : ${v}.hi;
<% v = "mn%d%s" % (w, sf(i)) %>\
% endwhile
% if PACK:
            if (mn1${sf(i)} <= as_float((uint)(${s(K - 1)} >> 32))) {
% else:
            if (mn1${sf(i)} <= ${bd(K - 1)}) {
% endif
                for (int j = 0; j < ${VW}; ++j) {
% if PACK:
% if METRIC == "maximum":
                    /* -0 + 0 = +0: the key's bit order is the value order (the max of
                       |d| can be -0 where a coordinate difference is -0) */
                    const real_t a = ((real_t*)&${acc})[j] + (real_t)0;
% else:
                    const real_t a = ((real_t*)&${acc})[j];
% endif
                    if (a > as_float((uint)(${s(K - 1)} >> 32))) continue;
                    const int l = tidx[c * ${VW} + j];
                    const int dr = dist_rows(${pp}, l);
                    const ulong key = ((ulong)as_uint(a) << 32) | (uint)(2 * dr + (l > ${pp}));
                    if (l >= 0 && dr > radius && key < ${s(K - 1)}) {
% if CB:
                        cbuf${sf(i)}[nb${sf(i)} * ${WG} + lid] = key;
                        if (++nb${sf(i)} == ${CB}) ${flush(i)}
% else:
                        ulong cv = key;
% for k in range(K):
                        { const ulong lo = cv < ${s(k)} ? cv : ${s(k)}; cv = cv < ${s(k)} ? ${s(k)} : cv; ${s(k)} = lo; }
% endfor
% endif
                    }
% else:
                    const real_t a = ((real_t*)&${acc})[j];
                    const int l = tidx[c * ${VW} + j];
                    if (a <= ${bd(K - 1)} && l >= 0) {
                        const int key = tie_key(${pp}, l);
                        if (dist_rows(${pp}, l) > radius
                            && (a < ${bd(K - 1)} || key < tie_key(${pp}, ${bi(K - 1)}) || ${bi(K - 1)} < 0)) {
                            ${insert('a', 'l', 'key', sf(i), pp)}
                        }
                    }
% endif
                }
            }
% endfor
        }
% if CB and PACK:
        /* the tile's buffered candidates into the top-k */
% for i in range(QQ):
        ${flush(i)}
% endfor
% endif
    }
% if SPLIT > 1:
<% QW = WG // SPLIT %>\
    /* merge: work-item sp = 0 of each query takes the other lists' entries in order
       (each list is sorted, a library point is in one list only: same top-k) */
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
% for k in range(K):
                { const ulong lo = cv < s${k} ? cv : s${k}; cv = cv < s${k} ? s${k} : cv; s${k} = lo; }
% endfor
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
                const real_t a = pd[s2][qi][j];
                const int l = pi[s2][qi][j];
                if (l < 0) break;
                const int key = tie_key(p, l);
                if (a < bd${K - 1} || (a == bd${K - 1} && (bi${K - 1} < 0 || key < tie_key(p, bi${K - 1}))))
                    ${insert('a', 'l', 'key')}
                else
                    break;
            }
        }
    }
% endif
% endif
% for i in range(QQ):
% if SPLIT > 1:
    if (active && sp == 0) {
% else:
    if (active${sf(i)}) {
% endif
        const size_t o = ((size_t)b * nq + q${sf(i)}) * K;
% for k in range(K):
% if PACK:
        const uint key${k} = (uint)s${k}${sf(i)};
        const real_t bd${k} = as_float((uint)(s${k}${sf(i)} >> 32));
        const int bi${k} = s${k}${sf(i)} == EMPTY ? -1 : ((key${k} & 1u) ? p${sf(i)} + (int)(key${k} >> 1) : p${sf(i)} - (int)(key${k} >> 1));
        out_idx[o + ${k}] = bi${k};
        out_dist[o + ${k}] = bi${k} < 0 ? INFINITY : ${metric.finish(METRIC, "bd%d" % k)};
% else:
        out_idx[o + ${k}] = bi${k}${sf(i)};
        out_dist[o + ${k}] = bi${k}${sf(i)} < 0 ? INFINITY : ${metric.finish(METRIC, "bd%d%s" % (k, sf(i)))};
% endif
% endfor
    }
% endfor
}
% elif VARIANT == "sorted":
__kernel __attribute__((reqd_work_group_size(${WG}, 1, 1)))
void dist_full(__global const real_t* restrict x,
               __global const int* restrict qpts, const int nq,
               __global const int* restrict lpts, const int nl,
               __global real_t* restrict out, __global real_t* restrict fin)
{
    const int j = get_global_id(0);
    const int q = get_global_id(1);
    if (j >= nl) return;
    const int p = qpts[q];
    const int l = lpts[j];
    real_t acc = (real_t)0;
% for k in reversed(range(E)):
    ${metric.step(METRIC, "acc", "x[l + %d]" % (k * TAU), "x[p + %d]" % (k * TAU), FMA)}
% endfor
    out[(size_t)q * nl + j] = acc;
    fin[(size_t)q * nl + j] = ${metric.finish(METRIC, "acc")};
}

% endif
