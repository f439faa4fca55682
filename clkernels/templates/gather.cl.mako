## params: CTYPE
## Generic row-wise gather: out[r, i] = a[r * lda + idx[i]], or FILL where idx[i] < 0.
## Global size (m rounded up, rows); out is (rows, m) row-major.
% if CTYPE == "double":
#pragma OPENCL EXTENSION cl_khr_fp64 : enable
% endif
__kernel void gather(__global const ${CTYPE}* restrict a, const uint lda,
                     __global const int* restrict idx, const uint m, const ${CTYPE} fill,
                     __global ${CTYPE}* restrict out)
{
    const uint i = (uint)get_global_id(0);
    const uint r = (uint)get_global_id(1);
    if (i >= m) return;
    const int j = idx[i];
    out[(size_t)r * m + i] = j >= 0 ? a[(size_t)r * lda + (uint)j] : fill;
}
