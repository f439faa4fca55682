## params: K, REAL, ACC, WG, WEIGHT, TJ, VEC, LANES, LWG, PF, LB, LMAJ, CM, ST, CH, SPL, PR, INL, KR, O32, PIW, FS
## version: 1
## legacy-hashes: 2d017211375239c9
## All-to-all cross mapping: one k-NN table per library series, reused for many
## targets, skill reduced on the device (no prediction is ever stored).
##
## pack: turns the k-NN tables (series-local kernel points or times, distances) of
##   libraries b0 + get_global_id(1) into the lookup weights w = exp(-d / d_min)
##   (the points are kept, -1 where none), and the weight sum per
##   query (0 when the query has no valid prediction), once per library; WEIGHT "ccm"
##   packs the weights over their sum in real_t instead (common/_lookup.mako's `norm`:
##   the skill then sums weight x target in real_t and divides nothing). The
##   weights are common/_lookup.mako's, as in simplex_lookup.cl.mako's `lookup` (same
##   operations in the same order), so the fused skill below reproduces pyedmcl.ccm
##   bit for bit. WEIGHT "ccm": zero distances get weight 1 (others 0) when
##   d_min == 0 and a query with fewer than K admissible neighbours predicts NaN
##   (pyEDM CCM); "simplex": d_min floored at 1e-6 (pyEDM Simplex).
## xmap_skill: one work-group per (TJ targets, packed library b): the table row of
##   each query is read once for TJ targets; it predicts every query (weighted average
##   of the target at the neighbours' times + tshift) and reduces Pearson rho against
##   the target at obs[q] (< 0: no observation), with the same per-work-item streaming
##   statistics and pairwise merge tree as simplex_lookup.cl.mako's `skill`
##   (common/_stats.mako). diag != 0 (embedding scans): library b predicts its own
##   series tgt[0] + b, written to column ocol[0]. WEIGHT "ccm" applies pyEDM CCM's
##   rules: fewer than 3 pairs -> NaN, zero variance -> 0.
##   Two layouts, parts of this folder: LANES = 0 (_groups.mako: targets per
##   work-group; scalar, VEC vector lanes or PF pipelined query loop; LB libraries per
##   work-group) and LANES = 1 (_lanes.mako: targets as work-items, coalesced reads);
##   both give the same rho bit for bit. CM (LANES = 1): pack writes each library's
##   rows by query class (_skill.mako's class_start / in_class), K entries per row, which
##   the target lanes read as one stretch per class. ST = 1 (with CM): the work-group
##   stages each class's rows in local memory, CH at a time; SPL > 1 (with ST): SPL
##   work-items a target and library stream a subtree of the classes each (_lanes.mako).
## PIW (CM, the host's choice, :func:`pyedmcl.kernels.xmap.pack_tile`; 0 without CM):
##   pack takes tiles of 8 query classes x PIW rows of each, staged in local memory: the
##   tile's raw rows read in first (coalesced), then weighed and written in place.
## O32 (ST, the host's choice: 1 where the targets' bytes fit 32 bits): staged entries
##   hold the byte offset each reads (time x bytes per time) instead of the time, and
##   the TJ targets of a work-item are read at constant distances from its first, whose
##   time-major row holds whole work-groups of LWG x TJ targets (the host pads it:
##   pyedmcl.kernels.xmap.lane_tile) (_lanes.mako).
## PR (with ST and O32, float32 weights): each staged entry's offset and weight side by
##   side, one 8-byte local load (H100: faster at some K and layouts, slower at others).
## KR = 1 (the scalar query loop: TJ targets, no VEC, PF, LANES or CM; or staged target
##   lanes: LANES, CM and ST): K is the kernels' last argument instead of a constant, so
##   one program serves every E of an embedding scan (one target per library: its skill
##   is a small part of the scan, and 20 programs were the scan's first-use cost), every
##   small E-group of a map on a CPU (WEIGHT "ccm") and, staged, the E-groups of a GPU's
##   mixed-E map (the template's K then bounds the argument: it sizes the staged rows);
##   the loops over the K slots run the same operations in the same order, so the same
##   weights, predictions and rho.
## FS (the host's: WEIGHT "ccm" outside the embedding scan): CCM's reduction, every
## stream of target j shifted by shift[j] (its first finite observation, the host's
## pyedmcl.primitives.lookup.ccm_shifts), the streams' sums added
## by the tree and finished once (as pyedmcl.ccm's skill, lookup/simplex_lookup.cl.mako);
## else each stream shifted by its first pair and finished, the tree merging (Chan).
## INL (the host's choice, 1 on PoCL): isfinite() in the query loops as clang's built-in
##   and, for float32 data, the weights' double exp inline (PoCL calls OpenCL's out of
##   line; /_vecops.mako, common/_lookup.mako); lookup/simplex_lookup.cl.mako takes the
##   same INL, so pyedmcl.ccm weighs neighbours alike.
<%namespace name="lk" file="/common/_lookup.mako"/>
<%namespace name="stats" file="/common/_stats.mako"/>
<%namespace name="groups" file="/xmap/_groups.mako"/>
<%namespace name="lanes" file="/xmap/_lanes.mako"/>
<%namespace name="skill" file="/xmap/_skill.mako"/>
<%namespace name="vec" file="/_vecops.mako"/>
<% assert not KR or not (VEC or PF) and (not (LANES or CM) or (LANES and CM and ST)) %>\
${lk.prelude(REAL, ACC, 0 if KR else K, INL)}
${vec.ops(INL, types=(("%s%d" % (REAL, TJ),) if VEC == 2 else ()))}

