## EXACT=1 in rqa_lines' bit-word paths (BITS > 0, DMAJ): the cells' near flags
## (common/_exact.mako: |fl32(acc - thr)| <= B) are packed beside the cells' bits, one
## shift and or per cell, branch-free; a 32-row half with any near cell then redoes those
## cells alone in double (rqa_exact_cell: the float64 kernel's whole decision of the
## cell: both pairs, the Theiler band, the matrix's edges) and rewrites their bits. A
## per-cell branch cost the H100 ~50% (N = 10^5 and 946,303); a half is flagged rarely.
## EXACT=2 (GPUs): one flag per half instead (anyn |= near: one predicate or per cell,
## where the near bits take a shift and an or); a flagged half (0.4% of the halves at
## 1e-4 near cells; 9-25% on a 0.1 grid at E = 2, r = 0.2-0.5, whose near fraction is
## 0.3-0.9%) redoes its near cells alone in double, found again by the cells' float32
## code (one lane: redo_half, DMAJ: redo_dmaj); with vector lanes all its cells.
## T: the names of _names.mako.
## Import with <%namespace name="fix" file="/rqa_lines/_exactfix.mako"/>.
<%namespace name="exact" file="/common/_exact.mako"/>

## The float64 decision of cell (i, j) as the float64 kernel takes it (0 or 1; 0 outside
## the matrix, as the float32 path masks it); tw: the Theiler window applied (vertical
## launches with THEILER_MATRIX) or 0.
<%def name="cell_function()">\
% if EXACT:
inline uint rqa_exact_cell(__global const double* xd64, __global const double* yd64,
                           __global const double* x2d64, __global const double* y2d64,
% if PERCOL:
                           __global const double* tc64,
% endif
                           const double thr64, const double thr264, const int i, const int j,
                           const int n_rows, const int n_cols, const int tw)
{
    if (i < 0 || i >= n_rows || j < 0 || j >= n_cols || abs(i - j) < tw)
        return 0u;
    if (!(rqa_exact_dist(xd64, i, yd64 + ${VEC}, j) < ${"tc64[%d + j]" % VEC if PERCOL else "thr64"}))
        return 0u;
% if JOINT:
    if (!(rqa_exact_dist(x2d64, i, y2d64 + ${VEC}, j) < thr264))
        return 0u;
% endif
    return 1u;
}
% endif
</%def>

## The call of rqa_exact_cell for row `row`, column `col`.
<%def name="cell(row, col, tw='0')">rqa_exact_cell(xd64, yd64, x2d64, y2d64, ${"tc64, " if PERCOL else ""}thr64, thr264, ${row}, ${col}, n_rows, n_cols, ${tw})</%def>

## Declare the half's near bits beside `bits` (vec lanes).
<%def name="declare(T)">\
% if EXACT == 2:
            ${T.IV if T.VEC > 1 else "uint"} anyn = 0;   /* EXACT=2: a near cell in the half (lanes) */
% elif EXACT:
            ${T.UV} nbits = (${T.UV})0u;   /* EXACT: the half's near cells */
% endif
</%def>

## Pack this cell's near flag (`near`, set by _recurrence.mako's recurrent/joint) as bit
## r: PACK shifts it in like the cell's bit (rows last to first), else it is or'ed at r.
<%def name="pack(T, r='r')">\
% if EXACT == 2:
                anyn |= near;
% elif EXACT and PACK:
                nbits = (nbits << 1) | near;
% elif EXACT and T.VEC == 1:
                nbits |= near << ${r};
% elif EXACT:
                nbits |= as_${T.UV}(near) & (${T.UV})(1u << ${r});
% endif
</%def>

## After a half (rows ib + 32 h + r): redo its near cells and rewrite their bits in
## `bits` (vec lanes; lane l's column: l0 + l in vertical launches, i + l0 + l in
## diagonal ones). EXACT=2 with one lane: a flagged half finds its near cells again by
## the cells' own float32 code (`body`, the caller's: it sets `near` for row i) and
## redoes those alone, as redo_dmaj does.
<%def name="redo_half(T, body=None)">\
% if EXACT:
<%
    col = "l0 + _l" if MODE in ("vertical", "bvertical") else "_i + l0 + _l"
    tw = "w" if (THEILER_MATRIX and MODE in ("vertical", "bvertical")) else "0"
%>\
%   if EXACT == 2 and T.VEC == 1:
            if (anyn) {   /* EXACT=2: rare; the half's near cells again, those redone */
                uint _nb = 0u;
                for (int r = nh - 1; r >= 0; --r) {
                    const int i = ib + 32 * h + r;
${body(xs="x", xoff="i")}\
                    _nb |= near << r;
                }
                for (uint _m = _nb; _m; _m &= _m - 1u) {
                    const int _r = 31 - (int)clz(_m & (0u - _m)), _i = ib + 32 * h + _r, _l = 0;
                    bits = (bits & ~(1u << _r)) | (${cell("_i", col, tw)} << _r);
                }
            }
