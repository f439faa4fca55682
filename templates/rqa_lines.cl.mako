## params: E, TAU, METRIC, REAL, MODE, VEC, WG, HBINS, JOINT, THEILER_MATRIX, WBORDER, BITS, PH, CBITS, SHARE, SYM, WALK
## WALK=1 (BITS=2; the CPU default): vertical runs (column and row walks) are walked black
## run start by black run start instead of transition by transition. Black runs of length 1
## that close inside the word (most of them at low RR) are counted with one popcount per
## word; the walk then takes one step per white run (its length: the black start minus
## the white start), and finds the end of the rare longer black runs with one ctz. Half
## the steps, and no store-to-load chain on histogram bin 1. WALK=0: the transition walk.
## SYM=1 (needs SHARE=1; auto- and joint RQA, whose matrix is symmetric): only the cells on
## and above the main diagonal are computed. Column j of the full matrix is (column j above
## the diagonal) + (cell (j, j)) + (row j right of the diagonal, read top-down). The
## vertical launch covers the columns j >= row0 and walks rows i < j only (the column's open
## run at the diagonal stays in the carryovers); MODE "horizontal" transposes the stored
## 64x64 bit tiles of the row block and walks each row i from column i + 1: its runs are the
## vertical runs of the lower triangle. A row's first run (it touches the diagonal) is not
## counted but returned in hhead, its open last run (touches the bottom border) in htail;
## the host joins the column tail, the diagonal cell and the row head (dnr.py).
## SHARE=1 (needs BITS=2): every cell is computed once per row block. The vertical launch
## also stores its 64-row column words in sbits (word w of the row block, column j at
## sbits[w * sstride + SPAD + j], zero padding of SPAD columns on both sides); the
## diagonal launch of the same row block then gathers each diagonal's word from those
## column words (bit r of column i + k) instead of recomputing the distances. Only the
## columns the diagonals can reach are stored (j > row0 + skmin - 64).
## CBITS=1 (set by the host on PoCL): clang's ctz/popcount builtins instead of OpenCL's
## clz()/popcount(), which PoCL 3.0 runs as out-of-line calls (Oclgrind lacks the builtins).
## PH > 0: lengths <= PH are first counted in a private per-work-item histogram
## (no atomics at all; good on CPUs, where private arrays live in L1), flushed once.
## BITS=1: each lane first packs 32 rows of recurrences into a
## bit word (branch-free vector code), then walks the word run by run with clz,
## so the histogram work is per run, not per cell.
## Line detection for RQA by Divide & Recombine (Rawald et al.), one sub-matrix
## set per launch. The recurrence matrix R[i][j] (i: row = point of x, j: column
## = point of y) is never stored: every cell is recomputed from the raw series.
##
## MODE "vertical": a work-item owns VEC consecutive columns j and walks the rows
##   row0 .. row0+nrows-1 of the launch, tracking per column the black (vertical
##   line) run, the white (recurrence-time) run and the recurrence-point count.
##   Runs crossing the sub-matrix's lower border continue through the carryover
##   buffers vcarry / wcarry / npts (one element per column).
## MODE "diagonal": a work-item owns VEC consecutive diagonals k = j - i and walks
##   the same rows; a diagonal's run continues through dcarry (one per diagonal).
##   The diagonal sub-matrix is (row block) x (diagonal block): carries only flow
##   from one row block to the next, so all sub-matrices of a row block are
##   independent (and may run on different devices).
##
## Line lengths <= HBINS go to a work-group-local histogram (uncontended local
## atomics) merged once per work-group into the launch's 32-bit global histogram;
## longer (rare) lines go straight to global atomics. The host folds each launch's
## 32-bit counts into 64-bit totals (accumulate kernel), so counts never overflow.
##
## Recurrence: d < thr, where d is the *squared* Euclidean distance (thr = r^2,
## no sqrt) or the maximum / Manhattan distance (thr = r). JOINT=1: R = R1 & R2
## from a second pair of series (joint recurrence). THEILER_MATRIX=1: cells with
## |i - j| < w are not recurrent for vertical/white lines and counts (CRP-toolbox
## convention); otherwise w only enters the diagonal range chosen by the host.
## WBORDER=0 drops white lines that touch the top or bottom border of a column.
<%namespace name="metric" file="_metric.mako"/>
${metric.real_type(REAL)}
<%
    V = "" if VEC == 1 else str(VEC)
    RV = REAL + V
    CV = ("int" if REAL == "float" else "long") + V
    UV = "uint" + V
    IV = "int" + V
    LANES = "0123456789abcdef"
    # BITS=1: 32 rows per run-walk word; BITS=2: 64 (two packed 32-row halves), so the
    # per-word costs of the walk (loop exit misprediction, carry handling) halve.
    WT = "ulong" if BITS == 2 else "uint"
    WB = 64 if BITS == 2 else 32
    WU = "UL" if BITS == 2 else "u"
    if SHARE and BITS != 2:
        raise ValueError("SHARE=1 needs BITS=2")
    if SYM and not SHARE:
        raise ValueError("SYM=1 needs SHARE=1")
    if MODE == "horizontal" and not SYM:
        raise ValueError("MODE horizontal needs SYM=1")
    if WALK == 2 and PH < 64:
        raise ValueError("WALK=2 needs PH >= 64 (a power of two)")
    SPAD = 64 + VEC
    ULV = "ulong" + V
    def lane(expr, l):
        return expr if VEC == 1 else "(%s).s%s" % (expr, LANES[l])
    def vload(ptr):
        return "*(%s)" % ptr if VEC == 1 else "vload%d(0, %s)" % (VEC, ptr)
    def cmp_u(expr):
        # a comparison result as a lane mask usable by select() on uint lanes
        if VEC == 1:
            return "(%s)" % expr
        return "convert_int%d(%s)" % (VEC, expr) if REAL == "double" else "(%s)" % expr
