## Lane-vector operations that every runtime compiles inline.
## Import with <%namespace name="vec" file="/_vecops.mako"/>.
##
## PoCL runs OpenCL's vector built-ins (select, any, integer max/min, clamp, shuffle2,
## vloadN, popcount, clz) as out-of-line calls of its kernel library. The vectors then
## pass through memory: in loops over lane vectors that was a third of the time and more
## (PoCL 3.0, AVX-512). Its compiler is clang, whose operators and built-ins become
## single instructions. The host passes INL=1 where the kernel runs on PoCL
## (:func:`clkernels.devices.inline_vector_ops`); elsewhere OpenCL's built-ins stay.
## Both forms give the same values:
##   VSELECT(a, b, c)    select(a, b, c) of vectors: the ternary operator, which takes
##                       the same most-significant bit of each lane of c
##   VANY(m)             any(m) of an integer mask vector: the sign of its OR reduction
##                       (where the compiler has it: clang 14 and later)
##   VMAXI(a, b), VMINI(a, b), VCLAMPI(x, lo, hi)   of integer lanes
##   ISFINITE(x)         isfinite(x) of a scalar, as a condition (non-zero: finite)
## and the defs `shift_in` (shuffle2 moving the lanes up by one), `rotate` (shuffle),
## `load` (vloadN), `ctz`,
## `convert` (convert_T), `or_halves` (the OR of a vector's lanes, the same everywhere) and
## `lane_bits` (a compare mask's lanes as the bits of one integer).
## Arguments are evaluated more than once: pass side-effect-free expressions.

<%!
def mask_type(T):
    """The unsigned lane type of a shuffle mask for vectors of T ("float16" -> "uint")."""
    return {"char": "uchar", "uchar": "uchar", "short": "ushort", "ushort": "ushort",
            "int": "uint", "uint": "uint", "float": "uint", "long": "ulong", "ulong": "ulong",
            "double": "ulong"}[T.rstrip("0123456789")]
%>
## the macros, and `typedef`s of the unaligned vector types that `load` reads
## (`types`: OpenCL vector type names such as "float16", "uint8")
<%def name="ops(INL, types=())">\
<%
    ALIGN = {"char": 1, "uchar": 1, "short": 2, "ushort": 2, "int": 4, "uint": 4, "float": 4,
             "long": 8, "ulong": 8, "double": 8}
%>\
% if INL:
/* PoCL: inline forms of OpenCL's vector built-ins (clkernels/templates/_vecops.mako) */
#define VSELECT(a, b, c) ((c) ? (b) : (a))
#if defined(__has_builtin) && __has_builtin(__builtin_reduce_or)
#  define VANY(m) (__builtin_reduce_or(m) < 0)
#else
#  define VANY(m) any(m)   /* clang before 14 */
#endif
#define VMAXI(a, b) ((a) > (b) ? (a) : (b))
#define VMINI(a, b) ((a) < (b) ? (a) : (b))
#define VCLAMPI(x, lo, hi) ((x) < (lo) ? (lo) : ((x) > (hi) ? (hi) : (x)))
#define ISFINITE(x) __builtin_isfinite(x)
%   for t in dict.fromkeys(types):
typedef ${t} __attribute__((aligned(${ALIGN[t.rstrip("0123456789")]}))) ${t}_u;
%   endfor
% else:
#define VSELECT(a, b, c) select(a, b, c)
#define VANY(m) any(m)
#define VMAXI(a, b) max(a, b)
#define VMINI(a, b) min(a, b)
#define VCLAMPI(x, lo, hi) clamp(x, lo, hi)
#define ISFINITE(x) isfinite(x)
% endif
</%def>

## the W lanes of `v` (type T, a vector of W lanes) moved up by one, lane `first` of
## (v, fill) into lane 0 (W: fill's first, 2W - 1: its last): shuffle2(v, fill, (first,
## 0, 1, ..., W - 2))
<%def name="shift_in(INL, v, fill, T, W, first=None)">\
<%
    idx = ", ".join(str(i) for i in [W if first is None else first] + list(range(W - 1)))
    mask = mask_type(T)
