"""Devices are chosen only if they build: probe, fallback, errors, quiet and repaired builds.

PoCL's build is made to fail for real with ``POCL_EXTRA_BUILD_FLAGS`` set to an invalid
flag (every PoCL build then fails with CL_INVALID_BUILD_OPTIONS, as every build fails on
a CPU newer than PoCL's LLVM). Runs that need the variable set before PoCL loads, or a
fresh process, are subprocesses; each uses its own cache root. In this process clkernels
works for pyedmcl (``PYEDMCL_*`` variables); a subprocess runs either pyedmcl's CLI or
clkernels alone, with its default settings (``CLKERNELS_*`` variables).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import uuid
from pathlib import Path

import numpy as np
import pytest
from conftest import TEST_DEVICES

import clkernels.probe as probe_mod
from clkernels.buildcache import bitcode_ok, elf_ok
from clkernels.devices import (
    DeviceUnusableError,
    build_options,
    default_device,
    list_devices,
    resolve_selector,
    usable,
)
from clkernels.userdirs import UnsafeCacheDirError, private_dir

BAD = "-invalid-flag-for-test"
REPO = Path(__file__).resolve().parents[1]
HAS_INTEL = any(d.runtime == "intel" for d in list_devices())
HAS_POCL = any(d.runtime == "pocl" for d in list_devices())
needs_both = pytest.mark.skipif(not (HAS_INTEL and HAS_POCL),
                                reason="needs PoCL and Intel's CPU runtime (pyedmcl[intel])")


@pytest.fixture
def cache_root(tmp_path, monkeypatch):
    """A private cache root and an empty in-process verdict memo for this test."""
    root = tmp_path / "cache"
    monkeypatch.setenv("PYEDMCL_CACHE_DIR", str(root))
    monkeypatch.setattr(probe_mod, "_verdicts", {})
    return root


def _env(cache: Path, **extra: str) -> dict[str, str]:
    """A subprocess environment with cache root ``cache`` for pyedmcl and for clkernels
    alone, no device choice, no inherited build or registration settings."""
    own = [f"{app}_{name}" for app in ("PYEDMCL", "CLKERNELS")
           for name in ("OWNS_POCL_CACHE", "DEVICE", "QUIET")]
    env = {k: v for k, v in os.environ.items()
           if k not in ("POCL_CACHE_DIR", "POCL_EXTRA_BUILD_FLAGS", "PYOPENCL_CTX",
                        "OCL_ICD_VENDORS", *own)}
    path = os.pathsep.join(p for p in (str(REPO), os.environ.get("PYTHONPATH")) if p)
    env.update({"PYEDMCL_CACHE_DIR": str(cache), "CLKERNELS_CACHE_DIR": str(cache),
                "PYTHONPATH": path}, **extra)
    return env


def _run(args: list[str], env: dict[str, str], timeout: float = 120) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, *args], env=env, capture_output=True, text=True,
                          timeout=timeout, cwd=str(REPO))


def _pocl():
    return next(d for d in list_devices() if d.runtime == "pocl")


def _pocl_mismatch() -> str:
    """Why the probe refuses this machine's PoCL before building ("" where it builds)."""
    from clkernels.devices import cl_device

    dev = cl_device(_pocl())
    return probe_mod.pocl_target_mismatch(str(dev.version), int(dev.native_vector_width_float))


# --- the probe and its cache --------------------------------------------------------

_VERDICT = textwrap.dedent("""
    import clkernels
    from clkernels.devices import list_devices, usable
    v = usable(next(d for d in list_devices() if d.runtime == "pocl"))
    print(v.ok, v.cached, v.reason)
""")


def test_probe_key_follows_build_settings(monkeypatch):
    pocl_like = ("pocl|cpu-x|3.0|cu2", "Portable Computing Language", ())
    monkeypatch.delenv("POCL_EXTRA_BUILD_FLAGS", raising=False)
    plain = probe_mod.probe_key(*pocl_like)
    monkeypatch.setenv("POCL_EXTRA_BUILD_FLAGS", BAD)
    assert probe_mod.probe_key(*pocl_like) != plain
    monkeypatch.delenv("POCL_EXTRA_BUILD_FLAGS")
    monkeypatch.setenv("POCL_CACHE_DIR", "/elsewhere")  # where, not how: same verdict
    assert probe_mod.probe_key(*pocl_like) == plain
    assert probe_mod.probe_key(*pocl_like[:2], ("-DX",)) != plain