%>
<%def name="dist(acc, xs, yv, xoff)">\
    ${RV} ${acc};   /* starts at the first term: 0 + t == t exactly (t >= +0), one add less */
% for m in range(E):
    {
        const ${RV} _d = (${RV})(${xs}[${xoff} + ${m * TAU}]) - ${yv}[${m}];
%   if METRIC == "euclidean":
        ${acc} ${"=" if m == 0 else "+="} _d * _d;  /* FP_CONTRACT OFF: rounded product + sum, identical on every platform */
%   elif METRIC == "maximum":
%     if m == 0:
        ${acc} = fabs(_d);
%     else:
        { const ${RV} _a = fabs(_d); ${acc} = ${"(_a > %s) ? _a : %s" % (acc, acc) if VEC == 1 else "select(%s, _a, _a > %s)" % (acc, acc)}; }
%     endif
%   elif METRIC == "manhattan":
        ${acc} ${"=" if m == 0 else "+="} fabs(_d);
%   else:
<% raise ValueError("unknown METRIC %r" % METRIC) %>
%   endif
    }
% endfor
</%def>

#define SPAN ${(E - 1) * TAU}
/* integer min/max inline (PoCL 3.0 calls its min()/max() out of line) */
#define IMIN(a, b) ((a) < (b) ? (a) : (b))
#define IMAX(a, b) ((a) > (b) ? (a) : (b))
#define SPAD ${SPAD}
/* No fused multiply-add contraction: every platform rounds d*d and the sum the same
   way, so float32 histograms are bit-identical across OpenCL runtimes (with mad()
   or contraction, PoCL and Intel's runtime disagreed on a few threshold cells). */
#pragma OPENCL FP_CONTRACT OFF

inline void hist_add(uint* ph, __local uint* lh, __global uint* gh, const uint len)
{
% if PH:
    if (len <= ${PH}u) ph[len - 1u] += 1u;
    else
% endif
    if (len <= ${HBINS}u) atomic_inc(&lh[len - 1u]);
    else atomic_inc(&gh[len - 1u]);
}

<%def name="black_start_walk(s, e, cur, vlen, wlen, wcount, hv, hw, head=None)">\
    /* WALK=1: the run entering the word (colour ${cur}) closes at the first run start p0.
       Black runs of length 1 closed inside the word (a black start followed by a white
       start) are counted with one popcount; then one step per black start p: the white
       run before it is [last, p); an isolated p reopens white at p + 1, a longer black run
       ends at the next white start (one ctz) or stays open (bopen). */
    const ${WT} iso = ${s} & (${e} >> 1);
% if PH:
    *n1 += popw(iso);   /* a register, not bin 1 of the private histogram (a store chain) */
% else:
    if (iso) atomic_add(&${hv[1]}[0], popw(iso));
