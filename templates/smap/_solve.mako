## S-map part: the solver of one (prediction point, theta) problem, written by one
## work-item. Uses the kernel's N, M, IDX, PIVOT_TOL, acc_t and its row/ti/n_pred and
## output arguments; solve_df() also the df helpers (_df.mako functions()).

## Solve the Jacobi-scaled normal equations held in G (upper triangle, IDX) and
## write prediction (centred), coefficients (centred), variance and status. F: a factor
## of the trace test (inverse_check), or None.
<%def name="solve(G, sw, swy, swyy, F=None)">\
    {
        const size_t o = (size_t)ti * n_pred + row;
        int status = 0;
        acc_t sc[N];
        for (int k = 0; k < N; ++k) {
            const acc_t g = ${G}[IDX(k, k)] + (k > 0 ? ridge : (acc_t)0);
            if (!(g > (acc_t)0)) status = 1;
            sc[k] = status ? (acc_t)0 : (acc_t)1 / sqrt(g);
            ${G}[IDX(k, k)] = g;
        }
        acc_t c[N];
        if (!status) {
            for (int k = 0; k < N; ++k)
                for (int l = k; l < M; ++l)
                    ${G}[IDX(k, l)] *= sc[k] * (l < N ? sc[l] : (acc_t)1);
            for (int k = 0; k < N && !status; ++k) {
                acc_t dk = ${G}[IDX(k, k)];
                for (int i = 0; i < k; ++i) dk -= ${G}[IDX(i, k)] * ${G}[IDX(i, k)];
                if (!(dk > (acc_t)PIVOT_TOL)) { status = 1; break; }
                const acc_t u = sqrt(dk);
                ${G}[IDX(k, k)] = u;
                for (int l = k + 1; l < M; ++l) {   /* l == N: forward substitution of the rhs */
                    acc_t s = ${G}[IDX(k, l)];
                    for (int i = 0; i < k; ++i) s -= ${G}[IDX(i, k)] * ${G}[IDX(i, l)];
                    ${G}[IDX(k, l)] = s / u;
                }
            }
        }
${inverse_check(G, "", F)}
        if (!status) {
            for (int k = N - 1; k >= 0; --k) {
                acc_t s = ${G}[IDX(k, N)];
                for (int l = k + 1; l < N; ++l) s -= ${G}[IDX(k, l)] * c[l];
                c[k] = s / ${G}[IDX(k, k)];
            }
            for (int k = 0; k < N; ++k) {
                c[k] *= sc[k];
                out_coef[o * N + k] = c[k];
            }
            const acc_t p = c[0];
            out_pred[o] = p;
            out_var[o] = (${swyy} - (acc_t)2 * p * ${swy} + p * p * ${sw}) / ${sw};
        } else {
${nan_outputs(" " * 12)}\
        }
        out_status[o] = status;
    }
</%def>

## The df twin of solve(): G holds float2 (hi, lo) entries; the Jacobi scaling is
## by powers of two, so it is exact in df arithmetic.
<%def name="solve_df(G, sw, swy, swyy)">\
    {
        const size_t o = (size_t)ti * n_pred + row;
        int status = 0;
        float sc[N];
        for (int k = 0; k < N; ++k) {
            const float2 g = k > 0 ? df_add(${G}[IDX(k, k)], (float2)(ridge, 0.0f)) : ${G}[IDX(k, k)];
            if (!(g.x > 0.0f)) status = 1;
            sc[k] = status ? 0.0f : ldexp(1.0f, -(ilogb(g.x) / 2));
            ${G}[IDX(k, k)] = g;
        }
        float2 c[N];
        if (!status) {
            for (int k = 0; k < N; ++k)
                for (int l = k; l < M; ++l) {
                    const float f = sc[k] * (l < N ? sc[l] : 1.0f);   /* a power of two: exact */
                    ${G}[IDX(k, l)] *= f;
                }
            for (int k = 0; k < N && !status; ++k) {
                float2 dk = ${G}[IDX(k, k)];
                for (int i = 0; i < k; ++i) dk = df_sub(dk, df_mul(${G}[IDX(i, k)], ${G}[IDX(i, k)]));
                if (!(dk.x > PIVOT_TOL)) { status = 1; break; }
                const float2 u = df_sqrt(dk);
                ${G}[IDX(k, k)] = u;
                for (int l = k + 1; l < M; ++l) {
                    float2 t = ${G}[IDX(k, l)];
                    for (int i = 0; i < k; ++i) t = df_sub(t, df_mul(${G}[IDX(i, k)], ${G}[IDX(i, l)]));
                    ${G}[IDX(k, l)] = df_div(t, u);
                }
            }
        }
${inverse_check(G, ".x")}
        if (!status) {
            for (int k = N - 1; k >= 0; --k) {
                float2 t = ${G}[IDX(k, N)];
                for (int l = k + 1; l < N; ++l) t = df_sub(t, df_mul(${G}[IDX(k, l)], c[l]));
                c[k] = df_div(t, ${G}[IDX(k, k)]);
            }
            for (int k = 0; k < N; ++k) out_coef[o * N + k] = (c[k].x + c[k].y) * sc[k];
            const float p = (c[0].x + c[0].y) * sc[0];
            out_pred[o] = p;
            out_var[o] = (${swyy} - 2.0f * p * ${swy} + p * p * ${sw}) / ${sw};
        } else {
${nan_outputs(" " * 12)}\
        }
        out_status[o] = status;
    }
</%def>

## row o's outputs NaN (no prediction); `ind`: the lines' indentation
<%def name="nan_outputs(ind)">\
${ind}for (int k = 0; k < N; ++k) out_coef[o * N + k] = (acc_t)NAN;
${ind}out_pred[o] = (acc_t)NAN;
${ind}out_var[o] = (acc_t)NAN;
</%def>

<%def name="empty_row()">\
    {
        const size_t o = (size_t)ti * n_pred + row;
${nan_outputs(" " * 8)}\
        out_status[o] = status0;
    }
</%def>

## After the Cholesky factorisation (upper factor U in G's upper triangle, the system
## Jacobi-scaled to a unit diagonal): the row goes to the host (status 1) where
## trace(G^-1) = ||U^-T||_F^2 exceeds 1 / INV_TOL. That trace lies between 1 / lambda_min
## and N / lambda_min; the smallest pivot only bounds lambda_min from above, and on
## nearly rank-deficient local fits (a target almost a function of one lag) it was 1e-8
## at a condition of 6e15, where the normal equations' answer and pyEDM's minimum-norm
## SVD one differed by 0.1 in a prediction. HI: ".x" for df entries (the hi part). F: a
## factor the trace is multiplied by first (G's entries' rounding that many times larger
## than the sums': the gemm variant), or None.
<%def name="inverse_check(G, HI, F=None)">\
        if (!status) {
            acc_t tr = (acc_t)0;
            for (int j = 0; j < N; ++j) {
                acc_t w[N];
                for (int i = j; i < N; ++i) {
                    acc_t s = i == j ? (acc_t)1 : (acc_t)0;
                    for (int k = j; k < i; ++k) s -= ${G}[IDX(k, i)]${HI} * w[k];
                    w[i] = s / ${G}[IDX(i, i)]${HI};
                    tr += w[i] * w[i];
                }
            }
            if (!(tr${"" if F is None else " * " + F} * (acc_t)INV_TOL < (acc_t)1)) status = 1;
        }
</%def>
