## params: E, TAU, METRIC, REAL, WG_X, WG_Y, THRESHOLDED, EXACT
## version: 1
## legacy-hashes: f22f469634c1fbec
## Recurrence-plot image for any N without storing the N x N matrix: pixel
## (py, px) covers the block of rows [py*b, min((py+1)*b, n_rows)) and columns
## [px*b, ...) of the (cross) recurrence matrix and holds the fraction of
## recurrent cells in it (THRESHOLDED=1; d < thr, squared Euclidean vs r^2) or the
## mean distance (THRESHOLDED=0, the unthresholded distance plot; Euclidean
## distances are sqrt'ed per cell). With b = 1 a pixel is one cell. A launch draws the
## image rows [py0, height) into out (row py0 first), so a tall image can be drawn in
## row blocks (height = the block's end) when it does not fit on the device.
## EXACT=1 (THRESHOLDED, float32 on a device with fp64): the cells within the float32
## error bound of the threshold are redone in double from the raw series (xd64 rows, yd64
## columns) and decided by d64 < thr64 (common/_exact.mako, pyedmcl/rqa/exact.py).
<%namespace name="metric" file="/common/_metric.mako"/>
<%namespace name="exact" file="/common/_exact.mako"/>
${metric.real_type(REAL)}
${exact.functions(fma=0)}

__kernel __attribute__((reqd_work_group_size(${WG_X}, ${WG_Y}, 1)))
void rqa_density(__global const real_t* restrict x, __global const real_t* restrict y,
${exact.args_two()}\
                 const int n_rows, const int n_cols, const int b, const int width,
                 const int height, const real_t thr, __global float* restrict out,
                 const int py0)
{
    const int px = get_global_id(0), py = py0 + (int)get_global_id(1);
    if (px >= width || py >= height) return;
    const int r0 = py * b, r1 = min(r0 + b, n_rows);
    const int c0 = px * b, c1 = min(c0 + b, n_cols);
    real_t acc_out = (real_t)0;
    for (int i = r0; i < r1; ++i) {
        for (int j = c0; j < c1; ++j) {
            real_t acc = (real_t)0;
% for m in range(E):
            ${metric.step(METRIC, "acc", "x[i + %d]" % (m * TAU), "y[j + %d]" % (m * TAU))}
% endfor
% if THRESHOLDED:
%   if EXACT:
            uint rec = (acc < thr) ? 1u : 0u;
${exact.redo("rec", "acc - thr", "exb", "i", "j", 1, series=("xd64", "yd64"), pad=0, bounds=False)}\
            acc_out += rec ? (real_t)1 : (real_t)0;
%   else:
            acc_out += (acc < thr) ? (real_t)1 : (real_t)0;
%   endif
% else:
            acc_out += ${metric.finish(METRIC, "acc")};
% endif
        }
    }
    const int cells = (r1 - r0) * (c1 - c0);
    out[(size_t)(py - py0) * width + px] = cells > 0 ? (float)(acc_out / (real_t)cells) : 0.0f;
}
