## SYM=1 pieces of rqa_lines: the row run walk, the 64x64 bit transpose and the body of
## MODE "horizontal", which walks the rows of the stored column words of a row block (the
## vertical runs of the lower triangle); the chunked walk and the joins are in
## _symjoin.mako. T: the names of _names.mako.
## Import with <%namespace name="sym" file="/rqa_lines/_sym.mako"/>.
<%namespace name="bits" file="/rqa_lines/_bits.mako"/>
<%namespace name="lanewalk" file="/rqa_lines/_lanewalk.mako"/>
<%namespace name="kskip" file="/rqa_lines/_kskip.mako"/>

<%def name="functions(T)">\
/* Runs of one row (left to right) over nb (<= 64) columns packed in b: black runs are
   vertical lines of the lower triangle, white ones white vertical lines. *col is the
   colour of the open run, *len its length; the row's first run is not counted but
   returned in *head (length | colour << 31) once it closes. */
RQA_INLINE void row_runs(ulong b, const int nb, uint* len, uint* col, uint* head,
                         uint* ph_v, __local uint* lh_v, __global uint* gh_v,
                         uint* ph_w, __local uint* lh_w, __global uint* gh_w, uint* n1)
{
    const ulong m = (nb >= 64) ? ~0UL : ((1UL << nb) - 1UL);
    b &= m;
    uint cur = *col;
% if WALK:
    const ulong up = (b << 1) | (ulong)cur;
    const ulong s = b & ~up & m, e = ~b & up & m;
    if ((s | e) == 0UL) { *len += (uint)nb; return; }
${bits.black_start_walk(T, "s", "e", "cur", "*len", "*len", None, ("ph_v", "lh_v", "gh_v"), ("ph_w", "lh_w", "gh_w"), head="head")}
    if (bopen >= 0) { *len = (uint)(nb - bopen); *col = 1u; }
    else { *len = (uint)(nb - last); *col = 0u; }
% else:
    ulong t = (b ^ ((b << 1) | (ulong)cur)) & m;
    if (t == 0UL) { *len += (uint)nb; return; }
    int p = ctzw(t);
    t &= t - 1UL;
    const uint closed = *len + (uint)p;
    if (*head == 0u) *head = closed | (cur << 31);
    else if (cur) hist_add(ph_v, lh_v, gh_v, closed);
    else hist_add(ph_w, lh_w, gh_w, closed);
    int last = p;
    cur ^= 1u;
    while (t) {
        p = ctzw(t);
        t &= t - 1UL;
        if (cur) hist_add(ph_v, lh_v, gh_v, (uint)(p - last));
        else hist_add(ph_w, lh_w, gh_w, (uint)(p - last));
        last = p;
        cur ^= 1u;
    }
    *len = (uint)(nb - last);
    *col = cur;
% endif
}

${transpose("transpose64", "ulong", 64)}
% if HCH:
${transpose("transpose32", "uint", 32)}
% endif
% if WALK == 3:

/* The same transpose on eight ulong8 vectors (WALK=3): blocks of 32, 16 and 8 rows swap
   whole vectors, blocks of 4, 2 and 1 swap lanes (shuffle) inside each vector. */
#define RQA_TSWAP(A, B, J, M) { const ulong8 t_ = (((A) >> (ulong)(J)) ^ (B)) & (ulong8)(M); \
                                (A) ^= t_ << (ulong)(J); (B) ^= t_; }
#define RQA_TLANE(V, J, M, PERM, LOW) { const ulong8 p_ = shuffle((V), (ulong8)PERM); \
    const ulong8 lo_ = (((V) >> (ulong)(J)) ^ p_) & (ulong8)(M); \
    const ulong8 hi_ = ((p_ >> (ulong)(J)) ^ (V)) & (ulong8)(M); \
    (V) = select((V) ^ hi_, (V) ^ (lo_ << (ulong)(J)), (long8)LOW); }
