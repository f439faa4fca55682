## DSEG > 1 (DMAJ's diagonal launch, rqa_lines.cl.mako): the row block's rows in DSEG
## segments of whole 64-row words, the launch's second dimension. Work-item (lane, g)
## computes and walks its diagonal over segment g's rows only: a launch holds DSEG times
## the work-items, each walking a DSEG-th of the rows. A diagonal's run continues from
## one row block to the next, so with one segment a launch lasts as long as a walk over
## all its rows, however few diagonals it has (the later row blocks of SYM's triangle:
## few diagonals, each a long serial walk, most of the device idle).
## Segment 0 continues the carried run (dcarry) as before. A later segment does not know
## the run entering it: its head (the black run from its first row) is kept, not
## counted, and its tail (the run open at its end) left, in dseg; MODE djoin (one
## work-item a diagonal, right after the launch, in its queue) joins them in order: the
## run carried into a segment and the segment's head are one line, counted there.
## The same histograms as DSEG = 1. Import with
## <%namespace name="dseg" file="/rqa_lines/_dseg.mako"/>.

## The values DSEG takes with the others (raises ValueError otherwise; renders nothing).
<%def name="check()"><%
    if DSEG < 1 or (DSEG > 1 and not (DMAJ and MODE == "diagonal") and MODE != "djoin"):
        raise ValueError("DSEG > 1 needs DMAJ=1 and MODE diagonal (or MODE djoin)")
%></%def>

## dseg's records: per lane 2 (DSEG - 1) words, segment g >= 1's head (its length, with
## DSEG_FULL where the whole segment is one black run, or DSEG_EMPTY where the diagonal
## has no cell in it) and tail.
<%def name="defines()">\
% if DSEG > 1:
#define DSEG_FULL 0x80000000u
#define DSEG_EMPTY 0xFFFFFFFFu
#define DSEG_REC ${2 * (DSEG - 1)}
% endif
</%def>

## The kernel argument DSEG adds after dcarry.
<%def name="arg()">\
% if DSEG > 1:
                 __global uint* restrict dseg,          /* DSEG: the segments' heads and tails */
% endif
</%def>

## The segment's rows: rs (first row, on a 64-row word) and rend (one past the last row
## of the matrix in it); dr the run entering it (segment 0: the carried one), hd and
## inhead its head while it is walked.
<%def name="rows()">\
% if DSEG > 1:
        const int seg = get_global_id(1);
        const int srows = (nrows + ${64 * DSEG - 1}) / ${64 * DSEG} * 64;
        const int rs = row0 + seg * srows;
        const int rend = IMIN(IMIN(rs + srows, row0 + nrows), n_rows);
        uint dr = (mine && seg == 0) ? dcarry[l0 - carry0] : 0u;
        uint hd = 0u;
        int inhead = seg > 0;
% else:
        const int rs = row0;
        const int rend = IMIN(row0 + nrows, n_rows);
        uint dr = mine ? dcarry[l0 - carry0] : 0u;
% endif
</%def>

## Before the walk of the word `wd` (ulong, nb cells): while in the head, its black cells
## from row 0 join the head and leave the word (a white cell ends the head).
<%def name="strip_head(wd)">\
% if DSEG > 1:
                if (inhead) {
                    const ulong nw = ~${wd};   /* (ctzw needs a nonzero word) */
                    const int h = nw ? IMIN(ctzw(nw), nb) : nb;
                    hd += (uint)h;
                    inhead = h == nb;
                    ${wd} = h >= 64 ? 0UL : ${wd} & ~((1UL << h) - 1UL);
                }
% endif
</%def>

## After the walk: segment 0 carries its open run on (dcarry); a later one leaves its
## head and tail for djoin.
<%def name="store(iem)">\
% if DSEG > 1:
        if (mine && seg == 0) {
            dcarry[l0 - carry0] = dr;
        } else if (mine) {
            __global uint* const r = dseg + (size_t)(l0 - carry0) * DSEG_REC + 2 * (seg - 1);
            r[0] = ${iem} > rs ? (inhead ? (hd | DSEG_FULL) : hd) : DSEG_EMPTY;
            r[1] = dr;
        }
% else:
        if (mine) dcarry[l0 - carry0] = dr;
% endif
</%def>

## MODE djoin: diagonals lane0 - carry0 + i, i < nl, after their DSEG launch: the carried
## run (segment 0's tail) through every later segment that has cells, into hist_d
## (index length - 1) where a line closes; the run left open goes back to dcarry.
<%def name="join_kernel()">\
__kernel void rqa_djoin(__global uint* restrict dcarry, __global const uint* restrict dseg,
                        const int li0, const int nl, __global uint* restrict hist_d)
{
    const int i = get_global_id(0);
    if (i >= nl)
        return;
    __global const uint* const r = dseg + (size_t)(li0 + i) * DSEG_REC;
    uint c = dcarry[li0 + i];
    for (int g = 0; g < ${DSEG - 1}; ++g) {
        const uint h = r[2 * g];
        if (h == DSEG_EMPTY)   /* the diagonal ended before this segment */
            break;
        if (h & DSEG_FULL) {   /* one black run over the whole segment */
            c += h & ~DSEG_FULL;
            continue;
        }
        if (c + h > 0u)
            atomic_inc(&hist_d[c + h - 1u]);
        c = r[2 * g + 1];
    }
    dcarry[li0 + i] = c;
}
</%def>
