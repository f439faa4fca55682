## MODE "warmcol" / "warmdiag" of rqa_lines: the carries of lanes lane0 .. lane0 +
## nlanes - 1 at row row0 (a row range's start), each work-item walking its lane up from
## row row0 - 1, 32 cells a step packed in a word (the run ends at the word's first cell
## of the other colour: one ctz), with the vertical launch's recurrence decision
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
        for (int top = row0 - 1; top >= 0; top -= 32) {
            const int nb = IMIN(32, top + 1);
            uint b = 0u;
            for (int r = 0; r < nb; ++r) {
                const int i = top - r;
${rec.recurrent(T1)}\
${rec.joint(T1)}\
${rec.theiler(T1)}\
                b |= (rec ? 1u : 0u) << r;
            }
            if (colour == 2u) colour = b & 1u;
            const uint other = (colour ? ~b : b) & (nb == 32 ? 0xFFFFFFFFu : ((1u << nb) - 1u));
            if (other) { len += (uint)(31 - (int)clz(other & (0u - other))); reached = 0; break; }
            len += (uint)nb;
        }
        vcarry[l0 - carry0] = colour == 1u ? len : 0u;
        wcarry[l0 - carry0] = colour == 0u ? len : 0u;
        npts[l0 - carry0] = colour == 1u ? len : (reached ? 0u : 1u);
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
            const uint white = ~b & (nb == 32 ? 0xFFFFFFFFu : ((1u << nb) - 1u));
            if (white) { len += (uint)(31 - (int)clz(white & (0u - white))); break; }
            len += (uint)nb;
        }
        dcarry[k - carry0] = len;
% endif
    }
</%def>
