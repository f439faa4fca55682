## Shared defs: streaming skill statistics of (prediction p, observation o) pairs,
## reduced into Pearson rho, MAE and RMSE (simplex_lookup's `skill`, xmap_lookup's
## `xmap_skill`: one definition, so both reduce bit for bit alike).
## Import with <%namespace name="stats" file="/common/_stats.mako"/>; needs `acc_t`
## (and `functions()` emitted once before any kernel that uses `reduce`).
##
## A stream (one work-item's share of the pairs) keeps shifted sums, 10 values:
##   n, Kp, Ko, S(dp), S(do), S(dp^2), S(do^2), S(dp*do), S|p - o|, S(p - o)^2
## with dp = p - Kp, do = o - Ko and the shift (Kp, Ko) = the stream's first pair:
## the shifted-data algorithm (Chan, Golub & LeVeque 1983), as stable as Welford's
## update for the stream lengths here (error ~ n eps (1 + (mean - K)^2 / var)), but
## with no division per pair: Welford's two divisions made the fused cross-map skill
## fp64-division-bound on GPUs. `finish` turns a stream into merge statistics
##   n, mean p, mean o, C_pp, C_oo, C_po, S|e|, S e^2
## and `merge` combines two (Chan et al.'s pairwise update, in a fixed tree order).
## Operators only (no fabs/fma calls): PoCL vectorises them; contraction is off in
## every including template, so every runtime rounds alike.
<%def name="functions()">
/* the finished stream s (10 shifted sums) as merge statistics m (8 values) */
inline void stats_finish(const acc_t* s, acc_t* m)
{
    const acc_t n = s[0];
    if (n == 0) { for (int i = 0; i < 8; ++i) m[i] = 0; return; }
    const acc_t cpp = s[5] - s[3] * s[3] / n, coo = s[6] - s[4] * s[4] / n;
    m[0] = n;
    m[1] = s[1] + s[3] / n;
    m[2] = s[2] + s[4] / n;
    m[3] = cpp > 0 ? cpp : (acc_t)0;  /* rounding must not make a variance negative */
    m[4] = coo > 0 ? coo : (acc_t)0;
    m[5] = s[7] - s[3] * s[4] / n;
    m[6] = s[8];
    m[7] = s[9];
}

/* FS (streams of one shift): the shifted sums of stream b added into a's (the same
   shift in both, so n and every sum add; the finish comes once, at the end) */
inline void stats_add(acc_t* a, const acc_t* b)
${add_sums("a", "b", 10)}

