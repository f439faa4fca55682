## params: CTYPE, ACC
## In-place affine map per row: a[r, i] = a[r, i] * scale[r] + shift[r] (row-major
## (rows, m)), computed in ACC (double where the device has fp64). Maps values computed
## on standardised data back to data units without a host round trip.
% if CTYPE == "double" or ACC == "double":
#pragma OPENCL EXTENSION cl_khr_fp64 : enable
% endif
__kernel void affine_rows(__global ${CTYPE}* restrict a, const uint m,
                          __global const ${ACC}* restrict scale,
                          __global const ${ACC}* restrict shift)
{
    const uint i = (uint)get_global_id(0);
    const uint r = (uint)get_global_id(1);
    if (i >= m) return;
    const size_t at = (size_t)r * m + i;
    a[at] = (${CTYPE})((${ACC})a[at] * scale[r] + shift[r]);
}
