## The recurrence decision of rqa_lines: distance of a row point to VEC column points and
## the cell's colour (threshold, JOINT second pair, THEILER_MATRIX band), and the packing
## of 32 cells per lane into a bit word (BITS). T: the names of _names.mako.
## Import with <%namespace name="rec" file="/rqa_lines/_recurrence.mako"/>.

## Distance between row point xoff of xs and the column coordinates yv, into acc (declared
## here; squared for euclidean). FMA=1: the squares after the first
## are added by fma(), one rounding each (OpenCL's fma is correctly rounded everywhere).
<%def name="dist(T, acc, xs, yv, xoff)">\
<% RV, VEC = T.RV, T.VEC %>\
    ${RV} ${acc};   /* starts at the first term: 0 + t == t exactly (t >= +0), one add less */
% for m in range(E):
    {
        const ${RV} _d = (${RV})(${xs}[${xoff} + ${m * TAU}]) - ${yv}[${m}];
%   if METRIC == "euclidean" and m > 0 and FMA:
        ${acc} = fma(_d, _d, ${acc});  /* FMA=1: PyRQA's kernels, whose `sum += diff * diff` OpenCL compilers contract */
%   elif METRIC == "euclidean":
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

## Coordinates yv (and yv2, JOINT) of the VEC column points starting at index `at`
## (y is padded by VEC on the left); PERCOL: their thresholds tv (tcol, padded alike).
<%def name="coords(T, at)">\
<% RV, VEC = T.RV, T.VEC %>\
        ${RV} yv[${E}];
% if JOINT:
        ${RV} yv2[${E}];
% endif
% if PERCOL:
        const ${RV} tv = ${T.vload("tcol + %d + %s" % (VEC, at))};   /* the columns' thresholds */
% endif
% for m in range(E):
        yv[${m}] = ${T.vload("y + %d + %s + %d" % (VEC, at, m * TAU))};
%   if JOINT:
        yv2[${m}] = ${T.vload("y2 + %d + %s + %d" % (VEC, at, m * TAU))};
%   endif
% endfor
</%def>

## rec: the lanes of row i closer than thr (masked by `mask`, e.g. "lvalid & ").
<%def name="recurrent(T, mask='')">\
${dist(T, "acc", "x", "yv", "i")}
            ${T.IV} rec = ${mask}${T.cmp_u("acc < tv" if PERCOL else "acc < (%s)thr" % T.RV)};
</%def>

## JOINT: rec &= the second pair's decision.
<%def name="joint(T)">\
% if JOINT:
${dist(T, "acc2", "x2", "yv2", "i")}
            rec &= ${T.cmp_u("acc2 < (%s)thr2" % T.RV)};
% endif
</%def>

## THEILER_MATRIX: cells with |i - j| < w are not recurrent (lid: the lanes' columns j).
<%def name="theiler(T)">\
% if THEILER_MATRIX:
            rec &= (abs_diff((${T.IV})(i), lid) >= (${T.UV})(w))${"" if T.VEC > 1 else " ? 1 : 0"};
% endif
</%def>

## The bit words ba of one run-walk word (rows ib .. ib + nb - 1), 32 rows at a time: the
## caller's body sets rec for row i; bit r of lane l's half h is the cell of row
## ib + 32 h + r (vstore: lane l's half h at ba[h * VEC + l]).
## UNR=1: a full half (32 rows) takes a fully unrolled copy of the row loop, so that
## the shifts are constants, the loop's own instructions vanish and the compiler loads
## each row value once for the E coordinates that read it (x[i + m TAU] is row i + m TAU's
## first coordinate); the same cells in the same order.
<%def name="packed_halves(T)">\
<% UV, VEC = T.UV, T.VEC %>\
          for (int h = 0; h < ${T.WB // 32}; ++h) {   /* 32-row halves of the word */
            const int nh = IMIN(IMAX(nb - 32 * h, 0), 32);
            ${UV} bits = (${UV})0u;
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
${caller.body()}\
% if VEC == 1:
                bits |= (rec ? 1u : 0u) << r;
% else:
                bits |= as_${UV}(rec) & (${UV})(1u << r);
% endif
            }
% endfor
% if UNR:
            }
% endif
% if VEC == 1:
            ba[h] = bits;
% else:
            vstore${VEC}(bits, h, ba);
% endif
          }
</%def>
