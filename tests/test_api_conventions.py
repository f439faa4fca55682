"""The public API spells each shared concept one way (docs/api.md, "Conventions").

Signatures of every public function: options keyword-only, ``dtype="float32"``,
``device``/``backend`` wherever kernels run, ``devices``/``return_device``/``params``
exactly where documented, ``knn``/``max_E``/``knn_method`` and none of their former spellings; the
former spellings still work for one release with a DeprecationWarning.
"""

from __future__ import annotations

import inspect
import warnings
from pathlib import Path

import numpy as np
import pytest
from conftest import CPU_DEVICE

import pyedmcl as pe
from pyedmcl._deprecation import RENAMED

#: public functions that run no kernel (NumPy helpers, files, device listing)
HOST_ONLY = {"embed", "read_panel", "xmap_open", "xmap_verify", "list_devices", "select_device",
             "surrogates", "causal_network", "kendall_tau", "rqa_batch_open",
             "plot_rqa_vs_radius", "plot_rqa_heatmap"}
#: positional data arguments; everything else is keyword-only
DATA = {"x", "y", "target", "X"}
DEVICES = {"rqa", "cross_rqa", "joint_rqa", "rqa_batch", "xmap"}
RETURN_DEVICE = {"simplex", "smap", "pairwise_distances", "recurrence_plot"}
PARAMS = {"pairwise_distances", "rqa", "cross_rqa", "joint_rqa"}
#: dtype defaults other than "float32", with the reason in docs/api.md
DTYPE_DEFAULT = {"xmap": None}  # None: the stored dtype when resuming, else float32
#: former spelling -> the keyword that replaced it
FORMER = {"k": "knn", "E_max": "max_E", "knn_backend": "knn_method", "knn_kernel": "knn_method"}
DEPRECATED = {("knn_table", "k"): "knn", ("knn_search", "k"): "knn",
              ("measure_recall", "k"): "knn", ("xmap", "E_max"): "max_E",
              ("simplex", "knn_backend"): "knn_method", ("ccm", "knn_backend"): "knn_method",
              ("knn_search", "knn_backend"): "knn_method",
              ("measure_recall", "knn_backend"): "knn_method",
              ("xmap", "knn_kernel"): "knn_method"}


def _functions() -> dict[str, inspect.Signature]:
    out = {}
    for name in pe.__all__:
        obj = getattr(pe, name)
        if inspect.isfunction(obj):
            out[name] = inspect.signature(obj)
    return out


FUNCS = _functions()
KERNEL = {n: s for n, s in FUNCS.items() if n not in HOST_ONLY}


def _with(param: str) -> set[str]:
    return {n for n, s in FUNCS.items() if param in s.parameters}


def test_inventory_is_complete():
    """Every public function is classified (a new one must be looked at here)."""
    assert HOST_ONLY <= set(FUNCS)
    assert {"simplex", "smap", "ccm", "embed_dimension", "predict_interval",
            "predict_exclusion_radius", "predict_nonlinear", "knn_table", "knn_search",
            "measure_recall", "pairwise_distances", "rqa", "cross_rqa", "joint_rqa",
            "rqa_batch", "rqa_grid", "recurrence_plot", "recurrence_network", "xmap",
            "generate", "multiview", "partial_cross_map"} == set(KERNEL)


@pytest.mark.parametrize("name", sorted(KERNEL))
def test_options_are_keyword_only(name):
    for p in KERNEL[name].parameters.values():
        if p.name not in DATA:
            assert p.kind is p.KEYWORD_ONLY, (name, p.name)


@pytest.mark.parametrize("name", sorted(KERNEL))
def test_device_and_backend_everywhere(name):
    ps = KERNEL[name].parameters
    assert "device" in ps and ps["device"].default is None, name
    assert "backend" in ps and ps["backend"].default is None, name


@pytest.mark.parametrize("name", sorted(KERNEL))
def test_dtype_default(name):
    ps = KERNEL[name].parameters
    assert "dtype" in ps, name
    assert ps["dtype"].default == DTYPE_DEFAULT.get(name, "float32"), name


def test_devices_return_device_params_where_documented():
    assert _with("devices") == DEVICES
    assert _with("return_device") == RETURN_DEVICE
    assert _with("params") == PARAMS
    for name in RETURN_DEVICE:
        assert FUNCS[name].parameters["return_device"].default is False
    for name in PARAMS:
        assert FUNCS[name].parameters["params"].default is None


