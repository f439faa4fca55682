## params: E, TAU, K, CAP, RADIUS, VARIANCE
## version: 1
## pyEDM's Simplex neighbours of the queries whose knn-th place ties, on the device
## (pyedmcl/edm/simplex_ties.py: `decide`, the same steps; the host's version decides
## the rows this kernel leaves open).
##
## Slot s < count[0] holds tied query rows[s] (point qpts[rows[s]]), its knn-th float64
## distance kth[s] and its candidates groups[s][0 .. min(gcount[s], CAP))): every
## admissible library point within kth (1 + 2 width) (knn/range.cl.mako), so every other
## one lies farther than lo = kth (1 + width) in pyEDM's arithmetic too. The library
## points within RADIUS rows of the query (excluded; pyEDM's tree returns them) join
## the pool from the ascending library lpts. Over the pool, in pyEDM's arithmetic (its
## state columns: the prediction time's value first, then its lags; TAU's sign as the
## caller's), the kd-tree's distances (four running sums over columns 4m .. 4m+3, added
## ((s0 + s1) + s2) + s3, then the rest) and NumPy's full-scan ones (left to right):
## * the K first admissible by (kd distance, |p - l|, l); where pyEDM's tree returns
##   fewer points than the library holds (`complete`), its farthest returned is the
##   kq-th smallest kd distance of the pool, known where it lies within lo;
## * a knn-th below it and within lo: decided; at or past it (known): pyEDM's full
##   scan, the K first by (full-scan distance, |p - l|, l), decided where its knn-th
##   lies within lo; otherwise (a cut list, an unknown farthest point) left open.
## A decided slot weighs its K neighbours as pyEDM's Simplex does (w = exp(-d / max(d_0,
## 1e-6)) over pyEDM's distances d, kd or full scan; the targets y, nt rows ldy apart,
## library point l predicting y[j][l + tshift]) and writes each target's prediction (and
## VARIANCE: pyEDM's variance) at out[j * ostride + (scatter ? rows[s] : s)]: into the
## pass's predictions (scatter) or a slot's column; rsel[s] = rows[s]. An open or unused
## slot writes nothing and rsel[s] = -1; count[1] (zeroed by the caller) counts the open
## slots, so that the host reads the lists only where it has rows to decide. Contraction is off: each operation rounds
## as NumPy's.
<%namespace name="metric" file="/common/_metric.mako"/>\
${metric.real_type("double")}
#define K ${K}
#define CAP ${CAP}
<%
    P = CAP + 2 * RADIUS + 1
    FULL = E - E % 4
    # offsets of pyEDM's columns from a kernel point (its window x[p + j |TAU|])
    cols = [(E - 1 - c) * abs(TAU) for c in range(E)] if TAU > 0 else [c * abs(TAU) for c in range(E)]
%>
/* the kd-tree's and NumPy's full-scan distance of kernel points l and p */
inline void pyedm_dist(__global const double* restrict x, const int l, const int p,
                       double* kd, double* fs)
{
% for c in range(E):
    const double d${c} = x[l + ${cols[c]}] - x[p + ${cols[c]}];
% endfor
% for a in range(4):
    double s${a} = 0.0;
% endfor
% for c in range(FULL):
    s${c % 4} = s${c % 4} + d${c} * d${c};
% endfor
    double s = ((s0 + s1) + s2) + s3;
% for c in range(FULL, E):
    s = s + d${c} * d${c};
% endfor
    *kd = sqrt(s);
    double f = d0 * d0;
% for c in range(1, E):
    f = f + d${c} * d${c};
% endfor
    *fs = sqrt(f);
}

/* whether (d, c, l) ranks before (d0, c0, l0): distance, |p - l|, l */
inline int before(const double d, const int c, const int l, const double d0, const int c0,
                  const int l0)
{
    return d < d0 || (d == d0 && (c < c0 || (c == c0 && l < l0)));
}

/* the first K admissible pool points by (key, |p - l|, l) into sel / sd (sd inf past
   those that exist); returns the knn-th key (inf where fewer) */
