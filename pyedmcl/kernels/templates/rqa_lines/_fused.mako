## MODE "fused" of rqa_lines (FUSE; decision 0120): the cells of the upper triangle and
## all three walks in one launch, no bit planes. A warp owns a tile of FR rows (a band) by
## FKW diagonals (a range, from diagonal 1). It takes the range's 32-diagonal groups from
## the highest down and each group's 32-row halves top down; per half and lane:
## - the cells of diagonal kw + wl as DMAJ computes them (one coordinate term a cell, the
##   same sums: the same bits), the diagonal word D walked top down;
## - D barrel-shifted (RQA_SHFL) into A (column hb + kw + wl) and B (column hb + kw + 32 +
##   wl); B | the A the group above left for this half (local memory) is the whole word of
##   column hb + kw + 32 + wl, walked top down (black, white, count) from the state the
##   group above left at the half above; after the lowest group its A words are whole;
## - D transposed across the warp (lane t: row hb + t, bit l: diagonal kw + l), bit-
##   reversed and walked right to left (black, white).
## Tiles never wait on each other: each counts the runs inside its lane segments and
## leaves, per segment and colour, a state word (the last run open at its end, the first
## run's length, FUSED_FRESH: no run closed: the segment is one run): per diagonal and
## band (black), per column segment (black, white; FR + FKW slots a tile), per row and
## range (black, white). MODE "fused"'s program also holds the joins (rqa_fjoin_*): one
## work-item per lane links the segments of a launch's bands in walk order into the
## lane's carry (diagonals, columns) or, for the rows (inside one band), into the row's
## run at the diagonal (head) and at the right border (tail), which rqa_symjoin takes
## with the columns' runs open at the diagonal.
## Import with <%namespace name="fused" file="/rqa_lines/_fused.mako"/>.
<%namespace name="diagonal" file="/rqa_lines/_diagonal.mako"/>

<%def name="functions()">\
/* FUSE: a lane segment's walk state for one colour: the open run (bits 0..14), the first
   run's length once a run has closed (bits 15..29), FUSED_FRESH (bit 30) while none has;
   a new segment is FUSED_FRESH with no open run */
#define FUSED_FRESH 0x40000000u
#define FUSED_OPEN(s) ((s) & 0x7FFFu)
#define FUSED_FIRST(s) (((s) >> 15) & 0x7FFFu)

inline uint fused_ctz(const uint x) { return x ? 31u - clz(x & (~x + 1u)) : 32u; }
inline uint fused_low(const int nb) { return nb >= 32 ? 0xffffffffu : (nb <= 0 ? 0u : (1u << nb) - 1u); }
% if SHFL == 1:
inline uint fused_brev(const uint v) { uint r; asm("brev.b32 %0, %1;" : "=r"(r) : "r"(v)); return r; }
% else:
#ifdef CLKERNELS_OCLGRIND
/* Oclgrind's interpreter has no llvm.bitreverse, which clang makes of the swaps below */
inline uint fused_brev(const uint v)
{
    uint r = 0u;
    for (int b = 0; b < 32; ++b) r = (r << 1) | ((v >> b) & 1u);
    return r;
}
#else
inline uint fused_brev(uint v)
{
    v = ((v >> 1) & 0x55555555u) | ((v & 0x55555555u) << 1);
    v = ((v >> 2) & 0x33333333u) | ((v & 0x33333333u) << 2);
    v = ((v >> 4) & 0x0F0F0F0Fu) | ((v & 0x0F0F0F0Fu) << 4);
    v = ((v >> 8) & 0x00FF00FFu) | ((v & 0x00FF00FFu) << 8);
    return (v >> 16) | (v << 16);
}
#endif
% endif

inline void fused_add(__local uint* lh, __global uint* gh, const uint len)
{
    if (len == 0u) return;
    if (len <= ${HBINS}u) atomic_inc(&lh[len - 1u]); else atomic_inc(&gh[len - 1u]);
}

/* the ones of w's nb next cells (bit 0 first; nb in 1..32, bits from nb on zero) walked
   from state s: runs closed inside counted (the segment's first one kept in the state);
   lone ones strictly inside the word counted in *n1 by one popcount */
