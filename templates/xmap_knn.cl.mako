## params: E, TAU, K, REAL, WG, TILE
## Batched all-k-NN tables for the all-to-all map: one launch builds the tables
## of B library series at once (batch b = get_global_id(1) is series
## base0 + b * stride of the flattened data), so a GPU is filled even when one
## series has only a few thousand points (one table per launch would occupy a
## few dozen work-groups).
##
## Same neighbours, distances and order as the EDM k-NN kernel (knn.cl.mako):
## queries qpts[0..nq) and library lpts[0..nl) (kernel points of the series,
## library ascending; the same list for cross mapping); the squared
## distance accumulates coordinate by coordinate with fma (as _metric.mako's
## euclidean step), then sqrt; point l is skipped for query p when
## |p - l| <= radius; order: distance, then |p - l|, then l. Since that order is
## total, any exact top-k gives the same table bit for bit. Output indices are
## the series' own kernel points (-1 / +inf padding when fewer than K).
## One work-item per query; library tiles of TILE points in local memory.
<%namespace name="metric" file="_metric.mako"/>
${metric.real_type(REAL)}
#define K ${K}

inline int tie_key(const int p, const int l) { return 2 * (int)abs(p - l) + (l > p); }

__kernel __attribute__((reqd_work_group_size(${WG}, 1, 1)))
void knn_batch(__global const real_t* restrict x, __global const int* restrict qpts,
               const int nq, __global const int* restrict lpts, const int nl,
               const int base0, const int stride, const int radius,
               __global int* restrict out_idx, __global real_t* restrict out_dist)
{
    const int q = get_global_id(0);
    const int lid = get_local_id(0);
    const int b = get_global_id(1);
    __global const real_t* xs = x + (size_t)base0 + (size_t)b * stride;
    __local real_t tile[${E}][${TILE}];
    __local int tidx[${TILE}];

    const bool active = q < nq;
    const int p = active ? qpts[q] : 0;
    real_t qv[${E}];
% for k in reversed(range(E)):
    qv[${k}] = xs[p + ${k * TAU}];
% endfor
% for k in range(K):
    real_t bd${k} = INFINITY; int bi${k} = -1;
% endfor
    for (int base = 0; base < nl; base += ${TILE}) {
        barrier(CLK_LOCAL_MEM_FENCE);
        for (int t = lid; t < ${TILE}; t += ${WG}) {
            const int li = base + t;
            const int lp = li < nl ? lpts[li] : lpts[nl - 1];
            tidx[t] = li < nl ? lp : -1;
% for k in reversed(range(E)):
            tile[${k}][t] = xs[lp + ${k * TAU}];
% endfor
        }
        barrier(CLK_LOCAL_MEM_FENCE);
        const int cnt = min(${TILE}, nl - base);
        for (int t = 0; t < cnt; ++t) {
            real_t acc = (real_t)0;
% for k in reversed(range(E)):
            ${metric.step("euclidean", "acc", "tile[%d][t]" % k, "qv[%d]" % k)}
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
        out_dist[o + ${k}] = bi${k} < 0 ? INFINITY : ${metric.finish("euclidean", "bd%d" % k)};
% endfor
    }
}
