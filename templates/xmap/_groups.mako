## xmap_skill with LANES = 0: one work-group per (TJ targets, LB libraries), WG
## queries per library: every work-item streams the queries q = lid (mod WG) of its
## library for the TJ targets (the table row read once for all), and the work-group
## reduces each target's streams with common/_stats.mako's pairwise tree.
##   Scalar streams (VEC = 0) keep only what rho needs, in fewer registers (149 -> 128
##   on the H100 at TJ = 2: more work-groups per SM): see _skill.mako's `stream`.
##   VEC = 1 (CPUs): the TJ targets are the lanes of explicit vectors (PoCL does not
##   vectorise the work-item loop around the query loop); every lane runs the scalar
##   code's operations in the same order (the update becomes a per-lane select), so the
##   statistics, and rho, are bit-identical to VEC = 0. VEC = 2: the same with the
##   targets time-major (y[i * ldy + j], rows zero-padded to a multiple of TJ), so the
##   TJ values at one time are one vector load instead of TJ gathers from TJ series.
##   PF = 1 (VEC = 0; GPUs): software-pipelined query loop: the next query's table row
##   and target values are loaded while this one is computed (same values, same
##   operations: rho bit-identical to PF = 0); hides the latency of the target gathers,
##   which scatter when the series is noisy (neighbours of consecutive queries far
##   apart in time).
##   LB (GPUs): LB libraries per work-group (local size (WG, LB)), all for the same TJ
##   targets, each with its own reduction; `nb` libraries in the launch (a ragged last
##   group computes a copy of library nb - 1 and writes nothing). The work-groups
##   resident on one SM then gather from LB times fewer target series, which stay in
##   its L1.
<%namespace name="stats" file="/common/_stats.mako"/>
<%namespace name="skill" file="/xmap/_skill.mako"/>
<%namespace name="vec" file="/_vecops.mako"/>
<%namespace name="lk" file="/common/_lookup.mako"/>
<%def name="kernel()">
__kernel __attribute__((reqd_work_group_size(${WG}, ${LB}, 1)))
${skill.signature()}
{
    const int j0 = get_group_id(0) * ${TJ};
    const int lid = get_local_id(0);
    /* LB libraries per work-group (local dimension 1), all for the same TJ targets */
    const int bl = ${"get_local_id(1)" if LB > 1 else "0"};
    const int bg = get_group_id(1) * ${LB} + bl;
    const int b = min(bg, nb - 1);
    __global const int* ib = tidx + (size_t)b * nq * K;
    __global const ${lk.wtype(WEIGHT)}* wb = tw + (size_t)b * nq * K;
    __global const acc_t* db = tden + (size_t)b * nq;
% for t in range(TJ):
    __global const real_t* y${t} = y + (size_t)(diag ? tgt[0] + b : tgt[min(j0 + ${t}, ntg - 1)]) * ldy;
% if FS:
    const acc_t K${t} = shift[min(j0 + ${t}, ntg - 1)];
% endif
% if not VEC:
${skill.stream(t)}
% endif
% endfor
% if VEC:
${vec_loop()}
% elif PF:
${pf_loop()}
% else:
${scalar_loop()}
% endif
% if not VEC:
% for t in range(TJ):
    ${skill.stream_sums(t)}
% endfor
% endif
    __local acc_t red[${LB}][${WG}][${10 if FS else 8}];
% for t in range(TJ):
${stats.reduce("s%d" % t, "red[bl]", WG, FS)}
    if (lid == 0 && j0 + ${t} < ntg && bg < nb) {
${skill.rho("red[bl][0]", "j0 + %d" % t)}
    }
    barrier(CLK_LOCAL_MEM_FENCE);
% endfor
}
</%def>
## VEC = 1: the TJ targets' streams as the lanes of vectors S0..S9 (stats.update_vec)
<%def name="vec_loop()">\
<%
    AV = "%s%d" % (ACC, TJ); LV = ("long" if ACC == "double" else "int") + str(TJ); RV = "%s%d" % (REAL, TJ)
    CCM = WEIGHT == "ccm"; NV = RV if CCM else AV  # normalised weights: real_t sums