inline uint fused_walk(uint w, const int nb, const uint s, __local uint* lh, __global uint* gh,
                       uint* n1)
{
    uint c = FUSED_OPEN(s);
    if (w == fused_low(nb)) return (s & ~0x7FFFu) | (c + (uint)nb);
    if (w == 0u) {   /* no cell of this colour (most words): the open run closes at bit 0 */
        if (s & FUSED_FRESH) return c << 15;   /* the segment's first run */
        fused_add(lh, gh, c);
        return s & ~0x7FFFu;
    }
    {
        const uint lone = w & ~(w << 1) & ~(w >> 1) & (fused_low(nb - 1) & ~1u);
        *n1 += popcount(lone);
        w &= ~lone;
    }
    const uint lead = fused_ctz(~w);
    uint first = FUSED_FIRST(s);
    if (s & FUSED_FRESH) first = c + lead; else fused_add(lh, gh, c + lead);
    uint pos = lead;
    w >>= lead;
    for (;;) {
        if (w == 0u) { c = 0u; break; }
        const uint z = fused_ctz(w);
        w >>= z;
        pos += z;
        const uint o = fused_ctz(~w);
        pos += o;
        if (pos >= (uint)nb) { c = o; break; }
        fused_add(lh, gh, o);
        w >>= o;
    }
    return (first << 15) | c;
}
</%def>


<%def name="kernel()">\
<%
    NS = 32 + (E - 1) * TAU
    if NS > 64:
        raise ValueError("FUSE keeps 32 + (E - 1) TAU terms in registers: (E - 1) TAU <= 32")
    if FR % 32 or FKW % 32 or WG % 32:
        raise ValueError("FUSE needs FR, FKW and WG multiples of 32")
    W = WG // 32
    H = FR // 32