inline double first_k(const int np, const int* pl, const int* adm, const double* key,
                      const int p, int* sel, double* sd)
{
    int n = 0;
    for (int i = 0; i < np; ++i) {
        if (!adm[i]) continue;
        const double d = key[i];
        const int l = pl[i];
        const int c = l > p ? l - p : p - l;
        if (n == K && !before(d, c, l, sd[K - 1], sel[K - 1] > p ? sel[K - 1] - p : p - sel[K - 1],
                              sel[K - 1]))
            continue;
        int j = n < K ? n : K - 1;
        for (; j > 0; --j) {
            const int lj = sel[j - 1];
            if (!before(d, c, l, sd[j - 1], lj > p ? lj - p : p - lj, lj)) break;
            sel[j] = lj;
            sd[j] = sd[j - 1];
        }
        sel[j] = l;
        sd[j] = d;
        if (n < K) ++n;
    }
    for (int j = n; j < K; ++j) {
        sel[j] = -1;
        sd[j] = INFINITY;
    }
    return n == K ? sd[K - 1] : INFINITY;
}

__kernel void pyedm_decide(__global const double* restrict x, __global const int* restrict lpts,
                           const int nl, __global const int* restrict qpts,
                           __global const int* restrict rows, __global const double* restrict kth,
                           volatile __global int* restrict count,
                           __global const int* restrict groups,
                           __global const int* restrict gcount, const int slots, const int kq,
                           const int complete, const double width,
                           __global const double* restrict y, const int ldy, const int nt,
                           const int tshift, __global double* restrict out_p,
                           __global double* restrict out_v, const int ostride,
                           const int scatter, __global int* restrict rsel)
{
    const int s = get_global_id(0);
    if (s >= slots) return;
    rsel[s] = -1;
    if (s >= count[0]) return;
    if (gcount[s] > CAP) {  /* a cut list: the host's */
        atomic_inc(count + 1);
        return;
    }
    const int q = rows[s];
    const int p = qpts[q];
    const double lo = kth[s] * (1.0 + width);
    int pl[${P}], adm[${P}];
    double rk[${P}], rr[${P}];
    int np = 0;
    for (int i = 0; i < gcount[s]; ++i) {
        pl[np] = groups[(size_t)s * CAP + i];
        adm[np++] = 1;
    }
% if RADIUS >= 0:
    {   /* the excluded library points: the first at or past p - RADIUS, on */
        int a = 0, b = nl;
        while (a < b) {
            const int m = (a + b) >> 1;
            if (lpts[m] < p - ${RADIUS}) a = m + 1; else b = m;
        }
        for (int i = a; i < nl && lpts[i] <= p + ${RADIUS}; ++i) {
            pl[np] = lpts[i];
            adm[np++] = 0;
        }
    }
% endif
    for (int i = 0; i < np; ++i)
        pyedm_dist(x, pl[i], p, rk + i, rr + i);
    int sel[K];
    double sd[K];
    const double knnth = first_k(np, pl, adm, rk, p, sel, sd);
    int decided, scan;
    if (complete) {
        /* pyEDM's farthest returned point: the kq-th smallest kd distance of the pool */
        double kv = INFINITY;
        if (kq <= np) {
            double t[${P}];
            for (int i = 0; i < np; ++i) t[i] = rk[i];
            for (int i = 0; i < kq; ++i) {  /* kq steps of a selection sort */
                int m = i;
                for (int j = i + 1; j < np; ++j) if (t[j] < t[m]) m = j;
                const double v = t[m]; t[m] = t[i]; t[i] = v;
            }
            kv = t[kq - 1];
        }
        const int known = kq <= np && kv <= lo;
        decided = knnth <= lo && (known ? knnth < kv : 1);
        scan = known && !(knnth < kv);
    } else {
        decided = knnth <= lo;
        scan = 0;
    }
    if (scan) {  /* pyEDM's full scan: NumPy's distances */
        decided = first_k(np, pl, adm, rr, p, sel, sd) <= lo;
    }
    if (!decided) {
        atomic_inc(count + 1);  /* open: the host's */
        return;
    }
    /* pyEDM's Simplex.Project over the K neighbours (all finite here) */
    const double dmin = fmax(sd[0], 1e-6);
    double w[K];
    double den = 0;
    for (int i = 0; i < K; ++i) {
        w[i] = exp(-(sd[i] / dmin));
        den += w[i];
    }
    const size_t at = (size_t)(scatter ? q : s);
    for (int j = 0; j < nt; ++j) {
        __global const double* const yj = y + (size_t)j * ldy + tshift;
        double num = 0;
        for (int i = 0; i < K; ++i) num += w[i] * yj[sel[i]];
        const double mu = num / den;
        out_p[(size_t)j * ostride + at] = mu;
% if VARIANCE:
        double v = 0;
        for (int i = 0; i < K; ++i) {
            const double e = yj[sel[i]] - mu;
            v += w[i] * (e * e);
        }
        out_v[(size_t)j * ostride + at] = v / den;
% endif
    }
    rsel[s] = q;
}
