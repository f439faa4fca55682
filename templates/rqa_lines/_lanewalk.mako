## WALK=3 of rqa_lines (BITS=2, VEC >= 2, PH >= 64; the CPU default): the run walk of
## one 64-cell word per lane, VEC lanes at once in vector registers (columns of the
## vertical launch, rows of the horizontal one) instead of lane after lane. The scalar
## walks of WALK=1 take one data-dependent loop per lane word (its exit mispredicted once
## per word); here every step is branch-free vector code over all lanes:
##   * the run entering the word closes at its first transition p0: one increment per
##     lane (ph_vw holds the black and the white bins; a row's first run becomes its head;
##     a line longer than PH takes hist_add, rare);
##   * black runs of length 1 closed in the word: one popcount (n1v);
##   * white runs closed in the word pair the remaining black starts with the white starts
##     in order (ctz of both, lowest first): length ps - pe <= 62 < PH, one private-bin
##     increment per lane and step (lanes without a run left add to their own spare bin
##     PH + l, so no two lanes chain on one address);
##   * the rare longer black lines closed in the word: starts paired with ends alike;
##   * the open run at the word's end: its colour is the word's last cell, its start the
##     highest black or white start (clz).
## Same histograms as WALK=1 (and 0). T: the names of _names.mako.
## Import with <%namespace name="lanewalk" file="/rqa_lines/_lanewalk.mako"/>.

## The lane types of a WALK=3 walk: ULV ulongVEC (words), LV longVEC (masks); the lane
## bit counts popv / hibv / ctzv are _bits.mako's.

