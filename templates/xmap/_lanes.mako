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
## KR (with ST): K is the kernel's argument, the template's K the most it may be (the
## staged rows' size); the slots' loop runs in the same order: the same rho.
## ST = 1 (with CM): the work-group stages each class's table rows in local memory, CH
## rows at a time (the host's CH fits them in the budget, XMAP_SKILL.request): each
## library's LWG work-items copy its rows with coalesced loads and turn every entry into
## the time it reads (l + tshift), and the queries' observation times are staged once
## for all; the query loop then reads the entries from local memory, not as one global
## load per entry and work-item. With WEIGHT "ccm" a query with an empty slot has no
## prediction (pack's den = 0), so an empty slot reads time 0 with its weight 0 instead
## of a test per entry. Same operations on the same values: the same rho bit for bit.
## H100, 64 libraries x 8,192 targets x 1,000 queries: K = 7 4.95 -> 4.2 ms, K = 21
## 10.1 -> 6.6 ms (LWG 64-128, LB 1).
## SPL > 1 (with ST): the WG-leaf tree is cut into SPL subtrees of WG / SPL query classes
## each (the aligned blocks of leaves of the post-order walk: complete subtrees), streamed
## by SPL work-items per target and library (local dimension 1: LB x SPL), which meet in
## local memory, where the first merges the subtree roots by the same post-order walk:
## the same merges in the same order, so the same rho, with SPL times the work-items
## (E-groups of a few hundred targets fill a GPU).
## ST with O32: a work-item's TJ targets are read LWG values apart from its first target's
## column, unclamped (the host pads the rows to whole work-groups), so one address sum per
## entry serves all TJ; PR: each entry's offset and weight staged as one uint2 (H100,
## E = 6, 10,000 x 1,000: skill 410 -> 350 ms with the layouts re-tuned over both).
<%namespace name="skill" file="/xmap/_skill.mako"/>
<%namespace name="stats" file="/common/_stats.mako"/>
<%namespace name="lk" file="/common/_lookup.mako"/>
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
${staged(WT)}
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
${skill.predict(capture(at, "ys%d" % t, "l{k}"))}
                const acc_t p = pr;
                if (to >= 0 && ISFINITE(p)) ${skill.upd(t, capture(at, "y%d" % t, "to"))}
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
% for t in range(TJ):
% if FS:
            ${stats.add_sums("stk%d[sp - 2]" % t, "stk%d[sp - 1]" % t, 8)}
% else:
            stats_merge(stk${t}[sp - 2], stk${t}[sp - 1]);
% endif
% endfor
            --sp;
        }
    }
% if SPL > 1:
${split_merge()}
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
## target value at time `i` (>= 0) of the column `base` points at: a 32-bit product
## (times x bytes per time) widened once, one multiply-add per read on GPUs where the
## 64-bit index product took a dozen instructions (H100)
<%def name="at(base, i)">(*(__global const real_t*)((__global const uchar*)${base} + (size_t)(uint)(${i}) * ldyb))</%def>
## ST's query loop of class r (the rows from rs on): stage CH rows, then predict them.
## O32: each entry staged as the byte offset of the time it reads (time x ldyb, the host
## checks that y's bytes fit 32 bits), so a read adds it to the target's column pointer
## instead of a 64-bit product (as bytes: an element index would be merged with the
## column's own index into one 64-bit sum, scaled at every read). The same values in the
## same operations: the same rho.
<%def name="staged(WT)">
<%
    NONE = "0xffffffffu" if O32 else "-1"  # no observation (or, "simplex", no entry)
    PAIR = PR and O32 and WT == "real_t" and REAL == "float"  # (as kernel()'s)
    def off(t):  # the staged read position of time t (>= 0)
        return "(uint)(%s) * ldyb" % t if O32 else t
    def val(t, e):  # the value of target t that a staged entry reads
        if O32:
            return "(*(__global const real_t*)(yl + (size_t)(%s) + %d))" % (e, t * LWG * (4 if REAL == "float" else 8))
        return capture(at, "y%d" % t, e)
