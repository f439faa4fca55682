## xmap_skill with LANES = 1 (GPUs): the targets are the work-items (LWG per
## work-group, TJ per work-item, LWG apart): every work-item walks all queries of
## library b for its own targets, so the table row is a uniform (broadcast) load, once
## per TJ targets, and the target values are read from `y` laid out time-major
## (y[i * ldy + j] is target j's value at time i, j the position in tgt/ocol):
## coalesced, where LANES = 0 gathers one scattered value per (query, neighbour).
## WG keeps its meaning: the work-item streams over the WG query classes q = r (mod WG)
## and merges them with the WG-leaf pairwise tree of LANES = 0 (common/_stats.mako's
## `reduce`), evaluated in post-order with a stack (leaves in bit-reversed order), so
## rho is bit-identical. Not for diag (one target per library).
## LMAJ = 1: the grid runs libraries first (group (b, tile) instead of (tile, b)), so
## the work-groups resident on one compute unit read the same targets' slab of y for
## different libraries (L1 hits where tile-first order streams y from L2 for every
## library). Same rho. LB > 1: LB libraries per work-group (local dimension 1), all for
## the same targets, so the warps resident on one compute unit share one tile of y in
## L1 (H100: hit rate 38% -> 69%). CM = 1: the tables in query-class order (pack's):
## each class's rows are one stretch, read with unit-stride pointers.
## KR, ST, SPL, O32, PR: the staged query loop and the subtrees' merge, _staged.mako.
<%namespace name="skill" file="/xmap/_skill.mako"/>
<%namespace name="stats" file="/common/_stats.mako"/>
<%namespace name="lk" file="/common/_lookup.mako"/>
<%namespace name="st" file="/xmap/_staged.mako"/>
<%def name="kernel()">
<%
    LOG = WG.bit_length() - 1
    WT = capture(lk.wtype, WEIGHT)  # real_t: normalised weights
    M = WG // SPL  # classes a subtree
    # PR (with ST, O32 and float32 weights): an entry's offset and weight as one uint2
    PAIR = ST and PR and O32 and WT == "real_t" and REAL == "float"
    NL = LB * SPL  # rows of work-items (local dimension 1)
