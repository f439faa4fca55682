## SHFL's diagonal walk of rqa_lines (MODE diagonal): the 64-row words of a warp's 32
## diagonals built from the column planes by warp shuffles (or local memory, SHFL=2).
## T: the names of _names.mako.
## Import with <%namespace name="shfl" file="/rqa_lines/_shfl.mako"/>.

## SHFL=1 (PLANES, VEC 1, WG a multiple of 32; NVIDIA; 2: the same through local
## memory, for tests on any device): the 32 work-items of a warp own
## the diagonals kw .. kw + 31 and build their 64-row words from the column planes
## together. Work-item l loads columns kw + l and kw + l + 32 of each plane (four
## coalesced loads a word, where the gather made 64), and a five-stage barrel shift
## through warp shuffles moves bit r of column kw + l + r into bit r of diagonal
## kw + l: stage s takes the bits r with bit s set from the column 2^s further on
## (RQA_SHFL, rqa_lines.cl.mako). Every work-item of the warp runs every word of the
## warp's rows (the shuffles need all 32); a work-item walks only its own words, the
## same words and bits as the gather.
<%def name="body_shfl(T)">\
        const int wl = t0 & 31;                  /* lane in the warp */
        const int kw = lane0 + (t0 - wl);        /* the warp's first diagonal */
        const int mine = t0 < nlanes;
        uint dr = mine ? dcarry[l0 - carry0] : 0u;
        const int ibo = row0 + ((IMAX(row0, -l0) - row0) & ~63);   /* this diagonal's words */
        const int ieo = IMIN(row0 + nrows, n_cols - l0);
% if SHFL == 2:
        /* SHFL=2: shuffles through local memory (shx), a barrier each: the group's words */
        const int kg = lane0 + (t0 - (int)get_local_id(0)), kl = kg + ${WG - 1};
% else:
        const int kg = kw, kl = kw + 31;
% endif
        const int ie = IMIN(row0 + nrows, n_cols - kg);           /* the warp's words */
        /* the next word's plane values are loaded before this word's shuffles */
        int ib = row0 + ((IMAX(row0, -kl) - row0) & ~63);
        uint nlo_a = 0u, nlo_b = 0u, nhi_a = 0u, nhi_b = 0u;
        if (ib < ie) {
${plane_loads("ib")}\
        }
        for (; ib < ie; ib += 64) {
            const int nb = IMIN(64, row0 + nrows - ib);
            uint lo_a = nlo_a, lo_b = nlo_b, hi_a = nhi_a, hi_b = nhi_b;
            if (ib + 64 < ie) {
${plane_loads("ib + 64")}\
            }
% for s, m in enumerate(("0xAAAAAAAAu", "0xCCCCCCCCu", "0xF0F0F0F0u", "0xFF00FF00u", "0xFFFF0000u")):
            {   /* stage ${s}: bits r with r & ${1 << s} from ${1 << s} columns on */
                const int from = (wl + ${1 << s}) & 31;
                const int wrap = wl + ${1 << s} >= 32;
                const uint la = RQA_SHFL(lo_a, from), lb = RQA_SHFL(lo_b, from);
                const uint ha = RQA_SHFL(hi_a, from), hb = RQA_SHFL(hi_b, from);
                lo_a = bitselect(lo_a, wrap ? lb : la, ${m});
                hi_a = bitselect(hi_a, wrap ? hb : ha, ${m});
%   if s < 4:
                lo_b = bitselect(lo_b, lb, ${m});   /* columns past 63 are never read */
                hi_b = bitselect(hi_b, hb, ${m});
%   endif
            }
% endfor
            if (mine && ib >= ibo && ib < ieo)
                diag_runs(((ulong)hi_a << 32) | (ulong)lo_a, nb, &dr, ph_d, lh_d, hist_d, &n_iso);
        }
        if (mine) dcarry[l0 - carry0] = dr;
</%def>

## SHFL: the plane values of the word at row `at` that work-item wl loads: columns
## kw + wl and kw + wl + 32 of the low plane, 32 further on of the high one (zero outside
## the buffer), into nlo_a, nlo_b, nhi_a, nhi_b.
<%def name="plane_loads(at)">\
            {
                const int c = SPAD + ${at} + kw + wl;    /* column kw + wl of the plane rows */
                __global const uint* sp = sbits + 2 * ((${at} - row0) >> 6) * sstride + c;
                nlo_a = (c >= 0 && c < sstride) ? sp[0] : 0u;
                nlo_b = (c + 32 >= 0 && c + 32 < sstride) ? sp[32] : 0u;
                nhi_a = (c + 32 >= 0 && c + 32 < sstride) ? sp[sstride + 32] : 0u;
                nhi_b = (c + 64 >= 0 && c + 64 < sstride) ? sp[sstride + 64] : 0u;
            }
</%def>

## The RQA_SHFL(v, from) macro of SHFL 1 and 2 (rqa_lines.cl.mako, before the kernels).
<%def name="macros()">\
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
</%def>
