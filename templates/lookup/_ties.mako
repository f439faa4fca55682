## The lookup template's `ties` kernel (a program of REAL double): the rows of a float64
## k-NN table where pyEDM may decide the knn-th place otherwise (pyedmcl/edm/simplex_ties.py).
##
## ties: query q is listed where its knn-th and (knn + 1)-th distances (entries k - 1 and
## k of its row of ks, ascending; the (knn + 1)-th present) lie within `width` (relative
## to the latter) of each other: count[0] (zeroed by the caller) takes a slot s, list[s] =
## q and kth[s] = its knn-th distance (slots in no order; list and kth hold nq). The
## host's `simplex_ties.tied` is the same test in the same double arithmetic (contraction
## is off), so a row tied here is tied there.
<%def name="ties()">\
__kernel void ties(__global const int* restrict idx, __global const double* restrict dist,
                   const int nq, const int ks, const int k, const double width,
                   __global int* restrict list, __global double* restrict kth,
                   volatile __global int* restrict count)
{
    const int q = get_global_id(0);
    if (q >= nq) return;
    const size_t o = (size_t)q * ks;
    const double a = dist[o + k - 1];
    const double b = dist[o + k];
    if (idx[o + k] >= 0 && b - a <= width * b) {
        const int s = atomic_inc(count);
        list[s] = q;
        kth[s] = a;
    }
}
</%def>
