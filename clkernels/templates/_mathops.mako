## Math functions that every runtime compiles inline.
## Import with <%namespace name="mth" file="/_mathops.mako"/>.
##
## PoCL calls its kernel library's double-precision exp() out of line, one scalar call
## per value: a loop that weighs neighbours by exp(-d / d_min) cannot be vectorised and
## spends most of its time in the call (the weights of an all-to-all map, N = 100 x
## 1,000, PoCL 3.0 on AVX-512: 38.5 ms, 17-20 ms inline; Intel's runtime, whose exp is a
## vector routine: 9.5 ms). With
## INL=1 (the host's choice on PoCL, :func:`clkernels.devices.inline_vector_ops`)
## `exp_fn` defines the inline function below, `inl_exp`, and `exp` names it; elsewhere
## `exp_fn` is empty and `exp` names OpenCL's exp().
## Both are accurate to about one ulp, not bit-identical to each other: a kernel's
## results are reproducible per runtime, as with any library exp.
##
## The inline double exp: k = round(x / ln 2) by the 1.5 * 2^52 shift (round to nearest
## even, no rint() call), r = x - k ln 2 in two parts (Cody and Waite: k * LN2_HI is
## exact for |k| < 2^21), exp(r) for |r| <= ln 2 / 2 by its Taylor series to r^13
## (truncation below 5e-18, relative), then the scale 2^k as two exact powers of two
## 2^(k >> 1) * 2^(k - (k >> 1)), so the one rounding is the last product, also where the
## result is subnormal. x below -746 gives +0, above 709.79 +inf, NaN itself.

## the definition of `inl_exp` where INL and ACC ("float" / "double") is double, else nothing
<%def name="exp_fn(INL, ACC)">\
% if INL and ACC == "double":
/* inline double exp (clkernels/templates/_mathops.mako): PoCL calls its own out of line */
inline double inl_exp(const double x)
{
    const double xc = x < -746.0 ? -746.0 : (x > 710.0 ? 710.0 : x);
    const double shift = 0x1.8p52;
    const double k = (xc * 0x1.71547652b82fep0 + shift) - shift;
    const double r = (xc - k * 0x1.62e42feep-1) - k * 0x1.a39ef35793c76p-33;
    double p = 0x1.6124613a86d09p-33;      /* 1/13! */
    p = p * r + 0x1.1eed8eff8d898p-29;     /* 1/12! */
    p = p * r + 0x1.ae64567f544e4p-26;     /* 1/11! */
    p = p * r + 0x1.27e4fb7789f5cp-22;     /* 1/10! */
    p = p * r + 0x1.71de3a556c734p-19;     /* 1/9! */
    p = p * r + 0x1.a01a01a01a01ap-16;     /* 1/8! */
    p = p * r + 0x1.a01a01a01a01ap-13;     /* 1/7! */
    p = p * r + 0x1.6c16c16c16c17p-10;     /* 1/6! */
    p = p * r + 0x1.1111111111111p-7;      /* 1/5! */
    p = p * r + 0x1.5555555555555p-5;      /* 1/4! */
    p = p * r + 0x1.5555555555555p-3;      /* 1/3! */
    p = p * r + 0.5;
    p = p * r + 1.0;
    p = p * r + 1.0;
    const long ki = (long)k;
    const long k1 = ki >> 1;
    const double s1 = as_double((k1 + 1023) << 52);
    const double s2 = as_double((ki - k1 + 1023) << 52);
    const double y = (p * s1) * s2;
    return x != x ? x : (x < -746.0 ? 0.0 : (x > 709.782712893384 ? INFINITY : y));
}
% endif
</%def>

## the name of the exp function of ACC that `exp_fn` chose
<%def name="exp(INL, ACC)">${"inl_exp" if INL and ACC == "double" else "exp"}</%def>