%>\
__kernel __attribute__((reqd_work_group_size(${LWG}, ${NL}, 1)))
${skill.signature()}
{
% if PAIR:
    /* each staged entry's offset and weight side by side: one 8-byte local load */
    __local uint2 st_p[${NL}][${CH * K}];
% endif
% if ST and not PAIR:
    __local ${"uint" if O32 else "int"} st_t[${NL}][${CH * K}];
    __local ${WT} st_w[${NL}][${CH * K}];
% endif
% if ST:
    __local acc_t st_d[${NL}][${CH}];
    __local ${"uint" if O32 else "int"} st_o[${SPL}][${CH}];
% endif
% if SPL > 1:
    /* the subtree roots of every target, library and subtree, for the final merges */
    __local acc_t roots[${SPL}][${LB * LWG * TJ}][8];
    const int sub = get_local_id(1) / ${LB};  /* this work-item's subtree */
% endif
    /* targets j0 + t * LWG, t < TJ: the table row is loaded once for TJ targets and
       every read of a target value stays coalesced over the work-group */
    const int j0 = get_group_id(${LMAJ}) * ${LWG * TJ} + get_local_id(0);
    /* LB libraries per work-group (local dimension 1, its index mod LB), all for the
       same targets */
    const int bg = get_group_id(${1 - LMAJ})${(" * %d + get_local_id(1)" % LB + (" %% %d" % LB if SPL > 1 else "")) if LB > 1 else ""};
    const int b = min(bg, nb - 1);
    __global const int* ib = tidx + (size_t)b * nq * K;
    __global const ${WT}* wb = tw + (size_t)b * nq * K;
    __global const acc_t* db = tden + (size_t)b * nq;
    const uint ldyb = (uint)ldy * (uint)sizeof(real_t);  /* bytes per time of y */
% if ST and O32:
    /* the first target's column as bytes, unclamped: y's rows hold whole tiles of
       LWG x TJ targets (XMAP_SKILL.launch checks ldy), so a staged read is one 64-bit
       add of the entry's offset, shared by the TJ targets at constant distances */
    __global const uchar* yl = (__global const uchar*)(y + j0);
% endif
% for t in range(TJ):
    __global const real_t* y${t} = y + min(j0 + ${t * LWG}, ntg - 1);
    /* the same column tshift times on: neighbour l predicts from time l + tshift */
    __global const real_t* ys${t} = y${t} + (long)tshift * ldy;
    /* merge statistics of the finished subtrees (at most one per tree level; FS: their
       summed lean sums n, K, K, S dp, S do, S dp^2, S do^2, S dp*do) */
    acc_t stk${t}[${LOG + 1}][8];
% if FS:
    const acc_t K${t} = shift[min(j0 + ${t * LWG}, ntg - 1)];
% endif
% endfor
    int sp = 0;
% if SPL > 1:
    for (int c = sub * ${M}; c < (sub + 1) * ${M}; ++c) {
% else:
    for (int c = 0; c < ${WG}; ++c) {
% endif
        int r = 0;  /* leaf c of the post-order walk: query class bitrev(c) */
        for (int i = 0; i < ${LOG}; ++i) r |= ((c >> i) & 1) << (${LOG - 1} - i);
% for t in range(TJ):
${skill.stream(t)}
% endfor
% if CM:
        /* the class's packed rows are adjacent (pack's CM order), K entries each */
        const int rs = ${skill.class_start("r")};
        __global const int* ir = ib + (size_t)rs * K;
        __global const ${WT}* wr = wb + (size_t)rs * K;
        __global const acc_t* dr = db + rs;
% endif
% if ST:
${st.staged(WT)}
% else:
        for (int q = r; q < nq; q += ${WG}) {
            const int to = obs[q];
% if CM:
            const acc_t den = *dr++;
% for k in range(K):
            const int l${k} = ir[${k}];
            const ${WT} w${k} = wr[${k}];
% endfor
            ir += K;
            wr += K;
% else:
            const acc_t den = db[q];
% for k in range(K):
            const int l${k} = ib[(size_t)${k} * nq + q];
            const ${WT} w${k} = wb[(size_t)${k} * nq + q];
% endfor
% endif
% for t in range(TJ):
            {
${skill.predict(capture(st.at, "ys%d" % t, "l{k}"))}
                const acc_t p = pr;
                if (to >= 0 && ISFINITE(p)) ${skill.upd(t, capture(st.at, "y%d" % t, "to"))}
            }
% endfor
        }
% endif
% for t in range(TJ):
        {
% if FS:
            const acc_t e_[8] = {n${t}, kp${t}, ko${t}, a${t}[0], a${t}[1], a${t}[2], a${t}[3],
                                 a${t}[4]};
            for (int i = 0; i < 8; ++i) stk${t}[sp][i] = e_[i];
% else:
            ${skill.stream_sums(t)}
            stats_finish(s${t}, stk${t}[sp]);
% endif
        }
% endfor
        ++sp;
        /* a finished subtree per trailing one bit of c (within this work-item's
           subtree): merge (left, right); FS: add */
        for (int m = c${" %% %d" % M if SPL > 1 else ""}; m & 1; m >>= 1) {
${st.merge_top(" " * 12)}\
        }
    }
% if SPL > 1:
${st.split_merge()}
% endif
% if FS:
% for t in range(TJ):
    ${skill.finish8("stk%d[0]" % t)}
% endfor
% endif
% for t in range(TJ):
    if (j0 + ${t * LWG} < ntg && bg < nb${" && sub == 0" if SPL > 1 else ""}) {
${skill.rho("stk%d[0]" % t, "j0 + %d" % (t * LWG))}
    }
% endfor
}
</%def>
