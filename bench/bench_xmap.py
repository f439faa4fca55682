"""All-to-all cross map: pyedmcl vs kEDM (``kedm.xmap``) vs pyEDM (a loop of CCM), one process.

Same data (N series of length L, float32: ``--data osc`` noisy oscillators weakly
coupled in a ring, the default; ``--data walk`` random walks, the "random-walk-like
series" of the kEDM timings in the xmap issue) and the same E vector for everyone: ``--E 5`` (all series E=5) or ``--E mixed``
(E drawn uniformly from 1..20 with seed 0, kEDM's "mixed" case). The optimal-E
scan is not timed (kEDM's benchmark passes edims too); ``--with-edim`` adds
pyedmcl's E scan (E=1..20) as a separate line.

Times: pyedmcl after warm-up runs of the whole map (until one builds nothing: its
kernels, and those a GPU's first run builds behind it), the whole N x N matrix in
memory; kEDM after a call on a small slice (its warm-up); median
(and min) of ``--repeat`` runs. ``--profile`` adds pyedmcl's device time per
kernel (k-NN tables, pack, fused lookup + rho) from OpenCL events. pyEDM is
far slower: it is timed on ``--pyedm-pairs`` random pairs and extrapolated to
N^2 pairs (marked "extrapolated"). Agreement: max |pyedmcl - kedm| over the
matrix. Throughput: library x target x query x k weighted lookups per second.

Run:  python bench/bench_xmap.py --device pocl --N 100 --L 1000 --E 5
      python bench/bench_xmap.py --device nvidia --N 2000 --L 3780 --E 5 --data walk
      python bench/bench_xmap.py --device nvidia --N 5000 --L 3780 --E mixed
      python bench/bench_xmap.py --device nvidia:0 --devices nvidia:0,nvidia:1 --N 10000 --E 6

``--method smap --theta 3``: the S-map map (``pe.xmap(method="smap")``) instead, against
a loop of ``kedm.smap`` over every pair (kEDM has no S-map cross map; its smap, float32,
is timed on ``--kedm-pairs`` pairs and extrapolated when they are fewer than N^2) and a
loop of pyEDM's SMap (``--pyedm-pairs``, extrapolated). Agreement: max |rho| difference
over the pairs each peer ran.

      python bench/bench_xmap.py --method smap --theta 3 --N 10 --L 1000 --E 5
      python bench/bench_xmap.py --device nvidia --method smap --theta 3 --N 1000 --L 1000 --E 5
"""

from __future__ import annotations

import argparse
import time
import warnings

import numpy as np


def panel(N: int, L: int, seed: int = 0) -> np.ndarray:
    """(L, N) float32: noisy oscillators with random periods, weakly coupled in a ring."""
    rng = np.random.default_rng(seed)
    t = np.arange(L)
    base = np.sin(t[:, None] * rng.uniform(0.05, 0.6, N)[None, :] + rng.uniform(0, 6, N))
    drive = np.roll(base, 1, axis=1) * rng.uniform(0, 0.5, N)[None, :]
    return (base + drive + 0.2 * rng.standard_normal((L, N))).astype(np.float32)


def walks(N: int, L: int, seed: int = 0) -> np.ndarray:
    """(L, N) float32: independent Gaussian random walks. Smooth: the neighbours of
    consecutive query points lie at nearby times, so the fused lookup's target reads
    are close together (noisy series scatter them; the map's time depends on it)."""
    return np.cumsum(np.random.default_rng(seed).standard_normal((L, N)), axis=0).astype(
        np.float32)


def E_vector(spec: str, N: int) -> np.ndarray:
    """``"mixed"``: E per series drawn from 1..20; ``"mixedK"``: from 1..K (bench_cpu's
    row 3 is ``mixed10``); else one E for all."""
    if spec.startswith("mixed"):
        return np.random.default_rng(0).integers(1, int(spec[5:] or 20) + 1, N)
    return np.full(N, int(spec))


def cpu_seconds() -> float:
    """User + system CPU seconds of this process (all threads, OpenCL CPU runtimes too)."""
    import resource
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def profile(be, run) -> None:
    """Device seconds per kernel name over one ``run()`` (OpenCL profiling events)."""
    evs = []
    launch = be.launch

    def spy(kernel, *args):
        ev = launch(kernel, *args)
        evs.append((kernel.name, ev))
        return ev

    be.launch = spy
    try:
        run()
    finally:
        be.launch = launch
    tot: dict[str, list] = {}
    for name, ev in evs:
        t = tot.setdefault(name, [0, 0.0])
        t[0] += 1
        t[1] += be.event_seconds(ev)
    for name, (n, s) in tot.items():
        print(f"  {name:12s} {n:5d} launches  {s:.3f} s device time")