%>\
__kernel __attribute__((reqd_work_group_size(${WG}, 1, 1)))
void rqa_fused(__global const real_t* restrict x,   /* the series, SERIES_PAD zeros after it */
               const real_t thr, const int n,        /* n: embedded points */
               const int band0, const int nb,         /* this launch's bands */
               __global uint* restrict hist_d, __global uint* restrict hist_v,
               __global uint* restrict hist_w,
               __global uint* restrict counts,        /* per work-group: its recurrences, */
               const int coff,                        /* from entry coff on */
               __global uint* restrict pd,            /* per tile: ${FKW} diagonals */
               __global uint* restrict pc,            /* per tile: ${FR + FKW} columns x 2 */
               __global uint* restrict pr)            /* per tile: ${FR} rows x 2 */
{
    __local uint lh_d[${HBINS}], lh_v[${HBINS}], lh_w[${HBINS}];
    __local uint aprev[${W}][${H}][32];                 /* the group above's A words */
    __local uint cst[${W}][${H}][32], wcst[${W}][${H}][32];   /* column states */
    __local uint rst[${W}][${H}][32], wrst[${W}][${H}][32];   /* row states */
    __local uint lcount;
% if SHFL == 2:
    __local uint shx[${WG}];
% endif
    const int li = get_local_id(0), wl = li & 31, wi = li >> 5;
    for (int b = li; b < ${HBINS}; b += ${WG}) { lh_d[b] = 0u; lh_v[b] = 0u; lh_w[b] = 0u; }
    if (li == 0) lcount = 0u;
    barrier(CLK_LOCAL_MEM_FENCE);
    const int tile = get_group_id(0) * ${W} + wi;
    const int r0 = (band0 + tile % nb) * ${FR}, k0 = 1 + (tile / nb) * ${FKW};
    const int rend = min(r0 + ${FR}, n);
    uint npts = 0u, n1d = 0u, n1v = 0u, n1w = 0u;
    __global uint* const tpd = pd + (size_t)tile * ${FKW};
    __global uint* const tpc = pc + (size_t)tile * ${2 * (FR + FKW)};
    __global uint* const tpr = pr + (size_t)tile * ${2 * FR};
    if (r0 < n && k0 + r0 < n) {   /* the tile has cells (uniform in the warp) */
        for (int h = 0; h < ${H}; ++h) {
            aprev[wi][h][wl] = 0u;
            rst[wi][h][wl] = FUSED_FRESH;
            wrst[wi][h][wl] = FUSED_FRESH;
        }
        const int klast = min(k0 + ${FKW}, n - r0);     /* the tile's diagonals: k < klast */
        const int g0 = k0 + ((klast - 1 - k0) & ~31);   /* its highest group */
        real_t s[${NS}];
        for (int kw = g0; kw >= k0; kw -= 32) {
            const int k = kw + wl;
            uint ds = FUSED_FRESH;
            const int ie = min(rend, n - kw);           /* rows any diagonal of the group has */
            const int iem = min(rend, n - k);           /* my diagonal's */
            uint cs = 0u, wcs = 0u;                     /* the group above's column states */
            for (int hb = r0; hb < ie; hb += 32) {
                const int h = (hb - r0) >> 5;
                uint D = 0u;
${diagonal.dmaj_cells("x + min(hb + k, n - 1)", "r0")}\
                const int cnt = iem - hb;
                D &= fused_low(cnt);
                if (cnt > 0) ds = fused_walk(D, min(cnt, 32), ds, lh_d, hist_d, &n1d);
${diagonal.dmaj_barrel()}\
                {   /* column hb + kw + 32 + wl: the tile's rows t in [lo, hi) of the half */
                    const int c = hb + kw + 32 + wl;
                    const uint Wd = B | aprev[wi][h][wl];
                    aprev[wi][h][wl] = A;
                    const int lo = max(0, kw + 32 + wl - k0 - ${FKW} + 1), hi = min(32, rend - hb);
                    uint cin = cs, win = wcs;
                    if (h == 0 || kw == g0) { cin = FUSED_FRESH; win = FUSED_FRESH; }   /* it enters */
                    cs = cst[wi][h][wl];      /* the group above's, for the half below */
                    wcs = wcst[wi][h][wl];
                    if (c < n && hi > lo) {
                        const uint v = (Wd >> lo) & fused_low(hi - lo);
                        cin = fused_walk(v, hi - lo, cin, lh_v, hist_v, &n1v);
                        win = fused_walk(~v & fused_low(hi - lo), hi - lo, win, lh_w, hist_w, &n1w);
                        npts += popcount(v);
                    }
                    if (hb + 32 >= rend && c < n) {   /* the tile's bottom: the segment ends */
                        tpc[2 * (c - r0 - k0)] = cin;
                        tpc[2 * (c - r0 - k0) + 1] = win;
                    }
                    cst[wi][h][wl] = cin;
                    wcst[wi][h][wl] = win;
                }
                {   /* rows: lane t holds row hb + t, bit j diagonal kw + 31 - j */
                    uint T = D;
% for st, m in ((4, "0x0000FFFFu"), (3, "0x00FF00FFu"), (2, "0x0F0F0F0Fu"), (1, "0x33333333u"), (0, "0x55555555u")):
                    {
                        const uint y = RQA_SHFL(T, wl ^ ${1 << st});
                        T = (wl & ${1 << st}) ? ((T & ~${m}) | ((y >> ${1 << st}) & ${m}))
                                             : ((T & ${m}) | ((y & ${m}) << ${1 << st}));
                    }
% endfor
                    const int i = hb + wl;
                    const int lim = min(k0 + ${FKW}, n - i);   /* the row's diagonals: k < lim */
                    const int lo = max(0, kw + 32 - lim);
                    if (i < rend && lo < 32) {
                        const uint v = fused_brev(T) >> lo;
                        rst[wi][h][wl] = fused_walk(v, 32 - lo, rst[wi][h][wl], lh_v, hist_v, &n1v);
                        wrst[wi][h][wl] = fused_walk(~v & fused_low(32 - lo), 32 - lo, wrst[wi][h][wl],
                                                     lh_w, hist_w, &n1w);
                    }
                }
            }
            if (k < klast) tpd[k - k0] = ds;   /* the diagonal's segment in the band */
        }
        /* the lowest group's A words: column hb + k0 + wl, rows t <= wl (below them its
           cells lie under diagonal k0) */
        const int ie0 = min(rend, n - k0);
        for (int hb = r0; hb < ie0; hb += 32) {
            const int h = (hb - r0) >> 5;
            const int c = hb + k0 + wl;
            if (c < n) {
                uint cin = h ? cst[wi][h - 1][wl] : FUSED_FRESH;
                uint win = h ? wcst[wi][h - 1][wl] : FUSED_FRESH;
                const int hi = min(wl + 1, rend - hb);
                const uint v = aprev[wi][h][wl] & fused_low(hi);
                cin = fused_walk(v, hi, cin, lh_v, hist_v, &n1v);
                win = fused_walk(~v & fused_low(hi), hi, win, lh_w, hist_w, &n1w);
                npts += popcount(v);
                tpc[2 * (c - r0 - k0)] = cin;
                tpc[2 * (c - r0 - k0) + 1] = win;
            }
            const int i = hb + wl;
            if (i < rend) {
                tpr[2 * (i - r0)] = rst[wi][h][wl];
                tpr[2 * (i - r0) + 1] = wrst[wi][h][wl];
            }
        }
    }
    if (n1d) atomic_add(&lh_d[0], n1d);
    if (n1v) atomic_add(&lh_v[0], n1v);
    if (n1w) atomic_add(&lh_w[0], n1w);
    if (npts) atomic_add(&lcount, npts);
    barrier(CLK_LOCAL_MEM_FENCE);
    for (int b = li; b < ${HBINS}; b += ${WG}) {
        if (lh_d[b]) atomic_add(&hist_d[b], lh_d[b]);
        if (lh_v[b]) atomic_add(&hist_v[b], lh_v[b]);
        if (lh_w[b]) atomic_add(&hist_w[b], lh_w[b]);
    }
    if (li == 0) counts[coff + get_group_id(0)] = lcount;
}

/* rqa_fjoin_*: one work-item per lane links its segments of bands band0 .. band0 + nb - 1
   (tiles as rqa_fused numbers them: range-major, nb bands a range) in walk order */