%>\
<% KV = "(%s)(%s)" % (AV, ", ".join("K%d" % t for t in range(TJ))) if FS else "(%s)0" % AV %>\
    ${AV} S0 = (${AV})0, S1 = ${KV}, S2 = ${KV}, S3 = (${AV})0, S4 = (${AV})0,
        S5 = (${AV})0, S6 = (${AV})0, S7 = (${AV})0, S8 = (${AV})0, S9 = (${AV})0;
    for (int q = lid; q < nq; q += ${WG}) {
        const int to = obs[q];
        const acc_t den = db[q];
        /* no valid prediction (den 0: NaN) or no observation: no target counts it */
        if (!(den > 0) || to < 0) continue;
% for k in range(K):
        const int l${k} = ib[(size_t)${k} * nq + q];
        const ${lk.wtype(WEIGHT)} w${k} = wb[(size_t)${k} * nq + q];
% endfor
        ${NV} num = (${NV})0;
% for k in range(K):
        if (l${k} >= 0) {
            const int i = l${k} + tshift;
% if VEC == 2 and CCM:
            num += (${RV})w${k} * ${vec.load(INL, RV, "y + (size_t)i * ldy + j0")};
% elif VEC == 2:
            num += (${AV})w${k} * ${vec.convert(INL, capture(vec.load, INL, RV, "y + (size_t)i * ldy + j0"), AV)};
% elif CCM:
            num += (${RV})w${k} * (${RV})(${", ".join("y%d[i]" % t for t in range(TJ))});
% else:
            num += (${AV})w${k} * (${AV})(${", ".join("(acc_t)y%d[i]" % t for t in range(TJ))});
% endif
        }
% endfor
% if CCM:
        ${AV} p = ${vec.convert(INL, "num", AV)};
% else:
        ${AV} p = num / (${AV})den;
% endif
% if REAL != ACC and not CCM:
        {   /* the prediction is rounded to real_t, as in the scalar code */
            acc_t* pl = (acc_t*)&p;
% for t in range(TJ):
            pl[${t}] = (acc_t)(real_t)pl[${t}];
% endfor
        }
% endif
% if VEC == 2:
        const ${AV} v = ${vec.convert(INL, capture(vec.load, INL, RV, "y + (size_t)to * ldy + j0"), AV)};
% else:
        const ${AV} v = (${AV})(${", ".join("(acc_t)y%d[to]" % t for t in range(TJ))});
% endif
        const ${LV} ok = (p - p) == (${AV})0;  /* finite prediction */
        ${stats.update_vec("S", "p", "v", "ok", AV, FS)}
    }
% for t in range(TJ):
    acc_t s${t}[10];
% for i in range(10):
    s${t}[${i}] = ((acc_t*)&S${i})[${t}];
% endfor
% endfor
</%def>
## PF = 1: the query loop software-pipelined (`fetch` loads query qv's values)
<%def name="pf_loop()">\
    /* software-pipelined: the next query's table row and target values are loaded
       while this one is computed (the same values and operations as PF = 0) */
    int nto = -1;
    acc_t nden = 0;
% for k in range(K):
    int nl${k} = -1;
    ${lk.wtype(WEIGHT)} nw${k} = 0;
% for t in range(TJ):
    real_t ny${t}_${k} = 0;
% endfor
% endfor
% for t in range(TJ):
    real_t nyo${t} = 0;
% endfor
    if (lid < nq) {
${fetch("lid")}
    }
    for (int q = lid; q < nq; q += ${WG}) {
        const int to = nto;
        const acc_t den = nden;
% for k in range(K):
        const int l${k} = nl${k};
        const ${lk.wtype(WEIGHT)} w${k} = nw${k};
% for t in range(TJ):
        const real_t yv${t}_${k} = ny${t}_${k};
% endfor
% endfor
% for t in range(TJ):
        const real_t yo${t} = nyo${t};
% endfor
        if (q + ${WG} < nq) {
${fetch("q + %d" % WG)}
        }
% for t in range(TJ):
        {
${skill.predict("yv%d_{k}" % t)}
            const acc_t p = pr;
            if (to >= 0 && ISFINITE(p)) ${skill.upd(t, "yo%d" % t)}
        }
% endfor
    }
</%def>
## loads query `qv`'s observation time, table row and target values into the n* registers
<%def name="fetch(qv)">\
        nto = obs[${qv}];
        nden = db[${qv}];
% for k in range(K):
        nl${k} = ib[(size_t)${k} * nq + ${qv}];
        nw${k} = wb[(size_t)${k} * nq + ${qv}];
% for t in range(TJ):
        ny${t}_${k} = nl${k} >= 0 ? y${t}[nl${k} + tshift] : (real_t)0;
% endfor
% endfor
% for t in range(TJ):
        nyo${t} = nto >= 0 ? y${t}[nto] : (real_t)0;
% endfor
</%def>
## the scalar query loop
<%def name="scalar_loop()">\
    for (int q = lid; q < nq; q += ${WG}) {
        const int to = obs[q];
        const acc_t den = db[q];
% if not KR:
% for k in range(K):
        const int l${k} = ib[(size_t)${k} * nq + q];
        const ${lk.wtype(WEIGHT)} w${k} = wb[(size_t)${k} * nq + q];
% endfor
% endif
% for t in range(TJ):
        {
% if KR:
<% ccm = WEIGHT == "ccm" %>\
            ${"real_t" if ccm else "acc_t"} num = 0;
            for (int k = 0; k < K; ++k) {  /* the slots in the unrolled loop's order */
                const int l = ib[(size_t)k * nq + q];
                if (l >= 0) num += wb[(size_t)k * nq + q] * ${"" if ccm else "(acc_t)"}y${t}[l + tshift];
            }
            const real_t pr = den > 0 ? ${"num" if ccm else "(real_t)(num / den)"} : (real_t)NAN;
% else:
${skill.predict("y%d[l{k} + tshift]" % t)}
% endif
            const acc_t p = pr;
            if (to >= 0 && ISFINITE(p)) ${skill.upd(t, "y%d[to]" % t)}
        }
% endfor
    }
</%def>
