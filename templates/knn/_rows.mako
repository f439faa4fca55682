## knn.cl.mako, VARIANT "rows" (GPUs): SPLIT work-items per query (WG / SPLIT queries
## per group), each scanning every SPLIT-th point of each tile (broadcast reads) into
## its own register top-k; the SPLIT partial lists merge through local memory at the
## end (same total order, so the result does not depend on SPLIT). SPLIT > 1 keeps a
## GPU busy when there are few queries. SLIDE > 0: a contiguous library's tile as raw
## values, scanned in blocks of SLIDE points (_slide.mako).
<%namespace name="pts" file="/common/_points.mako"/>
<%namespace name="parts" file="/knn/_parts.mako"/>
<%namespace name="near" file="/knn/_near.mako"/>
<%namespace name="topk" file="/common/_topk.mako"/>
<%namespace name="slide" file="/knn/_slide.mako"/>
<%def name="kernel()">\
__kernel __attribute__((reqd_work_group_size(${WG}, 1, 1)))
void knn(${parts.knn_args()})
{
<% QW = WG // SPLIT %>
    const int lid = get_local_id(0);
% if SLIDE and SPLIT == 1:
    const int qi = lid;
    const int sp = 0;
% else:
    const int qi = lid % ${QW};
    const int sp = lid / ${QW};
% endif
    const int q = get_group_id(0) * ${QW} + qi;
    ${parts.batch_setup()}
% if SLIDE:
${slide.decl()}\
% else:
    __local real_t tile[${E}][${TILE}];
    __local int tidx[${TILE}];
% endif

    const bool active = q < nq;
    const int p = active ? qpts[q] : 0;
    real_t qv[${E}];
% for k in range(E):
    qv[${k}] = active ? x[${pts.attr.fwd('p', k, TAU, NC)}] : (real_t)0;
% endfor
% for k in range(near.attr.reg_entries(K, NEAR, SPLIT)):
    real_t bd${k} = INFINITY; int bi${k} = -1;
% endfor
${near.setup()}\

${parts.tile_loop("get_group_id(0) * %d + %d" % (QW, QW // 2))}\
% if SLIDE:
${slide.load()}\
${slide.scan()}\
% else:
        barrier(CLK_LOCAL_MEM_FENCE);
        for (int t = lid; t < ${TILE}; t += ${WG}) {
            const int li = base + t;
            const int lp = li < nl ? lib[li] : 0;
            tidx[t] = li < nl ? lp : -1;
% for k in range(E):
            tile[${k}][t] = x[${pts.attr.fwd('lp', k, TAU, NC)}];
% endfor
        }
        barrier(CLK_LOCAL_MEM_FENCE);
        const int cnt = min(${TILE}, nl - base);
        for (int t = sp; t < cnt; t += ${SPLIT}) {
            ${parts.offer("tile[%d][t]", "tidx[t]")}\
        }
% endif
    }
% if SPLIT > 1:
${parts.merge_split(QW, False, "acc")}\
% endif
    if (active && sp == 0) {
${near.clear()}\
        const size_t o = ((size_t)b * nq + q) * K;
% for k in range(K):
${parts.store_entry(k)}\
% endfor
    }
}
</%def>
