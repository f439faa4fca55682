## MODE "boxes" of rqa_lines (E, TAU and REAL shape it; no other value): the row
## series' boxes that MODE warmcol's WBOX reads (_warm.mako), built on the device from
## the row series itself (the kernels' own values, so the boxes are exactly the host's
## order statistics of them), one launch a level: a work-item per (block b, coordinate
## m) takes the least and the largest of its 32 sources, level 0's the points
## x[r + m TAU] of rows r = 32 b .. 32 b + 31 (below nsrc = n_rows), level l's the boxes
## of its 32 blocks of level l - 1 (below nsrc, that level's block count), at
## boxes[dst + (b E + m) 2 + 0 / 1].
## Import with <%namespace name="boxes" file="/rqa_lines/_boxes.mako"/>.
<%def name="boxes_kernel()">\
__kernel void rqa_row_boxes(__global const real_t* restrict x, __global real_t* restrict boxes,
                            const int level, const int nsrc, const int src, const int dst)
{
    const int g = get_global_id(0);
    const int b = g / ${E}, m = g - b * ${E};
    const int c0 = b << 5;
    if (c0 >= nsrc)
        return;
    real_t lo, hi;
    if (level == 0) {
        __global const real_t* p = x + m * ${TAU};
        lo = hi = p[c0];
        for (int k = 1; k < 32; ++k) {
            if (c0 + k < nsrc) {
                const real_t v = p[c0 + k];
                lo = v < lo ? v : lo;
                hi = v > hi ? v : hi;
            }
        }
    } else {
        __global const real_t* p = boxes + src + 2 * m;
        lo = p[c0 * ${2 * E}];
        hi = p[c0 * ${2 * E} + 1];
        for (int k = 1; k < 32; ++k) {
            if (c0 + k < nsrc) {
                const real_t a = p[(c0 + k) * ${2 * E}], c = p[(c0 + k) * ${2 * E} + 1];
                lo = a < lo ? a : lo;
                hi = c > hi ? c : hi;
            }
        }
    }
    boxes[dst + 2 * g] = lo;
    boxes[dst + 2 * g + 1] = hi;
}
</%def>
