## SYM=1 pieces of rqa_lines that cut a walk and join its pieces: MODE "horizontal" in
## chunks (HCH > 0), MODE "hjoin" (the chunks' pieces of a row joined) and MODE
## "symjoin" (the open vertical runs joined through the diagonal). T: the names of
## _names.mako. The row run walk and the bit transposes are _sym.mako's.
## Import with <%namespace name="symjoin" file="/rqa_lines/_symjoin.mako"/>.
<%namespace name="kc" file="/rqa_lines/_kcollect.mako"/>

## MODE "horizontal" with HCH > 0 (GPUs; the column words as 32-row planes, PLANES): a
## group of HCH work-items takes one (plane q, chunk s): plane q holds the rows
## i = row0 + 32 q + r (r < 32), its chunk s the HCH 64-column tiles from
## t0 = (row0 + 32 q + 1) / 64 + s HCH (absolute tiles: every plane's tiles start on a
## 64-column boundary). Row i starts at column i + 1. The chunk goes in two rounds of
## HCH / 2 tiles: the group reads the round's column words coalesced into local memory,
## then work-item l transposes half l % 2 (32 columns) of tile l / 2 of the round in
## registers (a 32x32 bit tile) and leaves its 32 row halves in local memory;
## then it walks rows l, l + HCH, ... across the round's tiles (row_runs, each row's open
## run in registers across the rounds), so no work-item holds 32 rows' state (192
## registers and 12% occupancy on an H100 when one did) and a work-group's tiles take
## half the local memory of a whole chunk (25% occupancy on the H100 with whole chunks
## of two 32x32 tiles per work-item). A row's runs closed inside the chunk are counted;
## its first and last pieces (they may continue in the neighbouring chunks) go to
## hrec[(i - row0) nchm + s] as (first, last) = (length | colour << 31, ...), or
## (open run | HFULL, 0) where the chunk is one run, (0, 0) where the row has no cell in
## it; MODE "hjoin" joins them. The launch holds (lanes: planes) x nchm groups.
<%def name="horizontal_chunks(T)">\
<%
    half = HCH // 2          # tiles per round
    rows = 32 // HCH         # rows per work-item
    pitch = HCH + 1          # uints per row in local memory (padded)
