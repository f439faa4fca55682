## params: E, TAU, K, METRIC, REAL, WG, TILE, VARIANT, QB
## Fused time-delay embedding + distance + top-k (exact all-k-NN table).
##
## Query q is the raw-series window at kernel point qpts[q]:
## (x[p], x[p+TAU], ..., x[p+(E-1)*TAU]); the embedding is never materialised.
## The library (kernel points lpts[b*nl .. b*nl+nl-1], ascending, one list per
## batch b = get_global_id(1), e.g. CCM's sampled libraries) streams through local
## memory in tiles of TILE points shared by the work-group; each work-item keeps
## its query's K best (distance, point) in registers (an unrolled insertion
## network, so no L x L matrix exists anywhere: O(nq * K) output).
##
## Exclusion: library point l is skipped for query p when |p - l| <= radius
## (radius 0 = leave-one-out self-exclusion; radius < 0 = none).
## Tie order (deterministic, pyEDM's Simplex order): distance, then |p - l|, then l.
## Rows with fewer than K admissible neighbours are padded with index -1 and
## distance +inf.
##
## VARIANT "rows" (GPUs): one work-item per query, the tile is read as broadcasts.
## VARIANT "cols" (CPU SIMD): a work-group owns QB queries (coordinates in local
## memory); work-items are library points of the tile (TILE = WG * R), so the
## distance block is computed branch-free across SIMD lanes; a flag per query
## marks tiles holding a candidate below its current k-th distance, and only then
## does the query's owner work-item scan that row and insert (top-k in registers).
<%namespace name="metric" file="_metric.mako"/>
${metric.real_type(REAL)}
#define K ${K}
<%def name="insert(D, L, KEY)">\
{
                    real_t cd = ${D}; int ci = ${L}; int ck = ${KEY};
% for k in range(K):
                    {
                        const bool sw = cd < bd${k} || (cd == bd${k} && (bi${k} < 0 || ck < tie_key(p, bi${k})));
                        const real_t td = bd${k}; const int ti = bi${k};
                        if (sw) { bd${k} = cd; bi${k} = ci; cd = td; ci = ti; ck = tie_key(p, ti); }
                    }
% endfor
}\
</%def>

/* tie key of library point l for query p: |p - l| first, then the earlier point */
inline int tie_key(const int p, const int l) { return 2 * (int)abs(p - l) + (l > p); }

% if VARIANT == "rows":
__kernel __attribute__((reqd_work_group_size(${WG}, 1, 1)))
void knn(__global const real_t* restrict x,
         __global const int* restrict qpts, const int nq,
         __global const int* restrict lpts, const int nl,
         const int radius,
         __global int* restrict out_idx, __global real_t* restrict out_dist)
{
    const int q = get_global_id(0);
    const int lid = get_local_id(0);
    const int b = get_global_id(1);
    __global const int* lib = lpts + (size_t)b * nl;
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

    for (int base = 0; base < nl; base += ${TILE}) {
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
        for (int t = 0; t < cnt; ++t) {
            real_t acc = (real_t)0;
% for k in range(E):
            ${metric.step(METRIC, "acc", "tile[%d][t]" % k, "qv[%d]" % k)}
% endfor
            if (acc <= bd${K - 1}) {
                const int l = tidx[t];
                const int key = tie_key(p, l);
                if ((int)abs(p - l) > radius
                    && (acc < bd${K - 1} || key < tie_key(p, bi${K - 1}) || bi${K - 1} < 0)) {
                    ${insert('acc', 'l', 'key')}
                }
            }
        }
    }
    if (active) {
        const size_t o = ((size_t)b * nq + q) * K;
% for k in range(K):
        out_idx[o + ${k}] = bi${k};
        out_dist[o + ${k}] = bi${k} < 0 ? INFINITY : ${metric.finish(METRIC, "bd%d" % k)};
% endfor
    }
}
% else:
<% R = TILE // WG %>
__kernel __attribute__((reqd_work_group_size(${WG}, 1, 1)))
void knn(__global const real_t* restrict x,
         __global const int* restrict qpts, const int nq,
         __global const int* restrict lpts, const int nl,
         const int radius,
         __global int* restrict out_idx, __global real_t* restrict out_dist)
{
    const int lid = get_local_id(0);
    const int q0 = get_group_id(0) * ${QB};
    const int b = get_global_id(1);
    __global const int* lib = lpts + (size_t)b * nl;
    __local real_t qloc[${QB}][${E}];
    __local int qp[${QB}];
    __local real_t cand[${QB}][${TILE}];
    __local int cidx[${TILE}];
    __local real_t thr[${QB}];
    __local int flag[${QB}];

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
    /* the owner work-item (lid < QB) keeps its query's k best in registers */
    const int p = lid < ${QB} ? qpts[min(q0 + lid, nq - 1)] : 0;
% for k in range(K):
    real_t bd${k} = INFINITY; int bi${k} = -1;
% endfor
    barrier(CLK_LOCAL_MEM_FENCE);

    for (int base = 0; base < nl; base += ${TILE}) {
% for r in range(R):
        {
            const int t = lid + ${r * WG};
            const int li = base + t;
            const int l = li < nl ? lib[li] : -1;
            const int lr = max(l, 0);
            cidx[t] = l;
% for k in range(E):
            const real_t c${k} = x[lr + ${k * TAU}];
% endfor
% for i in range(QB):
            {
                real_t acc = (real_t)0;
% for k in range(E):
                ${metric.step(METRIC, "acc", "c%d" % k, "qloc[%d][%d]" % (i, k))}
% endfor
                const bool ok = l >= 0 && acc <= thr[${i}] && (int)abs(qp[${i}] - l) > radius;
                cand[${i}][t] = ok ? acc : INFINITY;
                if (ok) flag[${i}] = 1;
            }
% endfor
        }
% endfor
        barrier(CLK_LOCAL_MEM_FENCE);
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
        barrier(CLK_LOCAL_MEM_FENCE);
    }
    const int q = q0 + lid;
    if (lid < ${QB} && q < nq) {
        const size_t o = ((size_t)b * nq + q) * K;
% for k in range(K):
        out_idx[o + ${k}] = bi${k};
        out_dist[o + ${k}] = bi${k} < 0 ? INFINITY : ${metric.finish(METRIC, "bd%d" % k)};
% endfor
    }
}
% endif
