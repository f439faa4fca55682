## S-map part: VARIANT "group", one work-group per (row, theta); a tile of WG library
## points' augmented vectors is staged in local memory and each work-item owns one or
## more (block, part) slots of the Gram matrix (GPUs). A block is RB x RB entries of the
## augmented matrix held in registers: 2 RB local loads feed RB^2 FMAs (RB 1: one entry,
## two loads an FMA, which bounds a fp64 Gram update by the local memory's bandwidth on
## GPUs); the blocks and the tile's layout: _gram_blocks.mako.
<%namespace name="pts" file="/common/_points.mako"/>
<%namespace name="metric" file="/common/_metric.mako"/>
<%namespace name="dfa" file="/smap/_df.mako"/>
<%namespace name="solver" file="/smap/_solve.mako"/>
<%namespace name="gb" file="/smap/_gram_blocks.mako"/>
<%def name="distance(out, tj)">\
    real_t ${out};
    {
        real_t _acc = (real_t)0;
% for k in range(E):
        ${metric.step(METRIC, "_acc", "x[%s]" % pts.attr.back(tj, k, TAU, NC), "xp[%d]" % k)}
% endfor
        ${out} = ${metric.finish(METRIC, "_acc")};
    }
</%def>

## The neighbour loop header: defines j (lib position) and tj, skips excluded points.
<%def name="for_neighbours(start, step)">\
% if MODE == "all":
    for (int j = ${start}; j < n_lib; j += ${step}) {
        const int tj = lib_t[j];
        if (abs(tj - tp) <= excl_r) continue;
% else:
    for (int q = ${start}; q < K; q += ${step}) {
        const int j = nbr[(size_t)row * K + q];
        if (j < 0) continue;
        const int tj = lib_t[j];
% endif
</%def>

## The kernel body: N unknowns, M = N + 1 augmented entries, NENT Gram entries; the
## Gram slots are blocks x NPART parts (the parts split the tile's points; _gram_blocks.mako).
<%def name="body(N, M, NENT)">\
<%
g = gb.attr.geometry(M, RB, WG, ACC, NENT)
MB, MP, NPART, TILE_LEN = g["MB"], g["MP"], g["NPART"], g["TILE_LEN"]
%>\
    const int row = get_group_id(0);
    const int ti = get_group_id(1);
    const int lid = get_local_id(0);
    __local real_t xp[${E}];
    __local acc_t tile[${TILE_LEN}];
    __local acc_t redA[${WG}], redB[${WG}], redC[${WG}];
    __local int redI[${WG}], redJ[${WG}];
    __local ${"float2" if ACC == "df" else "acc_t"} G[${NENT}];
    const acc_t theta = thetas[ti];
    const int tp = pred_t[row];
% if NC == 1:
    if (lid < ${E}) xp[lid] = x[tp - lid * ${TAU}];
% else:
    if (lid < ${E}) xp[lid] = x[tp * ${NC} + lid % ${NC} - (lid / ${NC}) * ${TAU * NC}];
% endif
    barrier(CLK_LOCAL_MEM_FENCE);

${pass1(False)}\
    /* pass 2: tiles of WG library points */
${gb.declare(g)}\
    acc_t sw = (acc_t)0, swy = (acc_t)0, swyy = (acc_t)0;
% if MODE == "all":
    const int n_items = n_lib;
% else:
    const int n_items = K;
% endif
    for (int base = 0; base < n_items; base += ${WG}) {
        {
            const int q = base + lid;
            acc_t a[${M}];
% for k in range(M):
            a[${k}] = (acc_t)0;
% endfor
% if MODE == "all":
            const int j = q;
            if (q < n_items) {
% else:
            const int j = q < n_items ? nbr[(size_t)row * K + q] : -1;
            if (j >= 0) {
% endif
                const int tj = lib_t[j];
% if MODE == "all":
                if (abs(tj - tp) > excl_r && j != skip) {
% else:
                {
% endif
                    ${distance("d", "tj")}
                    const acc_t w = exp(-scale * (acc_t)d);
                    const acc_t yv = (acc_t)ylib[j];
                    sw += w; swy += w * yv; swyy += w * yv * yv;
                    a[0] = w;
% for k in range(E):
                    a[${k + 1}] = w * (acc_t)(x[${pts.attr.back('tj', k, TAU, NC)}] - xp[${k}]);
% endfor
                    a[${N}] = w * yv;
                }
            }
% for k in range(MB * RB):
            tile[lid * ${MP} + ${gb.attr.tile_pos(k, RB, MB)}] = ${"a[%d]" % k if k < M else "(acc_t)0"};
% endfor
        }
        barrier(CLK_LOCAL_MEM_FENCE);
${gb.accumulate(g)}\
        barrier(CLK_LOCAL_MEM_FENCE);
    }
    /* combine the parts of each entry, and the variance sums */
${gb.store(g, NENT)}\
    redA[lid] = sw; redB[lid] = swy; redC[lid] = swyy;
    barrier(CLK_LOCAL_MEM_FENCE);
    for (int e = lid; e < ${NENT}; e += ${WG}) {
% if ACC == "df":
        float2 s = (float2)(0.0f, 0.0f);
        for (int part = 0; part < ${NPART}; ++part)
            s = df_add(s, df_qts(tile[part * ${NENT} + e], tile[${NENT * NPART} + part * ${NENT} + e]));
        G[e] = s;
% else:
        acc_t s = (acc_t)0;
        for (int part = 0; part < ${NPART}; ++part) s += tile[part * ${NENT} + e];
        G[e] = s;
% endif
    }
% for s in [2 ** i for i in range(20) if 2 ** i < WG][::-1]:
    if (lid < ${s}) {
        redA[lid] += redA[lid + ${s}];
        redB[lid] += redB[lid + ${s}];
        redC[lid] += redC[lid + ${s}];
    }
    barrier(CLK_LOCAL_MEM_FENCE);
% endfor
    if (lid == 0) {
        sw = redA[0]; swy = redB[0]; swyy = redC[0];
% if ACC == "df":
        ${solver.solve_df("G", "sw", "swy", "swyy")}
% else:
        ${solver.solve("G", "sw", "swy", "swyy")}
% endif
    }
</%def>

## Pass 1: the mean distance over the neighbours used and the farthest one (dropped where
## knn asks); defines status0, skip and scale. A row without a problem ends here: its empty
## outputs written (to_host: only its status, for the gemm variant's later kernels). Needs
## the kernel's row, ti, lid, theta, tp, xp and the red* arrays.
<%def name="pass1(to_host)">\
    /* pass 1 (d2: the runner-up's distance, redC its reduction) */
    acc_t dsum = (acc_t)0, dmax = (acc_t)-1, d2 = (acc_t)-1;
    int cnt = 0, jmax = -1;
    ${for_neighbours("lid", WG)}
        ${distance("d", "tj")}
        dsum += (acc_t)d;
        ++cnt;
        if ((acc_t)d > dmax || ((acc_t)d == dmax && j > jmax)) { d2 = dmax; dmax = (acc_t)d; jmax = j; }
        else d2 = fmax(d2, (acc_t)d);
    }
    redA[lid] = dsum; redB[lid] = dmax; redC[lid] = d2; redI[lid] = cnt; redJ[lid] = jmax;
    barrier(CLK_LOCAL_MEM_FENCE);
% for s in [2 ** i for i in range(20) if 2 ** i < WG][::-1]:
    if (lid < ${s}) {
        redA[lid] += redA[lid + ${s}];
        redI[lid] += redI[lid + ${s}];
        const acc_t m2 = redB[lid + ${s}];
        const int j2 = redJ[lid + ${s}];
        if (m2 > redB[lid] || (m2 == redB[lid] && j2 > redJ[lid])) {
            redC[lid] = fmax(redB[lid], redC[lid + ${s}]); redB[lid] = m2; redJ[lid] = j2;
        } else redC[lid] = fmax(redC[lid], m2);
    }
    barrier(CLK_LOCAL_MEM_FENCE);
% endfor
    dsum = redA[0]; cnt = redI[0]; dmax = redB[0]; jmax = redJ[0]; d2 = redC[0];
    barrier(CLK_LOCAL_MEM_FENCE);   /* everyone has read before redA.. are reused */
% if MODE == "all":
    const int drop = cnt - min(knn, cnt);
% else:
    const int drop = 0;
% endif
    /* the farthest point dropped and the runner-up within the distances' rounding
       (TIED): which one is farthest is rounding's choice; the host decides it (status 1) */
    const int status0 = cnt - drop <= 0 ? 2 : (drop > 1 ? 3 : (drop == 1 && TIED(dmax, d2) ? 1 : 0));
    if (status0) {          /* uniform across the work-group */
% if to_host:
        if (lid == 0) { out_status[(size_t)ti * n_pred + row] = status0; }
% else:
        if (lid == 0) ${solver.empty_row()}
% endif
        return;
    }
    if (drop) { dsum -= dmax; --cnt; }
    const int skip = drop ? jmax : -1;
    const acc_t scale = theta == (acc_t)0 ? (acc_t)0 : theta / (dsum / (acc_t)cnt);

</%def>
