## Shared defs of the two xmap_skill variants (_lanes.mako, _groups.mako): the kernel's
## signature (one argument list for both, so the launcher names each argument once)
## and the final rho of a target.
## the signature of xmap_skill (what XMAP_SKILL.launch passes)
<%def name="signature()">\
void xmap_skill(__global const int* restrict tidx, __global const acc_t* restrict tw,
                __global const acc_t* restrict tden, const int nq,
                __global const real_t* restrict y, const int ldy, const int tshift,
                __global const int* restrict tgt, __global const int* restrict ocol,
                const int ntg, __global const int* restrict obs,
                __global float* restrict out, const int ldo, const int orow, const int diag,
                const int nb)\
</%def>
## rho from the merge statistics `m` (acc_t[8]) of library b's predictions of the
## target at position `j` (of tgt/ocol), written to out; WEIGHT "ccm" applies pyEDM
## CCM's rules (fewer than 3 pairs -> NaN, zero variance -> 0)
<%def name="rho(m, j)">
        const acc_t n = ${m}[0];
        const acc_t sd = sqrt(${m}[3] * ${m}[4]);
        acc_t rho = sd > 0 ? ${m}[5] / sd : (acc_t)NAN;
% if WEIGHT == "ccm":
        if (n < 3) rho = (acc_t)NAN;
        else if (isnan(rho)) rho = 0;
% endif
        out[(size_t)(orow + b) * ldo + ocol[${j}]] = (float)rho;
</%def>