def warm_up(be, X: np.ndarray, E: np.ndarray, device, block_rows) -> None:
    """The whole map until it builds nothing: the kernels of its E-groups depend on their
    sizes (a slice's groups take other layouts), and a first run on a GPU may run its
    E-groups on one runtime-K program while their own build behind it (decision 0102),
    which the next run loads."""
    import pyedmcl as pe
    for _ in range(3):
        built = be.build_count
        pe.xmap(X, E=E, device=device, block_rows=block_rows)
        if be.build_count == built:
            break


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--device", default=None)
    ap.add_argument("--N", type=int, default=100)
    ap.add_argument("--L", type=int, default=1000)
    ap.add_argument("--E", default="5", help="an int, 'mixed' (1..20) or 'mixedK' (1..K)")
    ap.add_argument("--block-rows", type=int, default=None)
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--profile", action="store_true", help="device time per kernel")
    ap.add_argument("--peers", default="kedm,pyedm",
                    help="comma list of kedm, pyedm (and smap: a pe.smap loop, --method smap)")
    ap.add_argument("--pyedm-pairs", type=int, default=20)
    ap.add_argument("--with-edim", action="store_true")
    ap.add_argument("--data", choices=("osc", "walk"), default="osc",
                    help="noisy coupled oscillators, or random walks")
    ap.add_argument("--devices", default=None,
                    help="also time the map on these devices at once (e.g. nvidia:0,nvidia:1) "
                         "and print its speed-up over --device alone")
    ap.add_argument("--method", choices=("simplex", "smap"), default="simplex")
    ap.add_argument("--theta", type=float, default=3.0, help="S-map localisation (--method smap)")
    ap.add_argument("--smap-pass3", choices=("auto", "stream", "hat"), default="auto",
                    help="--method smap: how targets are summed (auto: pyedmcl's default "
                         "for the device kind)")
    ap.add_argument("--smap-compare", action="store_true",
                    help="--method smap: also time the other pass-3 path, alternating")
    ap.add_argument("--kedm-pairs", type=int, default=None,
                    help="--method smap: kedm.smap pairs timed (default: all N^2)")
    a = ap.parse_args(argv)

    import clkernels
    import pyedmcl as pe

    be = clkernels.get_backend(a.device)
    X = panel(a.N, a.L) if a.data == "osc" else walks(a.N, a.L)
    E = E_vector(a.E, a.N)
    print(f"device: {be.info.runtime} {be.info.name} ({be.info.compute_units} CUs)")
    print(f"N={a.N} L={a.L} E={a.E} (groups: {np.unique(E).size}) data={a.data}")
    if a.method == "smap":
        return bench_smap(a, X, E)

    t = time.perf_counter()
    warm_up(be, X, E, a.device, a.block_rows)
    print(f"warm-up (kernel builds): {time.perf_counter() - t:.2f} s")

    times, cpus, rho = [], [], None
    for _ in range(a.repeat):
        c, t = cpu_seconds(), time.perf_counter()
        r = pe.xmap(X, E=E, device=a.device, block_rows=a.block_rows)
        times.append(time.perf_counter() - t)
        cpus.append(cpu_seconds() - c)
        rho = r.rho
    best = float(np.median(times))
    M = a.L - (E - 1)
    lookups = float(a.N * np.sum(M * (E + 1)))
    print(f"pyedmcl xmap: {best:.3f} s median, {min(times):.3f} s min of {a.repeat}  "
          f"({lookups / best / 1e9:.2f} G weighted lookups/s; process CPU "
          f"{np.median(cpus):.3f} s: for a CPU device, less sensitive to other load)")
    if a.devices:
        devs = [d for d in a.devices.split(",") if d]
        t = time.perf_counter()
        for d in devs:  # every device's kernels built, as for --device above
            warm_up(clkernels.get_backend(d), X, E, d, a.block_rows)
        print(f"warm-up of {len(devs)} devices: {time.perf_counter() - t:.2f} s")
        mt, same = [], True
        for _ in range(a.repeat):
            t = time.perf_counter()
            r = pe.xmap(X, E=E, devices=devs, block_rows=a.block_rows)
            mt.append(time.perf_counter() - t)
            same = same and np.array_equal(r.rho, rho, equal_nan=True)
        mb = float(np.median(mt))
        print(f"pyedmcl xmap on {a.devices}: {mb:.3f} s median, {min(mt):.3f} s min   "
              f"speed-up over one device {best / mb:.2f}x (medians)   "
              f"matrix {'identical' if same else 'DIFFERS'} to the one-device run")
    if a.profile:
        profile(be, lambda: pe.xmap(X, E=E, device=a.device, block_rows=a.block_rows))

    if a.with_edim:
        pe.xmap(X[:, :8], E="auto", device=a.device)  # warm-up: scan kernels
        for e in range(1, 21):  # and every E-group the scan may choose
            pe.xmap(X[:, :2], E=e, device=a.device)
        t = time.perf_counter()
        r = pe.xmap(X, E="auto", device=a.device, block_rows=a.block_rows)
        print(f"pyedmcl xmap incl. optimal-E scan (E=1..20): {time.perf_counter() - t:.3f} s")

    peers = [p for p in a.peers.split(",") if p]
    if "kedm" in peers:
        from peers import import_peer
        kedm = import_peer("kedm")  # the CPU mask restored: kEDM's import pins to one core
        if kedm is None:
            print("kedm: not installed")
        else:
            kedm.xmap(X[:, :4], E[:4].tolist())
            kt = []
            for _ in range(a.repeat):
                t = time.perf_counter()
                K = kedm.xmap(X, E.tolist())
                kt.append(time.perf_counter() - t)
            kb = float(np.median(kt))
            print(f"kedm.xmap:    {kb:.3f} s median, {min(kt):.3f} s min   ratio kedm/pyedmcl = "
                  f"{kb / best:.2f}x (medians)   max|diff| = {np.nanmax(np.abs(K - rho)):.2e}")
    if "pyedm" in peers:
        try:
            import pyEDM
        except ModuleNotFoundError:
            print("pyEDM: not installed")
        else:
            cols, df = pyedm_frame(X)
            rng = np.random.default_rng(1)
            pairs = rng.integers(0, a.N, (a.pyedm_pairs, 2))
            err = 0.0
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                t = time.perf_counter()
                for i, j in pairs:
                    o = pyEDM.CCM(dataFrame=df, columns=cols[i], target=cols[j], E=int(E[j]),
                                  tau=-1, Tp=0, libSizes=[a.L - int(E[j]) + 1], sample=1,
                                  parallel=False)
                    err = max(err, abs(o[f"{cols[i]}:{cols[j]}"].iloc[0] - rho[i, j]))
                per = (time.perf_counter() - t) / len(pairs)
            tot = per * a.N * a.N
            print(f"pyEDM CCM loop: {per * 1e3:.1f} ms/pair -> {tot:.1f} s for N^2 pairs "
                  f"(extrapolated)   ratio pyEDM/pyedmcl = {tot / best:.0f}x   "
                  f"max|diff| on {len(pairs)} pairs = {err:.2e}")