%>\
% if INL:
__builtin_shufflevector(${v}, ${fill}, ${idx})\
% else:
shuffle2(${v}, ${fill}, (${mask}${W})(${idx}))\
% endif
</%def>

## the W lanes of `v` (type T, a vector of W lanes) rotated down by `r` (0 < r < W): lane
## i takes lane (i + r) mod W; shuffle(v, (i + r) mod W ...)
<%def name="rotate(INL, v, T, W, r)">\
<%
    idx = ", ".join(str((i + r) % W) for i in range(W))
    mask = mask_type(T)
%>\
% if INL:
__builtin_shufflevector(${v}, ${v}, ${idx})\
% else:
shuffle(${v}, (${mask}${W})(${idx}))\
% endif
</%def>

## vload of the vector type T (e.g. "float16", declared in `ops`' types when INL) at
## `ptr` (a pointer to its element type in address space `space`), any alignment
<%def name="load(INL, T, ptr, space='__global')">\
% if INL:
(*(${space} const ${T}_u*)(${ptr}))\
% else:
vload${T.lstrip("abcdefghijklmnopqrstuvwxyz")}(0, ${ptr})\
% endif
</%def>

## index of the lowest set bit of the scalar `v` (non-zero) of integer type T ("uint",
## "ulong"): a clang built-in with INL, else from OpenCL's clz()
<%def name="ctz(INL, v, T)">\
% if INL:
${"__builtin_ctzll" if T == "ulong" else "__builtin_ctz"}(${v})\
% else:
(${63 if T == "ulong" else 31} - (int)clz((${v}) & ((${T})0 - (${v}))))\
% endif
</%def>

## the vector `v` converted to the vector type T of as many lanes (convert_T, rounding
## to nearest even)
<%def name="convert(INL, v, T)">\
% if INL:
__builtin_convertvector(${v}, ${T})\
% else:
convert_${T}(${v})\
% endif
</%def>

## the OR of the W lanes of `v` (an integer vector of type T + W) by halves, as lines
## `const T<w> NAME<w>_ = <previous>.lo | <previous>.hi;` down to the scalar `NAME1_`
## (plain operators: no reduction built-in, which PoCL calls and Oclgrind's
## uninitialised-value plugin mishandles on compare masks)
<%def name="or_halves(v, T, W, name)">\
<% w, prev = W, v %>\
% while w > 1:
<% w //= 2 %>\
                const ${T}${w if w > 1 else ""} ${name}${w}_ = ${prev}.lo | ${prev}.hi;
<% prev = "%s%d_" % (name, w) %>\
% endwhile
</%def>

## the lanes of the W-lane compare mask `cond` (an int vector expression: -1 true, 0
## false) as the bits of `const uint NAME1_` (bit i: lane i), through `const uintW
## MASK` = the lanes' bits and `or_halves`. With INL on a 16-lane mask where the compiler
## targets AVX-512 (clang defines __AVX512F__ there), one mask move instead
## (vpmovd2m: PoCL turned the OR tree into eight shuffles and ORs); the same bits.
<%def name="lane_bits(INL, cond, W, MASK, NAME)">\
<% fast = INL and W == 16 %>\
% if fast:
#if defined(__AVX512F__) && defined(__has_builtin)
#if __has_builtin(__builtin_ia32_cvtd2mask512)
#define LANE_BITS_AVX512_
#endif
#endif
#ifdef LANE_BITS_AVX512_
                const uint ${NAME}1_ = (uint)__builtin_ia32_cvtd2mask512(as_int16(${cond}));
#else
% endif
                const uint${W} ${MASK} = as_uint${W}(${cond}) & (uint${W})(${", ".join("%du" % (1 << b) for b in range(W))});
${or_halves(MASK, "uint", W, NAME)}\
% if fast:
#endif
#undef LANE_BITS_AVX512_
% endif
</%def>
