## params: EMAX, TAU, KNN, METRIC, REAL, WG, TILE, QB, SPLIT, INS, VEC, ANY, LPB, FMA, ORD, INL, CQ
## version: 1
## legacy-hashes: e8c24d86159cdd4c
## Embedding-dimension scan: the exact k-NN tables of E = 1..EMAX in one pass.
##
## Works in TIME coordinates: the vector at time t is (x_t, x_{t-TAU}, ...,
## x_{t-(E-1)TAU}) (TAU > 0, past lags), so the squared distance at E is the one at
## E-1 plus one coordinate: per (query, library point) pair the kernel adds the
## coordinates newest-first once and, after coordinate E, compares the partial sum
## with that query's current K_E-th best at E (K_E = E + 1, or KNN for every E when
## KNN > 0). ~EMAX adds + EMAX compares per pair instead of ~EMAX^2/2 for EMAX
## separate k-NN runs. The accumulation order (x_t first) is the per-E kernel's
## (knn.cl.mako adds coordinates newest-first too), so every table is bit-identical
## to knn.cl.mako's for that E (contraction is off, see _metric.mako; with FMA=1
## both use fma() per coordinate).
##
## x is the series padded with PAD = (EMAX-1)*TAU leading values (any finite) and
## enough trailing ones that every lane's loads are in bounds: x[PAD + t] = x_t.
## ints (one buffer): obs[nq] (skill's rows, unused here) | qt[nq] (query times) |
## qemax[nq] (largest E at which the query is a prediction row) | lmask[...] (per
## library lane li, time t0 + li: bit E-1 set iff t0 + li is a library row at E;
## the library rows of E are nested in those of E-1, the host checks it). Lanes past
## the library have mask 0, so the library is a dense time range: contiguous loads.
##
## Exclusion: library time l is skipped for query time p when |p - l| <= radius.
## Tie order (pyEDM's, as knn.cl.mako): distance, then |p - l|, then l.
## Tile order ORD as knn.cl.mako's (0: ascending; 1: the tiles of a chunk nearest in
## time to the group's queries first, which keeps the per-E thresholds tight from the
## start on flows and smooth series; the result does not depend on it).
##
## A work-group owns QB queries (coordinates in local memory) and streams its share
## of the library in tiles of TILE = WG * R * VEC lanes. Distance phase (branch-free):
## per lane and query the partial sums over E and a candidate bit mask (bit E-1:
## partial sum <= current threshold at E, library row at E, outside the exclusion
## radius), stored unconditionally. VEC > 1 (CPUs): each work-item computes VEC
## consecutive library lanes with explicit vector types (vload, vector compares):
## PoCL's implicit work-item-loop vectoriser picks 4 lanes here at best, explicit
## float16 uses the full AVX-512 width. VEC == 1: one lane per work-item (GPUs).
## ANY (VEC == 1 only): lanes with a candidate OR their mask into a per-query word
## (local atomic_or, double-buffered per tile) so that the insertion phase skips
## queries / (query, E) lists without candidates at once (most, after the first
## tiles). Insertion phase: INS "q": the work-item owning query i walks the tile's
## masks, recomputes the flagged lane's partial sums (same operations, so the same
## values) and inserts into the sorted top-K_E lists in local memory (a short
## shifting insertion from the list's first empty entry: `fill` counts each list's
## entries); INS "qe": one work-item per (query, E) list (more parallel: GPUs), the
## tasks E-major (a warp's lists of one E).
## Thresholds are refreshed after each tile. CQ (with "qe" and ANY): a lane with a
## candidate for a query also appends its tile index to that query's list
## (clist, a local atomic_inc on ncand, double-buffered like qany), and a (query, E)
## work-item visits only those lanes instead of the whole tile. They come in the order
## the atomics ran; a sorted top-K under a total order holds the best K of its
## candidates whatever order they arrive in, so the tables do not change.
##
## Series batching: grid dimension 2 runs one scan per series b (x + xoff + b * xstride, output
## block b), all with one layout (ints): the all-to-all map's tables of many libraries.
##
## SPLIT > 1: the library is cut into SPLIT chunks (grid dimension 1), each group
## writes its raw (squared) partial lists to out_*; kernel knn_scan_merge merges the
## SPLIT sorted lists per (E, query) by the same total order (result independent of
## SPLIT). Output: idx (EMAX, nq, KMAX) library times, -1 past K_E / when fewer are
## admissible; dist finished (sqrt for euclidean), +inf there. RAW=1 (given only then):
## the accumulated distances, unfinished, for a merge of lists that orders them as the
## scan did (knn/window.cl.mako: the all-to-all map's lag scan).
##
## INS "key" (CPUs): one query per work-item, every E's list in private memory, the
## library in explicit vectors straight from the series (_keys.mako). INL (the host's
## choice, 1 on PoCL): its vector loads, lane masks and list shifts in the inline forms
## of /_vecops.mako, and the tables' square roots as clang's built-in (common/_metric.mako).
##
## Parts: the distance phase in _distance.mako, the insertion phase in _insert.mako, the
## merge kernel in _merge.mako, the "key" kernel in _keys.mako; the tie order and the
## sorted lists' insertion in common/_topk.mako (shared with knn).
<%namespace name="metric" file="/common/_metric.mako"/>\
<%namespace name="order" file="/common/_order.mako"/>\
<%namespace name="topk" file="/common/_topk.mako"/>\
<%namespace name="distance" file="/knn_scan/_distance.mako"/>\
<%namespace name="merge" file="/knn_scan/_merge.mako"/>\
<%namespace name="keys" file="/knn_scan/_keys.mako"/>\
<%namespace name="insert" file="/knn_scan/_insert.mako"/>\
<%
    KS = [KNN if KNN > 0 else E + 1 for E in range(1, EMAX + 1)]
    OFF = [sum(KS[:j]) for j in range(EMAX)]
    KT = sum(KS)
    KMAX = max(KS)
    R = TILE // (WG * VEC)
    PAD = (EMAX - 1) * TAU
    assert (INS == "key" or TILE % (WG * VEC) == 0) and EMAX <= 32 and TAU > 0 and not (ANY and VEC > 1)
    assert not CQ or (INS == "qe" and ANY and TILE <= 65536)
