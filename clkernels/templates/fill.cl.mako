## params: CTYPE
## Fill a buffer with one value. Our own kernel rather than clEnqueueFillBuffer:
## Oclgrind does not count a fill command as initialising memory, so kernels
## reading a filled buffer were reported as reading uninitialised values.
% if CTYPE == "double":
#pragma OPENCL EXTENSION cl_khr_fp64 : enable
% endif
__kernel void fill(__global ${CTYPE}* restrict a, const ${CTYPE} value, const ulong n)
{
    const size_t i = get_global_id(0);
    if (i < n) a[i] = value;
}
