## MODE "warmcol" / "warmdiag" of rqa_lines: the carries of lanes lane0 .. lane0 +
## nlanes - 1 at row row0 (a row range's start), each lane walked up from row row0 - 1
## (WARM 0: by one work-item; WARM 32: by a work-group of 32, a row each), 32 cells a step
## packed in a word (the run ends at the word's first cell of the other colour: one ctz),
## a column's whole blocks of white rows skipped by their boxes (WBOX), with the vertical launch's recurrence decision
## (columns: JOINT, the Theiler band of THEILER_MATRIX) or the diagonal launch's (JOINT);
## the series are padded by VEC as theirs are. A column's open run is black or white:
## its length goes to vcarry or wcarry, and npts gets the recurrences the walk saw (the
## black run's length; for a white run 1 if a recurrence lies above it, else 0: the
## white-border rule asks only whether one does, and the host subtracts what the carries
## were seeded with). A diagonal's carry is its open black run. T: _names.mako's names.
## Import with <%namespace name="warm" file="/rqa_lines/_warm.mako"/>.
<%namespace name="names" file="/rqa_lines/_names.mako"/>
<%namespace name="rec" file="/rqa_lines/_recurrence.mako"/>

<%def name="body(T)">\
% if WARM:
${coop_body(T)}\
% else:
${serial_body(T)}\
% endif
</%def>

## WARM = 0: one work-item walks its lane, 32 cells a step (CPUs: lanes in vector
## registers walk as far as their longest one; few such lanes per core)
<%def name="serial_body(T)">\
<% T1 = names.attr.Names(REAL, 1, 0) %>\
    const int t = get_global_id(0);
    if (t < nlanes) {
% if MODE == "warmcol":
        const int l0 = lane0 + t;        /* column j */
        const int lid = l0;
${rec.coords(T1, "l0", pad=VEC)}\
        /* 32 rows a step, walking up: bit r of b is row top - r; the run of the first
           cell's colour ends at the first bit of the other colour (one ctz) */
        uint colour = 2u, len = 0u;      /* 2: no cell seen yet */
        int reached = 1;                 /* the run reaches row 0 */
${box_offsets()}\
        /* rows top & ~31 .. top a step: whole aligned 32-row groups after the first */
        for (int top = row0 - 1; top >= 0; top = (top | 31) - 32) {
            const int nb = (top & 31) + 1;
${box_skip(T1, False)}\
            uint b = 0u;
            for (int r = 0; r < nb; ++r) {
                const int i = top - r;
${rec.recurrent(T1)}\
${rec.joint(T1)}\
${rec.theiler(T1)}\
                b |= (rec ? 1u : 0u) << r;
            }
${col_step()}\
        }
${col_store(8)}\
% else:
        const int k = lane0 + t;         /* diagonal k: cell (i, i + k) */
        uint len = 0u;
        /* the host walks diagonals with a cell at row row0 - 1: i + k < n_cols on the way */
        const int first = IMAX(0, -k);   /* the diagonal's first row */
        for (int top = row0 - 1; top >= first; top -= 32) {
            const int nb = IMIN(32, top - first + 1);
            uint b = 0u;
            for (int r = 0; r < nb; ++r) {
                const int i = top - r;
${rec.coords(T1, "i + k", pad=VEC)}\
${rec.recurrent(T1)}\
${rec.joint(T1)}\
                b |= (rec ? 1u : 0u) << r;
            }
${diag_step("b")}\
        }
        dcarry[k - carry0] = len;
% endif
    }
</%def>

## WARM = 32 (GPUs): a work-group of 32 walks one lane, a row each, 32 rows a step; the
## step's word is gathered by local atomics. One work-item walking a lane alone held its
## warp until the longest of its 32 lanes ended (Roessler, N = 946,303: the open white
## runs above a range's first row are long and of very different lengths). The word and
## the walk are those of the serial body: the same carries. Three words in turn: the one a
## step resets (for the step after next) is no longer read and not yet written.
<%def name="coop_body(T)">\
<% T1 = names.attr.Names(REAL, 1, 0) %>\
    __local uint word[3];
    const int t = get_group_id(0);       /* the lane (uniform in the work-group) */
    const int r = get_local_id(0);       /* this work-item's row of each step */
    if (r == 0) { word[0] = 0u; word[1] = 0u; }
    barrier(CLK_LOCAL_MEM_FENCE);
    if (t < nlanes) {
        int s = 0;
% if MODE == "warmcol":
        const int l0 = lane0 + t;        /* column j */
        const int lid = l0;
${rec.coords(T1, "l0", pad=VEC)}\
        uint colour = 2u, len = 0u;      /* 2: no cell seen yet */
        int reached = 1;                 /* the run reaches row 0 */
${box_offsets()}\
        for (int top = row0 - 1; top >= 0; top = (top | 31) - 32, s = s == 2 ? 0 : s + 1) {
            const int nb = (top & 31) + 1;
${box_skip(T1, True)}\
            if (r == 0) word[s == 0 ? 1 : (s == 1 ? 2 : 0)] = 0u;   /* the next step's */
            if (r < nb) {
                const int i = top - r;
${rec.recurrent(T1)}\
${rec.joint(T1)}\
${rec.theiler(T1)}\
                if (rec) atomic_or(&word[s], 1u << r);
            }
            barrier(CLK_LOCAL_MEM_FENCE);
            const uint b = word[s];
${col_step()}\
        }
        if (r == 0) {
${col_store(12)}\
        }
% else:
        const int k = lane0 + t;         /* diagonal k: cell (i, i + k) */
        uint len = 0u;
        const int first = IMAX(0, -k);   /* the diagonal's first row */
        for (int top = row0 - 1; top >= first; top -= 32, s = s == 2 ? 0 : s + 1) {
            const int nb = IMIN(32, top - first + 1);
            if (r == 0) word[s == 0 ? 1 : (s == 1 ? 2 : 0)] = 0u;   /* the next step's */
            if (r < nb) {
                const int i = top - r;
${rec.coords(T1, "i + k", pad=VEC)}\
${rec.recurrent(T1)}\
${rec.joint(T1)}\
                if (rec) atomic_or(&word[s], 1u << r);
            }
            barrier(CLK_LOCAL_MEM_FENCE);
${diag_step("word[s]")}\
        }
        if (r == 0)
            dcarry[k - carry0] = len;
% endif
    }
