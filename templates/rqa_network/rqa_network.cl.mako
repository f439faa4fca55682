## params: E, TAU, METRIC, REAL, FMA, WG, LSET, EXACT
## version: 1
## Recurrence networks (pyedmcl/rqa/network.py) on a bit-packed adjacency A = R - I of an
## auto-recurrence matrix: row i is NW = ceil(n / 32) uint words, bit b of word w the cell
## (i, 32 w + b); bits of columns >= n are 0. The recurrence decision is rqa_lines': the
## same distance sums in the working precision (squared Euclidean summed coordinate by
## coordinate, FMA=1: by fma(), threshold_rule="squared"), one strict `d < thr` on the
## host's precomputed threshold, so A is rqa()'s matrix without its main diagonal.
##   rn_adjacency  words (w, i) of a tile of rows; each row's popcount into deg[i]
##   rn_triangles  per row i (a work-group): (A^3)_ii = sum_{j in N(i)} |N(i) & N(j)|
##   rn_paths      per source s (a work-group): breadth-first search by frontier bitsets
##                 (next = OR of the frontier's rows, minus the visited set); sum of the
##                 distances to, and number of, the nodes reached (LSET > 0: frontier,
##                 next and visited sets in local memory, LSET >= NW words each, sized
##                 at compile time; LSET = 0: in global scratch)
## EXACT=1 (float32 on a device with fp64): rn_adjacency redoes the cells within the
## float32 error bound of the threshold in double from the raw series (xd64) and decides
## them by d64 < thr64, as rqa_lines does (common/_exact.mako, pyedmcl/rqa/exact.py).
<%namespace name="metric" file="/common/_metric.mako"/>
<%namespace name="exact" file="/common/_exact.mako"/>
${metric.real_type(REAL)}
${exact.functions()}
<% SET = "__local" if LSET else "__global" %>

/* index of the lowest set bit of a non-zero word (OpenCL 1.2 has clz, not ctz) */
inline int low_bit(const uint word) { return 31 - (int)clz(word & (0u - word)); }

/* sum of v over the work-group (every work-item gets it); red: WG slots */
inline ulong group_sum(__local ulong* red, const ulong v)
{
    const int lid = get_local_id(0);
    barrier(CLK_LOCAL_MEM_FENCE);
    red[lid] = v;
    barrier(CLK_LOCAL_MEM_FENCE);
    for (int h = ${WG} / 2; h > 0; h >>= 1) {
        if (lid < h) red[lid] += red[lid + h];
        barrier(CLK_LOCAL_MEM_FENCE);
    }
    return red[0];
}

/* Rows r0 .. r0 + get_global_size(1) - 1 (all < n): work-item (w, r) writes word w of
   row i = r0 + r. thr: the threshold of d (squared for Euclidean); deg: zeroed. */
__kernel __attribute__((reqd_work_group_size(${WG}, 1, 1)))
void rn_adjacency(__global const real_t* restrict x,
${exact.args_auto()}\
                  const int n, const int nw,
                  const int r0, const real_t thr, __global uint* restrict adj,
                  __global uint* restrict deg)
{
    __local ulong red[${WG}];
    const int w = get_global_id(0), i = r0 + (int)get_global_id(1);
    uint bits = 0u;
    if (w < nw) {
        real_t xi[${E}];
% for m in range(E):
        xi[${m}] = x[i + ${m * TAU}];
% endfor
        const int j0 = 32 * w, nb = min(32, n - j0);
        for (int b = 0; b < nb; ++b) {
            const int j = j0 + b;
            real_t acc = (real_t)0;
% for m in range(E):
            ${metric.step(METRIC, "acc", "xi[%d]" % m, "x[j + %d]" % (m * TAU), FMA)}
% endfor
            uint rec = (acc < thr) ? 1u : 0u;
${exact.redo("rec", "acc - thr", "exb", "i", "j", 1, series=("xd64", "xd64"), pad=0, bounds=False)}\
            bits |= (rec && j != i) ? (1u << b) : 0u;
        }
        adj[(size_t)i * nw + w] = bits;
    }
    const ulong k = group_sum(red, (ulong)popcount(bits));
    if (get_local_id(0) == 0 && k) atomic_add(&deg[i], (uint)k);
}

/* Rows r0 + get_group_id(0): tri[i] = (A^3)_ii, twice the triangles through i. Row i's
   neighbours are listed WG words at a time in local memory (each work-item lists the
   bits of one word), then every work-item adds popcount(row_i & row_j) over its own
   words (strided by WG) of the row's non-zero span [lo, hi). */
