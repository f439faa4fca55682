## Run walks of rqa_lines over one bit word (BITS > 0): column_runs (black and white
## vertical runs of a column) and diag_runs (black runs of a diagonal). Runs entering the
## word continue the carried ones; runs left open at its end are carried on. T: the names
## of _names.mako. Import with <%namespace name="runs" file="/rqa_lines/_runs.mako"/>.
<%namespace name="bits" file="/rqa_lines/_bits.mako"/>

<%def name="column_runs(T)">\
<% WT, WB = T.WT, T.WB %>\
/* Runs of one column over nb (<= ${WB}) rows packed in b (bit r = row r), walked
   transition by transition: t marks every cell whose colour differs from the cell
   above, runs alternate in colour, so each run costs one ctz and one count. */
RQA_INLINE void column_runs(${WT} b, const int nb, uint* vr, uint* wr, uint* np,
                        uint* ph_v, __local uint* lh_v, __global uint* gh_v,
                        uint* ph_w, __local uint* lh_w, __global uint* gh_w, uint* n1)
{
    const ${WT} m = (nb >= ${WB}) ? ~(${WT})0 : (((${WT})1 << nb) - (${WT})1);
    b &= m;
    const uint np_before = *np;
    *np += popw(b);
    uint cur = (*vr > 0u) ? 1u : 0u;            /* colour of the run entering from above */
% if WALK:
    const ${WT} up = (b << 1) | (${WT})cur;      /* the cell above each cell */
    const ${WT} s = b & ~up & m;                /* black run starts */
    const ${WT} e = ~b & up & m;                /* white run starts (black run ends) */
    if ((s | e) == (${WT})0) {
        if (cur) *vr += (uint)nb; else *wr += (uint)nb;
        return;
    }
${bits.black_start_walk(T, "s", "e", "cur", "*vr", "*wr", "1" if WBORDER else "np_before > 0u", ("ph_v", "lh_v", "gh_v"), ("ph_w", "lh_w", "gh_w"))}
    if (bopen >= 0) { *vr = (uint)(nb - bopen); *wr = 0u; }
    else { *wr = (uint)(nb - last); *vr = 0u; }
% else:
    ${WT} t = (b ^ ((b << 1) | (${WT})cur)) & m;
    if (t == (${WT})0) {
        if (cur) *vr += (uint)nb; else *wr += (uint)nb;
        return;
    }
    int p = ctzw(t);
    t &= t - (${WT})1;
    if (cur) {
        hist_add(ph_v, lh_v, gh_v, *vr + (uint)p);
        *vr = 0u;
    } else {
        const uint len = *wr + (uint)p;
        if (${"len > 0u" if WBORDER else "len > 0u && np_before > 0u"}) hist_add(ph_w, lh_w, gh_w, len);
        *wr = 0u;
    }
    int last = p;
    cur ^= 1u;
    while (t) {
        p = ctzw(t);
        t &= t - (${WT})1;
        if (cur) hist_add(ph_v, lh_v, gh_v, (uint)(p - last));
        else hist_add(ph_w, lh_w, gh_w, (uint)(p - last));
        last = p;
        cur ^= 1u;
    }
    if (cur) *vr = (uint)(nb - last); else *wr = (uint)(nb - last);
% endif
}
</%def>