RQA_INLINE void transpose64v(ulong* a)
{
    ulong8 v0 = vload8(0, a), v1 = vload8(1, a), v2 = vload8(2, a), v3 = vload8(3, a);
    ulong8 v4 = vload8(4, a), v5 = vload8(5, a), v6 = vload8(6, a), v7 = vload8(7, a);
<%
    vecstages = [(32, "0x00000000FFFFFFFFUL", ((0, 4), (1, 5), (2, 6), (3, 7))),
                 (16, "0x0000FFFF0000FFFFUL", ((0, 2), (1, 3), (4, 6), (5, 7))),
                 (8, "0x00FF00FF00FF00FFUL", ((0, 1), (2, 3), (4, 5), (6, 7)))]
    lanestages = [(4, "0x0F0F0F0F0F0F0F0FUL"), (2, "0x3333333333333333UL"), (1, "0x5555555555555555UL")]
%>
% for j, mk, pairs in vecstages:
%   for p, q in pairs:
    RQA_TSWAP(v${p}, v${q}, ${j}, ${mk})
%   endfor
% endfor
% for j, mk in lanestages:
<%  perm = ", ".join(str(l ^ j) for l in range(8)); low = ", ".join("-1" if not (l & j) else "0" for l in range(8)) %>\
%   for i in range(8):
    RQA_TLANE(v${i}, ${j}, ${mk}, (${perm}), (${low}))
%   endfor
% endfor
    vstore8(v0, 0, a); vstore8(v1, 1, a); vstore8(v2, 2, a); vstore8(v3, 3, a);
    vstore8(v4, 4, a); vstore8(v5, 5, a); vstore8(v6, 6, a); vstore8(v7, 7, a);
}
#undef RQA_TSWAP
#undef RQA_TLANE
% endif
</%def>

## In-place transpose of a `width` x `width` bit matrix of `ty` words (a[r] bit c -> a[c]
## bit r): swap the off-diagonal blocks of width / 2, then of width / 4 inside each block,
## ... down to 1. Constant trip counts: a GPU compiler unrolls them, so a[] stays in registers.
<%def name="transpose(name, ty, width)">\
<%
    sfx = "UL" if width == 64 else "u"
    masks = {32: "0x00000000FFFFFFFF", 16: "0x0000FFFF0000FFFF", 8: "0x00FF00FF00FF00FF",
             4: "0x0F0F0F0F0F0F0F0F", 2: "0x3333333333333333", 1: "0x5555555555555555"}
    stages = [j for j in (32, 16, 8, 4, 2, 1) if j < width]
%>\
/* In-place transpose of a ${width}x${width} bit matrix (a[r] bit c -> a[c] bit r): swap the
   off-diagonal blocks of ${width // 2}, then of ${width // 4} inside each block, ... down to 1. */
