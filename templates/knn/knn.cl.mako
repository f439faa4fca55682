## params: E, TAU, K, METRIC, REAL, WG, TILE, VARIANT, QB, EA, INS, FLAG, SPLIT, QQ, CB, FMA, ORD, NC, SLIDE, INL, NEAR
## version: 1
## legacy-hashes: 93f704e8c195d8c0
## Fused time-delay embedding + distance + top-k (exact all-k-NN table).
##
## Query q is the raw-series window at kernel point qpts[q]:
## (x[p], x[p+TAU], ..., x[p+(E-1)*TAU]); the embedding is never materialised.
## NC > 1: x is a row-major (rows, NC) matrix of NC columns and a point has E
## coordinates, E / NC lags of every column (rows p, p+TAU, ...; common/_points.mako);
## NC = 1 is a series. Point indices, exclusion and ties stay in rows.
## The library (kernel points lpts[b*lstride .. b*lstride+nl-1], ascending)
## streams through local memory in tiles of TILE points shared by the work-group.
## Batches b = get_global_id(1), set by launch arguments (one compiled kernel):
## library lists (lstride = nl, xstride = 0: CCM's sampled libraries), or series
## (lstride = 0, xstride = series length: the all-to-all map builds the tables of
## many library series in one launch; x is offset by xoff + b * xstride, points
## and output indices are the series' own). Output row (b, q). Each work-item keeps
## its query's K best (distance, point) in registers (an unrolled insertion
## network, so no L x L matrix exists anywhere: O(nq * K) output).
##
## Exclusion: library point l is skipped for query p when |p - l| <= radius
## (radius 0 = leave-one-out self-exclusion; radius < 0 = none).
## Tie order (deterministic, pyEDM's Simplex order): distance, then |p - l|, then l.
## Rows with fewer than K admissible neighbours are padded with index -1 and
## distance +inf.
##
## Tile order (ORD, a caller's value, not tuned; _order.mako): ORD=0 visits the
## library tiles in ascending order; ORD=1 starts at the tile holding the group's
## middle query and then takes tiles by their distance from it (c, c+1, c-1, c+2,
## ...). The top-k of a total order does not depend on the order candidates arrive
## in, so the result is the same; in a sampled flow the nearest neighbours of a point
## lie mostly on its own stretch of trajectory, so the k-th distance is tight after
## the first tiles and far fewer candidates pass (in ascending order it shrinks a
## little on every approach of the orbit).
##
## Coordinates are summed newest-first (x_t, then x_{t-tau}, ...: coordinate index
## E-1 down to 0), so the squared distance at E extends the one at E-1 term by term
## and knn_scan.cl.mako's incremental tables for E = 1..Emax are bit-identical to
## this kernel's (contraction is off; FMA=1, a per-job choice, fuses each square
## into the sum with fma() in both kernels alike, see _metric.mako).
##
## Early abandoning (EA > 0): coordinates are summed in chunks of EA and the rest
## is skipped once the partial distance exceeds the query's current k-th best
## (partial sums only grow, so this is exact); for large E most library points
## are rejected after the first chunk.
##
## SLIDE > 0 (rows only; a contiguous library, TAU = 1, NC = 1, checked on
## the host): the tile holds raw series values instead of E coordinates per point and
## is scanned in blocks of SLIDE points from vector loads (_slide.mako); the same table.
##
## NEAR > 0 (the rows variant; 0 elsewhere, KnnKernel.request): the list's last NEAR
## entries hold only neighbours within a few float32 distance bounds of the
## (K - NEAR)-th (near-ties that float32 may rank either way), -1 / inf past them. A
## float32 table widened for Simplex's row check then costs what the K - NEAR table
## costs: early abandoning keeps the (K - NEAR)-th's limit plus that margin instead of
## the K-th distance (_parts.mako). Lists without NEAR satisfy the same contract (all
## entries exact), so a reader may not tell "none within the margin" from "none left".
##
## Variants (VARIANT), one part each, described there: "rows" (GPUs, _rows.mako),
## "cols" (CPU SIMD across library points, _cols.mako), "vec" (explicit vectors,
## _vec.mako), "sorted" (CCM's full sorted rows, _sorted.mako). Defs the variants share
## are in _parts.mako; the top-k lists in common/_topk.mako.
<%namespace name="metric" file="/common/_metric.mako"/>\
<%namespace name="order" file="/common/_order.mako"/>\
<%namespace name="topk" file="/common/_topk.mako"/>\
<%namespace name="parts" file="/knn/_parts.mako"/>\
<%namespace name="rows" file="/knn/_rows.mako"/>\
<%namespace name="cols" file="/knn/_cols.mako"/>\
<%namespace name="vec" file="/knn/_vec.mako"/>\
<%namespace name="sorted" file="/knn/_sorted.mako"/>\
${metric.real_type(REAL)}
#define K ${K}

${topk.functions()}\
${parts.functions()}\
% if ORD:

${order.near_tile()}
% endif

% if VARIANT == "rows":
${rows.kernel()}
% elif VARIANT == "cols":
${cols.kernel()}
% elif VARIANT == "vec":
${vec.kernel()}
% elif VARIANT == "sorted":
${sorted.kernel()}
% endif