__kernel __attribute__((reqd_work_group_size(${WG}, 1, 1)))
void rn_triangles(__global const uint* restrict adj, const int nw, const int r0,
                  __global ulong* restrict tri)
{
    __local ulong red[${WG}];
    __local int list[32 * ${WG}];
    __local int span[3];   /* lo, hi, list length */
    const int i = r0 + (int)get_group_id(0), lid = get_local_id(0);
    __global const uint* ri = adj + (size_t)i * nw;
    if (lid == 0) { span[0] = nw; span[1] = 0; }
    barrier(CLK_LOCAL_MEM_FENCE);
    for (int v = lid; v < nw; v += ${WG})
        if (ri[v]) { atomic_min(&span[0], v); atomic_max(&span[1], v + 1); }
    barrier(CLK_LOCAL_MEM_FENCE);
    const int lo = span[0], hi = span[1];
    ulong acc = 0;
    for (int v0 = lo; v0 < hi; v0 += ${WG}) {
        barrier(CLK_LOCAL_MEM_FENCE);   /* the previous chunk's list is read */
        if (lid == 0) span[2] = 0;
        barrier(CLK_LOCAL_MEM_FENCE);
        uint word = (v0 + lid < hi) ? ri[v0 + lid] : 0u;
        if (word) {
            int at = atomic_add(&span[2], (int)popcount(word));
            for (; word; word &= word - 1u) list[at++] = 32 * (v0 + lid) + low_bit(word);
        }
        barrier(CLK_LOCAL_MEM_FENCE);
        const int m = span[2];
        for (int t = 0; t < m; ++t) {
            __global const uint* rj = adj + (size_t)list[t] * nw;
            uint c = 0u;   /* at most 32 per word of this work-item: fits */
            for (int u = lo + lid; u < hi; u += ${WG})
                c += popcount(ri[u] & rj[u]);
            acc += c;
        }
    }
    const ulong t = group_sum(red, acc);
    if (lid == 0) tri[i] = t;
}

/* Source s = s0 + get_group_id(0): total[s] = sum of the distances to the nodes reached
   (s excluded), reached[s] = their number. The sets (frontier, next, visited: NW words
   each) lie in local memory with LSET, else in scratch (3 NW words per work-group of the
   launch). */
__kernel __attribute__((reqd_work_group_size(${WG}, 1, 1)))
void rn_paths(__global const uint* restrict adj, const int nw, const int s0,
              __global uint* restrict scratch,
              __global ulong* restrict total, __global uint* restrict reached)
{
    __local ulong red[${WG}];
    __local int list[32 * ${WG}];
    __local int nlist[1];
    const int g = get_group_id(0), s = s0 + g, lid = get_local_id(0);
% if LSET:
    __local uint set[${3 * LSET}];
    ${SET} uint* fr = set;
% else:
    ${SET} uint* fr = scratch + (size_t)g * 3 * nw;
% endif
    ${SET} uint* nx = fr + nw;
    ${SET} uint* vis = nx + nw;
    for (int u = lid; u < nw; u += ${WG}) {
        const uint own = (u == s / 32) ? (1u << (s % 32)) : 0u;
        fr[u] = own; vis[u] = own; nx[u] = 0u;
    }
    ulong sum = 0, count = 0;
    for (ulong level = 1;; ++level) {
        barrier(CLK_LOCAL_MEM_FENCE | CLK_GLOBAL_MEM_FENCE);
        for (int v0 = 0; v0 < nw; v0 += ${WG}) {   /* the frontier, WG words at a time: */
            barrier(CLK_LOCAL_MEM_FENCE);
            if (lid == 0) nlist[0] = 0;
            barrier(CLK_LOCAL_MEM_FENCE);
            uint word = (v0 + lid < nw) ? fr[v0 + lid] : 0u;   /* listed in local memory */
            if (word) {
                int at = atomic_add(&nlist[0], (int)popcount(word));
                for (; word; word &= word - 1u) list[at++] = 32 * (v0 + lid) + low_bit(word);
            }
            barrier(CLK_LOCAL_MEM_FENCE);
            const int m = nlist[0];
            for (int t = 0; t < m; ++t) {   /* each listed row ORed into next, */
                __global const uint* rj = adj + (size_t)list[t] * nw;
                for (int u = lid; u < nw; u += ${WG})   /* every work-item its own words */
                    nx[u] |= rj[u];
            }
        }
        barrier(CLK_LOCAL_MEM_FENCE | CLK_GLOBAL_MEM_FENCE);
        ulong c = 0;
        for (int u = lid; u < nw; u += ${WG}) {
            const uint fresh = nx[u] & ~vis[u];
            fr[u] = fresh; vis[u] |= fresh; nx[u] = 0u;
            c += (ulong)popcount(fresh);
        }
        c = group_sum(red, c);
        if (c == 0) break;
        sum += level * c;
        count += c;
    }
    if (lid == 0) { total[s] = sum; reached[s] = (uint)count; }
}
