## MODE "warmcol" / "warmdiag" of rqa_lines: the carries of lanes lane0 .. lane0 + nlanes - 1
## at row row0 (a row range's start), each work-item walking its lane up from row row0 - 1
## cell by cell: the same recurrence decision as the vertical (columns: JOINT, the Theiler
## band of THEILER_MATRIX) and diagonal launches (JOINT), one cell at a time (the series
## are padded by VEC as theirs are). A column's open run is black or white: its length goes
## to vcarry or wcarry, and npts gets the recurrences the walk saw (the black run's length;
## for a white run 1 if a recurrence lies above it, else 0: the white-border rule asks only
## whether one does, and the host subtracts what the carries were seeded with). A
## diagonal's carry is its open black run. T: the names of _names.mako.
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
        uint colour = 2u, len = 0u;      /* 2: no cell seen yet */
        int i = row0 - 1;
        for (; i >= 0; --i) {
${rec.recurrent(T1)}\
${rec.joint(T1)}\
${rec.theiler(T1)}\
            const uint c = rec ? 1u : 0u;
            if (colour == 2u) colour = c;
            else if (c != colour) break;
            ++len;
        }
        vcarry[l0 - carry0] = colour == 1u ? len : 0u;
        wcarry[l0 - carry0] = colour == 0u ? len : 0u;
        npts[l0 - carry0] = colour == 1u ? len : (i >= 0 ? 1u : 0u);
% else:
        const int k = lane0 + t;         /* diagonal k: cell (i, i + k) */
        uint len = 0u;
        for (int i = row0 - 1; i >= 0 && i + k >= 0; --i) {
            if (i + k >= n_cols) break;  /* not reached: the host walks diagonals with a cell at row0 - 1 */
${rec.coords(T1, "i + k", pad=VEC)}\
${rec.recurrent(T1)}\
${rec.joint(T1)}\
            if (!rec) break;
            ++len;
        }
        dcarry[k - carry0] = len;
% endif
    }
</%def>