RQA_INLINE void ${name}(${ty}* a)
{
% for j in stages:
%   if width == 32:
    #pragma unroll
%   endif
    for (int q = 0; q < ${width // 2}; ++q) {
        const int k = ((q & ~${j - 1}) << 1) | (q & ${j - 1});   /* rows with bit ${j} clear */
        const ${ty} t = ((a[k] >> ${j}) ^ a[k + ${j}]) & ${("0x" + masks[j][-8:]) if width == 32 else masks[j]}${sfx};
        a[k] ^= t << ${j};
        a[k + ${j}] ^= t;
    }
% endfor
}
</%def>

## MODE "horizontal": the kernel body of work-item g.
<%def name="horizontal(T)">\
    /* work-item g: the 64 rows of stored word g of the row block, i = row0 + 64 g + r;
       row i is walked from column i + 1 to the last one, 64 columns per step */
    const int g = get_global_id(0);
    if (g < nlanes) {
        const int ib = row0 + 64 * g;
        const int nr = IMIN(64, row0 + nrows - ib);
        __global const ulong* sw = sbits + g * sstride + SPAD;
        uint len[64], col[64], head[64];
        ulong a[64];
% if WALK == 3:
${rows_lanes(T)}\
% else:
        for (int c0 = ib + 1; c0 < n_cols; c0 += 64) {
            const int nc = IMIN(64, n_cols - c0);
            for (int c = 0; c < 64; ++c) a[c] = sw[c0 + c];   /* zero padding past n_cols */
            transpose64(a);
            if (c0 == ib + 1) {   /* row r starts at bit r of the first step */
                for (int r = 0; r < nr; ++r) {
                    len[r] = 0u; head[r] = 0u;
                    col[r] = (uint)(a[r] >> r) & 1u;
                    if (r < nc) row_runs(a[r] >> r, nc - r, &len[r], &col[r], &head[r],
                                         ph_v, lh_v, hist_v, ph_w, lh_w, hist_w, &n_iso);
                }
            } else {
                for (int r = 0; r < nr; ++r)
                    row_runs(a[r], nc, &len[r], &col[r], &head[r],
                             ph_v, lh_v, hist_v, ph_w, lh_w, hist_w, &n_iso);
            }
        }
% endif
        for (int r = 0; r < nr; ++r) {
            const int i = ib + r;
            if (i + 1 >= n_cols) { hhead[i] = 0u; htail[i] = 0u; continue; }
            const uint open = len[r] | (col[r] << 31);
            if (head[r]) { hhead[i] = head[r]; htail[i] = open; }
            else { hhead[i] = open; htail[i] = 0u; }   /* one run: touches the diagonal and the bottom */
        }
    }
</%def>

## WALK=3 in MODE "horizontal": the rows of a transposed tile walked VEC at a time, the
## rows' open runs (len, col) and heads in the private arrays (_lanewalk.mako).
<%def name="rows_lanes(T)">\
<% ULV, LV, UV, VEC = T.ULV, T.LV, T.UV, T.VEC %>\
        ${ULV} n1v = (${ULV})0UL;
        const ${LV} rl = (${LV})(${", ".join(str(l) for l in range(VEC))});
        for (int c0 = ib + 1; c0 < n_cols; c0 += 64) {
            const int nc = IMIN(64, n_cols - c0);
            for (int c = 0; c < 64; ++c) a[c] = sw[c0 + c];   /* zero padding past n_cols */
% if NTHR > 1:
${kskip.tile(T)}\
% endif
            transpose64v(a);
            const int first = (c0 == ib + 1);   /* row r starts at bit r of the first step */
            for (int r0 = 0; r0 < nr; r0 += ${VEC}) {
                const ${LV} rv = rl + (${LV})(r0);
                const ${LV} rin = rv < (${LV})(nr);
                ${ULV} wv = vload${VEC}(0, a + r0);
                ${LV} nbl;
                ${UV} lnv, colv;
                if (first) {
                    wv >>= as_${ULV}(rv);
                    nbl = VCLAMPI((${LV})(nc) - rv, (${LV})0, (${LV})64) & rin;
                    lnv = (${UV})0u;
                    colv = convert_${UV}(wv & (${ULV})1);
                    vstore${VEC}((${UV})0u, 0, head + r0);
                } else {
                    nbl = (${LV})(nc) & rin;
                    lnv = vload${VEC}(0, len + r0);
                    colv = vload${VEC}(0, col + r0);
                }
                uint* hd = head + r0;
% if NTHR > 1:
${kskip.row_if(T, "wv", "nbl", "colv")}\
% endif
${lanewalk.walk(T, "wv", "nbl", ln="lnv", col="colv", head="hd")}\
% if NTHR > 1:
${kskip.row_else(T, "nbl", "lnv")}\
% endif
                vstore${VEC}(lnv, 0, len + r0);
                vstore${VEC}(colv, 0, col + r0);
            }
        }
%   for l in range(VEC):
        n_iso += (uint)${T.lane("n1v", l)};
%   endfor
</%def>
