## knn.cl.mako's NEAR tables (the rows variant): the list's last NEAR entries take only
## candidates within NEAR_WIDTHS float32 distance bounds of entry K - 1 - NEAR, so its
## acceptance limit `lim` is that margin once the list is full beyond it, not its last
## entry: near-ties of the (K - NEAR)-th neighbour are kept, farther points abandoned
## as early as without them. The offer (_parts.mako) inserts into the first K - NEAR
## entries and hands the entry they displace to insert() where it lies within the new
## margin. Reads E, K, METRIC, NEAR, SPLIT, WG from the context; the rows kernel's
## locals lid, qv, p.
<%namespace name="topk" file="/common/_topk.mako"/>

## NEAR entries in local memory (near_local: one query per work-item, SPLIT = 1; slots
## near_d / near_i of WG x NEAR, the query's 2 |q| in near_q): their updates are rare,
## and the registers they would hold are the scan's (NVIDIA caps the rows kernel at 64);
## else registers bd{k} / bi{k}, k >= K - NEAR, like the others
<%!
def near_local(NEAR, SPLIT):
    return bool(NEAR) and SPLIT == 1


def reg_entries(K, NEAR, SPLIT):
    """The register entries of a query's list: K, or K - NEAR where the rest are local."""
    return K - NEAR if near_local(NEAR, SPLIT) else K


def near_entry(i, K, NEAR, SPLIT):
    """Names of entry K - NEAR + i of the query's list: (distance, point)."""
    if near_local(NEAR, SPLIT):
        return "near_d[lid * %d + %d]" % (NEAR, i), "near_i[lid * %d + %d]" % (NEAR, i)
    return "bd%d" % (K - NEAR + i), "bi%d" % (K - NEAR + i)


def near_q(NEAR, SPLIT):
    return "near_q[lid]" if near_local(NEAR, SPLIT) else "nq2"
%>

## the displaced (cd, ci, ck) into the near entries
<%def name="insert()">\
% for i in range(NEAR):
${topk.swap_step(*near_entry(i, K, NEAR, SPLIT))}\
% endfor
</%def>

## the margin's function (before the kernel)
<%def name="functions()">\
% if NEAR:
<%
    if METRIC != "euclidean" or not 0 < NEAR < K:
        raise ValueError("NEAR=%d needs METRIC euclidean and 0 < NEAR < K=%d (got %s)"
                         % (NEAR, K, METRIC))
%>\

/* NEAR: the acceptance limit (squared) of a list whose entry K - 1 - NEAR is a (squared,
   inf while the list is short), last its last entry: the distance d = sqrt(a) plus
   NEAR_WIDTHS times the float32 bound D(d) = 2u (2 |q| + (E + 4) d) (nq2 = 2 |q|), squared,
   or last if that is less. The lookup (lookup/_resolve.mako) counts on every point within
   RESOLVE_WIDTHS (< NEAR_WIDTHS, the rest the float32 rounding of this sum) of d to be in
   the list. Monotone in a: the limit never grows while the list fills. */
#define NEAR_WIDTHS 16
inline real_t near_limit(const real_t a, const real_t last, const real_t nq2)
{
    const real_t d = sqrt(a);
    const real_t m = d + (real_t)(NEAR_WIDTHS * 1.1920928955078125e-07) * (nq2 + (real_t)${E + 4} * d);
    return fmin(last, m * m);
}
% endif
</%def>

## NEAR: the query's norm term nq2 = 2 |q| (float32 from its coordinates qv) and the
## limit `lim`, before the scan
<%def name="setup()">\
% if NEAR:
    real_t qss = (real_t)0;
%   for k in range(E):
    qss += qv[${k}] * qv[${k}];
%   endfor
    real_t lim = INFINITY;
%   if near_local(NEAR, SPLIT):
    __local real_t near_d[${WG * NEAR}];
    __local int near_i[${WG * NEAR}];
    __local real_t near_q[${WG}];
    near_q[lid] = 2 * sqrt(qss);
%     for i in range(NEAR):
    near_d[lid * ${NEAR} + ${i}] = INFINITY; near_i[lid * ${NEAR} + ${i}] = -1;
%     endfor
%   else:
    const real_t nq2 = 2 * sqrt(qss);
%   endif
% endif
</%def>

## NEAR: the list's last NEAR entries beyond the final margin (points that entered
## under a wider limit) emptied before the store: the output holds, past entry K - 1 -
## NEAR, exactly the neighbours within the margin, -1 / inf after them
<%def name="clear()">\
% if NEAR:
    {
        const real_t fin = near_limit(bd${K - 1 - NEAR}, INFINITY, ${near_q(NEAR, SPLIT)});
%   for i in range(NEAR):
<% D, I = near_entry(i, K, NEAR, SPLIT) %>\
        if (${D} > fin) ${I} = -1;
%   endfor
    }
% endif
</%def>