@pytest.mark.parametrize("name", sorted(FUNCS))
def test_no_former_spellings(name):
    ps = FUNCS[name].parameters
    for old in ("k", "E_max", "n_neighbors", "maxE", "dev", "knn_backend", "knn_kernel"):
        assert old not in ps, (name, old)


def test_neighbour_count_is_knn():
    assert {"simplex", "smap", "ccm", "embed_dimension", "predict_interval",
            "predict_exclusion_radius", "predict_nonlinear", "knn_table", "knn_search",
            "measure_recall"} <= _with("knn")
    assert _with("max_E") == {"embed_dimension", "xmap"}


def test_knn_method_is_one_name():
    """How neighbours are found: ``knn_method`` (``backend`` is only the Backend kind)."""
    assert _with("knn_method") == {"simplex", "ccm", "knn_search", "measure_recall", "xmap"}
    assert _with("knn_options") <= _with("knn_method")


def test_conventions_documented():
    """docs/api.md opens with the conventions and names every specific case."""
    text = (Path(__file__).parents[1] / "docs" / "api.md").read_text()
    conv = text.split("## Conventions", 1)[1].split("\n## ", 1)[0]
    for word in ("`dtype`", "`device`", "`devices`", "`knn`", "`return_device`", "`params`",
                 "`max_E`", "`knn_method`"):
        assert word in conv, word
    for name in DEVICES | RETURN_DEVICE | PARAMS | set(DTYPE_DEFAULT):
        assert f"`{name}`" in conv, name
    for (fn, old), new in DEPRECATED.items():
        assert f"`{fn}`" in conv and f"`{old}=`" in conv, (fn, old, new)


# --- former spellings: still accepted for one release ---------------------------------------

def test_registered_aliases():
    for name in ("knn_table", "knn_search", "measure_recall", "xmap", "simplex", "ccm"):
        getattr(pe, name)  # the lazy modules register their aliases on import
    assert RENAMED == DEPRECATED
    for (fn, old), new in RENAMED.items():
        assert FORMER[old] == new
        assert old not in FUNCS[fn].parameters and new in FUNCS[fn].parameters


X = np.sin(np.arange(300) * 0.37) + 0.2 * np.cos(np.arange(300) * 1.3)

CALLS = {
    "knn_table": lambda **kw: pe.knn_table(X, E=3, device=CPU_DEVICE, **kw),
    "knn_search": lambda **kw: pe.knn_search(X, E=3, knn_method="exact", device=CPU_DEVICE,
                                             **kw).indices,
    "measure_recall": lambda **kw: pe.measure_recall(X, E=3, knn_method="kdtree", sample=20,
                                                     device=CPU_DEVICE, **kw),
}


def _same(a, b) -> None:
    if isinstance(a, tuple):
        for u, v in zip(a, b, strict=True):
            np.testing.assert_array_equal(u, v)
    else:
        np.testing.assert_array_equal(a, b)


@pytest.mark.parametrize("name", sorted(CALLS))
def test_k_is_a_deprecated_alias_of_knn(name):
    if name == "measure_recall":
        pytest.importorskip("scipy")
    call = CALLS[name]
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        ref = call(knn=5)
    with pytest.warns(DeprecationWarning, match=rf"{name}\(k=\.\.\.\) is deprecated, "
                                                rf"use {name}\(knn=\.\.\.\)") as rec:
        got = call(k=5)
    assert all(Path(w.filename).name == Path(__file__).name for w in rec)  # the caller's line
    _same(got, ref)
    with pytest.raises(TypeError, match="both k= and knn="):
        call(k=5, knn=5)


def test_k_alias_is_validated_as_knn():
    with pytest.warns(DeprecationWarning), pytest.raises(ValueError, match="knn"):
        CALLS["knn_table"](k=0)


#: a call of each function whose k-NN method option was spelled otherwise, given the method
METHOD_CALLS = {
    "simplex": lambda **kw: pe.simplex(X, E=3, device=CPU_DEVICE, **kw).predicted,
    "ccm": lambda **kw: pe.ccm(X, np.roll(X, 3), E=2, lib_sizes=[50, 100], sample=3, seed=1,
                               device=CPU_DEVICE, **kw).rho_xy,
    "knn_search": lambda **kw: pe.knn_search(X, E=3, device=CPU_DEVICE, **kw).indices,
    "measure_recall": lambda **kw: pe.measure_recall(X, E=3, sample=20, device=CPU_DEVICE, **kw),
}


