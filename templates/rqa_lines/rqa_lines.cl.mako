## params: E, TAU, METRIC, REAL, MODE, VEC, WG, HBINS, JOINT, THEILER_MATRIX, WBORDER, BITS, PH, CBITS, SHARE, SYM, WALK, FMA, PERCOL, UNR, PACK, PLANES, HCH, SHFL, DPAIR, WARM, DMAJ, EXACT
## version: 1
## legacy-hashes: 2e7fe6f705ceb46a
## PACK=1 (BITS, VEC=1; the GPU default): a cell's bit is the sign of acc - thr, shifted
## into the word with the rows taken last to first, and aligned full halves read the row
## values with 16-byte loads (_recurrence.mako: packed_halves). The same bits as PACK=0.
## PLANES=1 (SHARE, VEC=1, WALK < 3; the GPU default): the column words are stored as
## two 32-bit planes (word w's low halves at sbits[2w * sstride + SPAD + j], its high
## halves one plane further), so that the diagonal launch gathers the half holding bit r
## only: 4 bytes a cell through L1 instead of 8.
## SHFL=1 (PLANES, MODE diagonal; NVIDIA): a warp builds its 32 diagonals' words from
## four coalesced plane loads per work-item and a barrel shift through warp shuffles
## (PTX shfl.sync), instead of 64 gathers each (_diagonal.mako: body_shfl); SHFL=2 the
## same through local memory (any device; the tests' check of the bit moves). The same
## bits as the gather.
## EXACT > 0 (REAL float, a device with fp64; the host's default for float32): the cells
## within the float32 error bound B of the threshold (pyedmcl/rqa/exact.py) are redone in
## double from the raw float64 series, exactly as the float64 kernel computes them, and
## decided by d64 < thr64: float32 histograms equal float64 ones bit for bit
## (common/_exact.mako; every cell-deciding site: _recurrence.mako, DMAJ's cells). The
## bit-word paths flag near cells beside their bits and redo a flagged 32-row half after
## it (_exactfix.mako): EXACT=1 (CPUs) keeps a near bit per cell and redoes those cells,
## EXACT=2 (GPUs) one flag per half and redoes the whole half; the cell-by-cell paths
## (BITS=0, the walk-ups) redo a near cell at once.
## DMAJ=1 (SYM, PLANES, SHFL, PACK, auto-RQA's upper triangle from diagonal 1; GPUs): the
## cells are computed diagonal-major. MODE "diagonal" is the row block's first launch: a
## work-item owns diagonal k and keeps the coordinate terms s(i) = f(x_i - y_{i+k}) of
## its diagonal in registers, so that a cell costs one term instead of E (cell (i, i + k)
## sums s(i), s(i + TAU), ... in the direct distance's order: the same bits); it walks
## its diagonal and moves the warp's 32 diagonal words into column words by a barrel
## shift (RQA_SHFL), stored as two partial planes: sbits (the warp's own 32 columns) and
## qbits (the 31 after them), a column's word being their OR. MODE "vertical" then walks
## the columns from those words (no distance), and "horizontal" reads the same ORed
## words (_diagonal.mako: body_dmaj, _vertical.mako: body_dmaj). The same histograms.
## DPAIR=1 (WALK=1, PH=0; GPUs): the diagonal walk takes one step per black run (start
## to end) instead of one per colour change, and every walk counts its lines of length 1
## in a register, added to the local bin once per work-item, instead of one local atomic
## per word (_runs.mako: diag_runs, _bits.mako, _hist.mako). The same histograms.
## MODE "warmcol" / "warmdiag" (row ranges, pyedmcl.rqa.ranges): the carries a lane
## holds at row row0, found by walking up from row row0 - 1, 32 cells a step, until its
## open run began (a column: black or white; a diagonal: black), one work-item per lane
## (WARM 0) or a work-group of WARM = 32 per lane, a row each (GPUs), no histogram
## (_warm.mako).
## MODE "collect" (no other value shapes it): SYM's row totals merged into the vertical
## and white ones, each histogram's last used bin, the column counts summed (_hist.mako:
## collect_kernel); the host takes the folds and open-run counts every program ends with
## (rqa_accumulate, rqa_add_runs) from this small program too.
## HCH > 0 (SYM and PLANES; GPUs): MODE "horizontal" walks the rows of a row block in
## chunks of HCH 64-column tiles, HCH work-items per (32-row plane, chunk), in two
## rounds: each transposes half a tile in registers, then walks rows across the round's
## tiles from local memory, and
## leaves each row's first and last pieces of the chunk in hrec; MODE "hjoin" (one
## (row, chunk) per work-item) joins them into the runs that cross chunk edges and the
## rows' first and last runs (_sym.mako). The same runs as HCH = 0, whose work-item walks
## 64 whole rows: a few hundred of them per row block, too few for a GPU.
## WALK=3 (BITS=2, VEC >= 2, PH >= 64; the CPU default): the VEC lanes of a work-item
## (columns, rows of a transposed tile, SHARE diagonals) are walked together in vector
## registers, branch-free per 64-cell word: popcount for lines of length 1, one
## private-bin increment per lane for the run entering the word, white lines (diagonals:
## lines) pairing starts with ends by ctz, one increment per lane and step (a lane with
## none left adds to its spare bin PH + l); the rare longer black lines by a scalar loop
## (_lanewalk.mako, decision 0056). Other modes and paths take WALK=1 there.
## WALK=1 (BITS=2): vertical runs (column and row walks) are walked black
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
## clz()/popcount(), which PoCL 3.0 runs as out-of-line calls (Oclgrind lacks the builtins),
## and the inline forms of the lane-vector built-ins (select, any, clamp: /_vecops.mako;
## WALK=3's vector bit counts as plain vector arithmetic): PoCL calls those too, and its
## lane walk took 62 ms against 30 ms inline (N = 10,000, 2 Xeon cores).
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
## Recurrence: d < thr, where d is the *squared* Euclidean distance (thr: the host's
## threshold for the chosen rule, pyedmcl/rqa/threshold.py; no sqrt; FMA=1 sums the squares
## by fma() as PyRQA's contracted kernels do; PERCOL=1: column j's threshold is tcol[j]
## instead of thr -- FAN, each column's k nearest, an asymmetric matrix) or the maximum / Manhattan distance (thr = r). JOINT=1: R = R1 & R2
## from a second pair of series (joint recurrence). THEILER_MATRIX=1: cells with
## |i - j| < w are not recurrent for vertical/white lines and counts (CRP-toolbox
## convention); otherwise w only enters the diagonal range chosen by the host.
## WBORDER=0 drops white lines that touch the top or bottom border of a column.
##
## Parts (this folder): _names (type names per REAL/VEC/BITS), _recurrence (distance and
## recurrence decision, bit packing), _hist (histogram accumulation), _bits (bit-word
## primitives, black-start walk), _runs (column and diagonal run walks), _lanewalk (WALK=3:
## the walks over vector lanes), _sym (SYM: row walk, transpose, MODE "horizontal"),
## _vertical and _diagonal (the mode bodies).
<%namespace name="metric" file="/common/_metric.mako"/>
<%namespace name="names" file="/rqa_lines/_names.mako"/>
<%namespace name="hist" file="/rqa_lines/_hist.mako"/>
<%namespace name="bits" file="/rqa_lines/_bits.mako"/>
<%namespace name="runs" file="/rqa_lines/_runs.mako"/>
<%namespace name="sym" file="/rqa_lines/_sym.mako"/>
<%namespace name="vertical" file="/rqa_lines/_vertical.mako"/>
<%namespace name="diagonal" file="/rqa_lines/_diagonal.mako"/>
<%namespace name="warm" file="/rqa_lines/_warm.mako"/>
<%namespace name="exact" file="/common/_exact.mako"/>
<%namespace name="fix" file="/rqa_lines/_exactfix.mako"/>
${metric.real_type(REAL)}
<%
    if SHARE and BITS != 2:
        raise ValueError("SHARE=1 needs BITS=2")
    if SYM and not SHARE:
        raise ValueError("SYM=1 needs SHARE=1")
    if PERCOL and SYM:
        raise ValueError("PERCOL=1 (an asymmetric matrix) excludes SYM=1")
    if MODE == "horizontal" and not SYM:
        raise ValueError("MODE horizontal needs SYM=1")
    if WALK == 2 and PH < 64:
        raise ValueError("WALK=2 needs PH >= 64 (a power of two)")
    if PACK and (not BITS or VEC != 1):
        raise ValueError("PACK=1 needs BITS > 0 and VEC=1")
    if PLANES and (not SHARE or VEC != 1 or WALK == 3):
        raise ValueError("PLANES=1 needs SHARE=1, VEC=1 and WALK < 3")
    if HCH and not (SYM and PLANES):
        raise ValueError("HCH > 0 needs SYM=1 and PLANES=1")
    if HCH and (HCH < 2 or HCH > 32 or 32 % HCH or WG % HCH):
        raise ValueError("HCH must be 2, 4, 8, 16 or 32 and divide WG")
    if MODE == "horizontal" and PLANES and not HCH:
        raise ValueError("MODE horizontal with PLANES=1 needs HCH > 0")
    if MODE == "hjoin" and not HCH:
        raise ValueError("MODE hjoin needs HCH > 0")
    if MODE in ("warmcol", "warmdiag") and (BITS or PACK or SHARE or SYM):
        raise ValueError("MODE warmcol/warmdiag walks cells: BITS, PACK, SHARE and SYM off")
    if SHFL and not (MODE == "diagonal" and PLANES and WG % 32 == 0):
        raise ValueError("SHFL > 0 needs MODE diagonal, PLANES=1 and WG a multiple of 32")
    if DPAIR and (WALK != 1 or PH):
        raise ValueError("DPAIR=1 needs WALK=1 and PH=0")
    if DMAJ and not (SYM and PLANES and PACK and (SHFL or MODE != "diagonal") and not JOINT and not PERCOL
                     and not THEILER_MATRIX and not FMA and MODE in ("vertical", "diagonal", "horizontal")):
        raise ValueError("DMAJ=1 needs SYM, PLANES, PACK (and SHFL for MODE diagonal), no "
                         "JOINT, PERCOL, THEILER_MATRIX or FMA, and MODE vertical, diagonal or "
                         "horizontal")
    if EXACT and REAL != "float":
        raise ValueError("EXACT=1 checks float32 kernels: REAL float")
    if WALK == 3 and (BITS != 2 or VEC < 2 or PH < 64):
        raise ValueError("WALK=3 needs BITS=2, VEC >= 2 and PH >= 64")
    T = names.attr.Names(REAL, VEC, BITS)
    IV = T.IV
