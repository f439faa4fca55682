## params: REAL, VEC, FMA_CHAIN
## Device peaks for roofline reporting: a streaming triad (bandwidth) and four
## independent multiply-add chains (arithmetic; written a*b+c so compilers contract
## to FMA where the hardware has it — PoCL 3.0 lowers an explicit fma() to a call).
## VEC is the vector width of real_t accesses;
## FMA_CHAIN the number of dependent fused multiply-adds per work-item and lane.
<%namespace name="real" file="/_real.mako"/>
${real.real_type(REAL, contract=True)}
% if VEC > 1:
typedef ${REAL}${VEC} vec_t;
% else:
typedef real_t vec_t;
% endif

__kernel void triad(__global vec_t* restrict a, __global const vec_t* restrict b,
                    __global const vec_t* restrict c, const real_t s, const int n)
{
    const int i = get_global_id(0);
    if (i < n) a[i] = b[i] + s * c[i];
}

__kernel void fma_chain(__global real_t* restrict out, const real_t s)
{
    const int i = get_global_id(0);
    const real_t u = (real_t)(i & 1023) * (real_t)1e-4;
% if VEC > 1:
    /* distinct lanes: a splat vector would let the compiler compute one lane only */
    const vec_t lane = (vec_t)(${", ".join("%d.0f" % j for j in range(VEC))}) * (real_t)1e-5;
% else:
    const vec_t lane = (vec_t)(0);
% endif
    vec_t x0 = (vec_t)(u) + lane, x1 = (vec_t)(u + s) - lane, x2 = (vec_t)(u - s) + lane,
          x3 = (vec_t)(s * u) - lane;
    const vec_t k = (vec_t)(-0.25f * s);
    /* x -> x*x + k is not an affine map, so no compiler can fold the chain. */
% for _ in range(FMA_CHAIN):
    x0 = x0 * x0 + k; x1 = x1 * x1 + k; x2 = x2 * x2 + k; x3 = x3 * x3 + k;
% endfor
    vec_t r = x0 + x1 + x2 + x3;
% if VEC > 1:
    out[i] = ${" + ".join("r.s%x" % lane for lane in range(VEC))};  // every lane is live
% else:
    out[i] = r;
% endif
}
