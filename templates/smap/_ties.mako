## S-map part: TIE_TOL and TIED(dmax, d2), pass 1's test of a dropped farthest point.
## A dropped farthest point whose runner-up lies within TIE_TOL of it (relative), or at
## the same distance, is rounding's or pyEDM's choice (the distances' rounding in REAL over
## E coordinates: the storage's, or a rotation's; among equal distances, the order of
## pyEDM's KDTree, which no rule on indices reproduces): the row goes to the host, which
## decides in float64 as pyEDM does (pyedmcl/edm/pyedm_kdtree.py).
<%def name="macros()">\
#define TIE_TOL ${"%.6e" % (8 * E * (2.0 ** -23 if REAL == "float" else 2.0 ** -52))}${"f" if REAL == "float" else ""}
#define TIED(dmax, d2) (((dmax) - (d2)) <= TIE_TOL * (dmax))
</%def>
