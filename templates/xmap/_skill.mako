## Shared defs of the two xmap_skill variants (_lanes.mako, _groups.mako): the kernel's
## signature (one argument list for both, so the launcher names each argument once),
## a query's prediction and the final rho of a target.
<%namespace name="lk" file="/common/_lookup.mako"/>
## the signature of xmap_skill (what XMAP_SKILL.launch passes)
<%def name="signature()">\
void xmap_skill(__global const int* restrict tidx, __global const ${lk.wtype(WEIGHT)}* restrict tw,
                __global const acc_t* restrict tden, const int nq,
                __global const real_t* restrict y, const int ldy, const int tshift,
                __global const int* restrict tgt, __global const int* restrict ocol,
                const int ntg, __global const int* restrict obs,
                __global float* restrict out, const int ldo, const int orow, const int diag,
                const int nb${", __global const acc_t* restrict shift" if FS else ""}${", const int K" if KR else ""})\
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
## CM (class-major packed tables, target lanes): the first packed row of query class
## `r` (the queries q = r mod WG, in order): classes of nq / WG rows, the first nq % WG
## of them one more
<%def name="class_start(r)">(${r}) * (nq / ${WG}) + min(${r}, nq % ${WG})</%def>
## CM: whether query class `c` (< WG) has a row `i` (nq / WG rows, the first nq % WG
## classes one more)
<%def name="in_class(c, i)">(${c}) < ${WG} && (${i}) < nq / ${WG} + ((${c}) < nq % ${WG})</%def>
## FS (CCM's reduction, as pyedmcl.ccm's skill): the shift is K<t> (shift[j], the
## target's first finite observation: pyedmcl.primitives.lookup.ccm_shifts), the same in every
## stream of the target, so streams add; else each stream's first pair.
## the lean stream of target t: the shifted sums of _stats.mako that rho needs (n, the
## shift Kp, Ko, S dp, S do, S dp^2, S do^2, S dp*do), n as an int: the same values as
## the acc_t stream of stats.update, in fewer registers and instructions; the shift is
## kept in acc_t (a prediction rounded to real_t and an observed value, converted once,
## not at every pair); the error sums (MAE, RMSE) are not kept: the map reports rho
<%def name="stream(t)">\
    int n${t} = 0;
% if FS:
    acc_t kp${t} = K${t}, ko${t} = K${t};  /* FS: the target's shift (shift[j]) */
% else:
    acc_t kp${t} = 0, ko${t} = 0;
% endif
    acc_t a${t}[5] = {0, 0, 0, 0, 0};\
</%def>
## the lean stream of target t as stats.update's 10 sums (error sums 0), s<t>
<%def name="stream_sums(t)">\
const acc_t s${t}[10] = {n${t}, kp${t}, ko${t}, a${t}[0], a${t}[1], a${t}[2], a${t}[3], a${t}[4],
                          0, 0};\
</%def>
## one pair (p = pr, the prediction rounded to real_t, as acc_t; observation o: a real_t
## expression) into the lean stream of target t: stats.update's operations on the values
## rho needs
<%def name="upd(t, o)">\
{
                const acc_t o_ = (acc_t)(${o});
% if not FS:
                if (n${t} == 0) { kp${t} = p; ko${t} = o_; }
% endif
                const acc_t dp_ = p - kp${t}, do_ = o_ - ko${t};
                n${t} += 1;
                a${t}[0] += dp_;
                a${t}[1] += do_;
                a${t}[2] += dp_ * dp_;
                a${t}[3] += do_ * do_;
                a${t}[4] += dp_ * do_;
            }
</%def>
## the prediction pr (real_t) of query slots l<k>, w<k> (unrolled); yfmt.format(k=k):
## slot k's target value (real_t). "ccm": the real_t sum of the normalised weights times
## the targets (common/_lookup.mako); else the acc_t sum over the weight sum den
<%def name="predict(yfmt)">\
% if WEIGHT == "ccm":
            real_t num = 0;
%   for k in range(K):
            if (l${k} >= 0) num += w${k} * ${yfmt.format(k=k)};
%   endfor
            const real_t pr = den > 0 ? num : (real_t)NAN;
% else:
            acc_t num = 0;
%   for k in range(K):
            if (l${k} >= 0) num += w${k} * (acc_t)${yfmt.format(k=k)};
%   endfor
            const real_t pr = den > 0 ? (real_t)(num / den) : (real_t)NAN;
% endif
</%def>
## FS: the summed lean entry m (acc_t[8]) finished in place into merge statistics
<%def name="finish8(m)">\
{
        const acc_t s_[10] = {${m}[0], ${m}[1], ${m}[2], ${m}[3], ${m}[4], ${m}[5], ${m}[6],
                              ${m}[7], 0, 0};
        stats_finish(s_, ${m});
    }\
</%def>
