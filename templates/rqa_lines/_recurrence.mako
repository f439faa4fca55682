## The recurrence decision of rqa_lines: distance of a row point to VEC column points and
## the cell's colour (threshold, JOINT second pair, THEILER_MATRIX band), and the packing
## of 32 cells per lane into a bit word (BITS). T: the names of _names.mako.
## Import with <%namespace name="rec" file="/rqa_lines/_recurrence.mako"/>.
<%namespace name="fix" file="/rqa_lines/_exactfix.mako"/>
<%!
def term(metric, d):
    """A coordinate's term of the distance, from its difference ``d``: the square
    (euclidean) or the magnitude (maximum, manhattan). dist() and DMAJ's terms along a
    diagonal (_diagonal.mako) both take it, so that the two sum the same values."""
    return "%s * %s" % (d, d) if metric == "euclidean" else "fabs(%s)" % d
%>

## Distance between row point xoff of xs and the column coordinates yv, into acc (declared
## here; squared for euclidean). FMA=1: the squares after the first
## are added by fma(), one rounding each (OpenCL's fma is correctly rounded everywhere).
## `stride`: the distance between a point's coordinates in xs (default TAU: a series).
<%def name="dist(T, acc, xs, yv, xoff, stride=None)">\
<% RV, VEC = T.RV, T.VEC; ST = TAU if stride is None else stride %>\
    ${RV} ${acc};   /* starts at the first term: 0 + t == t exactly (t >= +0), one add less */
% for m in range(E):
    {
        const ${RV} _d = (${RV})(${xs}[${xoff} + ${m * ST}]) - ${yv}[${m}];
%   if METRIC == "euclidean" and m > 0 and FMA:
        ${acc} = fma(_d, _d, ${acc});  /* FMA=1: PyRQA's kernels, whose `sum += diff * diff` OpenCL compilers contract */
%   elif METRIC == "euclidean":
        ${acc} ${"=" if m == 0 else "+="} ${term(METRIC, "_d")};  /* FP_CONTRACT OFF: rounded product + sum, identical on every platform */
%   elif METRIC == "maximum":
%     if m == 0:
        ${acc} = ${term(METRIC, "_d")};
%     else:
        { const ${RV} _a = ${term(METRIC, "_d")}; ${acc} = ${"(_a > %s) ? _a : %s" % (acc, acc) if VEC == 1 else "select(%s, _a, _a > %s)" % (acc, acc)}; }
%     endif
%   elif METRIC == "manhattan":
        ${acc} ${"=" if m == 0 else "+="} ${term(METRIC, "_d")};
%   else:
<% raise ValueError("unknown METRIC %r" % METRIC) %>
%   endif
    }
% endfor
</%def>

## Coordinates yv (and yv2, JOINT) of the VEC column points starting at index `at`
## (y is padded by VEC on the left, or by `pad` where the buffers are laid out for
## another VEC); PERCOL: their thresholds tv (tcol, padded alike).
<%def name="coords(T, at, pad=None)">\
<% RV, VEC = T.RV, (T.VEC if pad is None else pad) %>\
        ${RV} yv[${E}];
% if JOINT:
        ${RV} yv2[${E}];
% endif
% if PERCOL:
        const ${RV} tv = ${T.vload("tcol + %d + %s" % (VEC, at))};   /* the columns' thresholds */
% endif
% if EXACT:
        const int xcol = ${at};   /* EXACT: the column of lane 0 */
%   if PERCOL:
        const ${RV} tbv = ${T.vload("tcb + %d + %s" % (VEC, at))};   /* EXACT: their bounds */
%   endif
% endif
% for m in range(E):
        yv[${m}] = ${T.vload("y + %d + %s + %d" % (VEC, at, m * TAU))};
%   if JOINT:
        yv2[${m}] = ${T.vload("y2 + %d + %s + %d" % (VEC, at, m * TAU))};
%   endif
% endfor
</%def>

## rec: the lanes of row i closer than thr (masked by `mask`, e.g. "lvalid & "); the row's
## values are read at xs[xoff + m TAU] (packed_halves may hold them in registers).
## PACK=1 (VEC 1): rec is 0 or 1, the sign bit of acc - thr: acc < thr exactly when the
## rounded difference is negative (the host takes PACK only with finite thresholds, so
## no NaN arises from finite data), and the bit shifts straight into the word.
<%def name="recurrent(T, mask='', xs='x', xoff='i')">\
${dist(T, "acc", xs, "yv", xoff)}
<% thrx = "tv" if PERCOL else "(%s)thr" % T.RV %>\
% if EXACT and BITS:
            ${T.IV if T.VEC > 1 else "uint"} near = ${fix.near_flag(T, "acc - " + thrx, "tbv" if PERCOL else "exb")};   /* EXACT: redone per half (_exactfix.mako) */
%   if PACK:
            uint rec = ${mask}${sign_bit(T, "acc - " + thrx)};
%   else:
            ${T.IV} rec = ${mask}${T.cmp_u("acc < " + thrx)};
%   endif
% elif EXACT:
            ${"uint" if PACK else T.IV} rec = ${sign_bit(T, "acc - " + thrx) if PACK else T.cmp_u("acc < " + thrx)};
${fix.decide_exact(T, "rec", "acc - " + thrx, 1)}\
%   if mask:
            rec = ${mask}rec;
%   endif
% elif PACK:
            uint rec = ${mask}${sign_bit(T, "acc - " + thrx)};
% else:
            ${T.IV} rec = ${mask}${T.cmp_u("acc < " + thrx)};
% endif
</%def>

