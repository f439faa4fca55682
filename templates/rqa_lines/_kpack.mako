## NTHR > 1, MODE "vertical": the NTHR thresholds' bit words of one 64-row word. Each
## cell's distance is computed once and compared with every threshold (thrk, ascending).
## EXACT: one near flag per cell for all thresholds: the cell lies within the largest
## bound ebm of some threshold (|fl32(acc - th_k)| <= ebm; ebm >= each threshold's own
## bound B_k, so every cell that could decide otherwise than float64 at threshold k is
## flagged, pyedmcl/rqa/exact.py). After a half, a flagged cell's distance is recomputed
## once in double as the float64 kernel computes it (rqa_exact_dist) and decided against
## every float64 threshold (EXACT=1: the flagged cells; EXACT=2: a flagged half's every
## cell), as rqa_exact_cell decides one (outside the matrix or inside THEILER_MATRIX's
## band: 0).
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

%>

## Per work-item, before the walk: EXACT's bound ebm, the largest of the thresholds'.
<%def name="setup(T)">\
% if EXACT:
        float ebm = exbk[0];
        for (int kt = 1; kt < ${NTHR}; ++kt) ebm = fmax(ebm, exbk[kt]);
% endif
</%def>

## The halves of the word at rows ib .. ib + nb - 1 into ba[(2 kt + h) VEC + l], a half in
## two passes: the rows' distances into accs (and THEILER_MATRIX's band as a mask word),
## then threshold by threshold its bits (EXACT: and the near flags) from accs, so that no
## more than one threshold's words are live at once (K of them spilled on the CPU).
<%def name="halves(T)">\
<% UV, IV, RV, VEC = T.UV, T.IV, T.RV, T.VEC %>\
          for (int h = 0; h < 2; ++h) {   /* 32-row halves of the word */
            const int nh = IMIN(IMAX(nb - 32 * h, 0), 32);
            ${RV} accs[32];
            ${RV} amin = (${RV})INFINITY;   /* the half's least distance per lane */
% if THEILER_MATRIX:
            ${UV} tmw = (${UV})0u;   /* the cells outside the Theiler band */
% endif
            for (int r = 0; r < nh; ++r) {
                const int i = ib + 32 * h + r;
${rec.dist(T, "acc", "x", "yv", "i")}
                accs[r] = acc;
                amin = fmin(amin, acc);
% if THEILER_MATRIX and VEC == 1:
                tmw |= (abs_diff(i, lid) >= (uint)w ? 1u : 0u) << r;
% elif THEILER_MATRIX:
                tmw |= as_${UV}(abs_diff((${IV})(i), lid) >= (${UV})(w)) & (${UV})(1u << r);
% endif
            }
<%
    anyf = (lambda c: "any(%s)" % c) if VEC > 1 else (lambda c: "(%s)" % c)
    thmax = "(%s)thrk[%d]" % (RV, NTHR - 1)
    busy = "amin < %s" % thmax + (" | (amin - %s <= (%s)ebm)" % (thmax, RV) if EXACT else "")
    if VEC == 1:
        busy = busy.replace(" | ", " || ")
%>\
            /* the thresholds ascend: where no lane comes within the largest threshold (or,
               EXACT, within its bound), every threshold's half is white and none near */
            if (!${anyf(busy)}) {
                for (int kt = 0; kt < ${NTHR}; ++kt)
                    ${"ba[2 * kt + h] = 0u;" if VEC == 1 else "vstore%d((%s)0u, 2 * kt + h, ba);" % (VEC, UV)}
                continue;
            }
% if EXACT == 2:
            ${IV if VEC > 1 else "uint"} anyn = 0;   /* a near cell in the half (lanes) */
% elif EXACT:
            ${UV} nbits = (${UV})0u;   /* the half's near cells */
% endif
            #pragma unroll 1
            for (int kt = 0; kt < ${NTHR}; ++kt) {
                const ${RV} th = (${RV})thrk[kt];
                ${UV} bits = (${UV})0u;
                for (int r = 0; r < nh; ++r) {
%   if VEC == 1:
                    bits |= (accs[r] < th ? 1u : 0u) << r;
%   else:
                    bits = select(bits, bits | (${UV})(1u << r), ${T.cmp_u("accs[r] < th")});
%   endif
% if EXACT == 2:
                    anyn |= ${near_flag(T, EXACT, "accs[r] - th", "ebm")};
% elif EXACT and VEC == 1:
                    nbits |= ${near_flag(T, EXACT, "accs[r] - th", "ebm")} << r;
% elif EXACT:
                    nbits = select(nbits, nbits | (${UV})(1u << r), ${near_flag(T, EXACT, "accs[r] - th", "ebm")});
% endif
                }
% if VEC == 1:
                ba[2 * kt + h] = bits${" & tmw" if THEILER_MATRIX else ""};
% else:
                vstore${VEC}(bits${" & tmw" if THEILER_MATRIX else ""}, 2 * kt + h, ba);
% endif
            }
% if EXACT:
${redo(T)}\
% endif
          }
</%def>

## EXACT: the half's near cells (EXACT=2: a flagged lane's every cell) decided in double
## against every threshold, one distance each.
<%def name="redo(T)">\
<% UV, VEC = T.UV, T.VEC; tw = "w" if THEILER_MATRIX else "0" %>\
            if (${"any(%s != (%s)0)" % ("anyn" if EXACT == 2 else "nbits", T.IV if EXACT == 2 else UV) if VEC > 1 else ("anyn" if EXACT == 2 else "nbits")}) {   /* rare */
                uint _nb[${VEC}];
% if VEC == 1:
                _nb[0] = ${"anyn ? 0xFFFFFFFFu : 0u" if EXACT == 2 else "nbits"};
% elif EXACT == 2:
                vstore${VEC}(as_${UV}(anyn), 0, _nb);
% else:
                vstore${VEC}(nbits, 0, _nb);
% endif
                for (int _l = 0; _l < ${VEC}; ++_l) {
                    const int _j = l0 + _l;
                    for (uint _m = _nb[_l] & (nh >= 32 ? 0xFFFFFFFFu : (1u << nh) - 1u); _m; _m &= _m - 1u) {
                        const int _r = 31 - (int)clz(_m & (0u - _m)), _i = ib + 32 * h + _r;
                        const int _in = _i < n_rows && _j < n_cols && abs(_i - _j) >= ${tw};
                        const double d64 = _in ? rqa_exact_dist(xd64, _i, yd64 + ${VEC}, _j) : 0.0;
                        for (int _t = 0; _t < ${NTHR}; ++_t) {
                            const uint b = (_in && d64 < thr64k[_t]) ? 1u : 0u;
                            uint* const _w = &ba[(2 * _t + h) * ${VEC} + _l];
                            *_w = (*_w & ~(1u << _r)) | (b << _r);
                        }
                    }
                }
            }
</%def>