__kernel void pack(__global const int* restrict idx, __global const real_t* restrict dist,
                   const int nq, const int b0,
                   __global int* restrict tidx, __global ${lk.wtype(WEIGHT)}* restrict tw,
                   __global acc_t* restrict tden, const int ldk, const int bstride,
                   const int row0${", const int K" if KR else ""})
{
% if CM:
<% PR = 8 * PIW %>\
    /* a tile of 8 query classes x PIW rows of each (a work-group of ${PR}): a row index's
       8 classes are consecutive queries (their raw rows read together), and a class's
       PIW rows one stretch of the packed table (staged in local memory, then written
       whole); rows by class: class c's row i holds query c + i WG (class_start) */
    __local int sidx[${PR} * ${K}];
    __local ${lk.wtype(WEIGHT)} sw[${PR} * ${K}];
    __local acc_t sden[${PR}];
    /* (unsigned: a quotient and remainder of the same value are not a signed pair, which
       LLVM would freeze, an instruction Oclgrind does not run) */
    const uint lid = get_local_id(0), tile = get_group_id(0);
    const int c0 = (int)(tile % ${(WG + 7) // 8}u) * 8;
    const int i0 = (int)(tile / ${(WG + 7) // 8}u) * ${PIW};
    const int lc = (int)(lid & 7u), li = (int)(lid >> 3);
    const int live = ${skill.in_class("c0 + lc", "i0 + li")};  /* (no return before the barrier) */
    const int q = live ? c0 + lc + (i0 + li) * ${WG} : 0;
    const int t = (lc * ${PIW} + li) * K;  /* staged by class, then row */
% else:
    const int q = get_global_id(0);
% endif
    const int b = b0 + get_global_id(1);
% if not CM:
    if (q >= nq) return;
% endif
    /* raw table of library get_global_id(1): rows of ldk entries, bstride per library
       (a k-NN table: K, nq * K; one E of a fused scan: KMAX, EMAX * nq * KMAX) */
    const size_t o = (size_t)get_global_id(1) * (uint)bstride + (size_t)(row0 + q) * ldk;
% if not CM:
    /* packed: k-major per library (entry k of query q at b * nq * K + k * nq + q), so
       consecutive queries' entries are adjacent: coalesced reads in xmap_skill */
    const size_t t = (size_t)b * nq * K + q;
% endif
<% ti, tws, at = ("sidx", "sw", "k") if CM else ("tidx", "tw", "(size_t)k * nq") %>\
% if CM:
    /* the tile's raw rows read together before any is used: a row index's 8 classes are
       consecutive queries, whose raw rows are adjacent, read with consecutive work-items
       on consecutive entries, each entry once, into the work-item's own staged row (entry
       k of row r at r K + k), where the loops below read and then overwrite it (each
       work-item's K dependent reads had waited in turn) */
    for (uint e = lid; e < ${PR}u * (uint)K; e += ${PR}u) {
        const uint r = e / (uint)K, k = e - r * (uint)K;  /* r = row index x 8 + class */
        const int lc2 = (int)(r & 7u), li2 = (int)(r >> 3);
        if (${skill.in_class("c0 + lc2", "i0 + li2")}) {
            const size_t o2 = (size_t)get_global_id(1) * (uint)bstride
                              + (size_t)(row0 + c0 + lc2 + (i0 + li2) * ${WG}) * ldk + k;
            const int s = (lc2 * ${PIW} + li2) * K + (int)k;
            sidx[s] = idx[o2];
            sw[s] = dist[o2];
        }
    }
    barrier(CLK_LOCAL_MEM_FENCE);
% endif
<%
    def raw_l(k):
        return "sidx[t + %s]" % k if CM else "idx[o + %s]" % k
    def raw_d(k):
        return "(real_t)sw[t + %s]" % k if CM else "dist[o + %s]" % k
%>\
% if CM:
    if (live) {
% endif
    const real_t dmin_raw = ${raw_d("0")};
    ${lk.dmin(WEIGHT)}
    acc_t den = 0;
<%
    # "ccm": the weights kept for their normalisation below instead of computed twice.
    # KB slots: K, or with KR the template's K where it bounds the argument (staged
    # lanes); a scalar KR program serves every K from one source: 64 slots kept, any
    # slot beyond them computed again (the same weight either way)
    GUARD = KR and not LANES
    KB = 64 if GUARD else K
%>\
% if WEIGHT == "ccm":
    acc_t wk[${KB}];
% endif
    /* a loop over the K slots, not unrolled: K inlined copies of the double exp and the
       correctly rounded division were most of a skill program (its build time), and
       pack is a short memory-bound launch; the same operations in the same order */
    #pragma unroll 1
    for (int k = 0; k < K; ++k) {
        const int l = ${raw_l("k")};
        const real_t d = ${raw_d("k")};
        acc_t w = 0;
        if (l >= 0) {
            w = ${lk.weight(WEIGHT, "d", REAL, ACC, INL)};
            den += w;
        }
% if WEIGHT == "ccm":
        ${"if (k < %d) " % KB if GUARD else ""}wk[k] = w;
% endif
        ${ti}[t + ${at}] = l >= 0 ? l : -1;
% if WEIGHT != "ccm":
        ${tws}[t + ${at}] = w;
% endif
    }
    const int ok = ${lk.valid(WEIGHT, raw_l("K - 1") + " >= 0")};
% if WEIGHT == "ccm":
    /* the weights over their sum, as real_t (common/_lookup.mako's `norm`): the skill
       sums their products with the targets and divides nothing; the same weights as
       above (the same operations), 0 where the query has no prediction */
    #pragma unroll 1
    for (int k = 0; k < ${"min(K, %d)" % KB if GUARD else "K"}; ++k) {
        const acc_t w = wk[k];
        ${tws}[t + ${at}] = ok ? ${lk.norm("w", "den")} : (real_t)0;
    }
% if GUARD:
    /* slots beyond the kept ones: their weights computed again */
    #pragma unroll 1
    for (int k = ${KB}; k < K; ++k) {
        const int l = ${raw_l("k")};
        const real_t d = ${raw_d("k")};
        acc_t w = 0;
        if (l >= 0) w = ${lk.weight(WEIGHT, "d", REAL, ACC, INL)};
        ${tws}[t + ${at}] = ok ? ${lk.norm("w", "den")} : (real_t)0;
    }
% endif
% endif
% if CM:
    sden[lc * ${PIW} + li] = ok ? den : (acc_t)0;
    }
    barrier(CLK_LOCAL_MEM_FENCE);
    /* each class's rows i0 .. i0 + PIW - 1 that it has: one stretch from its row i0 */
    for (int lc2 = 0; lc2 < 8; ++lc2) {
        const int c = c0 + lc2;
        const int rows = c < ${WG} ? clamp(nq / ${WG} + (c < nq % ${WG}) - i0, 0, ${PIW}) : 0;
        const size_t g = ((size_t)b * nq + ${skill.class_start("c")} + i0) * K;
        const int s0 = lc2 * ${PIW} * K;
        for (int e = (int)lid; e < rows * K; e += ${PR}) {
            tidx[g + e] = sidx[s0 + e];
            tw[g + e] = sw[s0 + e];
        }
    }
    {
        const int c = c0 + lid / ${PIW}, i = i0 + lid % ${PIW};
        if (${skill.in_class("c", "i")})
            tden[(size_t)b * nq + ${skill.class_start("c")} + i] = sden[lid];
    }
% else:
    tden[(size_t)b * nq + q] = ok ? den : (acc_t)0;
% endif
}

${stats.functions()}
% if LANES:
${lanes.kernel()}
% else:
${groups.kernel()}
% endif