@pytest.mark.skipif("pocl" not in TEST_DEVICES,
                    reason="needs a PoCL that builds on this CPU (its LLVM may not know it)")
def test_probe_verdict_keyed_on_build_env(tmp_path):
    """A forced failure is never hidden by a cached success, nor the reverse (a real
    PoCL failure, so in fresh processes: PoCL keeps the flags it has seen)."""
    cache = tmp_path / "cache"
    runs = [(BAD, "False False"), ("", "True False"), (BAD, "False True")]
    for flags, expect in runs:
        env = _env(cache, **({"POCL_EXTRA_BUILD_FLAGS": flags} if flags else {}))
        p = _run(["-c", _VERDICT], env)
        assert p.returncode == 0, p.stderr
        assert p.stdout.startswith(expect), (flags, p.stdout)
        if flags:
            assert "INVALID_BUILD_OPTIONS" in p.stdout and BAD in p.stdout
    assert len(list((cache / "probe").glob("*.json"))) == 2


@pytest.mark.parametrize("version, width, bad", [
    # PoCL 3.0 (LLVM 14) on an AMD Zen 4: AVX-512 library, code for znver3
    ("OpenCL 3.0 PoCL HSTR: pthread-x86_64-unknown-linux-gnu-znver3", 16, "znver3"),
    ("OpenCL 3.0 PoCL HSTR: pthread-x86_64-unknown-linux-gnu-haswell", 16, "haswell"),
    ("OpenCL 3.0 PoCL HSTR: pthread-x86_64-unknown-linux-gnu-znver3", 8, ""),  # a Zen 3
    ("OpenCL 3.0 PoCL HSTR: pthread-x86_64-unknown-linux-gnu-znver4", 16, ""),  # newer LLVM
    ("OpenCL 3.0 PoCL HSTR: pthread-x86_64-unknown-linux-gnu-cascadelake", 16, ""),
    ("OpenCL 3.0 PoCL HSTR: pthread-x86_64-unknown-linux-gnu-skylake-avx512", 16, ""),
    ("OpenCL 3.0 PoCL", 16, ""),  # no target named: nothing to compare
])
def test_pocl_compiling_for_an_older_cpu_is_unusable(version, width, bad):
    why = probe_mod.pocl_target_mismatch(version, width)
    assert (bad in why and "AVX-512" in why) if bad else why == ""


@pytest.mark.skipif(not HAS_POCL, reason="needs PoCL")
def test_corrupt_verdict_is_ignored_and_rewritten(cache_root):
    first = usable(_pocl())
    (verdict,) = (cache_root / "probe").glob("*.json")
    verdict.write_text('{"ok": tr')  # truncated
    probe_mod._verdicts.clear()
    v = usable(_pocl())
    assert v.ok == first.ok and not v.cached
    assert json.loads(verdict.read_text())["ok"] is first.ok


def _fail(info, reason: str = "clBuildProgram failed: BUILD_PROGRAM_FAILURE: "
          "error: unknown target CPU 'generic'", cached: bool = False) -> None:
    """Record a failed probe verdict for ``info`` in this process (the real failure is
    exercised in subprocesses below; PoCL cannot be made to fail and recover in-process);
    ``cached``: as if read from the probe cache (a verdict of an earlier process)."""
    key = probe_mod.probe_key(info.fingerprint, info.platform_name, build_options(info))
    probe_mod._verdicts[key] = probe_mod.Verdict(False, reason, cached=cached)