%>

#define SPAN ${(E - 1) * TAU}
/* integer min/max inline (PoCL 3.0 calls its min()/max() out of line) */
#define IMIN(a, b) ((a) < (b) ? (a) : (b))
#define IMAX(a, b) ((a) > (b) ? (a) : (b))
#define SPAD ${T.SPAD}
% if PACK:
/* PACK: a cell's bit, the sign bit of d = acc - thr (never -0: acc >= +0, thr > 0), which
   the packing shifts in by one funnel shift. Oclgrind's interpreter has no funnel shift
   (llvm.fshl): there the same bit from a compare. */
#ifdef CLKERNELS_OCLGRIND
#  define RQA_SIGN(d) ((uint)((d) < (real_t)0))
#else
#  define RQA_SIGN(d) ${"(as_uint(d) >> 31)" if REAL == "float" else "((uint)(as_ulong(d) >> 63))"}
#endif
% endif
% if SHFL == 1:
/* SHFL=1: lane `from` of the warp's v (PTX shfl.sync: every lane of the warp runs it;
   volatile, so that the compiler moves it into no branch) */
inline uint rqa_shfl(const uint v, const int from)
{
    uint r;
    asm volatile("shfl.sync.idx.b32 %0, %1, %2, 0x1f, 0xffffffff;" : "=r"(r) : "r"(v), "r"(from));
    return r;
}
#define RQA_SHFL(v, from) rqa_shfl(v, from)
% elif SHFL == 2:
/* SHFL=2: the shuffle through local memory (every work-item of the group runs it) */
inline uint rqa_shfl_local(__local uint* shx, const uint v, const int from)
{
    const int l = get_local_id(0);
    barrier(CLK_LOCAL_MEM_FENCE);
    shx[l] = v;
    barrier(CLK_LOCAL_MEM_FENCE);
    return shx[(l & ~31) + from];
}
#define RQA_SHFL(v, from) rqa_shfl_local(shx, v, from)
% endif
% if HCH:
#define HFULL 0x40000000u   /* hrec: the chunk is one run of the row */
#define HLEN 0x3FFFFFFFu    /* hrec: a piece's length */
% endif
/* No fused multiply-add contraction: every platform rounds d*d and the sum the same
   way, so float32 histograms are bit-identical across OpenCL runtimes (with mad()
   or contraction, PoCL and Intel's runtime disagreed on a few threshold cells). */