@pytest.mark.parametrize("name", sorted(METHOD_CALLS))
def test_knn_backend_is_a_deprecated_alias_of_knn_method(name):
    pytest.importorskip("scipy")  # the k-d tree: a method other than the default
    call = METHOD_CALLS[name]
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        ref = call(knn_method="kdtree")
    with pytest.warns(DeprecationWarning, match=rf"{name}\(knn_backend=\.\.\.\) is deprecated, "
                                                rf"use {name}\(knn_method=\.\.\.\)") as rec:
        got = call(knn_backend="kdtree")
    assert all(Path(w.filename).name == Path(__file__).name for w in rec)
    _same(got, ref)
    with pytest.raises(TypeError, match="both knn_backend= and knn_method="):
        call(knn_backend="kdtree", knn_method="kdtree")


def test_knn_backend_alias_with_labelled_data():
    """The alias is translated before the labelled-data wrapper binds the signature."""
    pd = pytest.importorskip("pandas")
    pytest.importorskip("scipy")
    s = pd.Series(X, index=pd.date_range("2020-01-01", periods=X.size, freq="D"))
    ref = pe.simplex(s, E=3, knn_method="kdtree", device=CPU_DEVICE)
    with pytest.warns(DeprecationWarning, match="knn_method"):
        got = pe.simplex(s, E=3, knn_backend="kdtree", device=CPU_DEVICE)
    assert got.labels is not None
    np.testing.assert_array_equal(got.predicted, ref.predicted)


def test_knn_kernel_is_a_deprecated_alias_of_knn_method():
    P = np.stack([X, np.roll(X, 7), X ** 2], axis=1)
    ref = pe.xmap(P, E=2, knn_method="edm", device=CPU_DEVICE)
    with pytest.warns(DeprecationWarning, match=r"xmap\(knn_kernel=\.\.\.\) is deprecated, "
                                                r"use xmap\(knn_method=\.\.\.\)"):
        got = pe.xmap(P, E=2, knn_kernel="edm", device=CPU_DEVICE)
    np.testing.assert_array_equal(np.asarray(got), np.asarray(ref))
    with pytest.raises(ValueError, match="knn_method='faiss' is invalid"):
        pe.xmap(P, E=2, knn_method="faiss", device=CPU_DEVICE)


def test_E_max_is_a_deprecated_alias_of_max_E():
    P = np.stack([X, np.roll(X, 7), X ** 2], axis=1)
    ref = pe.xmap(P, E="auto", max_E=3, device=CPU_DEVICE)
    with pytest.warns(DeprecationWarning, match=r"use xmap\(max_E=\.\.\.\)"):
        got = pe.xmap(P, E="auto", E_max=3, device=CPU_DEVICE)
    np.testing.assert_array_equal(np.asarray(got.E), np.asarray(ref.E))
    np.testing.assert_array_equal(np.asarray(got), np.asarray(ref))


# --- the command line follows --------------------------------------------------------------

def _parse(argv: list[str]):
    from pyedmcl.cli.main import build_parser

    return build_parser().parse_args(argv)


def test_cli_spellings():
    from pyedmcl.cli.main import build_parser

    assert _parse(["xmap", "in.npy", "-o", "o.zarr", "--max-E", "4"]).max_E == 4
    assert _parse(["xmap", "in.npy", "-o", "o.zarr", "--E-max", "5"]).max_E == 5  # former flag
    assert _parse(["xmap", "in.npy", "-o", "o.zarr"]).max_E == 20
    assert _parse(["edim", "in.csv", "--knn", "3"]).knn == 3
    for argv in (["simplex", "in.csv", "-E", "2"], ["smap", "in.csv", "-E", "2", "--theta", "1"],
                 ["ccm", "in.csv", "-E", "2", "--lib-sizes", "10"], ["edim", "in.csv"]):
        assert _parse(argv + ["--knn", "4"]).knn == 4, argv[0]
    for argv in (["xmap", "in.npy", "-o", "o.zarr"], ["rqa", "in.csv", "-r", "0.1"],
                 ["crqa", "a.csv", "b.csv", "-r", "0.1"], ["jrqa", "a.csv", "b.csv"]):
        assert _parse(argv).n_workers == 2, argv[0]
        assert _parse(argv + ["--n-workers", "3"]).n_workers == 3, argv[0]
        assert _parse(argv + ["--workers", "4"]).n_workers == 4, argv[0]  # former flag
    sub = next(a for a in build_parser()._actions if a.dest == "command")
    assert "--E-max" not in sub.choices["xmap"].format_help()  # hidden alias
    for cmd in ("xmap", "rqa", "crqa", "jrqa"):
        assert "--workers" not in sub.choices[cmd].format_help().replace("--n-workers", "")
