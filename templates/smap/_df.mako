## S-map part: double-float ("df") arithmetic on float32 (hi, lo) pairs, for devices
## without fp64 (ACC "df"). functions() emits the OpenCL helpers; accum() is one
## Gram update in the accumulation precision (df: Dot2-style).
<%def name="functions()">\
/* double-float ("df") arithmetic on (hi, lo) float pairs, ~44-bit significands:
   error-free transformations (Knuth TwoSum, fma TwoProduct; Dekker, Shewchuk) */
float2 df_qts(float a, float b) { const float s = a + b; return (float2)(s, b - (s - a)); }
float2 df_ts(float a, float b)
{
    const float s = a + b, bb = s - a;
    return (float2)(s, (a - (s - bb)) + (b - bb));
}
float2 df_add(float2 a, float2 b)
{
    float2 s = df_ts(a.x, b.x);
    const float2 t = df_ts(a.y, b.y);
    s.y += t.x;
    s = df_qts(s.x, s.y);
    s.y += t.y;
    return df_qts(s.x, s.y);
}
float2 df_sub(float2 a, float2 b) { return df_add(a, (float2)(-b.x, -b.y)); }
float2 df_mul(float2 a, float2 b)
{
    const float p = a.x * b.x;
    float e = fma(a.x, b.x, -p);
    e += a.x * b.y + a.y * b.x;
    return df_qts(p, e);
}
float2 df_div(float2 a, float2 b)
{
    const float q1 = a.x / b.x;
    float2 r = df_sub(a, df_mul(b, (float2)(q1, 0.0f)));
    const float q2 = r.x / b.x;
    r = df_sub(r, df_mul(b, (float2)(q2, 0.0f)));
    return df_add(df_qts(q1, q2), (float2)(r.x / b.x, 0.0f));
}
float2 df_sqrt(float2 a)
{
    const float x = sqrt(a.x);
    const float2 r = df_sub(a, df_mul((float2)(x, 0.0f), (float2)(x, 0.0f)));
    return df_qts(x, r.x / (2.0f * x));
}
</%def>

## One Gram update G += x * y: a plain fma, or (df) Ogita-Rump-Oishi Dot2: the
## product's rounding error (fma) and the sum's (TwoSum) go to the lo part.
<%def name="accum(T, hi, lo, x, y)">\
% if ACC == "df":
{ const ${T} _p = (${x}) * (${y}); const ${T} _pe = fma(${x}, ${y}, -_p);
  const ${T} _s = ${hi} + _p; const ${T} _bb = _s - ${hi};
  ${lo} += _pe + ((${hi} - (_s - _bb)) + (_p - _bb)); ${hi} = _s; }\
% else:
${hi} += (${x}) * (${y});\
% endif
</%def>
