## knn.cl.mako, VARIANT "cols" (CPU SIMD): a work-group owns QB queries (coordinates
## in local memory); work-items are library points of the tile (TILE = WG * R), so the
## distance block is computed branch-free across SIMD lanes; a flag per query marks
## tiles holding a candidate below its current k-th distance, and only then is that
## row scanned and its candidates inserted: INS "reg" by the query's owner work-item
## into a register top-k (compare-swap network), INS "local" by one work-item for all
## QB queries into sorted top-k lists in local memory (a short shifting insertion: no
## SIMD lanes sit masked through a full network). FLAG=0 replaces the per-query flag
## by a per-lane candidate bit mask stored unconditionally: the distance block is then
## free of conditional stores, which PoCL's loop vectoriser needs; Intel's vectoriser
## masks the flag stores fine (FLAG=1).
## INS "mask" (FLAG=0, TILE <= 32): the lane bits are transposed into one candidate
## word per query (vectorised across queries), so the serial scan visits only
## candidate lanes.
<%namespace name="pts" file="/common/_points.mako"/>
<%namespace name="metric" file="/common/_metric.mako"/>
<%namespace name="parts" file="/knn/_parts.mako"/>
<%namespace name="topk" file="/common/_topk.mako"/>
<%def name="kernel()">\
<% R = TILE // WG %>
__kernel __attribute__((reqd_work_group_size(${WG}, 1, 1)))
void knn(${parts.knn_args()})
{
    const int lid = get_local_id(0);
    const int q0 = get_group_id(0) * ${QB};
    ${parts.batch_setup()}
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
        qloc[i][${k}] = x[${pts.attr.fwd('pp', k, TAU, NC)}];
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

${parts.tile_loop("q0 + %d" % (QB // 2))}\
% for r in range(R):
        {
            const int t = lid + ${r * WG};
            const int li = base + t;
            const int l = li < nl ? lib[li] : -1;
            const int lr = l < 0 ? 0 : l;
            cidx[t] = l;
% for k in range(E):
            const real_t c${k} = x[${pts.attr.fwd('lr', k, TAU, NC)}];
% endfor
% if INS != "reg" and not FLAG:
            unsigned int bits = 0u;
% endif
% for i in range(QB):
            {
                ${parts.distance("acc", "c%d", "qloc[" + str(i) + "][%d]", "thr[%d]" % i)}
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
                        ${topk.insert_reg(K, 'acc', 'l', 'key')}
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
                        ${topk.shift_insert("i", "", "K", "d", "l", "key", "pq")}
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
${parts.store(k)}\
% endfor
    }
% else:
    for (int e = lid; e < ${QB} * K; e += ${WG}) {
        const int i = e / K, k = e % K, q = q0 + i;
        if (q < nq) {
            const int l = topi[i][k];
            out_idx[((size_t)b * nq + q) * K + k] = l;
            out_dist[((size_t)b * nq + q) * K + k] = l < 0 ? INFINITY : ${"topd[i][k]" if context.get("RAW", 0) else metric.finish(METRIC, "topd[i][k]")};
        }
    }
% endif
}
</%def>
