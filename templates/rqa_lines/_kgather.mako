## NTHR > 1, SHARE, VEC a multiple of 8 (the CPU path): a diagonal launch's 64-row words
## of its VEC diagonals by a shear of the column words instead of 64 gathers. Bit r of
## diagonal l is bit r of column word sw[l + r]; over the VEC + 63 words x_j = sw[j], six
## steps (d = 32, 16, ..., 1) take bit r from d words further where bit d of r is set:
## x_j <- bitselect(x_j, x_{j+d}, M_d), M_d the bits r with r & d; after them x_j holds bit
## r of sw[j + r], for every r: x_l is diagonal l's word. The words are read once (ceil((VEC
## + 63) / 8) loads of eight; the 64 gathers read each VEC times) and each step is one
## bit-select per eight words (d < 8: and one shuffle2 of two neighbours). The same words.
## Reads sw[0 .. 8 ceil((VEC + 63) / 8) - 1], inside the column padding (SPAD = 64 + VEC).
## T: the names of _names.mako. Import with <%namespace name="kgather" file="/rqa_lines/_kgather.mako"/>.

## `dw` (ulongVEC) from the column words at `sw` (__global const ulong*).
<%def name="shear(T)">\
<%
    cnt = T.VEC + 63
    cur = ["_gx%d" % q for q in range(-(-cnt // 8))]
    masks = {32: "0xFFFFFFFF00000000UL", 16: "0xFFFF0000FFFF0000UL", 8: "0xFF00FF00FF00FF00UL",
             4: "0xF0F0F0F0F0F0F0F0UL", 2: "0xCCCCCCCCCCCCCCCCUL", 1: "0xAAAAAAAAAAAAAAAAUL"}
%>\
            /* the column words sheared into the diagonals' words (_kgather.mako) */
% for q, v in enumerate(cur):
            const ulong8 ${v} = vload8(${q}, sw);
% endfor
% for d in (32, 16, 8, 4, 2, 1):
<%
    cnt -= d
    new = ["_g%d_%d" % (d, a) for a in range(-(-cnt // 8))]
%>\
%   for a, v in enumerate(new):
<%
    if d % 8 == 0:
        partner = cur[a + d // 8]
    else:
        nxt = cur[a + 1] if a + 1 < len(cur) else cur[a]
        partner = "shuffle2(%s, %s, (ulong8)(%s))" % (cur[a], nxt, ", ".join(str(d + e) for e in range(8)))
%>\
            const ulong8 ${v} = bitselect(${cur[a]}, ${partner}, (ulong8)${masks[d]});
%   endfor
<% cur = new %>\
% endfor
            const ${T.ULV} dw = ${cur[0] if T.VEC == 8 else "(%s)(%s)" % (T.ULV, ", ".join(cur))};
</%def>