#pragma OPENCL FP_CONTRACT OFF
% if MODE not in ("symjoin", "collect"):
${exact.functions()}
${fix.cell_function()}
% endif

${hist.hist_add()}
% if BITS:
${bits.builtins(T)}

${runs.column_runs(T)}

${runs.diag_runs(T)}
% if SYM:

${sym.functions(T)}
% endif
% endif

<%namespace name="symjoin" file="/rqa_lines/_symjoin.mako"/>\

% if MODE == "symjoin":
${symjoin.join_kernel()}
% elif MODE == "collect":
${hist.collect_kernel()}
% else:
__kernel __attribute__((reqd_work_group_size(${WG}, 1, 1)))
void rqa_${MODE}(__global const real_t* restrict x,     /* row series */
                 __global const real_t* restrict y,     /* column series, padded by VEC on the left */
                 __global const real_t* restrict x2,    /* JOINT: second row series */
                 __global const real_t* restrict y2,    /* JOINT: second column series (padded) */
% if PERCOL:
                 __global const real_t* restrict tcol,  /* PERCOL: one threshold per column (padded like y) */
% endif
${exact.args(percol=PERCOL)}\
                 const real_t thr, const real_t thr2,
                 const int n_rows, const int n_cols,    /* embedded points of x and y */
                 const int row0, const int nrows,       /* rows of this launch */
                 const int lane0, const int nlanes,     /* first column (vertical) / diagonal k */
                 const int w,                           /* Theiler window */
                 const int carry0,                      /* lane of carry element 0 */
% if MODE in ("vertical", "warmcol"):
                 __global uint* restrict vcarry, __global uint* restrict wcarry,
                 __global uint* restrict npts,
                 __global uint* restrict hist_v, __global uint* restrict hist_w
% elif MODE == "horizontal" and HCH:
                 __global uint* restrict hrec, const int nchm,   /* pieces per (row, chunk) */
                 __global uint* restrict hist_v, __global uint* restrict hist_w
% elif MODE == "horizontal":
                 __global uint* restrict hhead, __global uint* restrict htail,  /* per row */
                 __global uint* restrict hist_v, __global uint* restrict hist_w
% elif MODE == "hjoin":
                 __global const uint* restrict hrec, const int nchm,
                 __global uint* restrict hhead, __global uint* restrict htail,  /* per row */
                 __global uint* restrict hist_v, __global uint* restrict hist_w
% else:
                 __global uint* restrict dcarry,
                 __global uint* restrict hist_d
% endif
% if SHARE and MODE != "hjoin":
                 , __global ${"uint" if PLANES else "ulong"}* restrict sbits, const int sstride  /* packed column words of the row block */
                 , const int skmin   /* lowest diagonal of any diagonal launch */
% endif
% if DMAJ:
                 , __global uint* restrict qbits   /* DMAJ: the second partial planes (sbits' layout) */
% endif
                 )
{
% if MODE in ("warmcol", "warmdiag"):
${warm.body(T)}\
}
% else:
${hist.setup()}
% if SHFL == 2:
    __local uint shx[${WG}];   /* SHFL=2: the shuffles' exchange */
% endif

% if MODE == "horizontal" and HCH:
${symjoin.horizontal_chunks(T)}\
% elif MODE == "horizontal":
${sym.horizontal(T)}\
% elif MODE == "hjoin":
${symjoin.hjoin(T)}\
% else:
    const int t0 = get_global_id(0) * ${VEC};     /* first lane of this work-item, launch-relative */
% if SHFL:
    {   /* SHFL: every work-item runs the shuffles (it walks only lanes t0 < nlanes) */
% else:
    if (t0 < nlanes) {
% endif
        const int l0 = lane0 + t0;                 /* first column j / diagonal k */
% if VEC == 1:
        const ${IV} lid = l0;
        const ${IV} lvalid = (${IV})(t0 < nlanes);
% else:
        const ${IV} lid = (${IV})(l0) + (${IV})(${", ".join(str(l) for l in range(VEC))});
        const ${IV} lvalid = ((${IV})(t0) + (${IV})(${", ".join(str(l) for l in range(VEC))})) < (${IV})(nlanes);
% endif
% if MODE == "vertical":
${vertical.body(T)}\
% else:
${diagonal.body(T)}\
% endif
    }
% endif
${hist.merge()}\
}
% endif
% endif

${hist.accumulate()}
