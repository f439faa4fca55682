## params: K, REAL, METRIC, NB
## The k-NN tables of NB library chunks merged into one: query q's lists (NB, nq, K) of
## accumulated distances (the knn kernel with RAW=1), each sorted in the kernel's total
## order (distance, then tie_key), give the K first entries of that order over all
## chunks, finished as the knn kernel finishes them. Chunks may overlap (a point in two
## chunks comes with the same distance and key: kept once), so the merged table equals
## one launch's over the whole library bit for bit.
<%namespace name="metric" file="/common/_metric.mako"/>\
<%namespace name="topk" file="/common/_topk.mako"/>\
${metric.real_type(REAL)}
#define K ${K}

${topk.functions()}\

__kernel void knn_merge(__global const int* restrict qpts, const int nq,
                        __global const int* restrict in_idx,
                        __global const real_t* restrict in_dist,
                        __global int* restrict out_idx, __global real_t* restrict out_dist)
{
    const int q = get_global_id(0);
    if (q >= nq) return;
    const int p = qpts[q];
% for k in range(K):
    real_t bd${k} = INFINITY; int bi${k} = -1;
% endfor
    for (int b = 0; b < ${NB}; ++b) {
        const size_t o = ((size_t)b * nq + q) * K;
        for (int j = 0; j < K; ++j) {
            const int l = in_idx[o + j];
            if (l < 0) break;
            const real_t d = in_dist[o + j];
            const int key = tie_key(p, l);
            /* a sorted list: once an entry does not enter, no later one does */
            if (!(d < bd${K - 1} || (d == bd${K - 1} && (bi${K - 1} < 0 || key < tie_key(p, bi${K - 1})))))
                break;
            if (${" || ".join("bi%d == l" % k for k in range(K))})
                continue;  /* the same point from an overlapping chunk */
            ${topk.insert_reg(K, 'd', 'l', 'key')}
        }
    }
    const size_t o = (size_t)q * K;
% for k in range(K):
    out_idx[o + ${k}] = bi${k};
    out_dist[o + ${k}] = bi${k} < 0 ? INFINITY : ${metric.finish(METRIC, "bd%d" % k)};
% endfor
}