def pyedm_frame(X: np.ndarray):
    """pyEDM's input for the (L, N) panel ``X``: column names and a frame with a time
    column 1..L first."""
    import pandas as pd

    cols = [f"x{i}" for i in range(X.shape[1])]
    df = pd.DataFrame(X.astype(np.float64), columns=cols)
    df.insert(0, "time", np.arange(1, X.shape[0] + 1))
    return cols, df


def rho_of(pred: np.ndarray, obs: np.ndarray) -> float:
    ok = np.isfinite(pred) & np.isfinite(obs)
    return float(np.corrcoef(pred[ok], obs[ok])[0, 1])


def compare_pass3(a, run, pass3: dict, kind: str) -> None:
    """Both ways of summing the targets, alternating in this process (medians); the
    matrices must be equal bit for bit."""
    mine = pass3[kind]
    ways = (mine, "hat" if mine == "stream" else "stream")
    times: dict[str, list] = {w: [] for w in ways}
    mats = {}
    for w in ways:  # builds
        pass3[kind] = w
        mats[w] = run().rho
    for _ in range(a.repeat):
        for w in ways:
            pass3[kind] = w
            t = time.perf_counter()
            run()
            times[w].append(time.perf_counter() - t)
    pass3[kind] = mine
    same = np.array_equal(mats[ways[0]], mats[ways[1]], equal_nan=True)
    print("pass 3 " + "   ".join(f"{w}: {np.median(v):.3f} s median" for w, v in times.items())
          + f"   matrices {'identical' if same else 'DIFFER'}")


