## knn.cl.mako, VARIANT "sorted" (CCM, many sampled subsets of one library; not tuned,
## only WG matters): kernel dist_full writes every query's (squared) distance to every
## point of the full library (the arithmetic of the other variants, so bit-identical
## values) and the finished distance; the host sorts each row by the same total order
## (distance, |p - l|, l); simplex_lookup's subset_lookup then takes, per query and
## per sampled library, the first K admissible members of that sorted row (exact: the
## K first members of a subset in a total order are its top-K) and predicts from them.
<%namespace name="pts" file="/common/_points.mako"/>
<%namespace name="metric" file="/common/_metric.mako"/>
<%def name="kernel()">\
__kernel __attribute__((reqd_work_group_size(${WG}, 1, 1)))
void dist_full(__global const real_t* restrict x,
               __global const int* restrict qpts, const int nq,
               __global const int* restrict lpts, const int nl,
               __global real_t* restrict out, __global real_t* restrict fin)
{
    const int j = get_global_id(0);
    const int q = get_global_id(1);
    if (j >= nl) return;
    const int p = qpts[q];
    const int l = lpts[j];
    real_t acc = (real_t)0;
% for k in reversed(range(E)):
    ${metric.step(METRIC, "acc", "x[%s]" % pts.attr.fwd("l", k, TAU, NC), "x[%s]" % pts.attr.fwd("p", k, TAU, NC), FMA)}
% endfor
    out[(size_t)q * nl + j] = acc;
    fin[(size_t)q * nl + j] = ${metric.finish(METRIC, "acc")};
}
</%def>
