## Bit-word primitives of rqa_lines (BITS > 0): ctz/popcount of a run-walk word and the
## black-start walk (WALK > 0) shared by the column and row run walks. T: the names of
## _names.mako. Import with <%namespace name="bits" file="/rqa_lines/_bits.mako"/>.
<%namespace name="vec" file="/_vecops.mako"/>

## ctzw/popw (CBITS=1, set by the host on PoCL: clang's builtins when the compiler has
## them), RQA_INLINE and, SHARE with VEC > 1, RQA_VLOAD_UL (an unaligned vector load).
<%def name="builtins(T)">\
<% WT, WB, WU, VEC, ULV = T.WT, T.WB, T.WU, T.VEC, T.ULV %>\
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
% if WALK == 3 and VEC > 1:
/* WALK=3's lane words: popv (bits set), hibv (index of the highest set bit, -1 for 0)
   and ctzv (of the lowest; lanes where it counts are never 0) of every lane. PoCL runs OpenCL's vector popcount() and clz() lane by lane; there the
   bit-count is plain vector arithmetic instead (LLVM makes it one vpopcntq where the CPU
   has one) and the highest bit the count of the word with every lower bit set. */
#ifdef RQA_CLANG_BITS
RQA_INLINE ${ULV} popv(${ULV} v) {
    v = v - ((v >> 1) & (${ULV})0x5555555555555555UL);
    v = (v & (${ULV})0x3333333333333333UL) + ((v >> 2) & (${ULV})0x3333333333333333UL);
    v = (v + (v >> 4)) & (${ULV})0x0f0f0f0f0f0f0f0fUL;
    return (v * (${ULV})0x0101010101010101UL) >> 56;
}
RQA_INLINE ${ULV} hibv(${ULV} v) {
    v |= v >> 1; v |= v >> 2; v |= v >> 4; v |= v >> 8; v |= v >> 16; v |= v >> 32;
    return popv(v) - (${ULV})1;
}
RQA_INLINE ${ULV} ctzv(const ${ULV} v) { return popv(~v & (v - (${ULV})1)); }
#else
#  define popv(v) popcount(v)
#  define hibv(v) ((${ULV})63 - clz(v))
#  define ctzv(v) hibv((v) & ((${ULV})0 - (v)))
#endif
% endif
${vec.ops(CBITS)}\
</%def>

## One word of a run walk by black run starts (WALK=1, 2): s marks the black run starts,
## e the white run starts of the word, cur the colour of the run entering it (its length
## vlen if black, wlen if white). Closed black runs go to the histogram hv, white ones to
## hw (if wcount); with head, the walk's first closed run is returned in *head instead
## (length | colour << 31). Leaves last (start of the open white run) and bopen (start of
## the open black run, or -1).
<%def name="black_start_walk(T, s, e, cur, vlen, wlen, wcount, hv, hw, head=None)">\
<% WT, WB = T.WT, T.WB %>\
    /* WALK=1: the run entering the word (colour ${cur}) closes at the first run start p0.
       Black runs of length 1 closed inside the word (a black start followed by a white
       start) are counted with one popcount; then one step per black start p: the white
       run before it is [last, p); an isolated p reopens white at p + 1, a longer black run
       ends at the next white start (one ctz) or stays open (bopen). */
    const ${WT} iso = ${s} & (${e} >> 1);
% if PH or DPAIR:
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
