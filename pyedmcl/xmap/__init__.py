"""All-to-all cross mapping (pairwise CCM among N series) at scale: batched on
each device, spread over all devices of a node or a Dask cluster, streamed to
Zarr in resumable row blocks."""
