## S-map part: VARIANT "item", PV prediction points per work-item (one per SIMD lane
## of an OpenCL vector: realV, accV, maskV), private accumulators (CPUs).
<%namespace name="pts" file="/common/_points.mako"/>
<%namespace name="dfa" file="/smap/_df.mako"/>
<%namespace name="solver" file="/smap/_solve.mako"/>
<%namespace name="split" file="/smap/_split.mako"/>
<%def name="lane(e, l)">${e if PV == 1 else "(%s).s%x" % (e, l)}</%def>
<%def name="sel(A, B, cond)">((${cond}) ? (accV)(${A}) : (accV)(${B}))</%def>
<%def name="sel2(a, b, cond)">((${cond}) ? (accV)(${b}) : (accV)(${a}))</%def>
<%def name="cvt(e)">convert_${"float" if ACC == "df" else ACC}${PV if PV > 1 else ""}(${e})</%def>

## One library point for every lane of the item variant: xj<k> (scalars in
## "all" mode, per-lane vectors in "table" mode), d (accV distance), yv, out (mask
## of lanes for which the point is excluded).
<%def name="vec_point()">\
% if MODE == "all":
        const int tj = lib_t[j];
%   for k in range(E):
        const real_t xj${k} = x[${pts.attr.back('tj', k, TAU, NC)}];
%   endfor
        const accV yv = (accV)((acc_t)ylib[j]);
        const maskV out = fabs((accV)((acc_t)tj) - tpv) <= excl;
% else:
        const int j = q;
%   for k in range(E):
        realV xj${k};
%   endfor
        accV yv;
        maskV out;
%   for l in range(PV):
        {
            const int r = min(row0 + ${l}, n_pred - 1);
            const int jl = nbr[(size_t)r * K + q];
            const int jj = max(jl, 0);
            const int tj = lib_t[jj];
%     for k in range(E):
            ${lane("xj%d" % k, l)} = x[${pts.attr.back('tj', k, TAU, NC)}];
%     endfor
            ${lane("yv", l)} = (acc_t)ylib[jj];
            ${lane("out", l)} = jl < 0 ? ${-1 if PV > 1 else 1} : 0;
        }
%   endfor
% endif
        realV dacc = (realV)(0);
% for k in range(E):
        {
            const realV df = xj${k} - xp[${k}];
% if METRIC == "euclidean":
            dacc += df * df;
% elif METRIC == "maximum":
            dacc = fmax(dacc, fabs(df));
% elif METRIC == "manhattan":
            dacc += fabs(df);
% else:
<% raise ValueError("unknown METRIC %r" % METRIC) %>
% endif
        }
% endfor
        const accV d = ${cvt("sqrt(dacc)" if METRIC == "euclidean" else "dacc")};
</%def>

## The kernel body: N unknowns, M = N + 1 augmented entries, NENT Gram entries
## (upper triangle, in the order of pairs).
<%def name="body(N, M, NENT, pairs)">\
    ## PV prediction points per work-item, one per SIMD lane (accV = acc_t PV-vector);
    ## library values are scalar loads broadcast to every lane, so no gathers.
% if SPLIT > 1:
    ## SPLIT work-items a row (PV == 1), combined in local memory (_split.mako): no
    ## early return past the last row, every work-item meets the barriers
    const int part = get_local_id(0) % ${SPLIT};
    const int row0 = get_global_id(0) / ${SPLIT};
    const int ti = get_global_id(1);
${split.declare(NENT)}\
% else:
    const int row0 = get_global_id(0) * ${PV};
    const int ti = get_global_id(1);
    if (row0 >= n_pred) return;
% endif
    const accV theta = (accV)(thetas[ti]);
    accV tpv;
    realV xp[${E}];
% for l in range(PV):
    {
        const int r = min(row0 + ${l}, n_pred - 1);
        const int tp = pred_t[r];
        ${lane("tpv", l)} = (acc_t)tp;
%   for k in range(E):
        ${lane("xp[%d]" % k, l)} = x[${pts.attr.back('tp', k, TAU, NC)}];
%   endfor
    }
% endfor
    const accV excl = (accV)((acc_t)excl_r);

    /* pass 1: mean distance, count, farthest neighbour (per lane) */
    accV dsum = (accV)(0), cnt = (accV)(0), dmax = (accV)(-1), jmax = (accV)(-1);
    accV d2 = (accV)(-1);   /* the runner-up's distance */
    ## MODE "table": the table is per row, so every lane reads its own neighbour
${split.loop()}\
        ${vec_point()}
        const accV dd = ${sel("-1", "d", "out")};
        dsum += ${sel("0", "d", "out")};
        cnt += ${sel("0", "1", "out")};
        const maskV up = dd >= dmax;
        d2 = ${sel2("fmax(d2, dd)", "dmax", "up")};
        dmax = ${sel2("dmax", "dd", "up")};
        jmax = ${sel2("jmax", "(accV)((acc_t)j)", "up")};
    }
% if SPLIT > 1:
${split.combine_pass1()}\
% endif
% if MODE == "all":
    const accV drop = cnt - fmin((accV)((acc_t)knn), cnt);