% endif
    const int p0 = ctzw(${s} | ${e});
    {
        const uint closed = (${cur} ? ${vlen} : ${wlen}) + (uint)p0;
% if head:
        if (*${head} == 0u) *${head} = closed | (${cur} << 31);
        else if (${cur}) hist_add(${", ".join(hv)}, closed);
        else hist_add(${", ".join(hw)}, closed);
% else:
        if (${cur}) hist_add(${", ".join(hv)}, closed);
        else if (closed > 0u && ${wcount}) hist_add(${", ".join(hw)}, closed);
% endif
    }
    ${WT} sw = ${s};
    int last = p0;      /* start of the open white run (!${cur}: p0 is the first black start) */
    int bopen = -1;     /* start of the black run left open at the word's end */
% if WALK == 2:
    /* steps of 8 black starts without data-dependent branches (the trip count of a
       per-run loop is mispredicted once per word): a step past the last start has
       p = ${WB} and adds 0 to some bin; only the rare black runs longer than 1 branch */
    const int cnt = (int)popw(sw);
    for (int k0 = 0; k0 < cnt; k0 += 8) {
%   for k in range(8):
        {
            const int p = sw ? ctzw(sw) : ${WB};
            sw &= sw - (${WT})1;
            const uint ok = (uint)(p < ${WB});
            ${hw[0]}[(uint)(p - last - 1) & ${PH - 1}u] += ok & (uint)(p > last);
            const uint isob = (uint)(iso >> (p & ${WB - 1})) & 1u;
            last = ok ? p + 1 : last;
            if (ok & (isob ^ 1u)) {
                const ${WT} above = ${e} & (~(${WT})1 << p);   /* white starts after p */
                if (above) { last = ctzw(above); hist_add(${", ".join(hv)}, (uint)(last - p)); }
                else bopen = p;
            }
        }
%   endfor
    }
% else:
    /* white runs closed inside the word are at most ${WB} long: straight to the bin */
<%  wadd = ("%s[(uint)(p - last) - 1u] += 1u;" % hw[0]) if PH >= WB else ("hist_add(%s, (uint)(p - last));" % ", ".join(hw)) %>\
    #define RQA_BLACK_AT(p) \
        if ((iso >> (p)) & (${WT})1) last = (p) + 1; \
        else { \
            const ${WT} above = ${e} & (~(${WT})1 << (p)); /* white starts after p */ \
            if (above) { last = ctzw(above); hist_add(${", ".join(hv)}, (uint)(last - (p))); } \
            else bopen = (p); \
        }
    if (!${cur}) {      /* p0 is the first black start: no white run before it */
        sw &= sw - (${WT})1;
        RQA_BLACK_AT(p0)
    }
    while (sw) {
        const int p = ctzw(sw);
        sw &= sw - (${WT})1;
        ${wadd}
        RQA_BLACK_AT(p)
    }
    #undef RQA_BLACK_AT
% endif
</%def>
% if BITS:
/* PoCL 3.0 runs OpenCL's clz() and popcount() as out-of-line library calls (~15% of
   the walk); clang's builtins become single instructions. Other runtimes: OpenCL's. */
% if CBITS:
#ifdef __has_builtin
#  if __has_builtin(__builtin_ctzll) && __has_builtin(__builtin_popcountll)
#    define RQA_CLANG_BITS 1
#  endif
#endif
% endif
#ifdef RQA_CLANG_BITS
#  define RQA_INLINE inline __attribute__((always_inline))
% if SHARE and VEC > 1:
/* unaligned vector load as one instruction (PoCL's vload${VEC} is an out-of-line call) */
typedef ${ULV} __attribute__((aligned(8))) rqa_ulongv_u;
#  define RQA_VLOAD_UL(p) (*(__global const rqa_ulongv_u*)(p))
% endif
RQA_INLINE int ctzw(const ${WT} v) { return ${"__builtin_ctzll" if BITS == 2 else "__builtin_ctz"}(v); }  /* v != 0 */
RQA_INLINE uint popw(const ${WT} v) { return (uint)${"__builtin_popcountll" if BITS == 2 else "__builtin_popcount"}(v); }
#else
#  define RQA_INLINE inline
% if SHARE and VEC > 1:
#  define RQA_VLOAD_UL(p) vload${VEC}(0, p)
% endif
inline int ctzw(const ${WT} v) { return ${WB - 1} - (int)clz(v & (0${WU} - v)); }  /* v != 0 */
inline uint popw(const ${WT} v) { return (uint)popcount(v); }
#endif

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
${black_start_walk("s", "e", "cur", "*vr", "*wr", "1" if WBORDER else "np_before > 0u", ("ph_v", "lh_v", "gh_v"), ("ph_w", "lh_w", "gh_w"))}
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

