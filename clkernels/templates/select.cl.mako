## params: WG, DIGIT
## The k-th smallest of n doubles (no NaN) by radix selection on their order keys (a
## double's bits, the sign bit flipped for non-negative values and every bit for
## negative ones: the keys order as the values do, -0 just below +0). select_histogram
## counts, per work-group in local memory, the DIGIT-bit digit at `shift` of the keys
## whose bits under `mask` equal `prefix`, added into hist (2^DIGIT bins); with `want_min`
## each work-group also writes the least key it saw to gmin[group]. select_gather copies
## the values whose keys match `prefix` under `mask` to out (at most `cap`, in no
## particular order; count[0] counts them all). clkernels.select drives the passes.
#pragma OPENCL EXTENSION cl_khr_fp64 : enable
#define BINS ${1 << DIGIT}

inline ulong order_key(const double v)
{
    const ulong b = as_ulong(v);
    return (b >> 63) ? ~b : (b | 0x8000000000000000UL);
}

__kernel __attribute__((reqd_work_group_size(${WG}, 1, 1)))
void select_histogram(__global const double* restrict a, const int n, const ulong prefix,
                      const ulong mask, const int shift, const uint dmask, const int want_min,
                      __global uint* restrict hist, __global ulong* restrict gmin)
{
    __local uint h[BINS];
    __local ulong lmin[${WG}];
    const int lid = get_local_id(0);
    for (int b = lid; b < BINS; b += ${WG})
        h[b] = 0u;
    barrier(CLK_LOCAL_MEM_FENCE);
    ulong least = 0xFFFFFFFFFFFFFFFFUL;
    for (int i = get_global_id(0); i < n; i += get_global_size(0)) {
        const ulong k = order_key(a[i]);
        if ((k & mask) == prefix)
            atomic_inc(&h[(uint)(k >> shift) & dmask]);
        least = k < least ? k : least;
    }
    if (want_min) {
        lmin[lid] = least;
        barrier(CLK_LOCAL_MEM_FENCE);
        for (int s = ${WG // 2}; s > 0; s >>= 1) {
            if (lid < s && lmin[lid + s] < lmin[lid])
                lmin[lid] = lmin[lid + s];
            barrier(CLK_LOCAL_MEM_FENCE);
        }
        if (lid == 0)
            gmin[get_group_id(0)] = lmin[0];
    }
    barrier(CLK_LOCAL_MEM_FENCE);
    for (int b = lid; b < BINS; b += ${WG}) {
        const uint c = h[b];
        if (c)
            atomic_add(&hist[b], c);
    }
}

__kernel void select_gather(__global const double* restrict a, const int n, const ulong prefix,
                            const ulong mask, const uint cap, __global uint* restrict count,
                            __global double* restrict out)
{
    for (int i = get_global_id(0); i < n; i += get_global_size(0)) {
        const double v = a[i];
        if ((order_key(v) & mask) == prefix) {
            const uint at = atomic_inc(&count[0]);
            if (at < cap)
                out[at] = v;
        }
    }
}
