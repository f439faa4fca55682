## params: E, TAU, REAL, SPLIT
## version: 1
## Range lists: for each query point, every library point within its own squared limit.
##
## Query q is the window at kernel point p (x[p], x[p+TAU], ..., x[p+(E-1)*TAU]), as in
## knn.cl.mako; library point l (lpts[0 .. nl-1]) is listed for q where |p - l| > radius
## (radius < 0: none excluded) and its squared Euclidean distance is at most the query's
## limit: out[q][c] = l for the c-th such point (in library order), c < cap; count[q] is
## their number, which may exceed cap (the caller then knows the list cut). One
## work-item per query walks the whole library; the library's loads are the same for
## every work-item (broadcast on GPUs, vectorised across queries on CPUs). The squares
## are added newest coordinate first, as the k-NN kernel adds them without FMA; callers
## that compare across arithmetics give their limits a margin.
##
## knn_range: query q at qpts[q] with limit lim[q], q < nq.
## knn_range_list (REAL double; params SPLIT, and WG where SPLIT > 1): the first
## listed[0] slots of a device list, slot s the query rows[s] (point qpts[rows[s]]) with
## limit (kth[s] (1 + 2 width))^2, s < slots (slots past the count write a count of 0):
## the tied queries the lookup program's `ties` kernel listed, with no host round trip
## (pyedmcl/edm/simplex_ties.py). SPLIT 1: a work-item a slot, as knn_range. SPLIT = WG
## (GPUs: few queries, each a long walk): a work-group a slot, its work-items taking
## every WG-th library point and the list's places from a local counter, so a list
## holds the same points in another order (its readers sort them).
<%namespace name="metric" file="/common/_metric.mako"/>\
${metric.real_type(REAL)}

## the walk of query point p with squared limit r over library points i0, i0 + STEP, ...
## into row / c (declared by the caller; ADD: how a point takes its place)
<%def name="walk(i0='0', STEP='1', ADD='c++')">\
% for j in range(E):
    const real_t q${j} = x[p + ${j * TAU}];
% endfor
    for (int i = ${i0}; i < nl; i += ${STEP}) {
        const int l = lpts[i];
        if ((l > p ? l - p : p - l) <= radius) continue;
        real_t acc = 0;
% for j in reversed(range(E)):
        ${metric.step("euclidean", "acc", "x[l + %d]" % (j * TAU), "q%d" % j)}
% endfor
        if (acc <= r) {
            const int at = ${ADD};
            if (at < cap) row[at] = l;
        }
    }
</%def>

__kernel void knn_range(__global const real_t* restrict x, __global const int* restrict lpts,
                        const int nl, __global const int* restrict qpts,
                        __global const real_t* restrict lim, const int nq, const int radius,
                        const int cap, __global int* restrict out, __global int* restrict count)
{
    const int q = get_global_id(0);
    if (q >= nq) return;
    const int p = qpts[q];
    const real_t r = lim[q];
    __global int* const row = out + (size_t)q * cap;
    int c = 0;
${walk()}\
    count[q] = c;
}
% if REAL == "double":

__kernel void knn_range_list(__global const real_t* restrict x,
                             __global const int* restrict lpts, const int nl,
                             __global const int* restrict qpts,
                             __global const int* restrict rows,
                             __global const double* restrict kth,
                             __global const int* restrict listed, const int slots,
                             const double width, const int radius, const int cap,
                             __global int* restrict out, __global int* restrict count)
{
%   if SPLIT == 1:
    const int s = get_global_id(0);
    if (s >= slots) return;
    int c = 0;
    if (s < listed[0]) {
        const int p = qpts[rows[s]];
        const double rr = kth[s] * (1.0 + 2.0 * width);
        const real_t r = rr * rr;
        __global int* const row = out + (size_t)s * cap;
${walk()}\
    }
    count[s] = c;
%   else:
    const int s = get_group_id(0);
    const int lid = get_local_id(0);
    __local int c;
    if (lid == 0) c = 0;
    barrier(CLK_LOCAL_MEM_FENCE);
    if (s < listed[0]) {  /* (the same for the whole group) */
        const int p = qpts[rows[s]];
        const double rr = kth[s] * (1.0 + 2.0 * width);
        const real_t r = rr * rr;
        __global int* const row = out + (size_t)s * cap;
${walk("lid", str(SPLIT), "atomic_inc(&c)")}\
    }
    barrier(CLK_LOCAL_MEM_FENCE);
    if (lid == 0) count[s] = c;
%   endif
}
% endif
