## S-map part: VARIANT "item" with SPLIT > 1 (PV == 1): SPLIT consecutive work-items of
## a work-group share one prediction row; part p of them takes the library points
## p, p + SPLIT, p + 2 SPLIT, ... (interleaved, so a warp's work-items read neighbouring
## library points: one cache line, not SPLIT scattered ones). The parts' pass-1 results
## and pass-2 Gram matrices are combined here through local memory, always in the order
## part 0, 1, ..., SPLIT - 1, so results are deterministic (they differ from SPLIT = 1
## by summation order only). Uses the item body's part, dsum, cnt, dmax, jmax, G (Glo),
## sw, swy, swyy and the kernel's WG, SPLIT, ACC, acc_t.

## The library loop header of one pass: j (MODE "all") or q (MODE "table") from the
## work-item's part in steps of SPLIT (SPLIT = 1: every point, as one work-item a row).
<%def name="loop()">\
% if MODE == "all" and SPLIT == 1:
    for (int j = 0; j < n_lib; ++j) {
% elif MODE == "all":
    for (int j = part; j < n_lib; j += ${SPLIT}) {
% elif SPLIT == 1:
    for (int q = 0; q < K; ++q) {
% else:
    for (int q = part; q < K; q += ${SPLIT}) {
% endif
</%def>

## Local memory (bytes) of the SPLIT combination for Gram size NENT (mirrored by
## pyedmcl.kernels.smap.split_local_bytes): 4 pass-1 values a work-item, and one slot
## of NENT (df: 2 NENT) Gram entries + 3 variance sums a row of the work-group.
<%!
def slot_len(NENT, ACC):
    """acc_t values of one row's slot: the Gram entries (df: hi and lo) + 3 sums."""
    return (2 * NENT if ACC == "df" else NENT) + 3
%>\
<%def name="declare(NENT)">\
    __local acc_t red1[${5 * WG}];
    __local acc_t red2[${(WG // SPLIT) * slot_len(NENT, ACC)}];
</%def>

## Pass 1's combination: every work-item publishes (dsum, cnt, dmax, jmax, d2), then each of
## the row's work-items folds the row's SPLIT entries in part order, so all of them hold
## the same totals. The farthest point: the largest distance, on a tie the largest j --
## what the one-item loop's `dd >= dmax` (the last j with the maximum) keeps.
<%def name="combine_pass1()">\
    {
        const int lid = get_local_id(0), b = lid - part;
        red1[lid] = dsum; red1[${WG} + lid] = cnt;
        red1[${2 * WG} + lid] = dmax; red1[${3 * WG} + lid] = jmax; red1[${4 * WG} + lid] = d2;
        barrier(CLK_LOCAL_MEM_FENCE);
        dsum = red1[b]; cnt = red1[${WG} + b]; dmax = red1[${2 * WG} + b]; jmax = red1[${3 * WG} + b];
        d2 = red1[${4 * WG} + b];
        for (int s = 1; s < ${SPLIT}; ++s) {
            dsum += red1[b + s];
            cnt += red1[${WG} + b + s];
            const acc_t m2 = red1[${2 * WG} + b + s], j2 = red1[${3 * WG} + b + s];
            if (m2 > dmax || (m2 == dmax && j2 > jmax)) {
                d2 = fmax(dmax, red1[${4 * WG} + b + s]); dmax = m2; jmax = j2;
            } else d2 = fmax(d2, m2);
        }
    }
</%def>

## Pass 2's reduction: in rounds s = 1 .. SPLIT - 1, part s writes its Gram matrix and
## variance sums to its row's slot and part 0 adds them to its own (df: the hi parts by
## TwoSum, the error and the lo parts to lo). Part 0 then holds the row's totals.
## UNROLL: entries unrolled (G stays in registers), else a loop (G is in memory anyway).
<%def name="reduce_gram(NENT)">\
<% L = slot_len(NENT, ACC) %>\
    {
        const int lid = get_local_id(0);
        __local acc_t* const slot = red2 + (lid / ${SPLIT}) * ${L};
        for (int s = 1; s < ${SPLIT}; ++s) {
            if (part == s) {
% if UNROLL:
%   for i in range(NENT):
                slot[${i}] = G[${i}];${"  slot[%d] = Glo[%d];" % (NENT + i, i) if ACC == "df" else ""}
%   endfor
% else:
                for (int i = 0; i < ${NENT}; ++i) {
                    slot[i] = G[i];${"  slot[%d + i] = Glo[i];" % NENT if ACC == "df" else ""}
                }
% endif
                slot[${L - 3}] = sw; slot[${L - 2}] = swy; slot[${L - 1}] = swyy;
            }
            barrier(CLK_LOCAL_MEM_FENCE);
            if (part == 0) {
% if ACC == "df":
%   if UNROLL:
%     for i in range(NENT):
                ${add_df("G[%d]" % i, "Glo[%d]" % i, "slot[%d]" % i, "slot[%d]" % (NENT + i))}
%     endfor
%   else:
                for (int i = 0; i < ${NENT}; ++i) ${add_df("G[i]", "Glo[i]", "slot[i]", "slot[%d + i]" % NENT)}
%   endif
% elif UNROLL:
%   for i in range(NENT):
                G[${i}] += slot[${i}];
%   endfor
% else:
                for (int i = 0; i < ${NENT}; ++i) G[i] += slot[i];
% endif
                sw += slot[${L - 3}]; swy += slot[${L - 2}]; swyy += slot[${L - 1}];
            }
            barrier(CLK_LOCAL_MEM_FENCE);
        }
    }
</%def>

## (hi, lo) += (bh, bl) for a df Gram entry: TwoSum of the hi parts, error and lo to lo
<%def name="add_df(hi, lo, bh, bl)">\
{ const acc_t _b = ${bh}; const acc_t _s = ${hi} + _b; const acc_t _bb = _s - ${hi};
                  ${lo} += ${bl} + ((${hi} - (_s - _bb)) + (_b - _bb)); ${hi} = _s; }\
</%def>