@needs_both
def test_default_skips_failing_pocl_with_one_line(cache_root, monkeypatch, capfd):
    monkeypatch.setattr(probe_mod, "_said", set())
    _fail(_pocl())
    devs = [d for d in list_devices() if d.device_type == "cpu"]
    chosen, why = default_device(devs)
    assert chosen.runtime == "intel" and "pocl skipped" in why
    err = capfd.readouterr().err.strip().splitlines()
    assert len(err) == 1, err
    assert "skipping pocl" in err[0] and "unknown target CPU" in err[0]
    assert "using intel" in err[0]
    assert resolve_selector("cpu", devs).runtime == "intel"  # a type counts working ones


@needs_both
def test_default_skips_a_cached_failure_quietly(cache_root, monkeypatch, capfd):
    """A failure an earlier process found (read from the probe cache) is skipped without
    the line: it is said on the run whose probe found it, as the compile notice is; the
    reason stays in the choice's explanation (``pyedmcl devices``)."""
    monkeypatch.setattr(probe_mod, "_said", set())
    _fail(_pocl(), cached=True)
    devs = [d for d in list_devices() if d.device_type == "cpu"]
    chosen, why = default_device(devs)
    assert chosen.runtime == "intel" and "pocl skipped" in why
    assert capfd.readouterr().err == ""


@needs_both
def test_explicit_failing_selector_says_why_and_what_works(cache_root, tmp_path, capsys):
    _fail(_pocl())
    with pytest.raises(DeviceUnusableError) as ei:
        resolve_selector("pocl")
    msg = str(ei.value)
    assert "'pocl'" in msg and "unknown target CPU" in msg
    assert "devices that work" in msg and "intel" in msg
    from pyedmcl.cli.main import main

    csv = tmp_path / "x.csv"
    np.savetxt(csv, np.sin(np.arange(120) * 0.3), header="x", comments="")
    assert main(["simplex", str(csv), "-E", "2", "--device", "pocl"]) == 1
    err = capsys.readouterr().err
    assert "cannot build kernels" in err and "Traceback" not in err


# --- real processes: fallback, no device, ICD dedup ----------------------------------

@needs_both
def test_cli_falls_back_to_intel_when_pocl_cannot_build(tmp_path):
    csv = tmp_path / "x.csv"
    np.savetxt(csv, np.sin(np.arange(200) * 0.3), header="x", comments="")
    p = _run(["-m", "pyedmcl.cli.main", "simplex", str(csv), "-E", "3", "--json"],
             _env(tmp_path / "cache", POCL_EXTRA_BUILD_FLAGS=BAD))
    assert p.returncode == 0, p.stderr
    assert json.loads(p.stdout)["rho"] > 0.9
    # besides the "compiling kernels" notice (said only when a build takes over a second)
    lines = [ln for ln in p.stderr.strip().splitlines() if "building kernels" not in ln]
    assert len(lines) == 1 and "skipping pocl" in lines[0] and "using intel" in lines[0], lines
    q = _run(["-m", "pyedmcl.cli.main", "simplex", str(csv), "-E", "3", "--json", "-q"],
             _env(tmp_path / "cache", POCL_EXTRA_BUILD_FLAGS=BAD))
    assert q.returncode == 0 and q.stdout == p.stdout and q.stderr == "", q.stderr  # -q: silent
    # the next run reads the verdict from the probe cache: the same answer, no line
    r = _run(["-m", "pyedmcl.cli.main", "simplex", str(csv), "-E", "3", "--json"],
             _env(tmp_path / "cache", POCL_EXTRA_BUILD_FLAGS=BAD))
    assert r.returncode == 0 and r.stdout == p.stdout and r.stderr == "", r.stderr


