## xmap_skill's LANES layout (_lanes.mako), staged: the query loop over table rows staged
## in local memory and the merge of the subtrees streamed by SPL work-items.
## KR (with ST): K is the kernel's argument, the template's K the most it may be (the
## staged rows' size); the slots' loop runs in the same order: the same rho.
## ST = 1 (with CM): the work-group stages each class's table rows in local memory, CH
## rows at a time (the host's CH fits them in the budget, XMAP_SKILL.request): each
## library's LWG work-items copy its rows with coalesced loads and turn every entry into
## the time it reads (l + tshift), and the queries' observation times are staged once
## for all; the query loop then reads the entries from local memory, not as one global
## load per entry and work-item. With WEIGHT "ccm" a query with an empty slot has no
## prediction (pack's den = 0), so an empty slot reads time 0 with its weight 0 instead
## of a test per entry. Same operations on the same values: the same rho bit for bit
## (decision 0082).
## SPL > 1 (with ST): the WG-leaf tree is cut into SPL subtrees of WG / SPL query classes
## each (the aligned blocks of leaves of the post-order walk: complete subtrees), streamed
## by SPL work-items per target and library (local dimension 1: LB x SPL), which meet in
## local memory, where the first merges the subtree roots by the same post-order walk:
## the same merges in the same order, so the same rho, with SPL times the work-items
## (E-groups of a few hundred targets fill a GPU).
## ST with O32: a work-item's TJ targets are read LWG values apart from its first target's
## column, unclamped (the host pads the rows to whole work-groups), so one address sum per
## entry serves all TJ; PR: each entry's offset and weight staged as one uint2 (one
## local-memory read per entry).
<%namespace name="skill" file="/xmap/_skill.mako"/>
<%namespace name="stats" file="/common/_stats.mako"/>
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
${merge_top(" " * 20)}\
                }
            }
        }
    }
</%def>
## the TJ stacks' top two entries (a finished subtree's halves) merged into one; FS: their
## sums added. `ind`: the lines' indentation
<%def name="merge_top(ind)">\
% for t in range(TJ):
% if FS:
${ind}${stats.add_sums("stk%d[sp - 2]" % t, "stk%d[sp - 1]" % t, 8)}
% else:
${ind}stats_merge(stk${t}[sp - 2], stk${t}[sp - 1]);
% endif
% endfor
${ind}--sp;
</%def>
