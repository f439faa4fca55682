## knn_scan's INS "key" kernel (_keys.mako), after its main pass: each E's list written
## out as (EMAX, nq, KMAX) tables (KS: K per E; LW, VL: the lists' key-vector lanes and
## count, PACK: float32 packed keys); RAW=1 (given only then): accumulated distances.
<%namespace name="metric" file="/common/_metric.mako"/>
<%def name="tables(KS, LW, VL, PACK)">\
<% RAW = context.get("RAW", 0) %>\
    /* out: (EMAX, nq, KMAX), the finished tables (cold code: per E one copy of its list
       into private memory, then a loop; unrolled per entry it doubled the build time) */
% if PACK:
    ulong lst[${max(max(KS), max(LW[j] + (16 if KS[j] > 16 else 0) for j in range(EMAX)) if VL else 0)}];
% endif
% for j in range(EMAX):
    {
        const size_t o = ((size_t)${j} * nq + q) * KMAX;
% if PACK and VL:
        vstore${LW[j]}(L${j}, 0, lst);
% if KS[j] > 16:
        vstore16(H${j}, 0, lst + 16);
% endif
% elif PACK:
% for k in range(KS[j]):
        lst[${k}] = s${k}_${j};
% endfor
% endif
% if PACK:
        for (int k = 0; k < ${KS[j]}; ++k) {
            const ulong v = lst[k];
            const uint key = (uint)v;
            const int l = v == EMPTY ? -1 : ((key & 1u) ? p + (int)(key >> 1) : p - (int)(key >> 1));
            const real_t d = as_float((uint)(v >> 32));
            out_idx[o + k] = l;
            out_dist[o + k] = l < 0 ? INFINITY : ${"d" if RAW else metric.finish(METRIC, "d", INL, REAL)};
        }
% else:
% for k in range(KS[j]):
        out_idx[o + ${k}] = bi${k}_${j};
        out_dist[o + ${k}] = bi${k}_${j} < 0 ? INFINITY : ${("bd%d_%d" % (k, j)) if RAW else metric.finish(METRIC, "bd%d_%d" % (k, j), INL, REAL)};
% endfor
% endif
        for (int k = ${KS[j]}; k < KMAX; ++k) {
            out_idx[o + k] = -1;
            out_dist[o + k] = INFINITY;
        }
    }
% endfor
</%def>