## Walk the words `wd` (ulongVEC) of the lanes over `nbl` cells each (longVEC, 0..64; a
## lane with 0 is left alone). Open runs: `vr`/`wr` (uintVEC, column walk: black and white
## length, one of them 0) or, with `head`, `ln`/`col` (uintVEC: length and colour of the
## row's open run) and `head` (a uint array, the row's first closed run:
## length | colour << 31). `wcount`: the lanes (an intVEC mask) whose carried white run
## counts (column walk, WBORDER=0). Closed lines go to ph_v/ph_w, both in ph_vw (hist_add
## beyond PH).
<%def name="walk(T, wd, nbl, vr=None, wr=None, ln=None, col=None, head=None, np=None, wcount=None)">\
<% ULV, LV, UV, IV, VEC = T.ULV, T.LV, T.UV, T.IV, T.VEC; nph = PH + VEC %>\
        {
            const ${ULV} spare_ = (${ULV})(${PH}UL) + (${ULV})(${", ".join(str(l) for l in range(VEC))});
            const ${UV} spare_w_ = convert_${UV}(spare_) + (${UV})${nph}u;
            const ${ULV} m_ = VSELECT(((${ULV})1 << as_${ULV}(${nbl})) - (${ULV})1, ~(${ULV})0,
                                    (${nbl}) >= (${LV})64);
            const ${ULV} b_ = (${wd}) & m_;
% if np:
            const ${UV} np_before = ${np};
            ${np} += convert_${UV}(popv(b_));
% endif
% if head:
            const ${ULV} cur_ = convert_${ULV}(${col});
% else:
            const ${ULV} cur_ = convert_${ULV}(${vr} > (${UV})0u) & (${ULV})1;
% endif
            const ${ULV} up_ = (b_ << 1) | cur_;
            const ${ULV} s_ = b_ & ~up_ & m_;          /* black run starts */
            const ${ULV} e_ = ~b_ & up_ & m_;          /* white run starts */
            const ${ULV} iso_ = s_ & (e_ >> 1);        /* black runs of length 1 closed here */
            n1v += popv(iso_);
            const ${ULV} se_ = s_ | e_;
            const ${IV} tr_ = convert_${IV}(se_ != (${ULV})0);   /* the entering run closes */
            const ${UV} p0_ = convert_${UV}(ctzv(se_));
% if head:
            const ${UV} closed_ = ${ln} + p0_;
% else:
            const ${UV} closed_ = VSELECT(${wr}, ${vr}, ${vr} > (${UV})0u) + p0_;
% endif
            /* the entering run's line: lanes that count it (a row's first run is its head
               instead), into ph_v (black) or ph_w (white, ${nph} bins further in ph_vw) */
% if head:
            const ${UV} h0_ = vload${VEC}(0, ${head});
            const ${IV} hz_ = tr_ & (h0_ == (${UV})0u);
            vstore${VEC}(VSELECT(h0_, closed_ | (convert_${UV}(cur_) << 31), hz_), 0, ${head});
            const ${IV} go_ = tr_ & ~hz_;
% else:
            const ${IV} go_ = tr_ & (convert_${IV}(cur_ != (${ULV})0) | ((closed_ > (${UV})0u)${"" if wcount is None else " & (%s)" % wcount}));
% endif
            const ${IV} big_ = go_ & (closed_ > (${UV})${PH}u);
            if (VANY(big_)) {   /* longer than the private bins (rare) */
% for l in range(VEC):
                if (${T.lane("big_", l)}) {
                    if (${T.lane("cur_", l)}) hist_add(ph_v, lh_v, hist_v, ${T.lane("closed_", l)});
                    else hist_add(ph_w, lh_w, hist_w, ${T.lane("closed_", l)});
                }
% endfor
            }
            {
                const ${UV} bin_ = VSELECT(spare_w_, closed_ - (${UV})1u + VSELECT((${UV})${nph}u, (${UV})0u, convert_${IV}(cur_ != (${ULV})0)),
                                          go_ & ~big_);
% for l in range(VEC):
                ph_vw[${T.lane("bin_", l)}] += 1u;
% endfor
            }
            /* white runs closed in the word: the black starts after the first (if the
               entering run is white, the first closes it) pair with the white starts */
            const ${ULV} cm_ = (${ULV})0 - cur_;
            ${ULV} sw_ = (s_ & cm_) | (s_ & (s_ - (${ULV})1) & ~cm_);
            ${ULV} ew_ = e_;
            while (VANY(sw_ != (${ULV})0)) {
                const ${LV} v_ = sw_ != (${ULV})0;
                const ${ULV} len_ = ctzv(sw_) - ctzv(ew_);
                const ${UV} bin_ = convert_${UV}(VSELECT(spare_, len_ - (${ULV})1, v_));
% for l in range(VEC):
                ph_w[${T.lane("bin_", l)}] += 1u;
% endfor
                sw_ &= sw_ - (${ULV})1;
                ew_ &= ew_ - (${ULV})1;
            }
            /* black lines longer than 1 closed in the word (1.5% at RR 0.1): their starts
               pair with their ends (the white starts after them) in order, as the white
               lines do; the carried black run's end (the first white start) is not one */
            {
                ${ULV} sl_ = s_ & ~iso_;
                ${ULV} el_ = e_ & ~(iso_ << 1);
                el_ = (el_ & ~cm_) | (el_ & (el_ - (${ULV})1) & cm_);
                while (VANY(el_ != (${ULV})0)) {
                    const ${LV} v_ = el_ != (${ULV})0;
                    const ${ULV} len_ = ctzv(el_) - ctzv(sl_);
                    const ${UV} bin_ = convert_${UV}(VSELECT(spare_, len_ - (${ULV})1, v_));
% for l in range(VEC):
                    ph_v[${T.lane("bin_", l)}] += 1u;
% endfor
                    sl_ = VSELECT(sl_, sl_ & (sl_ - (${ULV})1), v_);
                    el_ &= el_ - (${ULV})1;
                }
            }
            /* the open run at the word's end: colour of the last cell; started at the
               highest black (white) start when the word has a transition */
            const ${UV} nbu_ = convert_${UV}(${nbl});
            const ${IV} lastb_ = convert_${IV}(((b_ >> as_${ULV}(${nbl} - (${LV})1)) & (${ULV})1) != (${ULV})0);
            const ${UV} hs_ = convert_${UV}(hibv(s_));
            const ${UV} he_ = convert_${UV}(hibv(e_));
% if head:
            ${ln} = VSELECT(${ln} + nbu_, nbu_ - VSELECT(he_, hs_, lastb_), tr_);
            ${col} = VSELECT(${col}, VSELECT((${UV})0u, (${UV})1u, lastb_), tr_);
% else:
            const ${UV} vn_ = VSELECT(${vr} + VSELECT((${UV})0u, nbu_, ${vr} > (${UV})0u),
                                     VSELECT((${UV})0u, nbu_ - hs_, lastb_), tr_);
            const ${UV} wn_ = VSELECT(${wr} + VSELECT(nbu_, (${UV})0u, ${vr} > (${UV})0u),
                                     VSELECT(nbu_ - he_, (${UV})0u, lastb_), tr_);
            ${vr} = vn_;
            ${wr} = wn_;
% endif
        }
