## NTHR > 1, MODE "vertical": the NTHR thresholds' bit words of one 64-row word. Each
## cell's distance is computed once, compared with every threshold (th0 <= th1 <= ...,
## ascending) and its bit shifted into that threshold's half word (bitsK).
## EXACT: one near flag per cell for all thresholds: the cell lies within the largest
## bound ebm of some threshold (|fl32(acc - th_k)| <= ebm; ebm >= each threshold's own
## bound B_k, so every cell that could decide otherwise than float64 at threshold k is
## flagged, pyedmcl/rqa/exact.py). With vector lanes and NTHR + 2 <= 2 VEC it looks at the
## two thresholds around acc only (the nearest ones, as the thresholds ascend: the count of
## thresholds above acc picks them from a table by one shuffle2 each); otherwise at each.
## After a half, a flagged cell's distance is recomputed once in double as the float64
## kernel computes it (rqa_exact_dist) and decided against every float64 threshold
## (EXACT=1: the flagged cells; EXACT=2: a flagged half's every cell), as rqa_exact_cell
## decides one (outside the matrix or inside THEILER_MATRIX's band: 0).
## T: the names of _names.mako. Import with <%namespace name="kpack" file="/rqa_lines/_kpack.mako"/>.
<%namespace name="rec" file="/rqa_lines/_recurrence.mako"/>

<%!
def near_flag(T, EXACT, dd, b):
    """EXACT: whether |fl32(dd)| <= b (_exactfix.mako's near_flag, as an expression)."""
    if T.VEC == 1 and EXACT == 2:
        return "(uint)(fabs(%s) <= (%s))" % (dd, b)
    if T.VEC == 1:
        return "(uint)((as_uint(%s) & 0x7FFFFFFFu) <= as_uint(%s))" % (dd, b)
    return "((as_%s(%s) & (%s)0x7FFFFFFFu) <= as_%s((%s)(%s)))" % (T.UV, dd, T.UV, T.UV, T.RV, b)


def table(T, NTHR):
    """Whether the near test reads the two thresholds around acc from a table (the
    thresholds between -inf and +inf, in two lane vectors)."""
    return T.VEC > 1 and NTHR + 2 <= 2 * T.VEC
%>

## Per work-item, before the walk: the thresholds th0.. (and EXACT's bound ebm, table).
<%def name="setup(T)">\
<% RV, VEC = T.RV, T.VEC %>\
% for t in range(NTHR):
        const ${RV} th${t} = (${RV})thrk[${t}];
% endfor
% if EXACT:
        float ebm = exbk[0];   /* the largest of the thresholds' bounds */
        for (int kt = 1; kt < ${NTHR}; ++kt) ebm = fmax(ebm, exbk[kt]);
%   if table(T, NTHR):
<% e = ["-INFINITY"] + ["thrk[%d]" % t for t in range(NTHR)] + ["INFINITY"] * (2 * VEC - NTHR - 1) %>\
        /* entry q: th(q - 1), entry 0 -inf, past the last +inf */
        const ${RV} tlo = (${RV})(${", ".join(e[:VEC])});
        const ${RV} thi = (${RV})(${", ".join(e[VEC:])});
%   endif
% endif
</%def>