@pytest.mark.skipif(not HAS_POCL, reason="needs PoCL")
def test_no_working_device_is_one_clear_error(tmp_path):
    import pyopencl

    icd = Path(pyopencl.__file__).parent / ".libs" / "pocl.icd"
    if not icd.exists():
        pytest.skip("PoCL is not the one bundled with the pyopencl wheel")
    csv = tmp_path / "x.csv"
    np.savetxt(csv, np.sin(np.arange(100) * 0.3), header="x", comments="")
    env = _env(tmp_path / "cache", POCL_EXTRA_BUILD_FLAGS=BAD, PYEDMCL_NO_REGISTER="1",
               OCL_ICD_VENDORS=str(icd))  # PoCL alone: no Intel, no Oclgrind
    p = _run(["-m", "pyedmcl.cli.main", "simplex", str(csv), "-E", "2"], env)
    assert p.returncode == 1, p.stderr
    assert "no OpenCL device can build kernels" in p.stderr
    # the build's error, or where the probe refuses this PoCL before building, why
    assert "pocl" in p.stderr and (_pocl_mismatch() or BAD) in p.stderr
    assert "pip install intel-opencl-rt" in p.stderr and "Traceback" not in p.stderr


@pytest.mark.skipif(not HAS_INTEL, reason="needs Intel's CPU runtime (pyedmcl[intel])")
def test_child_processes_see_each_platform_once(tmp_path):
    """Registering Intel's runtime in a process whose parent registered it already
    (OCL_ICD_VENDORS inherited) adds no duplicate platform."""
    code = textwrap.dedent("""
        import subprocess, sys, clkernels
        clkernels.configure()
        import pyopencl as cl
        names = [p.name for p in cl.get_platforms()]
        depth = int(sys.argv[1])
        out = [names]
        if depth:
            r = subprocess.run([sys.executable, "-c", sys.argv[2], str(depth - 1), sys.argv[2]],
                               capture_output=True, text=True, check=True)
            out += eval(r.stdout)
        print(repr(out))
    """)
    p = _run(["-c", code, "2", code], _env(tmp_path / "cache"))
    assert p.returncode == 0, p.stderr
    levels = eval(p.stdout)
    assert len(levels) == 3
    for names in levels:
        assert sorted(names) == sorted(levels[0])
        assert len(names) == len(set(names)), names
        assert sum("Intel(R) OpenCL" in n for n in names) == 1


# --- quiet builds --------------------------------------------------------------------

@pytest.mark.skipif(not HAS_POCL, reason="needs PoCL")
def test_compiler_output_never_reaches_the_terminal(tmp_path):
    """PoCL's clang writes "1 warning generated." to descriptor 2 on a cold build; it is
    captured (the build-notice line is shown instead, here with its delay set to 0)."""
    code = textwrap.dedent(f"""
        import numpy as np, clkernels
        be = clkernels.get_backend("pocl")
        src = ("__kernel void k(__global float* a) {{ int i = 1.5; /* {uuid.uuid4().hex} */"
               " a[get_global_id(0)] = (float)i; }}")
        k = be.kernel_from_source(src, "k")
        a = be.to_device(np.zeros(4, np.float32))
        be.wait(be.launch(k, (4,), None, a))
        print(be.to_host(a).tolist())
    """)
    env = _env(tmp_path / "cache", CLKERNELS_BUILD_NOTICE_S="0")
    p = _run(["-c", code], env)
    assert p.returncode == 0, p.stderr
    assert p.stdout.strip() == "[1.0, 1.0, 1.0, 1.0]"
    assert "warning" not in p.stderr and "warning" not in p.stdout, p.stderr
    assert p.stderr.count("clkernels: building kernels for") == 1
    env["CLKERNELS_QUIET"] = "1"
    p = _run(["-c", code.replace("1.5", "2.5")], env)
    assert p.returncode == 0 and p.stderr == "", p.stderr


# --- caches repair themselves --------------------------------------------------------

_BUILD = textwrap.dedent("""
    import sys, numpy as np, clkernels
    be = clkernels.get_backend(sys.argv[1])
    k = be.kernel_from_source("__kernel void k(__global float* a) "
                              "{ a[get_global_id(0)] = 3.0f * a[get_global_id(0)]; } // TOKEN", "k")
    a = be.to_device(np.ones(4, np.float32))
    be.wait(be.launch(k, (4,), None, a))
    print(be.to_host(a).tolist())
""")


