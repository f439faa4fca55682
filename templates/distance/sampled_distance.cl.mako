## params: E, TAU, METRIC
## version: 1
## Distances in double (squared for euclidean) of random pairs (row point i, column point
## j) drawn by a counter hash, so that any device and the host draw the same pairs:
## pair s takes h = mix(key + s * GOLDEN) (splitmix64's output function), i = (h >> 32)
## nr >> 32 and j = (h mod 2^32) nc >> 32. Coordinates are summed in order without
## contraction, as the host's float64 reference does (pyedmcl.rqa.distances.sampled_dist),
## so the values are the host's bit for bit. Pairs s0 .. s0 + n - 1, one per work-item.
<%namespace name="metric" file="/common/_metric.mako"/>
${metric.real_type("double")}

__kernel void sampled_distance(__global const double* restrict rows,
                               __global const double* restrict cols,
                               const ulong key, const uint nr, const uint nc,
                               const int s0, const int n, __global double* restrict out)
{
    const int t = get_global_id(0);
    if (t >= n) return;
    ulong h = key + (ulong)(s0 + t) * 0x9E3779B97F4A7C15UL;
    h = (h ^ (h >> 30)) * 0xBF58476D1CE4E5B9UL;
    h = (h ^ (h >> 27)) * 0x94D049BB133111EBUL;
    h ^= h >> 31;
    const uint i = (uint)(((h >> 32) * (ulong)nr) >> 32);
    const uint j = (uint)(((h & 0xFFFFFFFFUL) * (ulong)nc) >> 32);
    real_t acc = (real_t)0;
% for m in range(E):
    ${metric.step(METRIC, "acc", "rows[i + %d]" % (m * TAU), "cols[j + %d]" % (m * TAU))}
% endfor
    out[t] = acc;
}