%   elif EXACT == 2:
            if (any(anyn != (${T.IV})0)) {   /* EXACT=2: rare; the flagged lanes' cells */
                int _an[${T.VEC}];
                uint _bb[${T.VEC}];
                vstore${T.VEC}(anyn, 0, _an);
                vstore${T.VEC}(bits, 0, _bb);
                for (int _l = 0; _l < ${T.VEC}; ++_l)
                    if (_an[_l])
                        for (int _r = 0; _r < nh; ++_r) {
                            const int _i = ib + 32 * h + _r;
                            _bb[_l] = (_bb[_l] & ~(1u << _r)) | (${cell("_i", col, tw)} << _r);
                        }
                bits = vload${T.VEC}(0, _bb);
            }
%   elif T.VEC == 1:
            for (uint _m = nbits; _m; _m &= _m - 1u) {   /* EXACT: the near cells, lowest first */
                const int _r = 31 - (int)clz(_m & (0u - _m)), _i = ib + 32 * h + _r, _l = 0;
                bits = (bits & ~(1u << _r)) | (${cell("_i", col, tw)} << _r);
            }
%   else:
            if (any(nbits != (${T.UV})0u)) {   /* EXACT: rare; the lanes' near cells */
                uint _nb[${T.VEC}], _bb[${T.VEC}];
                vstore${T.VEC}(nbits, 0, _nb);
                vstore${T.VEC}(bits, 0, _bb);
                for (int _l = 0; _l < ${T.VEC}; ++_l)
                    for (uint _m = _nb[_l]; _m; _m &= _m - 1u) {
                        const int _r = 31 - (int)clz(_m & (0u - _m)), _i = ib + 32 * h + _r;
                        _bb[_l] = (_bb[_l] & ~(1u << _r)) | (${cell("_i", col, tw)} << _r);
                    }
                bits = vload${T.VEC}(0, _bb);
            }
%   endif
% endif
</%def>

## DMAJ: the half hb's cell bits D and near bits ND (bit t: row hb + t, column
## hb + l0 + t); redo the near ones. EXACT=2: ND is one flag for the half; a flagged
## half finds its near cells again from the same float32 terms (`cell_acc(t)`, the
## distance of cell t in the cells' own order, so the same flags) and redoes those
## alone: a flagged half mostly holds one near cell, and redoing all 32 in double (global
## loads, the warp waiting) had cost a quantized record 1.3x.
<%def name="redo_dmaj(cell_acc=None)">\
% if EXACT == 2:
                    if (ND) {   /* EXACT=2: rare; the half's near cells again, those redone */
                        uint NB = 0u;
%   for t in range(31, -1, -1):
                        {
${cell_acc(t)}\
                            NB = (NB << 1) | (uint)(fabs(acc - (real_t)thr) <= exb);
                        }
%   endfor
                        for (uint _m = NB; _m; _m &= _m - 1u) {
                            const int _t = 31 - (int)clz(_m & (0u - _m));
                            D = (D & ~(1u << _t)) | (${cell("hb + _t", "hb + l0 + _t")} << _t);
                        }
                    }
% elif EXACT:
                    for (uint _m = ND; _m; _m &= _m - 1u) {   /* EXACT: the near cells */
                        const int _t = 31 - (int)clz(_m & (0u - _m));
                        D = (D & ~(1u << _t)) | (${cell("hb + _t", "hb + l0 + _t")} << _t);
                    }
% endif
</%def>

## EXACT: whether acc - thr (`dd`) lies within the bound `b` (uint 0/1 for one lane, else
## an int vector of -1/0 lanes).
## |dd| <= b as the magnitudes' bit patterns compare (IEEE: |a| <= |b| iff their bits
## without the sign do; dd is finite, b >= 0 or +inf): an and and one compare, inline on
## every runtime (PoCL calls fabs()); EXACT=2 (GPUs) takes fabs(), a free operand
## modifier there.
<%def name="near_flag(T, dd, b)">\
% if T.VEC == 1 and EXACT == 2:
(uint)(fabs(${dd}) <= (${b}))\
% elif T.VEC == 1:
(uint)((as_uint(${dd}) & 0x7FFFFFFFu) <= as_uint(${b}))\
% else:
((as_${T.UV}(${dd}) & (${T.UV})0x7FFFFFFFu) <= as_${T.UV}((${T.RV})(${b})))\
% endif
</%def>

## EXACT: the near lanes of pair `pair`'s decision `lt` redone in double (_exact.mako).
<%def name="decide_exact(T, lt, dd, pair)">\
% if PERCOL and pair == 1:
${exact.redo(lt, dd, "tbv", "i", "xcol", T.VEC, pair, t64=lambda l: "tc64[%d + xcol + %s]" % (VEC, l), rv=T.REAL)}\
% else:
${exact.redo(lt, dd, "exb" if pair == 1 else "exb2", "i", "xcol", T.VEC, pair, rv=T.REAL)}\
% endif
</%def>
