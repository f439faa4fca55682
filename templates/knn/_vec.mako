## knn.cl.mako, VARIANT "vec" (QB = SIMD width 4/8/16): one query per work-item over
## a local tile like "rows", but the distance block is written in explicit vectors of
## QB library points (PoCL 3.0 does not vectorise the cols variant's work-item loop
## here, and runs vload/any/fmin builtins as calls, so none is used); a vector is
## screened by its smallest lane against the k-th distance. float32 candidates go
## into a top-k of packed keys (distance bits << 32 | tie key, _topk.mako), whose
## integer order is exactly (distance, |p - l|, l), with a branch-free min/max
## network; float64 uses the register insertion network.
## Options (GPUs): QQ queries per work-item share each tile vector (register
## blocking); SPLIT work-items per query as in "rows" (more work-items in flight when
## the queries alone leave the GPU short of them); CB > 0 buffers a work-item's
## float32 candidates in local memory and inserts them per tile (the SIMD group runs
## the network once per batch, not once per divergent lane). None of them changes
## the result.
<%namespace name="pts" file="/common/_points.mako"/>
<%namespace name="metric" file="/common/_metric.mako"/>
<%namespace name="parts" file="/knn/_parts.mako"/>
<%namespace name="topk" file="/common/_topk.mako"/>
<%namespace name="vops" file="/_vecops.mako"/>
## the buffered candidates of the query with list suffix SF into its key list (CB > 0)
<%def name="flush(SF)">\
{
            for (int f = 0; f < nb${SF}; ++f) {
                ulong cv = cbuf${SF}[f * ${WG} + lid];
                if (cv < s${K - 1}${SF}) {
                    ${topk.insert_key(K, SF)}
                }
            }
            nb${SF} = 0;
        }\
</%def>\
<%def name="kernel()">\
<% VW = QB %>
<% sf = (lambda i: "") if QQ == 1 else (lambda i: "_%d" % i) %>\
typedef ${REAL}${VW} realv_t;
#define EMPTY ((ulong)0x7F800000FFFFFFFFUL)
__kernel __attribute__((reqd_work_group_size(${WG}, 1, 1)))
void knn(${parts.knn_args()})
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
    ${parts.batch_setup()}
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
    const realv_t qv${k}${sf(i)} = (realv_t)(active${sf(i)} ? x[${pts.attr.fwd('p' + sf(i), k, TAU, NC)}] : (real_t)0);
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

${parts.tile_loop("get_group_id(0) * %d + %d" % (WG * QQ // SPLIT, WG * QQ // SPLIT // 2))}\
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
            ((__local real_t*)tilev[${k}])[t] = x[${pts.attr.fwd('lp', k, TAU, NC)}];
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
            ${metric.step(METRIC, "acc", "tilev[%d][c]" % k, "qv%d" % k, FMA, "realv_t")}
% endfor
% else:
% for i in range(QQ):
            realv_t acc${sf(i)} = (realv_t)0;
% endfor
% for k in reversed(range(E)):
            {
                const realv_t tv = tilev[${k}][c];
% for i in range(QQ):
                ${metric.step(METRIC, "acc" + sf(i), "tv", "qv%d%s" % (k, sf(i)), FMA, "realv_t")}
% endfor
            }
% endfor
% endif
% for i in range(QQ):
<% acc = "acc" + sf(i); s = lambda k: "s%d%s" % (k, sf(i)); bd = lambda k: "bd%d%s" % (k, sf(i)); bi = lambda k: "bi%d%s" % (k, sf(i)); pp = "p" + sf(i) %>\
            /* any lane a candidate: the smallest lane against the k-th distance, by a
               min tree of halves (PoCL 3.0 runs any()/fmin() as calls; Oclgrind's
               uninitialised-value plugin crashes on reductions of compare masks) */
% if PACK and INL:
            {   /* INL (PoCL): the candidate lanes as bits (an OR tree of halves), visited
                   lowest first, instead of a min tree and a test of every lane */
${vops.lane_bits(INL, "%s <= (realv_t)as_float((uint)(%s >> 32))" % (acc, s(K - 1)), VW, "h_", "o")}\
                for (uint cb_ = o1_; cb_ != 0u; cb_ &= cb_ - 1u) {
                    const int j = ${vops.ctz(INL, "cb_", "uint")};
% else:
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
% endif
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
                        if (++nb${sf(i)} == ${CB}) ${flush(sf(i))}
% else:
                        ulong cv = key;
                        ${topk.insert_key(K, sf(i))}
% endif
                    }
% else:
                    const real_t a = ((real_t*)&${acc})[j];
                    const int l = tidx[c * ${VW} + j];
                    if (a <= ${bd(K - 1)} && l >= 0) {
                        const int key = tie_key(${pp}, l);
                        if (dist_rows(${pp}, l) > radius
                            && (a < ${bd(K - 1)} || key < tie_key(${pp}, ${bi(K - 1)}) || ${bi(K - 1)} < 0)) {
                            ${topk.insert_reg(K, 'a', 'l', 'key', sf(i), pp)}
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
        ${flush(sf(i))}
% endfor
% endif
    }
% if SPLIT > 1:
<% QW = WG // SPLIT %>\
${parts.merge_split(QW, PACK, "a")}\
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
${parts.store(k)}\
% else:
${parts.store(k, sf(i))}\
% endif
% endfor
    }
% endfor
}
</%def>
