"""``pyedmcl tune KERNEL|all``: autotune kernel families on a device, print a summary."""

from __future__ import annotations

import argparse
import sys

from ..validation import int_arg
from .quick_set import FIRST_USE_BUDGET_S, QUICK_SET, quick_set_seconds  # noqa: F401

#: seconds per case of ``tune KERNEL --quick``
QUICK_BUDGET_S = 20.0


def add_commands(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("tune", help="autotune kernels on a device and store the winners")
    p.add_argument("kernel", nargs="?", default=None, help="kernel family name, or 'all' (see --list)")
    p.add_argument("--device", default=None, help="device selector (default: the default device)")
    p.add_argument("--backend", default=None, choices=("pyopencl", "sycl"))
    p.add_argument("--quick", action="store_true",
                   help="time-boxed random search, one size; without a kernel name: the "
                        "families most workloads use, one case each (seconds in all)")
    p.add_argument("--budget", type=float, default=None,
                   help=f"seconds per case in --quick mode (default {QUICK_BUDGET_S:g} for a "
                        f"named kernel, {FIRST_USE_BUDGET_S:g} for the quick set)")
    p.add_argument("--sizes", type=int_arg, nargs="+", default=None, help="problem sizes to tune")
    p.add_argument("--E", type=int_arg, nargs="+", default=None, dest="E_values",
                   help="embedding dimensions to tune (default: the family's buckets)")
    p.add_argument("--force", action="store_true", help="re-time even if an entry exists")
    p.add_argument("--list", action="store_true", help="list kernel families and exit")
    p.add_argument("--export", default=None, metavar="FILE",
                   help="afterwards, write this device's entries as a shipped tuning/ file")
    p.add_argument("--prune-stale", nargs="+", default=None, metavar="FILE",
                   help="drop entries made for another version of their template from these "
                        "shipped tuning/ files (after a template change), then exit")
    p.add_argument("-q", "--quiet", action="store_true")
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=run)


def prune_stale(paths: list[str]) -> list[tuple[str, int, int]]:
    """Rewrite shipped tuning files without entries whose template hash is not current.

    Such entries are ignored at run time anyway (with a warning per lookup); pruning
    keeps the shipped database quiet and honest after a version bump. Returns
    ``(path, kept, dropped)`` per file.
    """
    import json
    from pathlib import Path

    from clkernels.tuning.database import atomic_write_json

    from ..kernels import registry

    fams = registry()
    out = []
    for path in paths:
        data = json.loads(Path(path).read_text())
        ents = data.get("entries", [])
        ents = list(ents.values()) if isinstance(ents, dict) else ents
        keep = [e for e in ents if isinstance(e, dict) and e.get("kernel") in fams
                and fams[e["kernel"]].entry_version(e) == fams[e["kernel"]].version]
        atomic_write_json(Path(path), {**data, "entries": keep})
        out.append((path, len(keep), len(ents) - len(keep)))
    return out