def _damage(files: list[Path]) -> None:
    for f in files:
        data = f.read_bytes()
        f.write_bytes(data[: len(data) // 3])


@pytest.mark.skipif(not HAS_POCL, reason="needs PoCL")
def test_damaged_pocl_cache_is_rebuilt(tmp_path):
    """Before: a truncated program.bc aborted the process at exit (134), a truncated
    work-group .so at the first launch."""
    cache = tmp_path / "cache"
    code = _BUILD.replace("TOKEN", uuid.uuid4().hex)
    first = _run(["-c", code, "pocl"], _env(cache))
    assert first.returncode == 0 and first.stdout.strip() == "[3.0, 3.0, 3.0, 3.0]", first.stderr
    kcache = cache / "pocl-kcache"
    bcs, sos = list(kcache.rglob("program.bc")), list(kcache.rglob("*.so"))
    assert bcs and sos and all(map(bitcode_ok, bcs)) and all(map(elf_ok, sos))
    _damage(bcs + sos)
    assert not any(map(bitcode_ok, bcs)) and not any(map(elf_ok, sos))
    again = _run(["-c", code, "pocl"], _env(cache))
    assert again.returncode == 0, again.stderr
    assert again.stdout.strip() == "[3.0, 3.0, 3.0, 3.0]"
    assert all(map(bitcode_ok, kcache.rglob("program.bc")))


@pytest.mark.skipif(not HAS_INTEL, reason="needs Intel's CPU runtime (pyedmcl[intel])")
def test_damaged_pyopencl_cache_is_rebuilt(tmp_path):
    """Before: KeyError('PYOPENCL_CACHE_FAILURE_FATAL') from PyOpenCL (CLI exit 2)."""
    cache = tmp_path / "cache"
    code = _BUILD.replace("TOKEN", uuid.uuid4().hex)
    assert _run(["-c", code, "intel"], _env(cache)).returncode == 0
    binaries = list((cache / "pyopencl-cache").rglob("binary"))
    assert binaries
    sizes = [b.stat().st_size for b in binaries]
    for b in binaries:
        b.write_bytes(os.urandom(64))
    again = _run(["-c", code, "intel"], _env(cache))
    assert again.returncode == 0, again.stderr
    assert again.stdout.strip() == "[3.0, 3.0, 3.0, 3.0]"
    assert [b.stat().st_size for b in binaries] == sizes  # the entry was written again


# --- safe folders --------------------------------------------------------------------

def test_cache_folders_are_private_and_never_symlinks(cache_root, tmp_path):
    d = private_dir("build-failures")
    assert d.stat().st_mode & 0o777 == 0o700
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (cache_root / "planted").symlink_to(elsewhere)
    with pytest.raises(UnsafeCacheDirError, match="symlink"):
        private_dir("planted")
    from clkernels.backends.base import save_failed_source

    os.rmdir(d)
    d.symlink_to(elsewhere)
    p = save_failed_source("__kernel void k() {}", "log", "fp")
    assert not list(elsewhere.iterdir()) and elsewhere not in p.parents


def test_user_chosen_pocl_cache_is_never_pruned(tmp_path, monkeypatch):
    """Only clkernels' own PoCL cache is checked and pruned: a folder the user set as
    ``POCL_CACHE_DIR`` may hold anything (here a damaged-looking ``.so`` two levels down,
    as a misconfigured home directory would) and is left byte for byte as it was."""
    from clkernels.buildcache import check_pocl_cache, pocl_cache_dir

    user = tmp_path / "mine"
    victim = user / "projects" / "thesis"
    victim.mkdir(parents=True)
    (victim / "libnotes.so").write_text("not an ELF file, but the user's")
    monkeypatch.setenv("PYEDMCL_CACHE_DIR", str(tmp_path / "root"))
    monkeypatch.setenv("POCL_CACHE_DIR", str(user))
    assert pocl_cache_dir() is None
    assert check_pocl_cache() == []
    assert (victim / "libnotes.so").read_text() == "not an ELF file, but the user's"
    assert not (user / ".pyedmcl-checked").exists()
    own = tmp_path / "root" / "pocl-kcache"
    own.mkdir(parents=True)
    monkeypatch.setenv("POCL_CACHE_DIR", str(own))
    assert pocl_cache_dir() == own.resolve()
