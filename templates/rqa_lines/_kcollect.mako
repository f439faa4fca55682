## NTHR > 1 in MODE "collect" (the run's bookkeeping kernels, _hist.mako and
## _symjoin.mako): one launch serves every threshold of a multi-threshold run, threshold
## k = get_global_id(1), each of its arrays that many strides further (the strides are
## trailing arguments). NTHR = 1 renders nothing here: the kernels as they were.
## Import with <%namespace name="kc" file="/rqa_lines/_kcollect.mako"/>.

## The stride arguments `names` (ints), after a kernel's others.
<%def name="args(*names)">${"".join(", const int %s" % n for n in names) if NTHR > 1 else ""}</%def>

## The pointers of threshold k: each (pointer, stride) pair moved by k strides.
<%def name="shift(*pairs)">\
% if NTHR > 1:
    {   /* NTHR: threshold get_global_id(1)'s arrays */
        const int k_ = get_global_id(1);
%   for ptr, stride in pairs:
        ${ptr} += k_ * ${stride};
%   endfor
    }
% endif
</%def>
