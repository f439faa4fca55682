## Addresses of state-vector coordinates in a row-major (rows, NC) data matrix x.
## Import with <%namespace name="pts" file="/common/_points.mako"/>; then
## pts.attr.fwd(P, k, TAU, NC) is the index expression of coordinate k of the point
## whose window starts at row P (the knn family's lags: rows P, P+TAU, ...) and
## pts.attr.back(T, k, TAU, NC) the one of coordinate k of the state at row T
## (S-map's lags: rows T, T-TAU, ...).
## NC = 1 is a plain series (coordinate k is lag k: x[P + k*TAU]); NC > 1 columns give
## NC coordinates per lag, lag-major as pyEDM 2.5.7's Embed orders them (c1(t), c2(t),
## ..., c1(t-tau), c2(t-tau), ...): coordinate k is lag k // NC of column k % NC.
<%!
def fwd(P, k, TAU, NC):
    """Index of coordinate k (0..E*NC-1, lag k // NC, column k % NC) of window P."""
    if NC == 1:
        return "%s + %d" % (P, k * TAU)
    return "%s * %d + %d" % (P, NC, (k // NC) * TAU * NC + k % NC)


def back(T, k, TAU, NC):
    """Index of coordinate k (lag k // NC, column k % NC) of the state at row T."""
    if NC == 1:
        return "%s - %d" % (T, k * TAU)
    off = k % NC - (k // NC) * TAU * NC
    return "%s * %d %s %d" % (T, NC, "+" if off >= 0 else "-", abs(off))
%>
