## S-map part: the group variant's Gram blocks (_group.mako). Work-item slot s = part *
## NBLK + block owns the RB x RB entries of one block of the augmented matrix's upper
## triangle (MB blocks a side, NBLK of them), summed over the points part, part + NPART,
## ... of each tile; SPT slots a work-item. A point's tile row holds entry k = b RB + i
## at tile_pos(k) = i MB + b, so the work-items of one point read one bank each, and its
## stride MP is odd, so a half-warp's fp64 stores of the fill hit 16 banks.
<%namespace name="dfa" file="/smap/_df.mako"/>
<%!
def geometry(M, RB, WG, ACC, NENT):
    """The blocks' constants: MB blocks a side, row stride MP, NBLK blocks, NPART parts,
    NSLOT slots, SPT slots a work-item, TILE_LEN (the tile, or the parts' sums after)."""
    MB = -(-M // RB)
    MP = MB * RB + (MB * RB + 1) % 2
    NBLK = MB * (MB + 1) // 2
    NPART = max(1, WG // NBLK)
    NSLOT = NBLK * NPART
    return dict(MB=MB, MP=MP, NBLK=NBLK, NPART=NPART, NSLOT=NSLOT, SPT=-(-NSLOT // WG),
                TILE_LEN=max(WG * MP, NENT * NPART * (2 if ACC == "df" else 1)))


def tile_pos(k, RB, MB):
    """Where a point's tile row holds augmented entry k."""
    return (k % RB) * MB + k // RB
%>

## Block -> (block row, block column) of the augmented upper triangle, as constant tables.
<%def name="tables(M)">\
<%
MB = -(-M // RB)
blocks = [(i, j) for i in range(MB) for j in range(i, MB)]
%>\
/* Gram block -> (block row, block column) of the augmented upper triangle, RB = ${RB} */
__constant ushort KA[${len(blocks)}] = {${", ".join(str(i) for i, j in blocks)}};
__constant ushort KB[${len(blocks)}] = {${", ".join(str(j) for i, j in blocks)}};
</%def>

## The work-item's accumulators and slots, decoded once.
<%def name="declare(g)">\
<%
SPT, NSLOT, NBLK, NPART, MP, MB = (g[k] for k in ("SPT", "NSLOT", "NBLK", "NPART", "MP", "MB"))
RR = range(RB)
%>\
    acc_t acc[${SPT * RB * RB}];
% for q in range(SPT * RB * RB):
    acc[${q}] = (acc_t)0;
% endfor
% if ACC == "df":
    acc_t acclo[${SPT * RB * RB}];
% for q in range(SPT * RB * RB):
    acclo[${q}] = (acc_t)0;
% endfor
% endif
    /* each work-item's slots, decoded once: its block's row and column, and its part */
    int ska[${SPT}], skb[${SPT}], spart[${SPT}];
% for q in range(SPT):
    {
        const int s = min(lid + ${q * WG}, ${NSLOT - 1});
        /* no div/rem pair: LLVM would insert a freeze that Oclgrind cannot check */
        const int part = ${"0" if NPART == 1 else "s / %d" % NBLK};
        const int b = s - part * ${NBLK};
        ska[${q}] = KA[b]; skb[${q}] = KB[b]; spart[${q}] = part;
    }
% endfor
</%def>

## One tile's Gram updates (the tile filled, after its barrier).
<%def name="accumulate(g)">\
<%
SPT, NSLOT, NBLK, NPART, MP, MB = (g[k] for k in ("SPT", "NSLOT", "NBLK", "NPART", "MP", "MB"))
RR = range(RB)
%>\
% for q in range(SPT):
${slot_block(q, NSLOT, " " * 8)}\
% for i in RR:
% for j in RR:
            acc_t t_acc${i}_${j} = acc[${(q * RB + i) * RB + j}];
% if ACC == "df":
            acc_t t_lo${i}_${j} = acclo[${(q * RB + i) * RB + j}];
% endif
% endfor
% endfor
            for (int t = spart[${q}]; t < ${WG}; t += ${NPART}) {
                __local const acc_t* ta = tile + t * ${MP} + ska[${q}];
                __local const acc_t* tb = tile + t * ${MP} + skb[${q}];
% for i in RR:
                const acc_t ra${i} = ta[${i * MB}], rb${i} = tb[${i * MB}];
% endfor
% for i in RR:
% for j in RR:
                ${dfa.accum("acc_t", "t_acc%d_%d" % (i, j), "t_lo%d_%d" % (i, j), "ra%d" % i, "rb%d" % j)}
% endfor
% endfor
            }
% for i in RR:
% for j in RR:
            acc[${(q * RB + i) * RB + j}] = t_acc${i}_${j};
% if ACC == "df":
            acclo[${(q * RB + i) * RB + j}] = t_lo${i}_${j};
% endif
% endfor
% endfor
        }
% endfor
</%def>

## Each slot's entries to the tile as the parts' sums (part * NENT + IDX; df: lo parts after
## NENT * NPART).
<%def name="store(g, NENT)">\
<%
SPT, NSLOT, NBLK, NPART, MP, MB = (g[k] for k in ("SPT", "NSLOT", "NBLK", "NPART", "MP", "MB"))
RR = range(RB)
%>\
% for q in range(SPT):
${slot_block(q, NSLOT, " " * 4)}\
        const int pe = spart[${q}] * ${NENT};
% for i in RR:
% for j in RR:
        {
            const int k = ska[${q}] * ${RB} + ${i}, l = skb[${q}] * ${RB} + ${j};
            if (k <= l && l < M) {
                tile[pe + IDX(k, l)] = acc[${(q * RB + i) * RB + j}];
% if ACC == "df":
                tile[${NENT * NPART} + pe + IDX(k, l)] = acclo[${(q * RB + i) * RB + j}];
% endif
            }
        }
% endfor
% endfor
    }
% endfor
</%def>

## the opening of slot block q of the SPT per work-item: guarded where the work-group's
## last slots pass NSLOT; `ind`: the line's indentation
<%def name="slot_block(q, NSLOT, ind)">\
%   if (q + 1) * WG > NSLOT:
${ind}if (lid + ${q * WG} < ${NSLOT}) {
%   else:
${ind}{
%   endif
</%def>