/* the next segment's state s after the open run: a one-run segment lengthens it (0 back);
   otherwise the run that closes in the segment (the open one and the segment's first) is
   returned (0: none) and the segment's last run is the open one */
inline uint fused_next(uint* open, const uint s)
{
    const uint last = FUSED_OPEN(s), first = FUSED_FIRST(s);
    if (s & FUSED_FRESH) { *open += last; return 0u; }
    const uint len = *open + first;
    *open = last;
    return len;
}

inline void fused_count(__global uint* h, const uint len) { if (len) atomic_inc(&h[len - 1u]); }

/* diagonal k's carry (its open black run) through the launch's bands */
__kernel void rqa_fjoin_diag(__global const uint* restrict pd, const int n, const int band0,
                             const int nb, __global uint* restrict carry, __global uint* restrict h)
{
    const int k = 1 + get_global_id(0);
    if (k >= n) return;
    const int r = (k - 1) / ${FKW};
    uint open = carry[k - 1];
    for (int b = 0; b < nb && (band0 + b) * ${FR} < n - k; ++b)
        fused_count(h, fused_next(&open, pd[(size_t)(r * nb + b) * ${FKW} + (k - 1 - r * ${FKW})]));
    carry[k - 1] = open;
}

/* column c's carries (black, white, and cnz: nonzero once a recurrence lies above, as the
   walk-ups of row ranges leave it; while none does its white run touches the top border
   and is dropped unless wborder) through the launch's bands, in each band from its
   highest range down */
__kernel void rqa_fjoin_col(__global const uint* restrict pc, const int n, const int band0,
                            const int nb, const int wborder, __global uint* restrict cb,
                            __global uint* restrict cw, __global uint* restrict cnz,
                            __global uint* restrict hv, __global uint* restrict hw)
{
    const int c = get_global_id(0);
    if (c >= n) return;
    uint ob = cb[c], ow = cw[c];
    int top = cnz[c] == 0u;
    for (int b = 0; b < nb; ++b) {
        const int r0 = (band0 + b) * ${FR};
        if (r0 >= c) break;                     /* no row of the band above the diagonal */
        const int rend = min(r0 + ${FR}, n);
        /* the ranges holding its rows i in [r0, min(rend, c)): k = c - i */
        const int klo = max(1, c - rend + 1), khi = c - r0;
        for (int r = (khi - 1) / ${FKW}; r >= (klo - 1) / ${FKW}; --r) {
            const size_t at = (size_t)(r * nb + b) * ${2 * (FR + FKW)}
                              + 2 * (c - r0 - (1 + r * ${FKW}));
            fused_count(hv, fused_next(&ob, pc[at]));
            const uint s = pc[at + 1], len = fused_next(&ow, s);
            if (!(s & FUSED_FRESH)) {   /* a black cell in the segment: the top run ends */
                if (wborder || !top) fused_count(hw, len);
                top = 0;
            }
        }
    }
    cb[c] = ob;
    cw[c] = ow;
    if (!top) cnz[c] = 1u;
}

/* row i (one band: this launch's) right to left: its run touching the diagonal (head) and,
   when it has several, the one at its right border (tail), both length | colour << 31,
   as rqa_symjoin takes them; the runs between counted */
__kernel void rqa_fjoin_row(__global const uint* restrict pr, const int n, const int band0,
                            const int nb, __global uint* restrict head, __global uint* restrict tail,
                            __global uint* restrict hv, __global uint* restrict hw)
{
    const int i = band0 * ${FR} + get_global_id(0);
    if (i >= min(n, (band0 + nb) * ${FR})) return;
    const int b = i / ${FR} - band0;
    uint ob = 0u, ow = 0u, tl = 0u;
    int c0 = -1;   /* the row's colour at its right border, until its run is the tail */
    for (int r = i < n - 1 ? (n - 2 - i) / ${FKW} : -1; r >= 0; --r) {
        const size_t at = (size_t)(r * nb + b) * ${2 * FR} + 2 * (i - (band0 + b) * ${FR});
        const uint sb = pr[at];
        if (c0 < 0)
            c0 = ((sb & FUSED_FRESH) || FUSED_FIRST(sb)) ? 1 : 0;
        for (int colour = 1; colour >= 0; --colour) {
            const uint len = fused_next(colour ? &ob : &ow, colour ? sb : pr[at + 1]);
            if (len && colour == c0) {   /* the first run to close: at the right border */
                tl = len | ((uint)colour << 31);
                c0 = 2;
            } else {
                fused_count(colour ? hv : hw, len);
            }
        }
    }
    head[i] = ob ? (ob | 0x80000000u) : ow;
    tail[i] = tl;
}
</%def>
