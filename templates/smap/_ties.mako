## S-map part: TIE_TOL and TIED(dmax, d2), pass 1's test of a dropped farthest point.
## A dropped farthest point whose runner-up lies within TIE_TOL of it (relative) is
## rounding's choice (the distances' rounding in REAL over E coordinates: the storage's,
## or a rotation's): the row goes to the host, which decides in float64. float32 storage
## counts equal distances too (rounding may have made them equal); fp64 keeps the last of
## equal ones, as the host does.
<%def name="macros()">\
#define TIE_TOL ${"%.6e" % (8 * E * (2.0 ** -23 if REAL == "float" else 2.0 ** -52))}${"f" if REAL == "float" else ""}
% if REAL == "float":
#define TIED(dmax, d2) (((dmax) - (d2)) <= TIE_TOL * (dmax))
% else:
#define TIED(dmax, d2) (((d2) < (dmax)) & (((dmax) - (d2)) <= TIE_TOL * (dmax)))
% endif
</%def>
