## Shared defs: exact top-k lists of the k-NN kernels (knn, knn_scan).
## Import with <%namespace name="topk" file="/common/_topk.mako"/>; needs `real_t`.
<%namespace name="vec" file="/_vecops.mako"/>\
##
## The k best candidates of a query are kept in the total order (distance, |p - l|, l)
## (pyEDM's Simplex tie order); `tie_key(p, l)` ranks |p - l| first, then the earlier
## point. The top-k of a total order does not depend on the order candidates arrive
## in, so every list form below gives the same result. Four forms:
##   * registers, bd0..bd{K-1} / bi0..bi{K-1} (distance / point, -1 = empty):
##     `insert_reg`, an unrolled compare-swap network;
##   * packed keys s0..s{K-1} (ulong: float distance bits << 32 | tie key, whose
##     integer order is the total order): `insert_key`, a branch-free min/max network;
##   * the same keys as the sorted lanes of one ulongW (W of 2, 4, 8, 16, W >= K) or of
##     two ulong16 (K <= 32, keys 16.. in the second), empty lanes EMPTY:
##     `insert_lanes`, a lane shift, a max and a select per vector (cheaper than the
##     network where many lists are live);
##   * sorted lists in local memory (topd / topi rows): `shift_insert`, a short
##     shifting insertion.

## tie_key and dist_rows, once per kernel source
<%def name="functions()">\
/* tie key of library point l for query p: |p - l| first, then the earlier point */
inline int tie_key(const int p, const int l) { return 2 * (l > p ? l - p : p - l) + (l > p); }
inline int dist_rows(const int p, const int l) { return l > p ? l - p : p - l; }
</%def>

## candidate (D, L) with tie key KEY into the register list bd{k}SF / bi{k}SF of K
## entries for query P (the displaced entry moves one place down)
<%def name="insert_reg(K, D, L, KEY, SF='', P='p')">\
{
                    real_t cd = ${D}; int ci = ${L}; int ck = ${KEY};
${insert_steps(0, K, SF, P)}\
}\
</%def>

## the compare-swap steps of entries K0 .. K1-1 of the register list for the candidate
## (cd, ci, ck) declared by the caller; afterwards (cd, ci) is the entry displaced past
## K1 - 1 (ci -1: none), so that a caller may offer it to entries from K1 on
<%def name="insert_steps(K0, K1, SF='', P='p')">\
% for k in range(K0, K1):
${swap_step("bd%d%s" % (k, SF), "bi%d%s" % (k, SF), P)}\
% endfor
</%def>

## one compare-swap of the candidate (cd, ci, ck) with the entry at lvalues D (distance)
## and I (point, -1 = empty) of query P: the candidate takes the place where it ranks
## first, and the entry it displaces goes on as the candidate
<%def name="swap_step(D, I, P='p')">\
                    {
                        const bool sw = cd < ${D} || (cd == ${D} && (${I} < 0 || ck < tie_key(${P}, ${I})));
                        const real_t td = ${D}; const int ti = ${I};
                        if (sw) { ${D} = cd; ${I} = ci; cd = td; ci = ti; ck = tie_key(${P}, ti); }
                    }
</%def>

## packed key `cv` (a ulong lvalue, consumed) into the key list s{k}SF of K entries
<%def name="insert_key(K, SF='')">\
% for k in range(K):
{ const ulong lo = cv < s${k}${SF} ? cv : s${k}${SF}; cv = cv < s${k}${SF} ? s${k}${SF} : cv; s${k}${SF} = lo; }
% endfor
</%def>

## packed key `cv` (a ulong, below the list's last key) into the sorted lanes LO (keys
## 0-15) and, where the list holds more than 16 keys, HI (keys 16-31): every lane
## above cv takes its left neighbour or cv, whichever is larger. Needs the macros of
## /_vecops.mako (`ops(INL)`).
<%def name="insert_lanes(LO, HI=None, W=16, INL=0)">\
<% U = "ulong%d" % W %>\
{
    const ${U} c = (${U})cv;
% if HI:
    /* the upper half shifts in the lower half's last key */
    const ulong16 shh = ${vec.shift_in(INL, HI, LO, "ulong16", 16, first=31)};
    ${HI} = VSELECT(${HI}, VMAXI(shh, (ulong16)cv), ${HI} > (ulong16)cv);
% endif
    const ${U} sh = ${vec.shift_in(INL, LO, "(%s)0UL" % U, U, W)};
    ${LO} = VSELECT(${LO}, VMAXI(sh, c), ${LO} > c);
}\
</%def>

## candidate (D, L) with tie key KEY into the sorted local list topd[I][OP j] /
## topi[I][OP j], j < K, of query P (OP: the list's offset in its row, e.g. "O + ",
## or ""); the caller has checked that it beats the list's last entry.
## FILL (an int lvalue, optional): the entries the list holds, its empty ones (-1) all
## after them; the walk then starts at the first empty entry instead of the last one
## (filling a list of K took ~K^2/2 moves of empty entries), reads each entry it passes
## once (distance and point, kept for the move) and leaves at the first one the
## candidate does not precede; FILL counts the new entry. The same list either way.
<%def name="shift_insert(I, OP, K, D, L, KEY, P, FILL=None)">\
% if FILL:
int j = min((int)${FILL}, ${K} - 1);
for (; j > 0; --j) {  /* entries below j: none empty */
    const real_t dj = topd[${I}][${OP}j - 1];
    const int ij = topi[${I}][${OP}j - 1];
    if (!(${D} < dj || (${D} == dj && ${KEY} < tie_key(${P}, ij)))) break;
    topd[${I}][${OP}j] = dj;
    topi[${I}][${OP}j] = ij;
}
% else:
int j = ${K} - 1;
while (j > 0 && (${D} < topd[${I}][${OP}j - 1] || (${D} == topd[${I}][${OP}j - 1]
       && (topi[${I}][${OP}j - 1] < 0 || ${KEY} < tie_key(${P}, topi[${I}][${OP}j - 1]))))) {
    topd[${I}][${OP}j] = topd[${I}][${OP}j - 1];
    topi[${I}][${OP}j] = topi[${I}][${OP}j - 1];
    --j;
}
% endif
topd[${I}][${OP}j] = ${D};
topi[${I}][${OP}j] = ${L};
% if FILL:
${FILL} = min(${FILL} + 1, ${K});
% endif
</%def>