%>
        const int cnt = nq / ${WG} + (r < nq % ${WG} ? 1 : 0);  /* the class's rows */
        const int li = get_local_id(0), lj = get_local_id(1);
        /* every subtree's class has at most cmax rows: the same stages everywhere */
        const int cmax = nq / ${WG} + (nq % ${WG} ? 1 : 0);
        for (int i0 = 0; i0 < cmax; i0 += ${CH}) {
            const int m = clamp(cnt - i0, 0, ${CH});
            barrier(CLK_LOCAL_MEM_FENCE);  /* the previous rows are read */
            for (int e = li; e < m * K; e += ${LWG}) {
                const int l = ir[(size_t)i0 * K + e];
% if WEIGHT == "ccm":
                /* empty: den = 0, no prediction; time 0 with weight 0 */
                const ${"uint" if O32 else "int"} tl = l >= 0 ? ${off("l + tshift")} : 0;
% else:
                const ${"uint" if O32 else "int"} tl = l >= 0 ? ${off("l + tshift")} : ${NONE};
% endif
% if PAIR:
                st_p[lj][e] = (uint2)(tl, as_uint(wr[(size_t)i0 * K + e]));
% else:
                st_t[lj][e] = tl;
                st_w[lj][e] = wr[(size_t)i0 * K + e];
% endif
            }
            for (int e = li; e < m; e += ${LWG}) {
                st_d[lj][e] = dr[i0 + e];
                if (lj % ${LB} == 0) {
                    const int to = obs[r + (i0 + e) * ${WG}];
                    st_o[${"sub" if SPL > 1 else "0"}][e] = to >= 0 ? ${off("to")} : ${NONE};
                }
            }
            barrier(CLK_LOCAL_MEM_FENCE);
            for (int i = 0; i < m; ++i) {
                const ${"uint" if O32 else "int"} to = st_o[${"sub" if SPL > 1 else "0"}][i];
                const acc_t den = st_d[lj][i];
% for t in range(TJ):
                ${"real_t" if WEIGHT == "ccm" else "acc_t"} num${t} = 0;
% endfor
% for k in ([None] if KR else range(K)):
% if KR:
                /* K: the argument, at most the template's ${K}: unrolled to that bound and
                   left at K (uniform), straight-line sums in slot order as the constant-K
                   form (a loop's sum Intel's CPU compiler reassociated: last-bit changes) */
                #pragma unroll
                for (int k = 0; k < ${K}; ++k) {
                    if (k >= K) break;
% if PAIR:
                    const uint2 pe = st_p[lj][i * K + k];
                    const uint tl = pe.x;
                    const float w = as_float(pe.y);
% else:
                    const ${"uint" if O32 else "int"} tl = st_t[lj][i * K + k];
                    const ${WT} w = st_w[lj][i * K + k];
% endif
% else:
                {
% if PAIR:
                    const uint2 pe = st_p[lj][i * K + ${k}];
                    const uint tl = pe.x;
                    const float w = as_float(pe.y);
% else:
                    const ${"uint" if O32 else "int"} tl = st_t[lj][i * K + ${k}];
                    const ${WT} w = st_w[lj][i * K + ${k}];
% endif
% endif
% for t in range(TJ):
% if WEIGHT == "ccm":
                    num${t} += w * ${val(t, "tl")};
% else:
                    if (tl != ${NONE}) num${t} += w * (acc_t)${val(t, "tl")};
% endif
% endfor
                }
% endfor
% for t in range(TJ):
                {
% if WEIGHT == "ccm":
                    const real_t pr = den > 0 ? num${t} : (real_t)NAN;
% else:
                    const real_t pr = den > 0 ? (real_t)(num${t} / den) : (real_t)NAN;
% endif
                    const acc_t p = pr;
                    if (to != ${NONE} && ISFINITE(p)) ${skill.upd(t, val(t, "to"))}
                }
% endfor
            }
        }
</%def>
## SPL > 1: every work-item leaves its subtree's root (stk<t>[0]) in `roots`; those of
## subtree 0 then walk the SPL roots as the leaves of the tree's top in post-order
<%def name="split_merge()">
    {
        const int slot = (get_local_id(1) % ${LB}) * ${LWG * TJ} + get_local_id(0);
% for t in range(TJ):
        for (int i = 0; i < 8; ++i) roots[sub][slot + ${t * LWG}][i] = stk${t}[0][i];
% endfor
        barrier(CLK_LOCAL_MEM_FENCE);
        if (sub == 0) {
            sp = 1;  /* subtree 0's root is stk<t>[0] already */
            for (int c = 1; c < ${SPL}; ++c) {
% for t in range(TJ):
                for (int i = 0; i < 8; ++i) stk${t}[sp][i] = roots[c][slot + ${t * LWG}][i];
% endfor
                ++sp;
                for (int m = c; m & 1; m >>= 1) {
% for t in range(TJ):
% if FS:
                    ${stats.add_sums("stk%d[sp - 2]" % t, "stk%d[sp - 1]" % t, 8)}
% else:
                    stats_merge(stk${t}[sp - 2], stk${t}[sp - 1]);
% endif
% endfor
                    --sp;
                }
            }
        }
    }
</%def>