% else:
    const accV drop = (accV)(0);
% endif
    const maskV dropped = drop > (accV)(0);
    /* the farthest point dropped and the runner-up within the distances' rounding
       (TIED): the host decides which (status 1) */
    const maskV amb = (drop == (accV)(1)) & TIED(dmax, d2);
    const accV amb_v = ${sel2("(accV)(0)", "(accV)(1)", "amb")};
    dsum = ${sel2("dsum", "dsum - dmax", "dropped")};
    const accV cnt_used = cnt - drop;
    const accV skip = ${sel2("(accV)(-1)", "jmax", "dropped")};
    const accV scale = ${sel2("theta / (dsum / cnt_used)", "(accV)(0)", "theta == (accV)(0)")};

    /* pass 2: weighted normal equations, one problem per lane */
    accV G[${NENT}];
% for i in range(NENT):
    G[${i}] = (accV)(0);
% endfor
% if ACC == "df":
    accV Glo[${NENT}];
% for i in range(NENT):
    Glo[${i}] = (accV)(0);
% endfor
% endif
    accV sw = (accV)(0), swy = (accV)(0), swyy = (accV)(0);
${split.loop()}\
        ${vec_point()}
        const accV w = ${sel("0", "exp(-scale * d)", "out || ((accV)((acc_t)j) == skip)")};
        sw += w; swy += w * yv; swyy += w * yv * yv;
        accV a[${M}];
        a[0] = w;
% for k in range(E):
        a[${k + 1}] = w * ${cvt("xj%d - xp[%d]" % (k, k))};
% endfor
        a[${N}] = w * yv;
% if UNROLL:
% for i, (k, l) in enumerate(pairs):
        ${dfa.accum("accV", "G[%d]" % i, "Glo[%d]" % i, "a[%d]" % k, "a[%d]" % l)}
% endfor
% else:
        /* rolled: the accumulators live in memory (L1) either way once NENT * PV is
           large, and the unrolled body would cost tens of seconds of compile time */
        for (int k = 0, i = 0; k < ${M}; ++k) {
            const accV ak = a[k];
            for (int l = k; l < ${M}; ++l, ++i) ${dfa.accum("accV", "G[i]", "Glo[i]", "ak", "a[l]")}
        }
% endif
    }
% if SPLIT > 1:
${split.reduce_gram(NENT)}\
% endif
    /* spill the lanes to scalars once, then one (not PV) copy of the solver code */
% if PV > 1:
    acc_t Gl[${NENT * PV}], sl[${4 * PV}], dl[${2 * PV}];
    for (int i = 0; i < ${NENT}; ++i) vstore${PV}(G[i], i, Gl);
% if ACC == "df":
    acc_t Gll[${NENT * PV}];
    for (int i = 0; i < ${NENT}; ++i) vstore${PV}(Glo[i], i, Gll);
% endif
    vstore${PV}(sw, 0, sl); vstore${PV}(swy, 1, sl); vstore${PV}(swyy, 2, sl);
    vstore${PV}(cnt_used, 3, sl); vstore${PV}(drop, 0, dl); vstore${PV}(amb_v, 1, dl);
% endif
% if SPLIT > 1:
    if (part == 0)   /* the row's totals */
% endif
    for (int l = 0; l < ${PV}; ++l) {
        const int row = row0 + l;
        if (row >= n_pred) break;
% if PV > 1:
        const acc_t cnt_l = sl[3 * ${PV} + l], drop_l = dl[l], amb_l = dl[${PV} + l];
% else:
        const acc_t cnt_l = cnt_used, drop_l = drop, amb_l = amb_v;
% endif
        const int status0 = cnt_l <= (acc_t)0 ? 2 : (drop_l > (acc_t)1 ? 3 :
                                                    (amb_l > (acc_t)0 ? 1 : 0));
        if (status0) ${solver.empty_row()}
        else {
% if ACC == "df":
            float2 Gs[${NENT}];
%   if PV > 1:
            for (int i = 0; i < ${NENT}; ++i) Gs[i] = df_qts(Gl[i * ${PV} + l], Gll[i * ${PV} + l]);
            const acc_t sw_l = sl[l], swy_l = sl[${PV} + l], swyy_l = sl[${2 * PV} + l];
%   else:
            for (int i = 0; i < ${NENT}; ++i) Gs[i] = df_qts(G[i], Glo[i]);
            const acc_t sw_l = sw, swy_l = swy, swyy_l = swyy;
%   endif
            ${solver.solve_df("Gs", "sw_l", "swy_l", "swyy_l")}
% else:
            acc_t Gs[${NENT}];
%   if PV > 1:
            for (int i = 0; i < ${NENT}; ++i) Gs[i] = Gl[i * ${PV} + l];
            const acc_t sw_l = sl[l], swy_l = sl[${PV} + l], swyy_l = sl[${2 * PV} + l];
%   else:
            for (int i = 0; i < ${NENT}; ++i) Gs[i] = G[i];
            const acc_t sw_l = sw, swy_l = swy, swyy_l = swyy;
%   endif
            ${solver.solve("Gs", "sw_l", "swy_l", "swyy_l")}
% endif
        }
    }
</%def>