## PACK=1: the sign bit of a real expression, as a uint 0 or 1 (RQA_SIGN, rqa_lines.cl.mako).
<%def name="sign_bit(T, expr)">RQA_SIGN(${expr})</%def>

## JOINT: rec &= the second pair's decision.
<%def name="joint(T)">\
% if JOINT:
${dist(T, "acc2", "x2", "yv2", "i")}
%   if EXACT and BITS:
            near |= ${fix.near_flag(T, "acc2 - (%s)thr2" % T.RV, "exb2")};
%     if PACK:
            rec &= ${sign_bit(T, "acc2 - (%s)thr2" % T.RV)};
%     else:
            rec &= ${T.cmp_u("acc2 < (%s)thr2" % T.RV)};
%     endif
%   elif EXACT:
            {
                ${"uint" if PACK else T.IV} rec2 = ${sign_bit(T, "acc2 - (%s)thr2" % T.RV) if PACK else T.cmp_u("acc2 < (%s)thr2" % T.RV)};
${fix.decide_exact(T, "rec2", "acc2 - (%s)thr2" % T.RV, 2)}\
                rec &= rec2;
            }
%   elif PACK:
            rec &= ${sign_bit(T, "acc2 - (%s)thr2" % T.RV)};
%   else:
            rec &= ${T.cmp_u("acc2 < (%s)thr2" % T.RV)};
%   endif
% endif
</%def>

## THEILER_MATRIX: cells with |i - j| < w are not recurrent (lid: the lanes' columns j).
<%def name="theiler(T)">\
% if THEILER_MATRIX:
            rec &= (abs_diff((${T.IV})(i), lid) >= (${T.UV})(w))${"" if T.VEC > 1 else " ? 1 : 0"};
% endif
</%def>

## The bit words ba of one run-walk word (rows ib .. ib + nb - 1), 32 rows at a time: the
## caller's body (args xs, xoff: where it reads row i's values) sets rec for row i; bit r
## of lane l's half h is the cell of row ib + 32 h + r (vstore: lane l's half h at
## ba[h * VEC + l]).
## UNR=1: a full half (32 rows) takes a fully unrolled copy of the row loop, so that
## the shifts are constants, the loop's own instructions vanish and the compiler loads
## each row value once for the E coordinates that read it (x[i + m TAU] is row i + m TAU's
## first coordinate); the same cells in the same order.
## PACK=1 (VEC 1, the GPU default): the rows are taken last to first and each cell's bit
## (rec: 0 or 1) shifted in at the bottom, bits = (bits << 1) | rec, one funnel shift
## where a compare, a select and an or were; with UNR, a full half whose first row is
## 16-byte aligned reads its 32 + (E - 1) TAU row values with 16-byte loads into
## registers first (x is padded by 4 values, so the last load stays inside).
<%def name="packed_halves(T)">\
<% UV, VEC = T.UV, T.VEC %>\
% if PACK:
          #pragma unroll   /* ba[h] in registers */
% endif
          for (int h = 0; h < ${T.WB // 32}; ++h) {   /* 32-row halves of the word */
            const int nh = IMIN(IMAX(nb - 32 * h, 0), 32);
            ${UV} bits = (${UV})0u;
${fix.declare(T)}\
% if PACK:
<%
    if VEC != 1:
        raise ValueError("PACK=1 needs VEC=1")
    XW = 4 if REAL == "float" else 2
    NX = -(-(32 + (E - 1) * TAU) // XW) * XW
%>\
%   if UNR:
            const int xb = ib + 32 * h;
            if (nh == 32 && (xb & ${XW - 1}) == 0) {   /* aligned full half: vector loads */
                ${REAL} xr[${NX}];
                __global const ${REAL}${XW}* xq = (__global const ${REAL}${XW}*)(x + xb);
%     for q in range(NX // XW):
                { const ${REAL}${XW} v = xq[${q}]; ${" ".join("xr[%d] = v.s%d;" % (q * XW + e, e) for e in range(XW))} }
%     endfor
                #pragma unroll
                for (int r = 31; r >= 0; --r) {
                    const int i = xb + r;
${caller.body(xs="xr", xoff="r")}\
                    bits = (bits << 1) | rec;
${fix.pack(T)}\
                }
            } else if (nh == 32) {
                #pragma unroll
                for (int r = 31; r >= 0; --r) {
                    const int i = xb + r;
${caller.body(xs="x", xoff="i")}\
                    bits = (bits << 1) | rec;
${fix.pack(T)}\
                }
            } else {
%   endif
            for (int r = nh - 1; r >= 0; --r) {
                const int i = ib + 32 * h + r;
${caller.body(xs="x", xoff="i")}\
                bits = (bits << 1) | rec;
${fix.pack(T)}\
            }
%   if UNR:
            }
%   endif
${fix.redo_half(T, caller.body)}\
            ba[h] = bits;
% else:
% for unrolled in ((True, False) if UNR else (False,)):
%   if UNR and unrolled:
            if (nh == 32) {
            #pragma unroll
            for (int r = 0; r < 32; ++r) {
%   elif UNR:
            } else {
            for (int r = 0; r < nh; ++r) {
%   else:
            for (int r = 0; r < nh; ++r) {
%   endif
                const int i = ib + 32 * h + r;
${caller.body(xs="x", xoff="i")}\
% if VEC == 1:
                bits |= (rec ? 1u : 0u) << r;
% else:
                bits |= as_${UV}(rec) & (${UV})(1u << r);
% endif
${fix.pack(T)}\
            }
% endfor
% if UNR:
            }
% endif
${fix.redo_half(T, caller.body)}\
% if VEC == 1:
            ba[h] = bits;
% else:
            vstore${VEC}(bits, h, ba);
% endif
% endif
          }
</%def>
