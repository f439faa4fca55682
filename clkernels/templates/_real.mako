## The real type of a kernel and its floating-point contraction policy.
## Import with <%namespace name="real" file="/_real.mako"/>.
<%def name="real_type(REAL, contract=False)">\
## Contraction off by default: each * and + is a correctly rounded IEEE operation on
## every conforming device, so distances (and threshold decisions) agree bit for bit
## across runtimes. Kernels that only measure peaks pass contract=True.
% if contract:
#pragma OPENCL FP_CONTRACT ON
% else:
#pragma OPENCL FP_CONTRACT OFF
% endif
% if REAL == "double":
#pragma OPENCL EXTENSION cl_khr_fp64 : enable
typedef double real_t;
% elif REAL == "float":
typedef float real_t;
% else:
<% raise ValueError("unknown REAL %r: use float or double" % REAL) %>\
% endif
</%def>
