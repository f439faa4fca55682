## Shared defs of the lookup kernels (lookup/simplex_lookup's `lookup`, `subset_lookup`,
## xmap/xmap_lookup's `pack`): one definition of pyEDM's neighbour weights, so
## every family weighs neighbours with the same operations in the same order (the
## cross map's rho equals pyedmcl.ccm's bit for bit).
## Import with <%namespace name="lk" file="/common/_lookup.mako"/>.
##
## w_i = exp(-d_i / d_min) over the admissible neighbours. WEIGHT selects pyEDM's
## zero-distance rule: "simplex" floors d_min at 1e-6 (pyEDM Simplex); "ccm" gives
## weight 1 to zero distances and 0 to the rest when d_min == 0, and a query with fewer
## than K admissible neighbours has no prediction (pyEDM CCM).
<%namespace name="metric" file="/common/_metric.mako"/>
<%namespace name="mth" file="/_mathops.mako"/>
## Float32 data on PoCL (INL, the host's choice, 1 there) weigh with the inline exp of
## /_mathops.mako: PoCL's own double exp is an out-of-line call, per neighbour. Both are
## within 1 ulp of exp, not the same bits (5% of values differ), and a float32 prediction
## rounds that difference away; float64 data keep PoCL's exp, so their results keep
## their bits.
<%!
def inline_exp(INL, REAL):
    return bool(INL) and REAL == "float"
%>
## types and pragmas: real_t (data), acc_t (sums, weights), K; contraction off, so
## every runtime rounds alike; the inline exp where `inline_exp` (`weight` then calls it)
<%def name="prelude(REAL, ACC, K, INL)">
${metric.real_type(REAL)}
% if ACC == "double" and REAL != "double":
#pragma OPENCL EXTENSION cl_khr_fp64 : enable
% endif
typedef ${ACC} acc_t;
% if K:
#define K ${K}
% endif
/* no implicit contraction: the same rounding on every runtime */
#pragma OPENCL FP_CONTRACT OFF
${mth.exp_fn(inline_exp(INL, REAL), ACC)}
</%def>
## the declaration of `dmin` (real_t) from the nearest distance `dmin_raw` ("simplex")
<%def name="dmin(WEIGHT)">\
% if WEIGHT == "simplex":
const real_t dmin = fmax(dmin_raw, (real_t)1e-6);\
% endif
</%def>
## the weight (acc_t expression) of a neighbour at distance `d` (a real_t expression);
## REAL, ACC and INL as given to `prelude`
<%def name="weight(WEIGHT, d, REAL, ACC, INL)">\
<% ex = capture(mth.exp, inline_exp(INL, REAL), ACC) %>\
% if WEIGHT == "simplex":
${ex}(-(acc_t)${d} / (acc_t)dmin)\
% else:
dmin_raw > 0 ? ${ex}(-(acc_t)${d} / (acc_t)dmin_raw) : (${d} == 0 ? (acc_t)1 : (acc_t)0)\
% endif
</%def>
## whether a query with weight sum `den` has a prediction; `full`: a C expression, true
## when the query has K admissible neighbours (what "ccm" requires)
<%def name="valid(WEIGHT, full)">\
% if WEIGHT == "ccm":
(den > 0 && ${full})\
% else:
den > 0\
% endif
</%def>
## CCM's prediction ("ccm", decision 0096): each weight divided by the query's weight
## sum once (acc_t), rounded to real_t, and the prediction the real_t sum, in slot
## order from 0, of those weights times the neighbours' targets (each product and sum
## rounded to real_t: contraction is off). pack (xmap_lookup), lookup and subset_lookup
## (simplex_lookup) use it alike, so the map's rho stays pyedmcl.ccm's bit for bit; the
## map's skill then reads real_t weights and divides nothing per target. "simplex"
## keeps the acc_t sum divided by the weight sum (Simplex and the scans).
<%!
def normalised(WEIGHT):
    return WEIGHT == "ccm"
%>
## the type of a packed weight (real_t where normalised)
<%def name="wtype(WEIGHT)">${"real_t" if normalised(WEIGHT) else "acc_t"}</%def>
## a normalised weight: acc_t `w` over the weight sum `den`, as real_t
<%def name="norm(w, den)">(real_t)((${w}) / (${den}))</%def>
## `acc += term` (real_t) with `term` rounded on its own: NOFUSE (the host's choice,
## clkernels.devices.fuses_despite_pragma: Intel's CPU runtime without AVX-512, whose
## optimiser fuses the product into the sum despite FP_CONTRACT OFF) rounds it through a
## volatile, so the sum keeps every other runtime's bits
<%def name="add(acc, term, NOFUSE)">\
% if NOFUSE:
{ volatile real_t _t = ${term}; ${acc} += _t; }\
% else:
${acc} += ${term};\
% endif
</%def>
