## knn.cl.mako, VARIANT "sorted" (CCM, many sampled subsets of one library; not tuned,
## only WG matters): kernel dist_full writes every query's (squared) distance to every
## point of the full library (the arithmetic of the other variants, so bit-identical
## values) and the finished distance; the host sorts each row by the same total order
## (distance, |p - l|, l); simplex_lookup's subset_lookup then takes, per query and
## per sampled library, the first K admissible members of that sorted row (exact: the
## K first members of a subset in a total order are its top-K) and predicts from them.
## Kernel dist_table writes the finished distance, in the same arithmetic, from each
## query to the points of a given table (rows of K entries, -1: none, +inf): a table
## whose neighbours another call chose (CCM's float64 order) with this call's distances.
<%namespace name="pts" file="/common/_points.mako"/>
<%namespace name="metric" file="/common/_metric.mako"/>
## `acc`: the comparison value of points `p` (query) and `l`, every variant's arithmetic
<%def name="accumulate(acc, p, l)">\
    real_t ${acc} = (real_t)0;
% for k in reversed(range(E)):
    ${metric.step(METRIC, acc, "x[%s]" % pts.attr.fwd(l, k, TAU, NC), "x[%s]" % pts.attr.fwd(p, k, TAU, NC), FMA)}
% endfor
</%def>
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
${accumulate("acc", "p", "l")}\
    out[(size_t)q * nl + j] = acc;
    fin[(size_t)q * nl + j] = ${metric.finish(METRIC, "acc")};
}

__kernel __attribute__((reqd_work_group_size(${WG}, 1, 1)))
void dist_table(__global const real_t* restrict x,
                __global const int* restrict qpts, const int nq,
                __global const int* restrict idx, const int k, const int rows,
                __global real_t* restrict fin)
{
    const size_t o = get_global_id(0);   /* entry o of the table: row o / k, query row % nq */
    if (o >= (size_t)rows * k) return;
    const int l = idx[o];
    if (l < 0) { fin[o] = INFINITY; return; }
    const int p = qpts[(int)(o / k) % nq];
${accumulate("acc", "p", "l")}\
    fin[o] = ${metric.finish(METRIC, "acc")};
}
</%def>