</%def>

## Diagonal words `dw` (ulongVEC) of the lanes over `nb` cells (the same for every lane;
## lanes outside the launch have `lval` 0): black runs only, the carried ones in `dr`
## (uintVEC). Lines of length 1 closed in the word: one popcount; the carried run closing
## at the first end and the other closed lines pair starts and ends in order, one
## private-bin increment per lane and step (spare bin PH + l when a lane has none;
## lines longer than PH, only possible for a carried run, take hist_add).
<%def name="diag_walk(T, dw, nb, lval, dr)">\
<% ULV, LV, UV, IV, VEC = T.ULV, T.LV, T.UV, T.IV, T.VEC %>\
        {
            const ${ULV} spare_ = (${ULV})(${PH}UL) + (${ULV})(${", ".join(str(l) for l in range(VEC))});
            const ${ULV} m_ = ((${nb}) >= 64 ? ~(${ULV})0 : (${ULV})((1UL << (${nb})) - 1UL)) & as_${ULV}(convert_${LV}(${lval}));
            const ${ULV} b_ = (${dw}) & m_;
            const ${ULV} cur_ = convert_${ULV}(${dr} > (${UV})0u) & (${ULV})1;
            const ${ULV} up_ = (b_ << 1) | cur_;
            const ${ULV} s0_ = b_ & ~up_;              /* line starts */
            const ${ULV} e0_ = ~b_ & up_ & m_;         /* line ends (the white cell after) */
            const ${ULV} iso_ = s0_ & (e0_ >> 1);
            n1v += popv(iso_);
            ${ULV} s_ = s0_ & ~iso_;
            ${ULV} e_ = e0_ & ~(iso_ << 1);
            /* the carried line closes at the first end (or covers the word) */
            const ${LV} cc_ = (cur_ != (${ULV})0) & (e_ != (${ULV})0);
            const ${UV} clen_ = ${dr} + convert_${UV}(ctzv(e_));
            const ${IV} ccl_ = convert_${IV}(cc_) & (clen_ > (${UV})${PH}u);
            if (VANY(ccl_)) {   /* longer than the private bins (rare) */
% for l in range(VEC):
                if (${T.lane("ccl_", l)}) hist_add(ph_d, lh_d, hist_d, ${T.lane("clen_", l)});
% endfor
            }
            {
                const ${UV} bin_ = convert_${UV}(VSELECT(spare_, convert_${ULV}(clen_) - (${ULV})1,
                                                       cc_ & ~convert_${LV}(ccl_)));
% for l in range(VEC):
                ph_d[${T.lane("bin_", l)}] += 1u;
% endfor
            }
            e_ = VSELECT(e_, e_ & (e_ - (${ULV})1), cc_);
            /* the other lines closed in the word (length 2 .. ${63}): starts pair with ends */
            while (VANY(e_ != (${ULV})0)) {
                const ${LV} v_ = e_ != (${ULV})0;
                const ${ULV} len_ = ctzv(e_) - ctzv(s_);
                const ${UV} bin_ = convert_${UV}(VSELECT(spare_, len_ - (${ULV})1, v_));
% for l in range(VEC):
                ph_d[${T.lane("bin_", l)}] += 1u;
% endfor
                s_ = VSELECT(s_, s_ & (s_ - (${ULV})1), v_);
                e_ &= e_ - (${ULV})1;
            }
            /* the line left open at the word's end: its last cell is black; it started at
               the highest start of the word, or before the word (no start: continued) */
            const ${IV} lastb_ = convert_${IV}(((b_ >> (ulong)((${nb}) - 1)) & (${ULV})1) != (${ULV})0);
            const ${IV} hass_ = convert_${IV}(s0_ != (${ULV})0);
            const ${UV} hs_ = convert_${UV}(hibv(s0_));
            ${dr} = VSELECT(${dr}, VSELECT((${UV})0u, VSELECT(${dr} + (${UV})(${nb}), (${UV})(${nb}) - hs_,
                                                        hass_), lastb_), ${lval});
        }
</%def>
