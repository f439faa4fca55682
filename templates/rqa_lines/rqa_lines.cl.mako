## params: E, TAU, METRIC, REAL, MODE, VEC, WG, HBINS, JOINT, THEILER_MATRIX, WBORDER, BITS, PH, CBITS, VHINT, SHARE, SYM, WALK, FMA, PERCOL, UNR, PACK, PLANES, HCH, SHFL, DPAIR, WARM, DMAJ, EXACT, NTHR, WBOX, DSEG
## version: 1
## legacy-hashes: 2e7fe6f705ceb46a
## What each value and mode does: README.md in this folder (the family's documentation).
<%namespace name="metric" file="/common/_metric.mako"/>
<%namespace name="names" file="/rqa_lines/_names.mako"/>
<%namespace name="hist" file="/rqa_lines/_hist.mako"/>
<%namespace name="bits" file="/rqa_lines/_bits.mako"/>
<%namespace name="runs" file="/rqa_lines/_runs.mako"/>
<%namespace name="sym" file="/rqa_lines/_sym.mako"/>
<%namespace name="vertical" file="/rqa_lines/_vertical.mako"/>
<%namespace name="diagonal" file="/rqa_lines/_diagonal.mako"/>
<%namespace name="warm" file="/rqa_lines/_warm.mako"/>
<%namespace name="boxes" file="/rqa_lines/_boxes.mako"/>
<%namespace name="exact" file="/common/_exact.mako"/>
<%namespace name="fix" file="/rqa_lines/_exactfix.mako"/>
<%namespace name="khist" file="/rqa_lines/_khist.mako"/>\
<%namespace name="kvert" file="/rqa_lines/_kvert.mako"/>\
<%namespace name="batch" file="/rqa_lines/_batch.mako"/>\
<%namespace name="bstats" file="/rqa_lines/_batchstats.mako"/>\
<%namespace name="shfl" file="/rqa_lines/_shfl.mako"/>\
<%namespace name="dseg" file="/rqa_lines/_dseg.mako"/>\
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
    if VHINT and VEC == 1:
        raise ValueError("VHINT=1 needs VEC > 1 (the hint names the lane vector type)")
    if HCH and (HCH < 2 or HCH > 32 or 32 % HCH or WG % HCH):
        raise ValueError("HCH must be 2, 4, 8, 16 or 32 and divide WG")
    if MODE == "horizontal" and PLANES and not HCH:
        raise ValueError("MODE horizontal with PLANES=1 needs HCH > 0")
    if MODE == "hjoin" and not HCH:
        raise ValueError("MODE hjoin needs HCH > 0")
    if WBOX and (MODE != "warmcol" or WBOX > 3):
        raise ValueError("WBOX (1..3 box levels) is MODE warmcol's")
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
    khist.check()   # NTHR's values
    dseg.check()
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
${shfl.macros()}
% if HCH:
#define HFULL 0x40000000u   /* hrec: the chunk is one run of the row */
#define HLEN 0x3FFFFFFFu    /* hrec: a piece's length */
% endif
${dseg.defines()}\
/* No fused multiply-add contraction: every platform rounds d*d and the sum the same
   way, so float32 histograms are bit-identical across OpenCL runtimes (with mad()
   or contraction, PoCL and Intel's runtime disagreed on a few threshold cells). */
#pragma OPENCL FP_CONTRACT OFF
% if MODE not in ("symjoin", "collect", "boxes"):
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
% elif MODE == "boxes":
${boxes.boxes_kernel()}
% elif MODE == "djoin":
${dseg.join_kernel()}
% elif MODE in ("bvertical", "bdiagonal"):
${batch.kernel(T)}\
% elif MODE == "bstats":
${bstats.kernel()}\
% else:
__kernel __attribute__((reqd_work_group_size(${WG}, 1, 1)))${" __attribute__((vec_type_hint(%s)))" % T.IV if VHINT else ""}
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
                 __global uint* restrict hist_v, __global uint* restrict hist_w${warm.box_arg()}
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
${dseg.arg()}\
                 __global uint* restrict hist_d
% endif
% if SHARE and MODE != "hjoin":
                 , __global ${"uint" if PLANES else "ulong"}* restrict sbits, const int sstride  /* packed column words of the row block */
                 , const int skmin   /* lowest diagonal of any diagonal launch */
% endif
% if DMAJ:
                 , __global uint* restrict qbits   /* DMAJ: the second partial planes (sbits' layout) */
% endif
${khist.args()}\
                 )
{
% if MODE in ("warmcol", "warmdiag"):
${warm.body(T)}\
}
% else:
% if NTHR > 1:
${khist.setup()}
% else:
${hist.setup()}
% endif
% if SHFL == 2:
    __local uint shx[${WG}];   /* SHFL=2: the shuffles' exchange */
% endif

% if MODE == "horizontal" and HCH:
${symjoin.horizontal_chunks(T)}\
% elif MODE == "horizontal" and NTHR > 1:
    #pragma unroll 1
    for (int kt = 0; kt < ${NTHR}; ++kt) {   /* NTHR: threshold kt's row walks */
${khist.names()}\
${sym.horizontal(T)}\
        n_isok[kt] += n_iso;
    }
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
% if MODE == "vertical" and NTHR > 1:
${kvert.body(T)}\
% elif MODE == "vertical":
${vertical.body(T)}\
% elif NTHR > 1:
        #pragma unroll 1
        for (int kt = 0; kt < ${NTHR}; ++kt) {   /* NTHR: threshold kt's diagonals */
${khist.names()}\
${diagonal.body(T)}\
            n_isok[kt] += n_iso;
        }
% else:
${diagonal.body(T)}\
% endif
    }
% endif
% if NTHR > 1:
${khist.merge()}\
% else:
${hist.merge()}\
% endif
}
% endif
% endif

${hist.accumulate()}
