## knn_scan.cl.mako's distance phase (branch-free): per library lane and query the
## partial sums over E and the candidate bit mask (bit E-1: partial sum <= the query's
## current threshold at E, library row at E, outside the exclusion radius), stored
## unconditionally into cbits. VEC == 1: R lanes per work-item (GPUs); VEC > 1: R
## vectors of VEC consecutive lanes per work-item (CPUs; the vector step does per lane
## the scalar step's operations, so the sums are the same).
<%namespace name="metric" file="/common/_metric.mako"/>
<%def name="phase(R)">\
% if VEC == 1:
        /* R lanes per work-item; each query coordinate / threshold is loaded once for all R */
% for r in range(R):
        const int lt${r} = lid + ${r * WG};
        const int ll${r} = t0 + base + lt${r};
        const unsigned int m${r} = (unsigned int)lmask[base + lt${r}];
% for j in range(EMAX):
        const real_t c${r}_${j} = x[PAD + ll${r} - ${j * TAU}];
% endfor
% endfor
% for i in range(QB):
        {
% for r in range(R):
            real_t acc${r} = (real_t)0;
            unsigned int bits${r} = 0u;
% endfor
% for j in range(EMAX):
            {
                const real_t qv = qloc[${i}][${j}];
                const real_t th = thr[${i}][${j}];
% for r in range(R):
                ${metric.step(METRIC, "acc%d" % r, "c%d_%d" % (r, j), "qv", FMA)}
                bits${r} |= acc${r} <= th ? ${"%du" % (1 << j)} : 0u;
% endfor
            }
% endfor
% for r in range(R):
            {
                const unsigned int cb = dist_rows(qp[${i}], ll${r}) > radius ? (bits${r} & m${r}) : 0u;
                cbits[${i}][lt${r}] = cb;
% if CQ:
                if (cb) {
                    atomic_or(&qany[cur][${i}], cb);
                    clist[${i}][atomic_inc(&ncand[cur][${i}])] = (ushort)lt${r};
                }
% elif ANY:
                if (cb) atomic_or(&qany[cur][${i}], cb);
% endif
            }
% endfor
        }
% endfor
% else:
<% RV = "%s%d" % (REAL, VEC); IV = "int%d" % VEC; UV = "uint%d" % VEC %>\
% for r in range(R):
        {
            const int t = (lid + ${r * WG}) * ${VEC};
            const int l = t0 + base + t;
            const ${IV} lv = (${IV})(l) + (${IV})(${", ".join(str(v) for v in range(VEC))});
            const ${UV} m = as_${UV}(vload${VEC}(0, lmask + base + t));
% for j in range(EMAX):
            const ${RV} c${j} = vload${VEC}(0, x + (PAD - ${j * TAU}) + l);
% endfor
% for i in range(QB):
            {
                ${RV} acc = (${RV})0;
                ${UV} bits = (${UV})0u;
% for j in range(EMAX):
                ${metric.step(METRIC, "acc", "c%d" % j, "qloc[%d][%d]" % (i, j), FMA, RV)}
% if REAL == "double":
                bits |= convert_${UV}(-(acc <= (${RV})thr[${i}][${j}])) << ${j}u;
% else:
                bits |= as_${UV}(acc <= (${RV})thr[${i}][${j}]) & (${UV})${"%du" % (1 << j)};
% endif
% endfor
                ${IV} dd = lv - (${IV})qp[${i}];
                dd = dd < 0 ? -dd : dd;
                const ${UV} cb = as_${UV}(dd > (${IV})radius) & bits & m;
                vstore${VEC}(cb, 0, &cbits[${i}][t]);
            }
% endfor
        }
% endfor
% endif
</%def>
