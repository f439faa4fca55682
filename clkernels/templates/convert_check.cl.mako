## params: SRC, DST, WRITE, CHECK
## Generic array conversion and finiteness check in one pass over a[offset .. offset+n):
##   WRITE: out[i] = (DST) a[offset + i]   (a dtype conversion or a compacting copy)
##   CHECK: bad[0] = min(bad[0], first i whose value is NaN or inf)   (bad[0] preset to n)
## Grid-stride loop, so any global size works; one atomic per work-item that saw a bad value.
% if "double" in (SRC, DST):
#pragma OPENCL EXTENSION cl_khr_fp64 : enable
% endif
__kernel void convert_check(__global const ${SRC}* restrict a, const ulong offset, const uint n
% if WRITE:
    , __global ${DST}* restrict out
% endif
% if CHECK:
    , __global int* restrict bad
% endif
    )
{
    const uint stride = (uint)get_global_size(0);
% if CHECK:
    int first = (int)n;
% endif
    for (uint i = (uint)get_global_id(0); i < n; i += stride) {
        const ${SRC} v = a[offset + i];
% if WRITE:
        out[i] = (${DST})v;
% endif
% if CHECK:
        first = isfinite(v) ? first : min(first, (int)i);   // branch-free: vectorises on CPUs
% endif
    }
% if CHECK:
    if (first < (int)n) atomic_min(bad, first);
% endif
}
