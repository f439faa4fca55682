## knn_scan's INS "key" kernel (_keys.mako), before its main pass: each E's first
## threshold, the K-th smallest of the lane minima over the library (KS: K per E; NM
## lane-minimum vectors per E of VW lanes; RV/IV/UV/IVC: the real, int, uint and
## comparison vector types).
<%namespace name="metric" file="/common/_metric.mako"/>
<%namespace name="vec" file="/_vecops.mako"/>
## whether the library lanes li0 .. li0 + n - 1 (C expressions) are all rows at every E
## and outside the exclusion radius of query p (their masks are all ones)
<%def name="admissible(li0, n)">\
${li0} >= lf && ${li0} + ${n} <= hf && (t0 + ${li0} + ${n - 1} < p - radius || t0 + ${li0} > p + radius)\
</%def>
<%def name="thresholds(KS, NM, VW, RV, IV, UV, IVC)">\
    /* first thresholds: per E the K-th smallest of the lane minima (lane i of a vector
       takes the minimum over the library rows at lanes i, i + VW, ...: times VW
       apart, so a smooth series' nearest rows spread over the lanes). Each lane
       minimum is a distinct admissible row, so the K-th smallest of them bounds the
       list's K-th distance from above: every row of the final list passes it and the
       main pass inserts ~K rows per E instead of ~K ln(n / K). */
    {
% for j in range(EMAX):
% for h in range(NM):
        ${RV} mn${h}_${j} = (${RV})INFINITY;
% endfor
% endfor
        for (int c = 0; c < chunk / ${VW}; c += ${NM}) {
            if (${admissible("c * %d" % VW, NM * VW)}) {  /* no lane masked: the minima alone */
% for h in range(NM):
                {
                    const int l = t0 + (c + ${h}) * ${VW};
                    ${RV} acc = (${RV})0;
% for j in range(EMAX):
                    {
                        const ${RV} cj = ${vec.load(INL, RV, "x + (PAD - %d) + l" % (j * TAU))};
                        ${metric.step(METRIC, "acc", "cj", "(%s)qv%d" % (RV, j), FMA, RV)}
                        mn${h}_${j} = acc < mn${h}_${j} ? acc : mn${h}_${j};
                    }
% endfor
                }
% endfor
                continue;
            }
% for h in range(NM):
            {
                const int l = t0 + (c + ${h}) * ${VW};
                ${IV} dd = ((${IV})(l) + (${IV})(${", ".join(str(v) for v in range(VW))})) - (${IV})p;
                dd = dd < 0 ? -dd : dd;
                const ${UV} m = as_${UV}(dd > (${IV})radius) & as_${UV}(${vec.load(INL, IV, "lmask + l - t0")});
                ${RV} acc = (${RV})0;
% for j in range(EMAX):
                {
                    const ${RV} cj = ${vec.load(INL, RV, "x + (PAD - %d) + l" % (j * TAU))};
                    ${metric.step(METRIC, "acc", "cj", "(%s)qv%d" % (RV, j), FMA, RV)}
                    const ${RV} a = convert_${IVC}((m & (${UV})${"%du" % (1 << j)}) != (${UV})0u) ? acc : (${RV})INFINITY;
                    mn${h}_${j} = a < mn${h}_${j} ? a : mn${h}_${j};
                }
% endfor
            }
% endfor
        }
% for j in range(EMAX):
% if KS[j] <= NM * VW:
        if (${j} < em) {
            /* the smallest lane minimum v with at least K of them <= v, for every lane at
               once: lane i of nb<h> counts (negated) the minima <= lane i of mn<h>, over
               the lane rotations of every minimum vector */
% for h in range(NM):
            ${IVC} nb${h} = (${IVC})0;
% for g in range(NM):
% for r in range(VW):
% if r == 0:
            nb${h} += mn${g}_${j} <= mn${h}_${j};
% else:
            nb${h} += ${vec.rotate(INL, "mn%d_%d" % (g, j), RV, VW, r)} <= mn${h}_${j};
% endif
% endfor
% endfor
% endfor
            ${RV} c = nb0 <= (${IVC})${-KS[j]} ? mn0_${j} : (${RV})INFINITY;
% for h in range(1, NM):
            {
                const ${RV} ch = nb${h} <= (${IVC})${-KS[j]} ? mn${h}_${j} : (${RV})INFINITY;
                c = ch < c ? ch : c;
            }
% endfor
<% w = VW; v = "c" %>\
% while w > 1:
<% w //= 2 %>\
            const ${REAL}${w if w > 1 else ""} c${w}_ = ${v}.lo < ${v}.hi ? ${v}.lo : ${v}.hi;
<% v = "c%d_" % w %>\
% endwhile
            th${j} = c1_;
        }
% endif
% endfor
    }
</%def>