## The halves of the word at rows ib .. ib + nb - 1 into ba[(2 kt + h) VEC + l].
<%def name="halves(T)">\
<% UV, IV, RV, VEC = T.UV, T.IV, T.RV, T.VEC; MV = IV if VEC > 1 else "int" %>\
          for (int h = 0; h < 2; ++h) {   /* 32-row halves of the word */
            const int nh = IMIN(IMAX(nb - 32 * h, 0), 32);
% for t in range(NTHR):
            ${UV} bits${t} = (${UV})0u;
% endfor
% if EXACT == 2:
            ${IV if VEC > 1 else "uint"} anyn = 0;   /* a near cell in the half (lanes) */
% elif EXACT:
            ${UV} nbits = (${UV})0u;   /* the half's near cells */
% endif
            for (int r = 0; r < nh; ++r) {
                const int i = ib + 32 * h + r;
${rec.dist(T, "acc", "x", "yv", "i")}
% if THEILER_MATRIX:
                const ${MV} tm = (abs_diff((${IV})(i), lid) >= (${UV})(w))${"" if VEC > 1 else " ? 1 : 0"};
% endif
% if EXACT and table(T, NTHR):
                ${UV} above = (${UV})0u;   /* thresholds above acc */
% endif
% for t in range(NTHR):
                {
                    const ${MV} lt = ${T.cmp_u("acc < th%d" % t)};
%   if VEC == 1:
                    bits${t} |= ((lt${" & tm" if THEILER_MATRIX else ""}) ? 1u : 0u) << r;
%   else:
                    bits${t} |= as_${UV}(lt${" & tm" if THEILER_MATRIX else ""}) & (${UV})(1u << r);
%   endif
%   if EXACT and table(T, NTHR):
                    above -= as_${UV}(lt);
%   endif
                }
% endfor
% if EXACT and table(T, NTHR):
                const ${UV} q = (${UV})${NTHR}u - above;   /* thresholds at or below acc */
                const ${RV} lo = shuffle2(tlo, thi, q), hi = shuffle2(tlo, thi, q + (${UV})1u);
                const ${IV} near = ((acc - lo) <= (${RV})ebm) | ((hi - acc) <= (${RV})ebm);
% elif EXACT:
                const ${IV if VEC > 1 else "uint"} near = ${" | ".join(near_flag(T, EXACT, "acc - th%d" % t, "ebm") for t in range(NTHR))};
% endif
% if EXACT == 2:
                anyn |= near;
% elif EXACT and VEC == 1:
                nbits |= near << r;
% elif EXACT:
                nbits |= as_${UV}(near) & (${UV})(1u << r);
% endif
            }
% if EXACT:
${redo(T)}\
% endif
% for t in range(NTHR):
%   if VEC == 1:
            ba[${2 * t} + h] = bits${t};
%   else:
            vstore${VEC}(bits${t}, ${2 * t} + h, ba);
%   endif
% endfor
          }
</%def>

## EXACT: the half's near cells (EXACT=2: a flagged lane's every cell) decided in double
## against every threshold, one distance each.
<%def name="redo(T)">\
<% UV, VEC = T.UV, T.VEC; tw = "w" if THEILER_MATRIX else "0" %>\
            if (${"any(%s != (%s)0)" % ("anyn" if EXACT == 2 else "nbits", T.IV if EXACT == 2 else UV) if VEC > 1 else ("anyn" if EXACT == 2 else "nbits")}) {   /* rare */
                uint _nb[${VEC}], _bb[${NTHR * VEC}];
% if VEC == 1:
                _nb[0] = ${"anyn ? 0xFFFFFFFFu : 0u" if EXACT == 2 else "nbits"};
% elif EXACT == 2:
                vstore${VEC}(as_${UV}(anyn), 0, _nb);
% else:
                vstore${VEC}(nbits, 0, _nb);
% endif
% for t in range(NTHR):
                ${"_bb[%d] = bits%d;" % (t, t) if VEC == 1 else "vstore%d(bits%d, %d, _bb);" % (VEC, t, t)}
% endfor
                for (int _l = 0; _l < ${VEC}; ++_l) {
                    const int _j = l0 + _l;
                    for (uint _m = _nb[_l] & (nh >= 32 ? 0xFFFFFFFFu : (1u << nh) - 1u); _m; _m &= _m - 1u) {
                        const int _r = 31 - (int)clz(_m & (0u - _m)), _i = ib + 32 * h + _r;
                        const int _in = _i < n_rows && _j < n_cols && abs(_i - _j) >= ${tw};
                        const double d64 = _in ? rqa_exact_dist(xd64, _i, yd64 + ${VEC}, _j) : 0.0;
                        for (int _t = 0; _t < ${NTHR}; ++_t) {
                            const uint b = (_in && d64 < thr64k[_t]) ? 1u : 0u;
                            _bb[_t * ${VEC} + _l] = (_bb[_t * ${VEC} + _l] & ~(1u << _r)) | (b << _r);
                        }
                    }
                }
% for t in range(NTHR):
                bits${t} = ${"_bb[%d]" % t if VEC == 1 else "vload%d(%d, _bb)" % (VEC, t)};
% endfor
            }
</%def>
