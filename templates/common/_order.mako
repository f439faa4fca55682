## Shared defs: the order in which a k-NN kernel visits its library tiles (ORD).
## Import with <%namespace name="order" file="/common/_order.mako"/>. The top-k of a total
## order does not depend on the order candidates arrive in, so this is a speed choice
## only: visiting first the tiles nearest (in time) to a group's queries makes the
## k-th distance tight early on flows and smooth series, so fewer candidates pass.
<%def name="near_tile()">\
/* the i-th of n tiles in the order c, c+1, c-1, c+2, c-2, ..., then the longer side */
inline int near_tile(const int i, const int c, const int n)
{
    const int m = min(c, n - 1 - c);
    if (i <= 2 * m) return (i & 1) ? c + (i + 1) / 2 : c - i / 2;
    return c <= n - 1 - c ? i : n - 1 - i;
}
</%def>
