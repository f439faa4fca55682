"""Write docs/api.md from the docstrings of the public API (``python docs/gen_api.py``)."""

from __future__ import annotations

import inspect
import re
from importlib import import_module
from pathlib import Path

import pyedmcl

MODULES = ["clkernels", "clkernels.devices", "clkernels.backends.base", "clkernels.tuning",
           "clkernels.peak", "pyedmcl.io", "pyedmcl.data", "pyedmcl.compat.pyedm"]


CONVENTIONS = """\
## Conventions

One spelling per concept across the public functions (checked by
`tests/test_api_conventions.py`):

- **Keyword-only options.** The data (`x`, `target`/`y`, `X`) are positional; every
  option is keyword-only. `embed(x, E, tau)`, a NumPy helper, is the one exception.
- **`dtype`**: `"float32"` (the default everywhere) or `"float64"` (needs fp64 on the
  device); numpy types and dtypes are accepted too. In float32 host series are centred
  (for predictions also scaled) in float64 before the cast, results mapped back to data
  units; a series that float32 cannot hold runs the call in float64 with one
  `PrecisionWarning` (see `pyedmcl._precision`). `xmap(dtype=None)`: the stored dtype when resuming, else
  float32.
- **`device`**: one device, on every function that runs kernels: a selector (`"pocl"`,
  `"intel"`, `"nvidia:0"`, `"gpu"`, `"cpu"`, `"p:d"`), a `DeviceInfo` or a backend;
  None picks the default device. **`devices`**: several devices to split one call's work
  over (a list or a comma-separated string of selectors) on `rqa`, `cross_rqa`,
  `joint_rqa`, `rqa_batch` (blocks of series) and `xmap`; when given it is used instead
  of `device`.
- **`backend`**: which host interface drives the device's runtime, the kind of
  `clkernels.Backend` object (`"pyopencl"`, `"sycl"`; None: the default), on every
  function that takes `device`; nothing else is called a backend in the API.
- **`knn_method`**: how neighbours are found: `"exact"`, `"kdtree"`, `"hnsw"`, `"ivf"`
  or `"auto"` (`simplex`, `ccm`, `knn_search`, `measure_recall`; options in
  `knn_options`), and `xmap`'s choice of exact kernel (`"batched"`, `"edm"`, `"scan"`).
- **`knn`**: the number of neighbours per prediction or query (default `E + 1`; S-map:
  every library point). **`max_E`**: the largest E a scan tries (`embed_dimension`,
  `xmap`). Former spellings still work for one release with a `DeprecationWarning`
  naming the new keyword: `k=` (`knn_table`, `knn_search`, `measure_recall`),
  `E_max=` (`xmap`), `knn_backend=` (`simplex`, `ccm`, `knn_search`, `measure_recall`)
  and `knn_kernel=` (`xmap`) for `knn_method=`. The project's other terms: docs/design.md,
  "Vocabulary".
- **`return_device`**: `True` returns the result arrays as device arrays in the
  computation dtype (`pyedmcl.interop`), on the functions whose result is an array along
  the series that a next device step can take as input: `simplex`, `smap`,
  `pairwise_distances`, `recurrence_plot`. Skill scans, CCM curves, RQA measures,
  k-NN tables (gathered on the host from query blocks sized to device memory) and xmap
  matrices (streamed to a store) are returned as NumPy.
- **`params`**: a dict of kernel launch parameters that replaces the tuning database's
  choice, on the functions that run one tunable kernel family: `pairwise_distances`
  (distance) and `rqa`, `cross_rqa`, `joint_rqa` (rqa_lines). The others run several
  families per call and take tuned parameters per device (`pyedmcl tune`).
- **`seed`**: an int >= 0 makes random draws repeatable; `ccm(seed=None)` draws fresh
  libraries each call (pyEDM's behaviour), `measure_recall(seed=0)` is repeatable.
- **`progress`**: `True` draws a line on stderr for calls longer than a second (an
  elapsed-time line; `xmap` and `rqa_batch` in blocks: a bar over blocks with its ETA),
  `False` never; `None` (the default of every analysis but `xmap`, whose default is
  `False`) draws only inside a Jupyter notebook (`pyedmcl.progress`).
- **Labelled data**: the EDM and RQA functions take an `xarray.DataArray` with a `time`
  dimension and time-indexed pandas objects besides arrays (the same numbers, bit for
  bit); their results carry the labels (`result.labels`, `as_dataframe()` indexed by
  time, `as_xarray()`). **`allow_irregular`** (default `False`): an unequally spaced
  time axis is refused unless it is `True` (docs/labelled_data.md).
- **Command line**: flags mirror the keywords (`--dtype`, `--device`, `--devices`,
  `--backend`, `--knn`, `--max-E`) and are spelled alike in every command (`-E/--E`,
  `--tau`, `-c/--column`, `-o/--out`, `--time-column`/`--no-time`, `-q`,
  `--n-workers`); former flags (`xmap --E-max`, `--workers`) still parse.
"""


def section(name: str, obj) -> str:
    try:
        # default values that are functions print their address: drop it (stable output)
        sig = re.sub(r" at 0x[0-9a-f]+", "", str(inspect.signature(obj)))
    except (TypeError, ValueError):
        sig = ""
    doc = inspect.getdoc(obj) or "(no docstring)"
    return f"### `{name}{sig}`\n\n{doc}\n"


def main() -> None:
    out = ["# API reference", "", "Generated from docstrings by `docs/gen_api.py`.", "",
           CONVENTIONS, "## `pyedmcl` (public functions)", ""]
    for name in sorted(pyedmcl.__all__):
        out.append(section(f"pyedmcl.{name}", getattr(pyedmcl, name)))
    for modname in MODULES:
        try:
            mod = import_module(modname)
        except ImportError:
            continue
        out += [f"## `{modname}`", "", inspect.getdoc(mod) or "", ""]
        names = getattr(mod, "__all__", None) or [n for n, v in vars(mod).items()
                                                  if not n.startswith("_") and getattr(v, "__module__", "") == modname
                                                  and (inspect.isfunction(v) or inspect.isclass(v))]
        for n in names:
            out.append(section(f"{modname}.{n}", getattr(mod, n)))
    path = Path(__file__).with_name("api.md")
    path.write_text("\n".join(out))
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
