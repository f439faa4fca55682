## NTHR > 1, WALK=3: a threshold's lane walk of one 64-cell word skipped where no lane of
## the word changes colour (_lanewalk.mako's walks then close no run: each lane's open run
## only grows by its cells). K thresholds walk K words per word of the matrix, and at the
## smaller thresholds most words are white: the test (a shift, an or, an xor, an and and
## one lane reduction) replaces the walk's branch-free steps and spare-bin increments.
## Each def emits `if (<a lane changes colour>)` before the walk's block, or the `else`
## after it. The same histograms (an NTHR = 1 kernel has none of this).
## Import with <%namespace name="kskip" file="/rqa_lines/_kskip.mako"/>.

<%!
def mask(T, nbl):
    """The cells of a lane word: nbl (longVEC, 0..64) low bits."""
    return ("VSELECT(((%s)1 << as_%s(%s)) - (%s)1, ~(%s)0, (%s) >= (%s)64)"
            % (T.ULV, T.ULV, nbl, T.ULV, T.ULV, nbl, T.LV))


def changes(T, wd, m, cur):
    """Whether some lane of word `wd` (masked by `m`) differs from the cell before it
    (`cur`: a ulongVEC of 0/1, the colour of the run entering the word)."""
    return "VANY(((%s ^ ((%s << 1) | %s)) & %s) != (%s)0)" % (wd, wd, cur, m, T.ULV)
%>

## Column walk (vertical): open runs vr (black) / wr (white), recurrences np.
<%def name="col_if(T, wd, nbl, vr)">\
            if (${changes(T, wd, mask(T, nbl), "(convert_%s(%s > (%s)0u) & (%s)1)" % (T.ULV, vr, T.UV, T.ULV))})
</%def>
<%def name="col_else(T, nbl, vr, wr, np)">\
            else {   /* no lane changes colour: its open run grows by its cells */
                const ${T.UV} nbu_ = convert_${T.UV}(${nbl});
                const ${T.IV} blk_ = ${vr} > (${T.UV})0u;
                ${vr} = VSELECT(${vr}, ${vr} + nbu_, blk_);
                ${wr} = VSELECT(${wr} + nbu_, ${wr}, blk_);
                ${np} = VSELECT(${np}, ${np} + nbu_, blk_);
            }
</%def>

## Diagonal walk: black runs only (dr), `nb` cells for every lane inside the launch (lval).
<%def name="diag_if(T, dw, nb, lval, dr)">\
            if (${changes(T, dw, "(((%s) >= 64 ? ~(%s)0 : (%s)((1UL << (%s)) - 1UL)) & as_%s(convert_%s(%s)))" % (nb, T.ULV, T.ULV, nb, T.ULV, T.LV, lval), "(convert_%s(%s > (%s)0u) & (%s)1)" % (T.ULV, dr, T.UV, T.ULV))})
</%def>
<%def name="diag_else(T, nb, lval, dr)">\
            else   /* no lane changes colour: an open line grows by the word */
                ${dr} = VSELECT(${dr}, ${dr} + (${T.UV})(${nb}), (${dr} > (${T.UV})0u) & ${lval});
</%def>

## Row walk (SYM's horizontal launch): the rows' open runs ln (length) and col (colour).
<%def name="row_if(T, wv, nbl, col)">\
                if (${changes(T, wv, mask(T, nbl), "convert_%s(%s)" % (T.ULV, col))})
</%def>
<%def name="row_else(T, nbl, ln)">\
                else   /* no row changes colour: its open run grows by its cells */
                    ${ln} += convert_${T.UV}(${nbl});
</%def>

## Row walk, a whole 64 x 64 tile (after its column words a[] are read, before the
## transpose): a tile with no recurrence, past the rows' first one, whose rows' open runs
## are all white, only lengthens those runs by its nc columns: the transpose and the
## walks are skipped.
<%def name="tile(T)">\
            if (c0 != ib + 1) {
                ulong any_ = 0UL;
                for (int c = 0; c < 64; ++c) any_ |= a[c];
                uint black_ = 0u;
                for (int r = 0; r < nr; ++r) black_ |= col[r];
                if (any_ == 0UL && black_ == 0u) {   /* every row stays white */
                    for (int r = 0; r < nr; ++r) len[r] += (uint)nc;
                    continue;
                }
            }
</%def>
