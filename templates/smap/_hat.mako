## S-map part: r = G^-1 e0 for one problem of the cross-map kernel (smap_xmap.cl.mako),
## written by one work-item. G holds the upper triangle of the weighted normal equations
## of the library alone (IDX, M = N + 1 entries a row, the last column free); r's dot
## product with a library point's regressors [1, z] is that point's share of the
## prediction (the hat matrix row), so one solve serves every target.
## Uses the kernel's N, M, IDX, PIVOT_TOL, acc_t and an int `status` (set to 1 where the
## scaled system fails the pivot or the trace(G^-1) test of _solve.mako: the host's SVD).
<%namespace name="solver" file="/smap/_solve.mako"/>
<%def name="inverse_e0(G, r)">\
        acc_t sc[N];
        for (int k = 0; k < N; ++k) {
            const acc_t g = ${G}[IDX(k, k)];
            if (!(g > (acc_t)0)) status = 1;
            sc[k] = status ? (acc_t)0 : (acc_t)1 / sqrt(g);
            ${G}[IDX(k, N)] = k == 0 ? (acc_t)1 : (acc_t)0;   /* the rhs: e0 */
        }
        if (!status) {
            /* Jacobi scaling (unit diagonal), then Cholesky with the rhs carried along
               (column N: the forward substitution of e0) */
            for (int k = 0; k < N; ++k)
                for (int l = k; l < M; ++l)
                    ${G}[IDX(k, l)] *= sc[k] * (l < N ? sc[l] : (acc_t)1);
            for (int k = 0; k < N && !status; ++k) {
                acc_t dk = ${G}[IDX(k, k)];
                for (int i = 0; i < k; ++i) dk -= ${G}[IDX(i, k)] * ${G}[IDX(i, k)];
                if (!(dk > (acc_t)PIVOT_TOL)) { status = 1; break; }
                const acc_t u = sqrt(dk);
                ${G}[IDX(k, k)] = u;
                for (int l = k + 1; l < M; ++l) {
                    acc_t s = ${G}[IDX(k, l)];
                    for (int i = 0; i < k; ++i) s -= ${G}[IDX(i, k)] * ${G}[IDX(i, l)];
                    ${G}[IDX(k, l)] = s / u;
                }
            }
        }
${solver.inverse_check(G, "")}
        if (!status) {
            for (int k = N - 1; k >= 0; --k) {
                acc_t s = ${G}[IDX(k, N)];
                for (int l = k + 1; l < N; ++l) s -= ${G}[IDX(k, l)] * ${r}[l];
                ${r}[k] = s / ${G}[IDX(k, k)];
            }
            for (int k = 0; k < N; ++k) ${r}[k] *= sc[k];
        }
</%def>
