## knn_scan.cl.mako's insertion phase (INS "q" / "qe"), after a tile's distance phase:
## each candidate lane of cbits recomputed (the same sums) and inserted into its query's
## sorted lists in local memory, then the thresholds lowered (KS: K per E, OFF: each
## E's list offset).
<%namespace name="metric" file="/common/_metric.mako"/>
<%namespace name="topk" file="/common/_topk.mako"/>
## candidate (D, L) with tie key KEY into query I's sorted list at offset O of K entries,
## of which FILL (an int lvalue) are filled
<%def name="insert_into(I, O, K, D, L, KEY, P, FILL)">\
{
    const real_t kd = topd[${I}][${O} + ${K} - 1];
    const int ki = topi[${I}][${O} + ${K} - 1];
    if (${D} < kd || (${D} == kd && (ki < 0 || ${KEY} < tie_key(${P}, ki)))) {
        ${topk.shift_insert(I, "%s + " % O, K, D, L, KEY, P, FILL)}
    }
}\
</%def>
<%def name="phase(KS, OFF)">\
% if INS == "q":
        for (int i = lid; i < ${QB}; i += ${WG}) {
            qany[cur ^ 1][i] = 0u;  /* the next tile's word; this one's was reset a tile ago */
% if ANY:
            if (qany[cur][i] == 0u) continue;
% endif
            const int p = qp[i];
            for (int t = 0; t < ${TILE}; ++t) {
                const unsigned int b = cbits[i][t];
                if (b == 0u) continue;
                const int l = t0 + base + t;
                const int key = tie_key(p, l);
                real_t acc = (real_t)0;
% for j in range(EMAX):
                ${metric.step(METRIC, "acc", "x[PAD + l - %d]" % (j * TAU), "qloc[i][%d]" % j, FMA)}
                if (b >> ${j}) {
                    if ((b >> ${j}) & 1u) ${insert_into("i", OFF[j], KS[j], "acc", "l", "key", "p", "fill[i][%d]" % j)}
% endfor
% for j in range(EMAX):
                }
% endfor
            }
            const int em = qem[i];
% for j in range(EMAX):
            thr[i][${j}] = ${j} < em ? topd[i][${OFF[j] + KS[j] - 1}] : (real_t)-1;
% endfor
        }
% else:
        /* tasks E-major: consecutive work-items take the same E of consecutive queries,
           so a warp's lists have one K and one recompute length (faster than query-major
           tasks on GPUs) */
        for (int task = lid; task < ${QB * EMAX}; task += ${WG}) {
            const int j = task / ${QB};
            const int i = task - j * ${QB};
% if CQ:
            if (j == 0) { qany[cur ^ 1][i] = 0u; ncand[cur ^ 1][i] = 0; }
% else:
            if (j == 0) qany[cur ^ 1][i] = 0u;
% endif
% if ANY:
            if (!((qany[cur][i] >> j) & 1u)) continue;
% else:
            if (j >= qem[i]) continue;
% endif
            const int p = qp[i];
            const int O = OFF[j], K = KS[j];
            int f = fill[i][j];
% if CQ:
            /* only the lanes with a candidate for this query; the lists hold the best K
               of the candidates under a total order, so the visiting order is free */
            const int nc = ncand[cur][i];
            for (int c = 0; c < nc; ++c) {
                const int t = clist[i][c];
% else:
            for (int t = 0; t < ${TILE}; ++t) {
% endif
                if (!((cbits[i][t] >> j) & 1u)) continue;
                const int l = t0 + base + t;
                const int key = tie_key(p, l);
                real_t acc = (real_t)0;
                /* coordinates 0..j newest-first, unrolled and nested as the "q" walk's: a
                   loop to j (a runtime bound) was compiled by Intel's CPU runtime into a
                   sum in another order (tables an ulp off the per-E kernel's) */
% for c in range(EMAX):
                ${metric.step(METRIC, "acc", "x[PAD + l - %d]" % (c * TAU), "qloc[i][%d]" % c, FMA)}
% if c < EMAX - 1:
                if (j > ${c}) {
% endif
% endfor
                ${"}" * (EMAX - 1)}
                ${insert_into("i", "O", "K", "acc", "l", "key", "p", "f")}
            }
            fill[i][j] = (ushort)f;
            thr[i][j] = topd[i][O + K - 1];
        }
% endif
</%def>
