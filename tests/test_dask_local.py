"""``scheduler="local"`` from a script: refused at once without a main guard, and the
complete script of docs/dask.md runs as written (a real LocalCluster, in a subprocess)."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

pytest.importorskip("distributed")
ROOT = Path(__file__).resolve().parents[1]


def _run(script: Path, timeout: float = 300) -> subprocess.CompletedProcess:
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(
        p for p in (str(ROOT), os.environ.get("PYTHONPATH")) if p), PYEDMCL_QUIET="1")
    return subprocess.run([sys.executable, str(script)], cwd=script.parent, env=env,
                          capture_output=True, text=True, timeout=timeout)


@pytest.mark.parametrize("call", ["pe.xmap(X, E=2, out='m.zarr', scheduler='local')",
                                  "pe.rqa(X[:, 0], E=2, radius=0.2, scheduler='local')",
                                  "pe.rqa_batch(X, E=2, radius=0.2, out='m.zarr', "
                                  "scheduler='local')"])
def test_unguarded_script_fails_at_once_naming_the_line(tmp_path, call):
    script = tmp_path / "plain.py"
    script.write_text(textwrap.dedent(f"""
        import pyedmcl as pe
        from pyedmcl.data import logistic_network

        X, _ = logistic_network(4, 120)
        {call}
    """))
    r = _run(script, timeout=120)
    assert r.returncode == 1
    last = r.stderr.strip().splitlines()[-1]
    assert last.startswith("pyedmcl.dask_local.UnguardedMainError: scheduler='local' was "
                           f"called from line 6 of {script}")
    assert 'if __name__ == "__main__":' in last
    assert "Nanny" not in r.stderr and not (tmp_path / "m.zarr").exists()


def test_guarded_lines_and_other_callers_pass(tmp_path, monkeypatch):
    """The check itself: a call under the guard, or from a function called under it, or
    with forked workers, or from no script at all, is let through."""
    from pyedmcl import dask_local

    script = tmp_path / "s.py"
    script.write_text("import x\n\nif __name__ == '__main__':\n    run()\n    more()\n")
    tree = dask_local.ast.parse(script.read_text())
    assert dask_local._guarded_ranges(tree) == [(4, 5)]
    # pytest's own main module is no .py script: nothing to check
    assert dask_local.unguarded_main_line() is None
    assert dask_local.unguarded_main_line("fork") is None


def test_documented_script_runs_as_written(tmp_path):
    text = (ROOT / "docs" / "dask.md").read_text()
    code = text.split("```python\n", 1)[1].split("```", 1)[0]
    script = tmp_path / "causal_map.py"
    script.write_text(code)
    r = _run(script)
    assert r.returncode == 0, r.stderr[-3000:]
    assert "rho[0, :3] =" in r.stdout and "RQA on the cluster: DET =" in r.stdout
    assert "RQA of every series: DET =" in r.stdout
    assert (tmp_path / "map.zarr").is_dir() and (tmp_path / "rqa.zarr").is_dir()


def _square(v: int) -> int:
    if v < 0:
        raise ValueError("negative")
    return v * v


def test_run_tasks_all_at_once_or_a_bounded_window():
    """run_tasks gives every task's result to on_result under its id; with ``in_flight``
    it takes the next task (and would send its data) only as one completes, so no more
    than that many are ever queued; a failing task stops the loop with its error and
    the tasks still queued are cancelled."""
    import distributed

    from pyedmcl.dask_local import run_tasks

    with distributed.LocalCluster(n_workers=1, threads_per_worker=2, processes=False,
                                  dashboard_address=None) as cluster, \
            distributed.Client(cluster) as client:
        got: dict[int, int] = {}
        run_tasks(client, _square, ((i, (i,)) for i in range(7)), key="t-all",
                  on_result=got.__setitem__)
        assert got == {i: i * i for i in range(7)}

        taken, seen = [], []

        def tasks():
            for i in range(9):
                taken.append(i)
                yield i, (i,)

        def done(i: int, v: int) -> None:
            seen.append(len(taken) - len(seen))  # tasks taken and not yet done
            got[i] = v
        got.clear()
        run_tasks(client, _square, tasks(), key="t-window", on_result=done, in_flight=3)
        assert got == {i: i * i for i in range(9)} and max(seen) <= 3

        got.clear()
        with pytest.raises(ValueError, match="negative"):
            run_tasks(client, _square, ((i, (v,)) for i, v in enumerate([1, 2, -1] + [3] * 20)),
                      key="t-fail", on_result=got.__setitem__, in_flight=3)
        assert len(got) < 23
