## Shared defs for every operator template: distance metrics as compile-time choices.
## Import with <%namespace name="metric" file="_metric.mako"/>; a metric is a
## template parameter, never a copied kernel. Euclidean accumulates the *squared*
## distance (compare with the squared radius; take sqrt only where a value is needed).
<%def name="step(METRIC, acc, a, b)">\
% if METRIC == "euclidean":
{ const real_t _d = (${a}) - (${b}); ${acc} = fma(_d, _d, ${acc}); }\
% elif METRIC == "maximum":
${acc} = fmax(${acc}, fabs((${a}) - (${b})));\
% elif METRIC == "manhattan":
${acc} += fabs((${a}) - (${b}));\
% else:
<% raise ValueError("unknown METRIC %r: use euclidean, maximum or manhattan" % METRIC) %>\
% endif
</%def>
<%def name="finish(METRIC, acc)">\
% if METRIC == "euclidean":
sqrt(${acc})\
% else:
(${acc})\
% endif
</%def>
<%def name="real_type(REAL)">\
% if REAL == "double":
#pragma OPENCL EXTENSION cl_khr_fp64 : enable
typedef double real_t;
% elif REAL == "float":
typedef float real_t;
% else:
<% raise ValueError("unknown REAL %r: use float or double" % REAL) %>\
% endif
</%def>
