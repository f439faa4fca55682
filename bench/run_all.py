"""Run every benchmark that exists on one device and write one report.

Each benchmark runs pyedmcl and its peers (kEDM, pyEDM, PyRQA, pyunicorn, faiss)
in one process on the same data and prints ratios; this driver runs them in
turn (a preset per device kind: a 2-core CPU or a GPU), keeps each one's full
output, extracts every ratio line into one markdown table, and draws PNG plots
from the benchmarks that write JSON rows (runtime vs L, vs N). The device's
measured peaks (our own triad / multiply-add kernels) head the report so every
achieved GB/s or GFLOP/s line can be read against them.

    python bench/run_all.py --device pocl --out bench/results/pocl
    python bench/run_all.py --device nvidia --out bench/results/nvidia
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent

CPU = {
    "edm": ["bench_edm.py", "--case", "sweep,ccm", "--L", "10000", "--Emax", "20", "--no-pyedm"],
    "edm_multivariate": ["bench_edm.py", "--case", "multivariate", "--mv-L", "4000"],
    "smap": ["bench_smap.py", "--L", "2000", "--E", "5", "--theta", "2"],
    "xmap": ["bench_xmap.py", "--N", "100", "--L", "1000", "--E", "5"],
    "rqa": ["bench_rqa.py", "--sizes", "30000", "100000", "--repeat", "3", "--pyrqa-max", "30000",
            "--pyunicorn-max", "0", "--json"],
    "knn_backends": ["bench_knn_backends.py", "--L", "2^10", "2^12", "2^14", "2^16", "--E", "1", "20",
                     "--json", "{out}/knn_backends.json"],
    "cpu_goals": ["bench_cpu.py", "--repeat", "5"],  # issue 27's four rows as ratios
    "first_use": ["bench_first_use.py"],  # cold vs warm mixed-E jobs (kernel builds)
}
GPU = {
    "edm": ["bench_edm.py", "--case", "gpu", "--data", "lorenz"],
    "edm_multivariate": ["bench_edm.py", "--case", "multivariate", "--mv-L", "20000"],
    "smap": ["bench_smap.py", "--L", "10000", "--E", "20", "--theta", "2", "--peers", "kedm"],
    "xmap": ["bench_xmap.py", "--N", "2000", "--L", "3780", "--E", "5", "--peers", "kedm"],
    "rqa": ["bench_rqa.py", "--sizes", "100012", "1000012", "--repeat", "3",
            "--pyrqa-platform", "NVIDIA",
            "--pyrqa-max", "100012", "--pyunicorn-max", "0", "--json"],
    "knn_backends": ["bench_knn_backends.py", "--L", "2^16", "2^18", "2^20", "--E", "20",
                     "--backends", "exact", "ivf", "--json", "{out}/knn_backends.json"],
    "first_use": ["bench_first_use.py", "--N", "1000", "--L", "1000"],
}
RATIO = re.compile(r"(ratio[^\n]*?[0-9.]+x|[0-9.]+x\b[^\n]*ratio|_ratio=[0-9.]+)", re.IGNORECASE)


def _plots(out: Path) -> list[str]:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return []
    made = []
    kb = out / "knn_backends.json"
    if kb.exists():
        rows = json.loads(kb.read_text())  # one row per (E, L): {"times": {backend: s}, ...}
        fig, ax = plt.subplots(figsize=(6, 4))
        backends = sorted({b for r in rows for b in r.get("times", {})})
        for be in backends:
            for E in sorted({r["E"] for r in rows}):
                pts = sorted((r["L"], r["times"][be]) for r in rows
                             if r["E"] == E and be in r.get("times", {}))
                if pts:
                    ax.loglog(*zip(*pts, strict=True), "o-", label=f"{be} E={E}")
        ax.set(xlabel="L", ylabel="Simplex seconds", title="k-NN back-ends: runtime vs L")
        ax.legend(fontsize=7)
        fig.tight_layout()
        fig.savefig(out / "runtime_vs_L.png", dpi=110)
        made.append("runtime_vs_L.png")
    rq = out / "rqa.txt"
    if rq.exists():
        pts = [(int(m.group(1)), float(m.group(2))) for m in
               re.finditer(r"N=(\d+)\s+pyedmcl_s=([0-9.]+)", rq.read_text())]
        if pts:
            fig, ax = plt.subplots(figsize=(6, 4))
            ax.loglog(*zip(*sorted(pts), strict=True), "o-", label="pyedmcl RQA")
            ax.set(xlabel="N", ylabel="seconds", title="RQA: runtime vs N")
            ax.legend()
            fig.tight_layout()
            fig.savefig(out / "rqa_runtime_vs_N.png", dpi=110)
            made.append("rqa_runtime_vs_N.png")
    return made


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--device", default=None)
    ap.add_argument("--out", default=None, help="results folder (default bench/results/<device>)")
    ap.add_argument("--only", nargs="+", default=None, help="subset of: " + ", ".join(CPU))
    ap.add_argument("--timeout", type=float, default=1800, help="seconds per benchmark")
    a = ap.parse_args(argv)

    sys.path.insert(0, str(HERE.parent))
    import pyedmcl  # noqa: F401  (registers OpenCL runtimes)
    from clkernels import get_backend
    from clkernels.peak import measure_peaks

    be = get_backend(a.device)
    out = Path(a.out or HERE / "results" / be.info.runtime)
    out.mkdir(parents=True, exist_ok=True)
    peaks = measure_peaks(be)
    preset = GPU if be.info.is_gpu else CPU
    lines = [f"# pyedmcl benchmarks on {be.info.name} ({be.info.runtime}, {be.info.compute_units} CUs)",
             "", f"Measured peaks (our own kernels): {peaks.bandwidth_gbs:.1f} GB/s triad, "
             f"{peaks.gflops:.1f} GFLOP/s multiply-add; ridge {peaks.ridge():.1f} flop/byte.",
             f"Run {time.strftime('%Y-%m-%d %H:%M')} with `python bench/run_all.py --device "
             f"{a.device or 'default'}`.", "", "| benchmark | line with a ratio |", "|---|---|"]
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(HERE.parent), os.environ.get("PYTHONPATH", "")]))
    for name, cmd in preset.items():
        if a.only and name not in a.only:
            continue
        args = [c.format(out=out) for c in cmd]
        full = [sys.executable, str(HERE / args[0]), *args[1:]]
        if a.device:
            full += ["--device", a.device]
        print(f"[run_all] {name}: {' '.join(full[1:])}", flush=True)
        try:
            proc = subprocess.run(full, capture_output=True, text=True, timeout=a.timeout, env=env)
            text = proc.stdout + ("\n" + proc.stderr if proc.returncode else "")
        except subprocess.TimeoutExpired as exc:
            text = (exc.stdout or b"").decode() if isinstance(exc.stdout, bytes) else (exc.stdout or "")
            text += f"\n[timed out after {a.timeout} s]"
        (out / f"{name}.txt").write_text(text)
        ratio_lines = [ln.strip() for ln in text.splitlines() if RATIO.search(ln)]
        for ln in ratio_lines or ["(no ratio printed; see the full output)"]:
            lines.append(f"| {name} | `{ln[:160]}` |")
    figs = _plots(out)
    lines += ["", "Full outputs: " + ", ".join(f"[{p.name}]({p.name})" for p in sorted(out.glob('*.txt')))]
    lines += [f"![{f}]({f})" for f in figs]
    (out / "README.md").write_text("\n".join(lines) + "\n")
    print(f"[run_all] report: {out / 'README.md'}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
