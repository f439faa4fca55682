## params: E, TAU, METRIC, REAL, WG_X, WG_Y, RPI, USE_LOCAL, SQRT
## version: 1
## legacy-hashes: 00a58c63ebe67a45
## Pairwise distances between time-delay embedded points, computed from the raw
## series (the embedding is never materialised). Point j of a series s is
## (s[j], s[j+TAU], ..., s[j+(E-1)*TAU]); a block of rows (points of x) times a
## block of columns (points of y) is written to out[r * ld_out + c].
## Tunables: WG_X x WG_Y work-group, RPI rows per work-item, USE_LOCAL stages the
## column segment of y in local memory.
<%namespace name="metric" file="/common/_metric.mako"/>
${metric.real_type(REAL)}
#define SPAN ${(E - 1) * TAU}

__kernel __attribute__((reqd_work_group_size(${WG_X}, ${WG_Y}, 1)))
void pairwise_distance(__global const real_t* restrict x,
                       __global const real_t* restrict y, const int n_cols_total,
                       __global real_t* restrict out, const int ld_out,
                       const int row0, const int nrows, const int col0, const int ncols)
{
    const int c = get_global_id(0);
    const int rb = get_global_id(1) * ${RPI};
% if USE_LOCAL:
    __local real_t ytile[${WG_X} + SPAN];
    const int cbase = col0 + get_group_id(0) * ${WG_X};
    for (int t = get_local_id(1) * ${WG_X} + get_local_id(0); t < ${WG_X} + SPAN; t += ${WG_X * WG_Y}) {
        const int g = cbase + t;
        ytile[t] = (g < n_cols_total + SPAN) ? y[g] : (real_t)0;
    }
    barrier(CLK_LOCAL_MEM_FENCE);
% endif
    if (c >= ncols) return;
    real_t yv[${E}];
% for k in range(E):
%   if USE_LOCAL:
    yv[${k}] = ytile[get_local_id(0) + ${k * TAU}];
%   else:
    yv[${k}] = y[col0 + c + ${k * TAU}];
%   endif
% endfor
% for r in range(RPI):
    if (rb + ${r} < nrows) {
        const int i = row0 + rb + ${r};
        real_t acc = (real_t)0;
%   for k in range(E):
        ${metric.step(METRIC, "acc", "x[i + %d]" % (k * TAU), "yv[%d]" % k)}
%   endfor
        out[(size_t)(rb + ${r}) * ld_out + c] = ${metric.finish(METRIC, "acc") if SQRT else "acc"};
    }
% endfor
}
