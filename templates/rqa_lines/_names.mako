## Names the rqa_lines parts share, derived from REAL, VEC and BITS once per render.
## Import with <%namespace name="names" file="/rqa_lines/_names.mako"/> and build with
## names.attr.Names(REAL, VEC, BITS); every part def takes that object as T.
<%!
class Names:
    """OpenCL type names and code snippets of one rqa_lines specialisation."""

    LANES = "0123456789abcdef"

    def __init__(self, REAL, VEC, BITS):
        self.REAL, self.VEC = REAL, VEC
        V = "" if VEC == 1 else str(VEC)
        self.RV = REAL + V          # real lanes
        self.UV = "uint" + V        # uint lanes (runs, bit words of 32 rows)
        self.IV = "int" + V         # int lanes (lane masks)
        self.ULV = "ulong" + V      # ulong lanes (SHARE: gathered 64-row words)
        self.LV = "long" + V        # long lanes (WALK=3: masks of 64-bit lane words)
        # BITS=1: 32 rows per run-walk word; BITS=2: 64 (two packed 32-row halves), so the
        # per-word costs of the walk (loop exit misprediction, carry handling) halve.
        self.WT = "ulong" if BITS == 2 else "uint"
        self.WB = 64 if BITS == 2 else 32
        self.WU = "UL" if BITS == 2 else "u"
        self.SPAD = 64 + VEC        # SHARE: zero columns on both sides of the stored words

    def lane(self, expr, l):
        """Lane l of a vector expression."""
        return expr if self.VEC == 1 else "(%s).s%s" % (expr, self.LANES[l])

    def vload(self, ptr):
        """VEC consecutive values at ptr."""
        return "*(%s)" % ptr if self.VEC == 1 else "vload%d(0, %s)" % (self.VEC, ptr)

    def cmp_u(self, expr):
        """A comparison result as a lane mask usable by select() on uint lanes."""
        if self.VEC == 1:
            return "(%s)" % expr
        return "convert_int%d(%s)" % (self.VEC, expr) if self.REAL == "double" else "(%s)" % expr
%>