/* Runs of one diagonal over nb (<= ${WB}) steps packed in b (same transition walk). */
RQA_INLINE void diag_runs(${WT} b, const int nb, uint* dr, uint* ph, __local uint* lh,
                      __global uint* gh, uint* n1)
{
    const ${WT} m = (nb >= ${WB}) ? ~(${WT})0 : (((${WT})1 << nb) - (${WT})1);
    b &= m;
    uint cur = (*dr > 0u) ? 1u : 0u;
% if WALK and PH >= WB:
    /* WALK: few branches (a diagonal word holds ~1 line longer than 1 at low RR, and the
       branches of a walk over it were mispredicted most of the time). s: run starts, e:
       run ends (the white cell after a run); lines of length 1 closed in the word: one
       popcount; the others pair starts and ends in order, two pairs without branches. */
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
% if SYM:

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
${black_start_walk("s", "e", "cur", "*len", "*len", None, ("ph_v", "lh_v", "gh_v"), ("ph_w", "lh_w", "gh_w"), head="head")}
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

/* In-place transpose of a 64x64 bit matrix (a[r] bit c -> a[c] bit r): swap the
   off-diagonal blocks of 32, then of 16 inside each block, ... down to 1. */
RQA_INLINE void transpose64(ulong* a)
{
<%
    tmasks = [(32, "0x00000000FFFFFFFFUL"), (16, "0x0000FFFF0000FFFFUL"), (8, "0x00FF00FF00FF00FFUL"),
              (4, "0x0F0F0F0F0F0F0F0FUL"), (2, "0x3333333333333333UL"), (1, "0x5555555555555555UL")]
%>
% for j, mk in tmasks:
    for (int q = 0; q < 32; ++q) {
        const int k = ((q & ~${j - 1}) << 1) | (q & ${j - 1});   /* rows with bit ${j} clear */
        const ulong t = ((a[k] >> ${j}) ^ a[k + ${j}]) & ${mk};
        a[k] ^= t << ${j};
        a[k + ${j}] ^= t;
    }
% endfor
}
% endif
% endif

__kernel __attribute__((reqd_work_group_size(${WG}, 1, 1)))
void rqa_${MODE}(__global const real_t* restrict x,     /* row series */
                 __global const real_t* restrict y,     /* column series, padded by VEC on the left */
                 __global const real_t* restrict x2,    /* JOINT: second row series */
                 __global const real_t* restrict y2,    /* JOINT: second column series (padded) */
                 const real_t thr, const real_t thr2,
                 const int n_rows, const int n_cols,    /* embedded points of x and y */
                 const int row0, const int nrows,       /* rows of this launch */
                 const int lane0, const int nlanes,     /* first column (vertical) / diagonal k */
                 const int w,                           /* Theiler window */
                 const int carry0,                      /* lane of carry element 0 */
% if MODE == "vertical":
                 __global uint* restrict vcarry, __global uint* restrict wcarry,
                 __global uint* restrict npts,
                 __global uint* restrict hist_v, __global uint* restrict hist_w
% elif MODE == "horizontal":
                 __global uint* restrict hhead, __global uint* restrict htail,  /* per row */
                 __global uint* restrict hist_v, __global uint* restrict hist_w
% else:
                 __global uint* restrict dcarry,
                 __global uint* restrict hist_d
% endif
% if SHARE:
                 , __global ulong* restrict sbits, const int sstride  /* packed column words of the row block */
                 , const int skmin   /* lowest diagonal of any diagonal launch */
% endif
                 )
{
% if MODE != "diagonal":
    __local uint lh_v[${HBINS}];
    __local uint lh_w[${HBINS}];
    for (int b = get_local_id(0); b < ${HBINS}; b += ${WG}) { lh_v[b] = 0u; lh_w[b] = 0u; }
% else:
    __local uint lh_d[${HBINS}];
    for (int b = get_local_id(0); b < ${HBINS}; b += ${WG}) lh_d[b] = 0u;
% endif
    barrier(CLK_LOCAL_MEM_FENCE);
    /* private histograms: set up after the barrier, so that they are not live across one
       (PoCL then keeps them on the work-item's stack, not in a per-work-group array) */
    uint ph_v[${max(PH, 1)}], ph_w[${max(PH, 1)}], ph_d[${max(PH, 1)}];
% if PH:
    for (int b = 0; b < ${PH}; ++b) { ${"ph_d[b] = 0u;" if MODE == "diagonal" else "ph_v[b] = 0u; ph_w[b] = 0u;"} }
% endif
    uint n_iso = 0u;   /* WALK, PH: lines of length 1 counted by popcount, added to bin 1 */

% if MODE == "horizontal":
    /* work-item g: the 64 rows of stored word g of the row block, i = row0 + 64 g + r;
       row i is walked from column i + 1 to the last one, 64 columns per step */
    const int g = get_global_id(0);
    if (g < nlanes) {
        const int ib = row0 + 64 * g;
        const int nr = IMIN(64, row0 + nrows - ib);
        __global const ulong* sw = sbits + g * sstride + SPAD;
        uint len[64], col[64], head[64];
        ulong a[64];
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
        for (int r = 0; r < nr; ++r) {
            const int i = ib + r;
            if (i + 1 >= n_cols) { hhead[i] = 0u; htail[i] = 0u; continue; }
            const uint open = len[r] | (col[r] << 31);
            if (head[r]) { hhead[i] = head[r]; htail[i] = open; }
            else { hhead[i] = open; htail[i] = 0u; }   /* one run: touches the diagonal and the bottom */
        }
    }
% else:
    const int t0 = get_global_id(0) * ${VEC};     /* first lane of this work-item, launch-relative */
    if (t0 < nlanes) {
        const int l0 = lane0 + t0;                 /* first column j / diagonal k */
% if VEC == 1:
        const ${IV} lid = l0;
        const ${IV} lvalid = (${IV})(t0 < nlanes);
% else:
        const ${IV} lid = (${IV})(l0) + (${IV})(${", ".join(str(l) for l in range(VEC))});
        const ${IV} lvalid = ((${IV})(t0) + (${IV})(${", ".join(str(l) for l in range(VEC))})) < (${IV})(nlanes);
% endif
% if MODE == "vertical":
        /* column coordinates are fixed for the whole walk */
        ${RV} yv[${E}];
%   if JOINT:
        ${RV} yv2[${E}];
%   endif
%   for m in range(E):
        yv[${m}] = ${vload("y + %d + l0 + %d" % (VEC, m * TAU))};
%     if JOINT:
        yv2[${m}] = ${vload("y2 + %d + l0 + %d" % (VEC, m * TAU))};
%     endif
%   endfor
%   if BITS:
        uint vra[${VEC}], wra[${VEC}], npa[${VEC}], ba[${VEC * WB // 32}];
        for (int l = 0; l < ${VEC}; ++l) {
            vra[l] = vcarry[l0 - carry0 + l]; wra[l] = wcarry[l0 - carry0 + l];
            npa[l] = npts[l0 - carry0 + l];
        }
%     if SYM:
        /* rows i < j of some lane only (the words below are never read) */
        const int iend = IMIN(row0 + nrows, l0 + ${VEC - 1});
%     else:
        const int iend = row0 + nrows;
%     endif
        for (int ib = row0; ib < iend; ib += ${WB}) {
            const int nb = IMIN(${WB}, row0 + nrows - ib);
          for (int h = 0; h < ${WB // 32}; ++h) {   /* 32-row halves of the word */
            const int nh = IMIN(IMAX(nb - 32 * h, 0), 32);
            ${UV} bits = (${UV})0u;
            for (int r = 0; r < nh; ++r) {
                const int i = ib + 32 * h + r;
${dist("acc", "x", "yv", "i")}
                ${IV} rec = ${cmp_u("acc < (%s)thr" % RV)};
%     if JOINT:
${dist("acc2", "x2", "yv2", "i")}
                rec &= ${cmp_u("acc2 < (%s)thr2" % RV)};
%     endif
%     if THEILER_MATRIX:
                rec &= (abs_diff((${IV})(i), lid) >= (${UV})(w))${"" if VEC > 1 else " ? 1 : 0"};
%     endif
%     if VEC == 1:
                bits |= (rec ? 1u : 0u) << r;
%     else:
                bits |= as_${UV}(rec) & (${UV})(1u << r);
%     endif
            }
%     if VEC == 1:
            ba[h] = bits;
%     else:
            vstore${VEC}(bits, h, ba);
%     endif
          }
            for (int l = 0; l < ${VEC}; ++l)
                if (t0 + l < nlanes) {
                    const ${WT} wd = ${"((ulong)ba[%d + l] << 32) | (ulong)ba[l]" % VEC if BITS == 2 else "ba[l]"};
%     if SHARE:
                    /* only columns a diagonal launch of this row block can read:
                       j >= row0 - 63 + skmin (e.g. the upper triangle, auto-RQA) */
                    if (${"1" if SYM else "l0 + l > row0 + skmin - 64"})
                        sbits[((ib - row0) >> 6) * sstride + SPAD + l0 + l] = wd;
%     endif
%     if SYM:
                    const int nbj = IMIN(nb, l0 + l - ib);   /* rows above the diagonal */
                    if (nbj > 0)
                        column_runs(wd, nbj, &vra[l], &wra[l], &npa[l], ph_v, lh_v, hist_v, ph_w, lh_w, hist_w, &n_iso);
%     else:
                    column_runs(wd, nb, &vra[l], &wra[l], &npa[l], ph_v, lh_v, hist_v, ph_w, lh_w, hist_w, &n_iso);
%     endif
                }
        }
        for (int l = 0; l < ${VEC}; ++l) {
            vcarry[l0 - carry0 + l] = vra[l]; wcarry[l0 - carry0 + l] = wra[l];
            npts[l0 - carry0 + l] = npa[l];
        }
%   else:
%   if VEC == 1:
        ${UV} vr = vcarry[l0 - carry0], wr = wcarry[l0 - carry0], np = npts[l0 - carry0];
%   else:
        ${UV} vr = vload${VEC}(0, vcarry + l0 - carry0), wr = vload${VEC}(0, wcarry + l0 - carry0), np = vload${VEC}(0, npts + l0 - carry0);
%   endif
        for (int i = row0; i < row0 + nrows; ++i) {
${dist("acc", "x", "yv", "i")}
            ${IV} rec = lvalid & ${cmp_u("acc < (%s)thr" % RV)};
%   if JOINT:
${dist("acc2", "x2", "yv2", "i")}
            rec &= ${cmp_u("acc2 < (%s)thr2" % RV)};
%   endif
%   if THEILER_MATRIX:
            rec &= (abs_diff((${IV})(i), lid) >= (${UV})(w))${"" if VEC > 1 else " ? 1 : 0"};
%   endif
            const ${IV} nrec = lvalid & ~rec;
%   if VEC == 1:
            const int ev = (nrec && vr > 0u);
            const int ew = (rec && wr > 0u)${"" if WBORDER else " && np > 0u"};
            if (ev) hist_add(ph_v, lh_v, hist_v, vr);
            if (ew) hist_add(ph_w, lh_w, hist_w, wr);
            vr = rec ? vr + 1u : (lvalid ? 0u : vr);
            wr = rec ? 0u : (lvalid ? wr + 1u : wr);
            np += rec ? 1u : 0u;
%   else:
            const ${IV} ev = nrec & (vr > (${UV})0u);
            const ${IV} ew = rec & (wr > (${UV})0u)${"" if WBORDER else " & (np > (%s)0u)" % UV};
            if (any(ev | ew)) {
%     for l in range(VEC):
                if (${lane("ev", l)}) hist_add(ph_v, lh_v, hist_v, ${lane("vr", l)});
                if (${lane("ew", l)}) hist_add(ph_w, lh_w, hist_w, ${lane("wr", l)});
%     endfor
            }
            vr = select(select(vr, (${UV})0u, nrec), vr + 1u, rec);
            wr = select(select(wr, wr + 1u, nrec), (${UV})0u, rec);
            np = select(np, np + 1u, rec);
%   endif
        }
%   if VEC == 1:
        vcarry[l0 - carry0] = vr; wcarry[l0 - carry0] = wr; npts[l0 - carry0] = np;
%   else:
        vstore${VEC}(vr, 0, vcarry + l0 - carry0); vstore${VEC}(wr, 0, wcarry + l0 - carry0); vstore${VEC}(np, 0, npts + l0 - carry0);
%   endif
%   endif
% else:
        /* diagonal k: cell (i, i + k) is valid for 0 <= i + k < n_cols (and i < n_rows) */
%   if SHARE:
        /* gather each diagonal's 64-row word from the column words the vertical launch
           stored: bit r of diagonal k is bit r of column ib + r + k. Words are aligned to
           row0 like the vertical ones; cells outside the matrix read the zero padding
           (a diagonal run ending at the border closes there: same histogram). */
        uint dra[${VEC}];
        for (int l = 0; l < ${VEC}; ++l) dra[l] = dcarry[l0 - carry0 + l];
        const int klast = l0 + ${VEC - 1};
        const int ibs = IMAX(row0, -klast);
        const int ie = IMIN(row0 + nrows, n_cols - l0);
        for (int ib = row0 + ((ibs - row0) & ~63); ib < ie; ib += 64) {
            const int nb = IMIN(64, row0 + nrows - ib);
            __global const ulong* sw = sbits + ((ib - row0) >> 6) * sstride + SPAD + ib + l0;
            ${ULV} dw = (${ULV})0UL;
            if (nb == 64) {   /* full word: constant trip count, unrolled by the compiler */
                for (int r = 0; r < 64; ++r)
                    dw |= ${"sw[r]" if VEC == 1 else "RQA_VLOAD_UL(sw + r)"} & (${ULV})(1UL << r);
            } else {
                for (int r = 0; r < nb; ++r)
                    dw |= ${"sw[r]" if VEC == 1 else "RQA_VLOAD_UL(sw + r)"} & (${ULV})(1UL << r);
            }
%     if VEC == 1:
            if (t0 < nlanes) diag_runs(dw, nb, &dra[0], ph_d, lh_d, hist_d, &n_iso);
%     else:
            ulong da[${VEC}];
            vstore${VEC}(dw, 0, da);
            for (int l = 0; l < ${VEC}; ++l)
                if (t0 + l < nlanes) diag_runs(da[l], nb, &dra[l], ph_d, lh_d, hist_d, &n_iso);
%     endif
        }
        for (int l = 0; l < ${VEC}; ++l) dcarry[l0 - carry0 + l] = dra[l];
%   elif BITS:
        uint dra[${VEC}], ba[${VEC * WB // 32}];
        for (int l = 0; l < ${VEC}; ++l) dra[l] = dcarry[l0 - carry0 + l];
        const int klast = l0 + ${VEC - 1};
        const int ib0 = IMAX(row0, -klast);
        const int ie = IMIN(row0 + nrows, n_cols - l0);
        for (int ib = ib0; ib < ie; ib += ${WB}) {
            const int nb = IMIN(${WB}, ie - ib);
            /* every cell (i, i + k) of the word inside the matrix for every lane? */
            const int inside = (ib + l0 >= 0) && (ib + nb - 1 + klast < n_cols);
          for (int h = 0; h < ${WB // 32}; ++h) {   /* 32-step halves of the word */
            const int nh = IMIN(IMAX(nb - 32 * h, 0), 32);
            ${UV} bits = (${UV})0u;
            for (int r = 0; r < nh; ++r) {
                const int i = ib + 32 * h + r;
                ${RV} yv[${E}];
%     if JOINT:
                ${RV} yv2[${E}];
%     endif
%     for m in range(E):
                yv[${m}] = ${vload("y + %d + i + l0 + %d" % (VEC, m * TAU))};
%       if JOINT:
                yv2[${m}] = ${vload("y2 + %d + i + l0 + %d" % (VEC, m * TAU))};
%       endif
%     endfor
${dist("acc", "x", "yv", "i")}
                ${IV} rec = ${cmp_u("acc < (%s)thr" % RV)};
                if (!inside) {   /* word reaches past the matrix for some lane */
                    const ${IV} jj = (${IV})(i) + lid;
                    rec &= (jj >= (${IV})0) & (jj < (${IV})(n_cols));
                }
%     if JOINT:
${dist("acc2", "x2", "yv2", "i")}
                rec &= ${cmp_u("acc2 < (%s)thr2" % RV)};
%     endif
%     if VEC == 1:
                bits |= (rec ? 1u : 0u) << r;
%     else:
                bits |= as_${UV}(rec) & (${UV})(1u << r);
%     endif
            }
%     if VEC == 1:
            ba[h] = bits;
%     else:
            vstore${VEC}(bits, h, ba);
%     endif
          }
            for (int l = 0; l < ${VEC}; ++l)
                if (t0 + l < nlanes) diag_runs(${"((ulong)ba[%d + l] << 32) | (ulong)ba[l]" % VEC if BITS == 2 else "ba[l]"}, nb, &dra[l], ph_d, lh_d, hist_d, &n_iso);
        }
        for (int l = 0; l < ${VEC}; ++l) dcarry[l0 - carry0 + l] = dra[l];
%   else:
%   if VEC == 1:
        ${UV} dr = dcarry[l0 - carry0];
%   else:
        ${UV} dr = vload${VEC}(0, dcarry + l0 - carry0);
%   endif
        const int klast = l0 + ${VEC - 1};
        const int ib = IMAX(row0, -klast);
        const int ie = IMIN(row0 + nrows, n_cols - l0);
        for (int i = ib; i < ie; ++i) {
            ${RV} yv[${E}];
%   if JOINT:
            ${RV} yv2[${E}];
%   endif
%   for m in range(E):
            yv[${m}] = ${vload("y + %d + i + l0 + %d" % (VEC, m * TAU))};
%     if JOINT:
            yv2[${m}] = ${vload("y2 + %d + i + l0 + %d" % (VEC, m * TAU))};
%     endif
%   endfor
            const ${IV} jj = (${IV})(i) + lid;
            const ${IV} cvalid = lvalid & (jj >= (${IV})0) & (jj < (${IV})(n_cols));
${dist("acc", "x", "yv", "i")}
            ${IV} rec = cvalid & ${cmp_u("acc < (%s)thr" % RV)};
%   if JOINT:
${dist("acc2", "x2", "yv2", "i")}
            rec &= ${cmp_u("acc2 < (%s)thr2" % RV)};
%   endif
            const ${IV} nrec = cvalid & ~rec;
%   if VEC == 1:
            if (nrec && dr > 0u) hist_add(ph_d, lh_d, hist_d, dr);
            dr = rec ? dr + 1u : (cvalid ? 0u : dr);
%   else:
            const ${IV} ed = nrec & (dr > (${UV})0u);
            if (any(ed)) {
%     for l in range(VEC):
                if (${lane("ed", l)}) hist_add(ph_d, lh_d, hist_d, ${lane("dr", l)});
%     endfor
            }
            dr = select(select(dr, (${UV})0u, nrec), dr + 1u, rec);
%   endif
        }
%   if VEC == 1:
        dcarry[l0 - carry0] = dr;
%   else:
        vstore${VEC}(dr, 0, dcarry + l0 - carry0);
%   endif
%   endif
% endif
    }
% endif
% if PH:
    ${"ph_d" if MODE == "diagonal" else "ph_v"}[0] += n_iso;
    for (int b = 0; b < ${PH}; ++b) {
%   if MODE != "diagonal":
        if (ph_v[b]) atomic_add(&lh_v[b], ph_v[b]);
        if (ph_w[b]) atomic_add(&lh_w[b], ph_w[b]);
%   else:
        if (ph_d[b]) atomic_add(&lh_d[b], ph_d[b]);
%   endif
    }
% endif
    barrier(CLK_LOCAL_MEM_FENCE);
% if MODE != "diagonal":
    for (int b = get_local_id(0); b < ${HBINS}; b += ${WG}) {
        if (lh_v[b]) atomic_add(&hist_v[b], lh_v[b]);
        if (lh_w[b]) atomic_add(&hist_w[b], lh_w[b]);
    }
% else:
    for (int b = get_local_id(0); b < ${HBINS}; b += ${WG}) {
        if (lh_d[b]) atomic_add(&hist_d[b], lh_d[b]);
    }
% endif
}

/* Fold a launch's 32-bit histogram into the 64-bit total and clear it. */
__kernel void rqa_accumulate(__global uint* restrict h32, __global ulong* restrict h64, const int n)
{
    const int b = get_global_id(0);
    if (b < n) {
        const uint c = h32[b];
        if (c) { h64[b] += (ulong)c; h32[b] = 0u; }
    }
}