%>\
    __local uint rw[${WG // HCH * 32 * pitch}];   /* [group][row][tile][half], padded */
    const int gg = get_global_id(0) / ${HCH}, l = get_global_id(0) % ${HCH};
    const int ingrp = gg < nlanes * nchm;
    const int q = lane0 + (ingrp ? gg / nchm : 0), s = ingrp ? gg % nchm : 0;
    const int ib = row0 + 32 * q;                           /* the plane's first row */
    const int t0 = ((ib + 1) >> 6) + s * ${HCH};
    const int nt = ingrp ? IMAX(0, IMIN(${HCH}, ((n_cols + 63) >> 6) - t0)) : 0;
    const int nr = IMIN(32, row0 + nrows - ib);
    __local uint* rg = rw + (get_local_id(0) / ${HCH}) * ${32 * pitch};
    uint len[${rows}], col[${rows}], head[${rows}];
    #pragma unroll
    for (int m = 0; m < ${rows}; ++m) { len[m] = 0u; col[m] = 0u; head[m] = 0u; }
    for (int rnd = 0; rnd < 2; ++rnd) {
        if (rnd) barrier(CLK_LOCAL_MEM_FENCE);              /* round 0's walks are done */
        const int tt = rnd * ${half} + (l >> 1);
        /* the round's HCH half tiles are HCH x 32 consecutive column words (half l % 2 of
           tile t0 + tt is the l-th 32 of them), staged through the group's tile area: word
           w read by work-item w % HCH (coalesced; a work-item's own 32 words share one
           cache line, so reading them itself makes every warp load touch 32 lines) into
           rg[(w / 32) 33 + w % 32] (HCH x 33 <= 32 (HCH + 1) words; at a pitch of 33 the
           reads below hit 32 banks) */
        {
            __global const uint* sw = sbits + q * sstride + SPAD + 64 * (t0 + rnd * ${half});
% if DMAJ:
            __global const uint* qw = qbits + q * sstride + SPAD + 64 * (t0 + rnd * ${half});
% endif
            #pragma unroll
            for (int c = 0; c < 32; ++c) {
                const int wd = c * ${HCH} + l;
                if (rnd * ${half} + (wd >> 6) < nt) rg[(wd >> 5) * 33 + (wd & 31)] = ${"sw[wd] | qw[wd]" if DMAJ else "sw[wd]"};
            }
        }
        barrier(CLK_LOCAL_MEM_FENCE);
        uint a[32];
        if (tt < nt) {
            #pragma unroll
            for (int c = 0; c < 32; ++c) a[c] = rg[l * 33 + c];
        }
        barrier(CLK_LOCAL_MEM_FENCE);                       /* the staged words are read */
        if (tt < nt) {   /* half l % 2 of tile t0 + tt: rg[r pitch + l] = row r's 32 columns */
            transpose32(a);
            #pragma unroll
            for (int r = 0; r < 32; ++r) rg[r * ${pitch} + l] = a[r];
        }
        barrier(CLK_LOCAL_MEM_FENCE);
        #pragma unroll
        for (int m = 0; m < ${rows}; ++m) {
            const int r = l + ${HCH} * m;
            if (r >= nr) break;
            for (int kk = 0; kk < ${half}; ++kk) {
                const int k = rnd * ${half} + kk;
                if (k >= nt) break;
                const int c0 = 64 * (t0 + k), nc = IMIN(64, n_cols - c0);
                const int st = ib + r + 1 - c0;    /* the row's first column, in the tile */
                if (st < nc) {                     /* the row has cells in this tile */
                    const int sh = IMAX(st, 0);
                    __local const uint* w2 = rg + r * ${pitch} + 2 * kk;
                    const ulong b = (((ulong)w2[1] << 32) | (ulong)w2[0]) >> sh;
                    if (st >= 0 || k == 0) { len[m] = 0u; head[m] = 0u; col[m] = (uint)b & 1u; }
                    row_runs(b, nc - sh, &len[m], &col[m], &head[m], ph_v, lh_v, hist_v, ph_w,
                             lh_w, hist_w, &n_iso);
                }
            }
        }
    }
    #pragma unroll
    for (int m = 0; m < ${rows}; ++m) {
        const int r = l + ${HCH} * m;
        if (r >= nr || nt == 0) break;
        const uint open = len[m] | (col[m] << 31);
        __global uint* rec = hrec + 2 * ((ib - row0 + r) * nchm + s);
        rec[0] = len[m] == 0u ? 0u : (head[m] ? head[m] : open | HFULL);  /* len 0: no cell here */
        rec[1] = len[m] == 0u || !head[m] ? 0u : open;
    }
</%def>

## MODE "hjoin": the kernel body of work-item g = (row i = row0 + lane0 + g / nchm of the
## row block, chunk s = g % nchm). It follows the last piece of chunk s where that piece
## starts in the chunk (the chunk holds several runs, is the row's first, or the previous
## chunk ends in the other colour) across the chunks that are one run of its colour, and
## counts it, or returns it as the row's first (touching the diagonal: hhead) or last
## (touching the bottom of the mirrored column: htail) run as MODE "horizontal" with
## HCH = 0 does; the chunk's first piece is counted where it starts at the chunk's left
## edge and closes inside it. The same runs as one walk of the whole row.
<%def name="hjoin(T)">\
    const int g = get_global_id(0);
    if (g < nlanes * nchm) {
        const int rr = lane0 + g / nchm, s = g % nchm;
        const int i = row0 + rr;
        const int tf = ((row0 + 32 * (rr >> 5) + 1) >> 6);       /* the plane's first tile */
        const int nch = (((n_cols + 63) >> 6) - tf + ${HCH - 1}) / ${HCH};
        const int sfirst = (((i + 1) >> 6) - tf) / ${HCH};       /* the row's first chunk */
        __global const uint* rec = hrec + 2 * rr * nchm;
        if (i + 1 >= n_cols) {
            if (s == 0) { hhead[i] = 0u; htail[i] = 0u; }
        } else if (s >= sfirst && s < nch) {
            const uint a = rec[2 * s], b = rec[2 * s + 1];
            const int full = (a & HFULL) != 0u;
            const uint last = full ? a & ~HFULL : b;             /* length | colour << 31 */
            const uint lc = last >> 31;
            uint prev = 2u;   /* colour of the previous chunk's last piece (2: none) */
            if (s > sfirst) {
                const uint pa = rec[2 * s - 2], pb = rec[2 * s - 1];
                prev = ((pa & HFULL) ? pa : pb) >> 31;
            }
            if (!full) {      /* the first piece closes inside the chunk */
                if (s == sfirst) hhead[i] = a;
                else if (prev != (a >> 31)) {
                    if (a >> 31) hist_add(ph_v, lh_v, hist_v, a & HLEN);
                    else hist_add(ph_w, lh_w, hist_w, a & HLEN);
                }
            }
            if (!full || prev != lc) {   /* the last piece starts here: follow it */
                uint n = last & HLEN;
                int end = 1;             /* it reaches the row's last column */
                for (int t = s + 1; t < nch; ++t) {
                    const uint na = rec[2 * t];
                    if ((na >> 31) != lc) { end = 0; break; }   /* ends at the chunk edge */
                    n += na & HLEN;
                    if (!(na & HFULL)) { end = 0; break; }      /* closes inside chunk t */
                }
                const uint run = n | (lc << 31);
                if (full && s == sfirst) {   /* it touches the diagonal */
                    hhead[i] = run;
                    if (end) htail[i] = 0u;
                } else if (end) htail[i] = run;
                else if (lc) hist_add(ph_v, lh_v, hist_v, n);
                else hist_add(ph_w, lh_w, hist_w, n);
            }
        }
    }
</%def>

## MODE "symjoin" (the whole program; it depends on no other template value): the
## vertical runs of the full symmetric matrix that SYM's launches left open, joined
## through the diagonal on the device, so the host reads histograms only. Column j reads
## (column j above the diagonal: its open run vr / wr) + (cell (j, j): black where
## diag_black) + (row j right of the diagonal: its first run head[j] and, where the row
## has several runs, its last one tail[j]; length | colour << 31). Runs of one colour
## join through the diagonal cell; a white run counts where wborder, or where it touches
## neither the top (row 0) nor the bottom. The recurrences the columns counted above the
## diagonal are summed per work-group into nsum (64-bit: 2^32 cells pass at N ~ 10^5).
<%def name="join_kernel()">\
inline void join_add(const uint colour, const uint len, const int top, const int bot,
                     const int wborder, const int hlen,
                     __global uint* restrict hv, __global uint* restrict hw)
{
    if (len == 0u || len > (uint)hlen) return;
    if (colour) atomic_inc(&hv[len - 1u]);
    else if (wborder || !(top || bot)) atomic_inc(&hw[len - 1u]);
}

__kernel __attribute__((reqd_work_group_size(64, 1, 1)))
void rqa_symjoin(__global const uint* restrict vr, __global const uint* restrict wr,
                 __global const uint* restrict npts,   /* column task: lanes j0 .. j0 + nj - 1 */
                 __global const uint* restrict head, __global const uint* restrict tail,
                 const int j0, const int nj, const int n,   /* n: columns of the matrix */
                 const int diag_black, const int wborder, const int hlen,
                 __global uint* restrict hv, __global uint* restrict hw,
                 __global ulong* restrict nsum${kc.args("cs", "rs", "hs", "ss")})           /* per work-group */
{
${kc.shift(("vr", "cs"), ("wr", "cs"), ("npts", "cs"), ("head", "rs"), ("tail", "rs"), ("hv", "hs"), ("hw", "hs"), ("nsum", "ss"))}\
    __local ulong part[64];
    const int t = get_global_id(0), lid = get_local_id(0);
    ulong c = 0UL;
    if (t < nj) {
        const int j = j0 + t;
        const uint v = vr[t], wv = wr[t];
        const uint a = v ? v : wv, cu = v ? 1u : 0u;   /* the open run at the diagonal */
        const uint d = (uint)diag_black;
        const uint hd = head[j], tl = tail[j];
        const uint hl = hd & 0x7FFFFFFFu, hc = hd >> 31;
        const uint below = (uint)(n - 1 - j);          /* cells of column j under the diagonal */
        const int up = a > 0u && cu == d, down = hl > 0u && hc == d;
        join_add(d, 1u + (up ? a : 0u) + (down ? hl : 0u),
                 j == 0 || (up && a == (uint)j), below == 0u || (down && hl == below),
                 wborder, hlen, hv, hw);
        if (a > 0u && cu != d) join_add(cu, a, a == (uint)j, 0, wborder, hlen, hv, hw);
        if (hl > 0u && hc != d) join_add(hc, hl, 0, hl == below, wborder, hlen, hv, hw);
        if (tl) join_add(tl >> 31, tl & 0x7FFFFFFFu, 0, 1, wborder, hlen, hv, hw);
        c = (ulong)npts[t];
    }
    part[lid] = c;
    barrier(CLK_LOCAL_MEM_FENCE);
    for (int s = 32; s > 0; s >>= 1) {
        if (lid < s) part[lid] += part[lid + s];
        barrier(CLK_LOCAL_MEM_FENCE);
    }
    if (lid == 0) nsum[get_group_id(0)] = part[0];
}
</%def>