/* merge statistics (n, mean p, mean o, Cpp, Coo, Cpo, S|e|, S e^2) of b into a */
inline void stats_merge(acc_t* a, const acc_t* b)
{
    const acc_t n = a[0] + b[0];
    if (b[0] == 0) return;
    if (a[0] == 0) { for (int i = 0; i < 8; ++i) a[i] = b[i]; return; }
    const acc_t dp = b[1] - a[1], dq = b[2] - a[2];
    const acc_t f = a[0] * b[0] / n;
    a[3] += b[3] + dp * dp * f;
    a[4] += b[4] + dq * dq * f;
    a[5] += b[5] + dp * dq * f;
    a[1] += dp * b[0] / n;
    a[2] += dq * b[0] / n;
    a[6] += b[6];
    a[7] += b[7];
    a[0] = n;
}
</%def>
## FS: the shifted sums of b added into a, the first n slots of the stream layout (10:
## stats_add; 8: the map's lean entries, n, K, K and five sums): n and every sum add, the
## shifts (slots 1, 2) are the same in both
<%def name="add_sums(a, b, n)">\
{
    ${a}[0] += ${b}[0];
    for (int i_ = 3; i_ < ${n}; ++i_) ${a}[i_] += ${b}[i_];
}\
</%def>
## one pair (p, o) into stream s (an acc_t[10]); p and o are acc_t expressions
<%def name="update(s, p, o, fs=False)">\
{
    const acc_t p_ = ${p}, o_ = ${o};
% if not fs:
    if (${s}[0] == 0) { ${s}[1] = p_; ${s}[2] = o_; }
% endif
    const acc_t dp_ = p_ - ${s}[1], do_ = o_ - ${s}[2], e_ = p_ - o_;
    ${s}[0] += 1;
    ${s}[3] += dp_;
    ${s}[4] += do_;
    ${s}[5] += dp_ * dp_;
    ${s}[6] += do_ * do_;
    ${s}[7] += dp_ * do_;
    ${s}[8] += e_ < 0 ? -e_ : e_;
    ${s}[9] += e_ * e_;
}\
</%def>
## the same update on vectors of streams S0..S9 (type V, lanes are independent
## streams), applied only where the mask `ok` (LV) is set: lane for lane the
## operations of `update`, so the results are bit-identical
<%def name="update_vec(S, p, o, ok, V, fs=False)">\
{
    const ${V} p_ = ${p}, o_ = ${o};
% if fs:
    const ${V} K1 = ${S}1, K2 = ${S}2;
% else:
    const ${V} K1 = ${S}0 == (${V})0 ? p_ : ${S}1, K2 = ${S}0 == (${V})0 ? o_ : ${S}2;
% endif
    const ${V} dp_ = p_ - K1, do_ = o_ - K2, e_ = p_ - o_;
    ${S}1 = ${ok} ? K1 : ${S}1;
    ${S}2 = ${ok} ? K2 : ${S}2;
    ${S}0 = ${ok} ? ${S}0 + (${V})1 : ${S}0;
    ${S}3 = ${ok} ? ${S}3 + dp_ : ${S}3;
    ${S}4 = ${ok} ? ${S}4 + do_ : ${S}4;
    ${S}5 = ${ok} ? ${S}5 + dp_ * dp_ : ${S}5;
    ${S}6 = ${ok} ? ${S}6 + do_ * do_ : ${S}6;
    ${S}7 = ${ok} ? ${S}7 + dp_ * do_ : ${S}7;
    ${S}8 = ${ok} ? ${S}8 + (e_ < (${V})0 ? -e_ : e_) : ${S}8;
    ${S}9 = ${ok} ? ${S}9 + e_ * e_ : ${S}9;
}\
</%def>

## the work-group's streams `s` (acc_t[10], one per work-item `lid`) reduced into
## `red`[0] (`red`: local acc_t[WG][8]) by the pairwise tree: leaves finished streams,
## halves merged level by level (a fixed order: rho reproducible across devices). The
## levels are a loop (its bound WG a constant): unrolled, each level's barrier made the
## program's build longer on Intel's CPU runtime (a mixed map builds many), with no
## change in its run time
<%def name="reduce(s, red, WG, fs=False)">
% if fs:
    /* FS: the streams' shifted sums added by the same tree (red: local acc_t[WG][10]),
       the root finished once into red[0][0..7] by work-item 0 (which reads it) */
    for (int i = 0; i < 10; ++i) ${red}[lid][i] = ${s}[i];
    barrier(CLK_LOCAL_MEM_FENCE);
    for (int h = ${WG // 2}; h > 0; h >>= 1) {
        if (lid < h) {
            acc_t a[10], b2[10];
            for (int i = 0; i < 10; ++i) { a[i] = ${red}[lid][i]; b2[i] = ${red}[lid + h][i]; }
            stats_add(a, b2);
            for (int i = 0; i < 10; ++i) ${red}[lid][i] = a[i];
        }
        barrier(CLK_LOCAL_MEM_FENCE);
    }
    if (lid == 0) {
        acc_t r_[10], m[8];
        for (int i = 0; i < 10; ++i) r_[i] = ${red}[0][i];
        stats_finish(r_, m);
        for (int i = 0; i < 8; ++i) ${red}[0][i] = m[i];
    }
% else:
    {
        acc_t m[8];
        stats_finish(${s}, m);
        for (int i = 0; i < 8; ++i) ${red}[lid][i] = m[i];
    }
    barrier(CLK_LOCAL_MEM_FENCE);
    for (int h = ${WG // 2}; h > 0; h >>= 1) {
        if (lid < h) {
            acc_t a[8], b2[8];
            for (int i = 0; i < 8; ++i) { a[i] = ${red}[lid][i]; b2[i] = ${red}[lid + h][i]; }
            stats_merge(a, b2);
            for (int i = 0; i < 8; ++i) ${red}[lid][i] = a[i];
        }
        barrier(CLK_LOCAL_MEM_FENCE);
    }
% endif
</%def>
