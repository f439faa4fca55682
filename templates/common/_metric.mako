## Shared defs for every operator template: distance metrics as compile-time choices.
## Import with <%namespace name="metric" file="/common/_metric.mako"/>; a metric is a
## template parameter, never a copied kernel. Euclidean accumulates the *squared*
## distance (compare with the squared radius; take sqrt only where a value is needed).
## No mad/fabs/fmax here: PoCL 3.0 runs them as calls, which also stops it
## vectorising (measured 2-9x slower); plain operators are exact for |d| and max, and
## contraction is off (see real_type), so `acc += d * d` rounds identically everywhere.
## (Inputs are validated finite, so fmax's NaN rule is never needed.)
## FMA=1 (euclidean): `acc = fma(d, d, acc)`, one rounding instead of two. OpenCL's
## fma() is correctly rounded on every device, so the sums still agree bit for bit
## across devices that all use it; GPUs run it as one instruction (~10% faster k-NN on
## an H100 at E=20), PoCL as a call, hence a per-job choice made by the host
## (every device of a job a GPU), never per device.
## One coordinate's term added to ${acc}. T is the type of the operands: real_t, or an
## OpenCL vector type (realv_t, float16, ...) whose lanes then do the same IEEE
## operations as the scalar form, so every lane's sum is bit-identical to it.
<%def name="step(METRIC, acc, a, b, FMA=0, T='real_t')">\
% if METRIC == "euclidean" and FMA:
{ const ${T} _d = (${a}) - (${b}); ${acc} = fma(_d, _d, ${acc}); }\
% elif METRIC == "euclidean":
{ const ${T} _d = (${a}) - (${b}); ${acc} += _d * _d; }\
% elif METRIC == "maximum":
{ ${T} _d = (${a}) - (${b}); _d = _d < 0 ? -_d : _d; ${acc} = ${acc} > _d ? ${acc} : _d; }\
% elif METRIC == "manhattan":
{ const ${T} _d = (${a}) - (${b}); ${acc} += _d < 0 ? -_d : _d; }\
% else:
<% raise ValueError("unknown METRIC %r: use euclidean, maximum or manhattan" % METRIC) %>\
% endif
</%def>
## the distance from its accumulated form `acc`; INL (the host's choice, 1 on PoCL) with
## REAL, the type of `acc`: the square root as clang's built-in, which PoCL inlines (its
## sqrt() is an out-of-line call; both are the correctly rounded IEEE square root, so
## the bits are the same)
<%def name="finish(METRIC, acc, INL=0, REAL='float')">\
% if METRIC == "euclidean" and INL:
${"__builtin_sqrtf" if REAL == "float" else "__builtin_sqrt"}(${acc})\
% elif METRIC == "euclidean":
sqrt(${acc})\
% else:
(${acc})\
% endif
</%def>
<%namespace name="real" file="/_real.mako"/>\
<%def name="real_type(REAL, contract=False)">${real.real_type(REAL, contract)}</%def>