def bench_smap(a, X: np.ndarray, E: np.ndarray) -> None:
    """``--method smap``: the S-map map against loops of kedm.smap and pyEDM's SMap."""
    import pyedmcl as pe
    from pyedmcl.xmap import smap_map

    kind = "gpu" if __import__("clkernels").get_backend(a.device).info.is_gpu else "cpu"
    if a.smap_pass3 != "auto":
        smap_map.PASS3[kind] = a.smap_pass3
    print(f"pass 3: {smap_map.PASS3[kind]}")

    def run():
        return pe.xmap(X, E=E, device=a.device, method="smap", theta=a.theta,
                       block_rows=a.block_rows)

    if a.smap_compare:
        compare_pass3(a, run, smap_map.PASS3, kind)

    t = time.perf_counter()
    run()
    print(f"warm-up (kernel builds): {time.perf_counter() - t:.2f} s")
    times, rho = [], None
    for _ in range(a.repeat):
        t = time.perf_counter()
        rho = run().rho
        times.append(time.perf_counter() - t)
    best = float(np.median(times))
    M = a.L - (E - 1)
    terms = float(a.N * np.sum(M * M))  # (library, target, row, library point): a loop's work
    print(f"pyedmcl xmap smap (theta={a.theta}): {best:.3f} s median, {min(times):.3f} s min "
          f"of {a.repeat}  ({terms / best / 1e9:.2f} G pair-row-point terms/s)")
    if a.profile:
        be = __import__("clkernels").get_backend(a.device)
        profile(be, run)
    peers = [p for p in a.peers.split(",") if p]
    rng = np.random.default_rng(1)
    if "smap" in peers:  # pyedmcl's single-pair S-map, one call per pair
        pe.smap(X[:, 0], target=X[:, 1], E=int(E[1]), Tp=0, theta=a.theta, device=a.device)
        t, err = time.perf_counter(), 0.0
        for i in range(a.N):
            for j in range(a.N):
                r = pe.smap(X[:, i], target=X[:, j], E=int(E[j]), Tp=0, theta=a.theta,
                            device=a.device)
                err = max(err, abs(r.rho - rho[i, j]))
        lt = time.perf_counter() - t
        print(f"pe.smap loop ({a.N * a.N} pairs): {lt:.3f} s   ratio loop/map = {lt / best:.2f}x   "
              f"max|rho diff| = {err:.2e}")
    if "kedm" in peers:
        from peers import import_peer
        kedm = import_peer("kedm")
        if kedm is None:
            print("kedm: not installed")
        else:
            n = a.N * a.N if a.kedm_pairs is None else a.kedm_pairs
            pairs = ([(i, j) for i in range(a.N) for j in range(a.N)] if n >= a.N * a.N
                     else rng.integers(0, a.N, (n, 2)).tolist())
            kedm.smap(X[:, 0], X[:, 0], target=X[:, 1], E=int(E[1]), Tp=0, theta=a.theta)
            err, kt = 0.0, []
            for _ in range(max(1, a.repeat // 2)):
                t = time.perf_counter()
                for i, j in pairs:
                    p = kedm.smap(X[:, i], X[:, i], target=X[:, j], E=int(E[j]), Tp=0,
                                  theta=a.theta)
                kt.append((time.perf_counter() - t) / len(pairs) * a.N * a.N)
            for i, j in pairs[:200]:
                p = kedm.smap(X[:, i], X[:, i], target=X[:, j], E=int(E[j]), Tp=0, theta=a.theta)
                err = max(err, abs(rho_of(p, X[int(E[j]) - 1:, j]) - rho[i, j]))
            kb = float(np.median(kt))
            print(f"kedm.smap loop ({len(pairs)} pairs{'' if len(pairs) == a.N * a.N else ', extrapolated to N^2'}): "
                  f"{kb:.3f} s median   ratio kedm/pyedmcl = {kb / best:.2f}x   "
                  f"max|rho diff| = {err:.2e} (kEDM's S-map: float32, its own neighbour rule)")
    if "pyedm" in peers:
        import pyEDM
        cols, df = pyedm_frame(X)
        pairs = rng.integers(0, a.N, (a.pyedm_pairs, 2))
        err = 0.0
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            t = time.perf_counter()
            for i, j in pairs:
                o = pyEDM.SMap(dataFrame=df, columns=cols[i], target=cols[j], E=int(E[j]),
                               tau=-1, Tp=0, theta=a.theta, lib=[1, a.L], pred=[1, a.L])
                pr = o["predictions"]
                err = max(err, abs(rho_of(pr["Predictions"].to_numpy(),
                                          pr["Observations"].to_numpy()) - rho[i, j]))
            per = (time.perf_counter() - t) / len(pairs)
        tot = per * a.N * a.N
        print(f"pyEDM SMap loop: {per * 1e3:.1f} ms/pair -> {tot:.1f} s for N^2 pairs "
              f"(extrapolated)   ratio pyEDM/pyedmcl = {tot / best:.0f}x   "
              f"max|rho diff| on {len(pairs)} pairs = {err:.2e}")


if __name__ == "__main__":
    main()