def run(args: argparse.Namespace) -> int:
    from tqdm import tqdm

    from clkernels import get_backend
    from clkernels.tuning import tune

    from ..kernels import fixed_families, registry
    from .args import UsageError, check_writable, reading_input

    fams = registry()
    if args.prune_stale:
        with reading_input("--prune-stale"):  # the files named are this command's input
            pruned = prune_stale(args.prune_stale)
        for path, kept, dropped in pruned:
            print(f"{path}: kept {kept}, dropped {dropped} stale entries")
        return 0
    if args.export:
        check_writable(args.export, "--export")  # before any tuning
    if args.list:
        for name, k in fams.items():
            print(f"{name:<24} {k.template:<32} tunes {', '.join(k.space.params)}")
        print(f"{'(fixed, not tuned)':<24} {', '.join(fixed_families())}")
        return 0
    if args.kernel is None and args.quick:
        return run_quick_set(args, fams)
    if args.kernel is None:
        raise UsageError(f"name a kernel family to tune, or 'all', or --list (or --quick "
                         f"alone for the quick set); choose one of: all, {', '.join(fams)}")
    names = list(fams) if args.kernel == "all" else [args.kernel]
    for n in names:
        if n in fixed_families():
            raise UsageError(f"{n!r} is a fixed kernel family (its launch parameters follow "
                             f"from device limits): nothing to tune; choose one of: all, "
                             f"{', '.join(fams)}")
        if n not in fams:
            raise UsageError(f"unknown kernel {n!r}; choose one of: all, {', '.join(fams)}")
    be = get_backend(args.device, args.backend)
    rows = []
    for n in names:
        fam = fams[n]
        specs = [s for s in fam.default_specs() if fam.applies(s, be.info)]
        if args.E_values:
            # one specialisation per requested E (k = E + 1 where the family has a k; the
            # scans' E is their largest, EMAX)
            specs = [{**s, ("EMAX" if "EMAX" in s else "E"): E, **({"K": E + 1} if "K" in s else {})}
                     for E in args.E_values for s in specs[:1]]
        sizes = args.sizes or fam.default_sizes(be.info, quick=args.quick)
        for spec in specs:
            for size in sizes:
                bar = None if args.quiet else tqdm(desc=f"{n} {fam.spec_bucket(spec)} n={size}",
                                                   unit="cfg", leave=False, file=sys.stderr)

                def progress(i, total, bar=bar):
                    if bar is not None:
                        bar.total = total
                        bar.n = i
                        bar.refresh()

                budget = QUICK_BUDGET_S if args.budget is None else args.budget
                res = tune(fam, be, spec, size, mode="random" if args.quick else "brute",
                           budget_s=budget if args.quick else None, progress=progress,
                           force=args.force)
                if bar is not None:
                    bar.close()
                rows.append(res)
    export(args, be)
    return report(args, be, rows)


def export(args: argparse.Namespace, be) -> None:
    """``--export FILE``: this device's tuned entries as a shipped tuning/ file."""
    if not args.export:
        return
    from pathlib import Path

    from clkernels.tuning.export import export_device

    n_exp = export_device(be.info, Path(args.export))
    print(f"exported {n_exp} entries to {args.export}", file=sys.stderr)


def run_quick_set(args: argparse.Namespace, fams: dict) -> int:
    """``pyedmcl tune --quick``: one time-boxed case of each family in :data:`QUICK_SET`,
    one progress line over the cases (``-q``: none)."""
    from tqdm import tqdm

    from clkernels import get_backend
    from clkernels.tuning import tune

    be = get_backend(args.device, args.backend)
    budget = FIRST_USE_BUDGET_S if args.budget is None else args.budget
    cases = [(n, list(fams[n].default_specs())[i]) for n, i in QUICK_SET if n in fams]
    bar = None if args.quiet else tqdm(total=len(cases), desc="quick tune", unit="case",
                                       file=sys.stderr)
    rows = []
    for n, spec in cases:
        fam = fams[n]
        if bar is not None:
            bar.set_postfix_str(f"{n} {fam.spec_bucket(spec)}")
        size = (args.sizes or fam.default_sizes(be.info, quick=True))[0]
        rows.append(tune(fam, be, spec, size, mode="random", budget_s=budget, force=args.force))
        if bar is not None:
            bar.update(1)
    if bar is not None:
        bar.close()
    export(args, be)
    return report(args, be, rows)


def report(args: argparse.Namespace, be, rows: list) -> int:
    """The tuning summary on stdout (a table, or JSON with ``--json``)."""
    from .args import print_json

    if args.json:
        print_json([{**r.__dict__, "speedup": r.speedup} for r in rows])
        return 0
    print(f"device: {be.info.name} ({be.info.runtime}), backend {be.name}")
    print(f"{'kernel':<20} {'spec':<16} {'size':<8} {'default ms':>11} {'tuned ms':>9} {'speedup':>8}  "
          f"{'timed':>5}  best")
    for r in rows:
        src = "(from DB)" if r.from_db else ""
        print(f"{r.kernel:<20} {r.spec_bucket:<16} {r.size_bucket:<8} {r.default_time_s * 1e3:>11.3f} "
              f"{r.best_time_s * 1e3:>9.3f} {r.speedup:>7.2f}x  {r.timed:>5}  {r.best_params} {src}")
    return 0