%>\
${metric.real_type(REAL)}
#define PAD ${PAD}
#define KMAX ${KMAX}

${topk.functions()}\
% if ORD:

${order.near_tile()}
% endif

% if INS == "key":
${keys.kernel(KS)}\
% else:
__constant int KS[${EMAX}] = {${", ".join(str(k) for k in KS)}};
__constant int OFF[${EMAX}] = {${", ".join(str(o) for o in OFF)}};




__kernel __attribute__((reqd_work_group_size(${WG}, 1, 1)))
void knn_scan(__global const real_t* restrict x, __global const int* restrict ints,
              const int nq, const int t0, const int chunk, const int radius,
              __global int* restrict out_idx, __global real_t* restrict out_dist,
              const uint xoff, const uint xstride)
{
    /* series batching (grid dimension 2): series b at x + xoff + b * xstride, one
       output block (SPLIT, EMAX, nq, KMAX) per series; one layout (ints) for all */
    {
        const size_t b = get_global_id(2);
        x += xoff + b * (size_t)xstride;
        out_idx += b * ${SPLIT * EMAX} * (size_t)nq * KMAX;
        out_dist += b * ${SPLIT * EMAX} * (size_t)nq * KMAX;
    }
    const int lid = get_local_id(0);
    const int q0 = get_group_id(0) * ${QB};
    const int s = get_global_id(1);
    __global const int* qt = ints + nq;
    __global const int* qemax = ints + 2 * nq;
    __global const int* lmask = ints + 3 * nq;
    __local real_t qloc[${QB}][${EMAX}];
    __local real_t thr[${QB}][${EMAX}];
    __local int qp[${QB}];
    __local int qem[${QB}];
    __local unsigned int cbits[${QB}][${TILE}];
    __local unsigned int qany[2][${QB}];  /* OR of a tile's masks per query (double-buffered) */
% if CQ:
    __local int ncand[2][${QB}];  /* a tile's candidate lanes per query (double-buffered) */
    __local ushort clist[${QB}][${TILE}];  /* ... and the lanes, in any order */
% endif
    __local real_t topd[${QB}][${KT}];
    __local int topi[${QB}][${KT}];
    __local ushort fill[${QB}][${EMAX}];  /* entries each list holds, its empty ones after them */

    for (int i = 0; i < ${QB}; ++i) {
        for (int e = lid; e < ${KT}; e += ${WG}) {
            topd[i][e] = INFINITY;
            topi[i][e] = -1;
        }
    }
    for (int i = lid; i < ${QB}; i += ${WG}) {
        const int q = q0 + i;
        const int p = q < nq ? qt[q] : 0;
        const int em = q < nq ? qemax[q] : 0;
        qp[i] = p;
        qem[i] = em;
        qany[0][i] = 0u;
        qany[1][i] = 0u;
% if CQ:
        ncand[0][i] = 0;
        ncand[1][i] = 0;
% endif
% for j in range(EMAX):
        qloc[i][${j}] = x[PAD + p - ${j * TAU}];
        thr[i][${j}] = ${j} < em ? INFINITY : (real_t)-1;
        fill[i][${j}] = 0;
% endfor
    }
    barrier(CLK_LOCAL_MEM_FENCE);

    const int lo = s * chunk;
    int cur = 0;
% if ORD:
    /* this chunk's tiles nearest in time to the group's queries first (lane li is
       time t0 + li) */
    const int ntile = chunk / ${TILE};
    int ctile;
    {
        const int d = qt[min(q0 + ${QB // 2}, nq - 1)] - t0 - lo;
        ctile = d < 0 ? 0 : min(d / ${TILE}, ntile - 1);
    }
    for (int it = 0; it < ntile; ++it, cur ^= 1) {
        const int base = lo + near_tile(it, ctile, ntile) * ${TILE};
% else:
    for (int base = lo; base < lo + chunk; base += ${TILE}, cur ^= 1) {
% endif
${distance.phase(R)}\
        barrier(CLK_LOCAL_MEM_FENCE);
${insert.phase(KS, OFF)}\
        barrier(CLK_LOCAL_MEM_FENCE);
    }

    /* out: (SPLIT, EMAX, nq, KMAX); SPLIT == 1 writes the finished table. A loop over E,
       not unrolled: 20 inlined copies of the correctly rounded square root were most of
       the program, tripling its build time for the same kernel time */
    for (int i = 0; i < ${QB}; ++i) {
        const int q = q0 + i;
        if (q >= nq) break;
        #pragma unroll 1
        for (int j = 0; j < ${EMAX}; ++j) {
            const int O = OFF[j], K = KS[j];
            for (int k = lid; k < KMAX; k += ${WG}) {
                const int l = k < K ? topi[i][O + k] : -1;
                const real_t d = topd[i][O + min(k, K - 1)];
                const size_t o = (((size_t)s * ${EMAX} + j) * nq + q) * KMAX + k;
                out_idx[o] = l;
% if SPLIT == 1 and not context.get("RAW", 0):
                out_dist[o] = l < 0 ? INFINITY : ${metric.finish(METRIC, "d")};
% else:
                out_dist[o] = l < 0 ? INFINITY : d;
% endif
            }
        }
    }
}

% if SPLIT > 1:
${merge.kernel()}
% endif
% endif
