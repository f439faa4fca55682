## params: E, TAU, K, METRIC, REAL, WG, TILE
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
<%namespace name="metric" file="_metric.mako"/>
${metric.real_type(REAL)}
#define K ${K}

/* tie key of library point l for query p: |p - l| first, then the earlier point */
inline int tie_key(const int p, const int l) { return 2 * (int)abs(p - l) + (l > p); }

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
                    real_t cd = acc; int ci = l; int ck = key;
% for k in range(K):
                    {
                        const bool sw = cd < bd${k} || (cd == bd${k} && (bi${k} < 0 || ck < tie_key(p, bi${k})));
                        const real_t td = bd${k}; const int ti = bi${k};
                        if (sw) { bd${k} = cd; bi${k} = ci; cd = td; ci = ti; ck = tie_key(p, ti); }
                    }
% endfor
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