</%def>

## A column's step once its word b (32 cells, bit r = row top - r, nb of them) is known:
## the run of the first cell's colour ends at the first bit of the other colour (one ctz)
<%def name="col_step()">\
            if (colour == 2u) colour = b & 1u;
            const uint other = (colour ? ~b : b) & (nb == 32 ? 0xFFFFFFFFu : ((1u << nb) - 1u));
            if (other) { len += (uint)(31 - (int)clz(other & (0u - other))); reached = 0; break; }
            len += (uint)nb;
</%def>

## A column's carries from its walk (`indent` spaces deep): the open black or white run,
## and the recurrences seen (see the file's head)
<%def name="col_store(indent)">\
<% pad = " " * indent %>\
${pad}vcarry[l0 - carry0] = colour == 1u ? len : 0u;
${pad}wcarry[l0 - carry0] = colour == 0u ? len : 0u;
${pad}npts[l0 - carry0] = colour == 1u ? len : (reached ? 0u : 1u);
</%def>

## A diagonal's step once its word (`word`, an expression) is known: the black run ends at
## the first white cell
<%def name="diag_step(word)">\
            const uint white = ~${word} & (nb == 32 ? 0xFFFFFFFFu : ((1u << nb) - 1u));
            if (white) { len += (uint)(31 - (int)clz(white & (0u - white))); break; }
            len += (uint)nb;
</%def>

## WBOX > 0 (MODE warmcol): the row series' boxes, level l (l < WBOX) holding per block of
## 32^(l+1) rows (block b: rows b 32^(l+1) .. up to n_rows) and coordinate m the least and
## the largest value the block's points take (wbox[boff_l + (b E + m) 2 + 0 / 1], laid
## out level after level: pyedmcl.kernels.rqa_lines.row_boxes).
<%def name="box_arg()">\
% if MODE == "warmcol" and WBOX:
, __global const real_t* restrict wbox  /* WBOX: the row blocks' boxes */\
% endif
</%def>

<%def name="box_offsets()">\
% if MODE == "warmcol" and WBOX:
        int boff[${WBOX}];
        boff[0] = 0;
%   for lv in range(1, WBOX):
        boff[${lv}] = boff[${lv - 1}] + ${2 * E} * ((n_rows + ${(32 << 5 * (lv - 1)) - 1}) >> ${5 + 5 * (lv - 1)});
%   endfor
% endif
</%def>

## WBOX: before a column's step whose top row ends an aligned block of 32^(l+1) rows, the
## largest such block whose box lies at the threshold or beyond from the column's point
## is skipped whole, as steps of all-white words would take it: a black run ends at its
## first row, a white run (or none yet) grows by its rows. The box's bound lb is dist()
## itself on the box's point nearest the column's: rounding is monotone, so every cell of
## the block computes a distance >= lb and decides white (EXACT: lb - thr beyond the
## bound, so no cell is near: none is redone in double). In a work-group (`coop`) every
## work-item takes the same decision; a skipped step keeps its word (s) for the next.
<%def name="box_skip(T, coop)">\
% if MODE == "warmcol" and WBOX:
<%
    thrx = "tv" if PERCOL else "(%s)thr" % T.RV
    bound = "tbv" if PERCOL else "exb"
%>\
            {
                int skip = 0;
%   for lv in reversed(range(WBOX)):
<% S = 32 << 5 * lv %>\
                if (!skip && (top & ${S - 1}) == ${S - 1}${" && colour != 1u" if lv else ""}) {
                    __global const ${T.RV}* bb = wbox + boff[${lv}] + (top >> ${5 + 5 * lv}) * ${2 * E};
                    ${T.RV} bx[${E}];   /* the box's point nearest the column's */
%     for m in range(E):
                    bx[${m}] = yv[${m}] < bb[${2 * m}] ? bb[${2 * m}] : (yv[${m}] > bb[${2 * m + 1}] ? bb[${2 * m + 1}] : yv[${m}]);
%     endfor
${rec.dist(T, "lb", "bx", "yv", "0", stride=1)}
%     if EXACT:
                    if (!(lb < ${thrx}) && (float)(lb - ${thrx}) > ${bound}) skip = ${S};
%     else:
                    if (!(lb < ${thrx})) skip = ${S};
%     endif
                }
%   endfor
                if (skip) {   /* white rows top - skip + 1 .. top */
                    if (colour == 1u) { reached = 0; break; }
                    colour = 0u;
                    len += (uint)skip;
                    top -= skip - 32;
%   if coop:
                    s = s == 0 ? 2 : s - 1;
%   endif
                    continue;
                }
            }
% endif
</%def>
