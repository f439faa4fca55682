## params: NB
## Zero NB buffers in one launch (Backend.zero_batch): their 32-bit words laid end to end,
## buffer k holding words o[k] .. o[k+1] - 1 of the launch (o[0] = 0). One launch instead
## of one fill per buffer: a run that allocates a dozen zeroed buffers (RQA's histograms
## and carryovers) spends ~25-50 us of host time per launch.
__kernel void zero_words(
% for k in range(NB):
    __global uint* restrict b${k},
% endfor
% for k in range(NB):
    const ulong o${k + 1}${"," if k + 1 < NB else ""}
% endfor
    )
{
    const ulong i = get_global_id(0);
% for k in range(NB):
    if (i < o${k + 1}) { b${k}[i${" - o%d" % k if k else ""}] = 0u; return; }
% endfor
}
