## knn_scan.cl.mako, INS "key" (CPUs): one query per work-item (QB == WG), its lists of
## every E in private memory, no local memory and no barriers. The library is read
## straight from the padded series in explicit vectors of VEC consecutive times (past
## lags: coordinate j of lane l is x[PAD + l - j TAU], so each coordinate is one
## contiguous load). Per vector: the partial sums over E newest-first (the per-E
## kernel's order), a candidate bit per (lane, E) against the list's current k-th
## distance, the library-row and exclusion masks; a lane bit mask (an OR tree of
## halves) skips the vector when no lane is a candidate at any E (almost all once the
## lists are full) and else visits only the candidate lanes. A candidate lane's
## partial sums are recomputed in scalars (same operations, so the same values) and
## inserted into the lists whose bit it has: float32 as packed keys (distance bits <<
## 32 | tie key, whose integer order is the total order) kept as the sorted lanes of
## one or two ulong16 per E up to 32 keys (`insert_lanes`: ten lists of scalar keys
## left too few registers for the vector loop), a list of K <= 8 keys in the narrowest
## ulong2/4/8 that holds it (fewer registers and moves), else through the branch-free min/max network; float64
## through the register network (common/_topk.mako). TILE: library lanes per step of the
## tile order ORD (visited nearest to this work-item's query first). SPLIT == 1.
## LPB (0, or a multiple of VEC up to 64): the candidate tests of LPB library lanes
## (LPB / VEC vectors) are made before one branch on their OR, whose set bits are then
## visited in lane order. About a third of the vectors hold a candidate, so a branch per
## vector is mispredicted often and each miss drains the vector loop; a candidate found
## with a threshold that an earlier lane of the group has since lowered is rejected by
## the insertion's own test, so the lists do not change.
## Vectors whose lanes are all rows at every E and outside the exclusion radius (all but
## a few near the library's ends and the query) skip the masks: the first pass takes the
## plain minima, the main pass no mask test (the same tables, fewer operations). A library of segments (gaps inside) keeps the masks.
## The first thresholds (and `admissible`) are in _keys_first.mako, the tables' write-out
## in _keys_out.mako.
<%namespace name="metric" file="/common/_metric.mako"/>
<%namespace name="topk" file="/common/_topk.mako"/>
<%namespace name="vec" file="/_vecops.mako"/>
<%namespace name="first" file="/knn_scan/_keys_first.mako"/>
<%namespace name="out" file="/knn_scan/_keys_out.mako"/>
<%def name="kernel(KS)">\
<%
    PACK = REAL == "float"
    VW = VEC
    NV = TILE // VW
    RV = "%s%d" % (REAL, VW); IV = "int%d" % VW; UV = "uint%d" % VW
    KMAX_ = max(KS)
    NM = 2 if KMAX_ > VW else 1  # lane-minimum vectors per E (K <= NM * VW gets a first threshold)
    CT = "long" if REAL == "double" else "int"
    CH = max(1, LPB // VW)  # vectors whose candidate tests share one branch
    MT = "ulong" if CH * VW > 32 else "uint"  # their candidate lanes as one bit mask
    MB = 64 if CH * VW > 32 else 32
    IVC = "%s%d" % (CT, VW)
    assert QB == WG and SPLIT == 1 and VW > 1 and TILE % (NM * VW) == 0 and NV % CH == 0
    assert CH * VW <= 64
    # each E's float32 key list as sorted ulong16 lanes: one vector up to 16 keys, two
    # (L: keys 0-15, H: 16-31) up to 32; else scalar keys
    VL = (1 if KMAX_ <= 16 else 2) if PACK and KMAX_ <= 32 else 0
    # lanes of E's lower vector: the smallest of 2, 4, 8, 16 that holds its K keys
    # (fewer registers for the small-E lists, and half the work per insertion)
    LW = [max(2, min(16, 1 << (k - 1).bit_length())) for k in KS]
    def ks(k, j):  # list entry k of E = j + 1
        if not VL:
            return "s%d_%d" % (k, j)
        return "L%d.s%x" % (j, k) if k < 16 else "H%d.s%x" % (j, k - 16)
%>\
${vec.ops(INL, types=(RV, UV, IV))}\
#define EMPTY ((ulong)0x7F800000FFFFFFFFUL)
/* vec_type_hint: the work is already in explicit vectors; without it Intel's CPU
   compiler also vectorises across work-items and runs every lane's divergent
   insertion path for all of them (measured 2.4x slower, E=1..10, n=1,000) */
__kernel __attribute__((reqd_work_group_size(${WG}, 1, 1))) __attribute__((vec_type_hint(${RV})))
void knn_scan(__global const real_t* restrict x, __global const int* restrict ints,
              const int nq, const int t0, const int chunk, const int radius,
              __global int* restrict out_idx, __global real_t* restrict out_dist,
              const uint xoff, const uint xstride)
{
    {
        const size_t b = get_global_id(2);
        x += xoff + b * (size_t)xstride;
        out_idx += b * ${EMAX} * (size_t)nq * KMAX;
        out_dist += b * ${EMAX} * (size_t)nq * KMAX;
    }
    const int q = get_global_id(0);
    if (q >= nq) return;  /* no barriers: a work-item past the queries leaves */
    __global const int* lmask = ints + 3 * nq;
    const int p = ints[nq + q];
    const int em = ints[2 * nq + q];
    /* library lanes lf .. hf - 1: rows at every E, every mask all ones (else none: a
       library of segments has gaps inside) */
    int lf = 0, hf = chunk;
    {
        const uint full = ${"0x%xu" % ((1 << EMAX) - 1)};
        while (lf < chunk && lmask[lf] != full) ++lf;
        while (hf > lf && lmask[hf - 1] != full) --hf;
        int li = lf;
        for (; li + ${VW} <= hf; li += ${VW})
            if (VANY(${vec.load(INL, UV, "(__global const uint*)lmask + li")} != (${UV})full)) break;
        for (; li < hf; ++li)
            if ((uint)lmask[li] != full) break;
        if (li < hf) hf = lf;
    }
% for j in range(EMAX):
    const real_t qv${j} = x[PAD + p - ${j * TAU}];
    /* the k-th distance at E = ${j + 1}; -1: not a prediction row at that E */
    real_t th${j} = ${j} < em ? INFINITY : (real_t)-1;
% endfor
% for j in range(EMAX):
% if VL:
    ulong${LW[j]} L${j} = (ulong${LW[j]})EMPTY;
% if KS[j] > 16:
    ulong16 H${j} = (ulong16)EMPTY;
% endif
% else:
% for k in range(KS[j]):
% if PACK:
    ulong s${k}_${j} = EMPTY;
% else:
    real_t bd${k}_${j} = INFINITY; int bi${k}_${j} = -1;
% endif
% endfor
% endif
% endfor

${first.thresholds(KS, NM, VW, RV, IV, UV, IVC)}\

% if ORD:
    const int ntile = chunk / ${TILE};
    int ctile;
    {
        const int d = p - t0;
        ctile = d < 0 ? 0 : min(d / ${TILE}, ntile - 1);
    }
    for (int it = 0; it < ntile; ++it) {
        const int base = near_tile(it, ctile, ntile) * ${TILE};
% else:
    for (int base = 0; base < chunk; base += ${TILE}) {
% endif
        for (int c = 0; c < ${NV}; c += ${CH}) {
% for h in range(CH):
            ${UV} cand${h};
            uint any${h};
            {
                const int li = base + (c + ${h}) * ${VW};
                const int l = t0 + li;
                ${RV} acc = (${RV})0;
                ${UV} cand = (${UV})0u;
% for j in range(EMAX):
                {
                    const ${RV} cj = ${vec.load(INL, RV, "x + (PAD - %d) + l" % (j * TAU))};
                    ${metric.step(METRIC, "acc", "cj", "(%s)qv%d" % (RV, j), FMA, RV)}
% if REAL == "double":
                    cand |= convert_${UV}(-(acc <= (${RV})th${j})) << ${j}u;
% else:
                    cand |= as_${UV}(acc <= (${RV})th${j}) & (${UV})${"%du" % (1 << j)};
% endif
                }
% endfor
                if (!(${first.admissible("li", VW)}))
                {
                    ${IV} dd = ((${IV})(l) + (${IV})(${", ".join(str(v) for v in range(VW))})) - (${IV})p;
                    dd = dd < 0 ? -dd : dd;
                    cand &= as_${UV}(dd > (${IV})radius) & as_${UV}(${vec.load(INL, IV, "lmask + li")});
                }
${vec.lane_bits(INL, "cand != (%s)0u" % UV, VW, "hit", "any")}\
                cand${h} = cand;
                any${h} = any1_;
            }
% endfor
            const ${MT} anyc = ${" | ".join("((%s)any%d << %d)" % (MT, h, h * VW) for h in range(CH))};
            if (anyc == 0) continue;
            for (${MT} lanes = anyc; lanes != 0; lanes &= lanes - 1) {
                const int bit = ${vec.ctz(INL, "lanes", MT)};
                const int hh = bit / ${VW};
                const int lane = bit - hh * ${VW};
% if CH == 1:
                const uint bits = ((const uint*)&cand0)[lane];
% else:
                const uint bits = ${" : ".join("hh == %d ? ((const uint*)&cand%d)[lane]" % (h, h) for h in range(CH - 1))} : ((const uint*)&cand${CH - 1})[lane];
% endif
                const int ll = t0 + base + (c + hh) * ${VW} + lane;
                const int dr = dist_rows(p, ll);
                const uint tk = (uint)(2 * dr + (ll > p));
                real_t a = (real_t)0;
% for j in range(EMAX):
                ${metric.step(METRIC, "a", "x[PAD + ll - %d]" % (j * TAU), "qv%d" % j, FMA)}
                if (bits >> ${j}) {
                    if ((bits >> ${j}) & 1u) {
% if PACK:
% if METRIC == "maximum":
                        /* -0 + 0 = +0: the key's bit order is the value order */
                        ulong cv = ((ulong)as_uint(a + (real_t)0) << 32) | tk;
% else:
                        ulong cv = ((ulong)as_uint(a) << 32) | tk;
% endif
                        if (cv < ${ks(KS[j] - 1, j)}) {
% if VL:
                            ${topk.insert_lanes("L%d" % j, "H%d" % j if KS[j] > 16 else None, LW[j], INL)}
% else:
                            ${topk.insert_key(KS[j], "_%d" % j)}
% endif
                            {   /* never above the first threshold (the list fills up first) */
                                const real_t kd = as_float((uint)(${ks(KS[j] - 1, j)} >> 32));
                                th${j} = kd < th${j} ? kd : th${j};
                            }
                        }
% else:
                        if (a < bd${KS[j] - 1}_${j} || (a == bd${KS[j] - 1}_${j} && (bi${KS[j] - 1}_${j} < 0 || (int)tk < tie_key(p, bi${KS[j] - 1}_${j})))) {
                            const int key = (int)tk;
                            ${topk.insert_reg(KS[j], "a", "ll", "key", "_%d" % j, "p")}
                            th${j} = bd${KS[j] - 1}_${j} < th${j} ? bd${KS[j] - 1}_${j} : th${j};
                        }
% endif
                    }
% endfor
% for j in range(EMAX):
                }
% endfor
            }
        }
    }

${out.tables(KS, LW, VL, PACK)}\
}
</%def>