<%def name="diag_runs(T)">\
<% WT, WB = T.WT, T.WB %>\
/* Runs of one diagonal over nb (<= ${WB}) steps packed in b (same transition walk). */
RQA_INLINE void diag_runs(${WT} b, const int nb, uint* dr, uint* ph, __local uint* lh,
                      __global uint* gh, uint* n1)
{
    const ${WT} m = (nb >= ${WB}) ? ~(${WT})0 : (((${WT})1 << nb) - (${WT})1);
    b &= m;
    uint cur = (*dr > 0u) ? 1u : 0u;
% if WALK and DPAIR:
    /* DPAIR (GPUs, no private bins): one step per black run, from its start s to its end
       e (the white cell after it); lines of length 1 closed in the word by one popcount
       into a register (n1), the white runs never visited. */
${starts_ends(WT)}\
    while (e) {
        hist_add(ph, lh, gh, (uint)(ctzw(e) - ctzw(s)));
        s &= s - (${WT})1;
        e &= e - (${WT})1;
    }
    /* the last run stays open when the word's last cell is black: s holds its start */
    const int q = ctzw(s | ((${WT})1 << ${WB - 1}));
    *dr = ((b >> (nb - 1)) & (${WT})1) ? (uint)(nb - q) : 0u;
% elif WALK and PH >= WB:
    /* WALK: few branches (a diagonal word holds ~1 line longer than 1 at low RR, and the
       branches of a walk over it were mispredicted most of the time). s: run starts, e:
       run ends (the white cell after a run); lines of length 1 closed in the word: one
       popcount; the others pair starts and ends in order, two pairs without branches. */
${starts_ends(WT)}\
%   for k in range(2):
    {
        const int ps = s ? ctzw(s) : ${WB};
        const int pe = e ? ctzw(e) : ${WB};   /* ${WB}: no end, the run (if any) stays open */
        ph[(uint)(pe - ps - 1) & ${PH - 1}u] += (uint)(pe < ${WB});
        s = (pe < ${WB}) ? (s & (s - (${WT})1)) : s;
        e &= e - (${WT})1;
    }
%   endfor
    while (e) {   /* more than two lines longer than 1 in the word (rare) */
        const int ps = ctzw(s), pe = ctzw(e);
        ph[pe - ps - 1] += 1u;
        s &= s - (${WT})1;
        e &= e - (${WT})1;
    }
    /* the last run stays open when the word's last cell is black: s holds its start */
    const int q = ctzw(s | ((${WT})1 << ${WB - 1}));
    *dr = ((b >> (nb - 1)) & (${WT})1) ? (uint)(nb - q) : 0u;
% else:
    /* isolated recurrences (lines of length 1, most diagonal runs at low RR) closed inside
       the word: counted with one popcount and removed, so the walk skips them (the last
       step may continue into the next word; step 0 continues the carried run) */
    {
        const ${WT} iso = b & ~((b << 1) | (${WT})cur) & ~(b >> 1) & (m >> 1);
        if (iso) {
            const uint ni = popw(iso);
% if PH:
            ph[0] += ni;
% else:
            if (${HBINS}u >= 1u) atomic_add(&lh[0], ni);
% endif
            b &= ~iso;
        }
    }
    ${WT} t = (b ^ ((b << 1) | (${WT})cur)) & m;
    if (t == (${WT})0) {
        if (cur) *dr += (uint)nb;
        return;
    }
    int p = ctzw(t);
    t &= t - (${WT})1;
    if (cur) { hist_add(ph, lh, gh, *dr + (uint)p); *dr = 0u; }
    int last = p;
    cur ^= 1u;
    while (t) {
        p = ctzw(t);
        t &= t - (${WT})1;
        if (cur) hist_add(ph, lh, gh, (uint)(p - last));
        last = p;
        cur ^= 1u;
    }
    if (cur) *dr = (uint)(nb - last);
% endif
}
</%def>

## diag_runs' walks over run starts and ends: s the starts, e the ends (the white cell
## after a run) of word b; its lines of length 1 counted into n1 and taken out of both;
## the carried run closed at the first end (or, with no end, the word added to it)
<%def name="starts_ends(WT)">\
    const ${WT} up = (b << 1) | (${WT})cur;
    ${WT} s = b & ~up;
    ${WT} e = ~b & up & m;
    const ${WT} iso = s & (e >> 1);
    *n1 += popw(iso);
    s &= ~iso;
    e &= ~(iso << 1);
    if (cur) {   /* the carried run closes at the first end, or covers the word */
        if (e == (${WT})0) { *dr += (uint)nb; return; }
        hist_add(ph, lh, gh, *dr + (uint)ctzw(e));
        e &= e - (${WT})1;
    }
</%def>
