"""The CPU-class step of the tuning lookup (docs/decisions/0051-tuning-by-cpu-class.md).

An unseen CPU borrows the device entries of the nearest measured CPU of its class
(same runtime, vendor and SIMD width, then the closest core count) before the
arch / vendor+type / global levels; the exact device still wins; a CPU of another
vendor or width falls through; malformed class data is skipped with a warning.
Fake DeviceInfo objects and shipped files in a scratch folder: no OpenCL needed.
"""

from __future__ import annotations

import json
import warnings
from dataclasses import replace

import pytest

import clkernels.tuning.database as db
from clkernels.cpuclass import CpuClass, cpu_class, parse_cpuinfo
from clkernels.devices import DeviceInfo, normalise_name
from clkernels.tuning import lookup
from pyedmcl.kernels.distance import PAIRWISE_DISTANCE

K = PAIRWISE_DISTANCE
SPEC = {"E": 5, "TAU": 1, "METRIC": "euclidean", "REAL": "float"}
SB, ZB = K.spec_bucket(SPEC), K.size_bucket(2000)


def fake(name: str, *, runtime: str = "intel", cores: int = 2, width: int = 16,
         vendor: str = "", family: str = "", device_type: str = "cpu",
         cache: int = 0) -> DeviceInfo:
    """A CPU as _describe would record it (width: native float vector width)."""
    return DeviceInfo(
        platform_index=0, device_index=0, platform_name=runtime, runtime=runtime,
        vendor="Intel(R) Corporation", name=name, normalised_name=normalise_name(name),
        driver_version="1.0", device_type=device_type, compute_units=cores, clock_mhz=0,
        local_mem_bytes=262144, global_mem_bytes=2**34, max_alloc_bytes=2**33,
        max_work_group_size=8192, max_work_item_sizes=(8192, 8192, 8192), fp64=True,
        opencl_c_version="OpenCL C 3.0", native_vector_width_float=width,
        cpu_vendor=vendor, cpu_family=family, cpu_cache_kib=cache)


def params(wg_x: int) -> dict:
    return {"WG_X": wg_x, "WG_Y": 1, "RPI": 1, "USE_LOCAL": 0}


def device_file(info: DeviceInfo, wg_x: int, header: dict | None = None) -> dict:
    """A shipped device file as export writes it, with an entry of the old format (no
    stored class: the class comes from the header)."""
    e = {"kernel": K.name, "version": K.version, "level": "device", "key": info.device_key,
         "spec_bucket": SB, "size_bucket": ZB, "params": params(wg_x)}
    return {"format": db.FORMAT, "device": header if header is not None else info.as_dict(),
            "entries": {db.entry_key(K.name, SB, ZB): e}}


def fallback_file(runtime: str) -> dict:
    ents = [{"kernel": K.name, "version": K.version, "level": "vendor_type",
             "key": f"{runtime}|cpu", "spec_bucket": SB, "size_bucket": ZB, "params": params(128)},
            {"kernel": K.name, "version": K.version, "level": "global", "key": "*",
             "device_type": "cpu", "spec_bucket": SB, "size_bucket": ZB, "params": params(256)}]
    return {"format": db.FORMAT, "entries": ents}


EPYC2 = fake("AMD EPYC", cores=2, vendor="amd", family="zen4")
EPYC16 = fake("AMD EPYC 9654", cores=16, vendor="amd", family="zen4")
XEON = fake("Intel(R) Xeon(R) Processor", cores=2, vendor="intel", family="x86-f6-m143")


@pytest.fixture
def shipped(tmp_path, monkeypatch):
    """Write shipped files into a scratch folder and read only those."""
    folder = tmp_path / "shipped"
    folder.mkdir()

    def write(files: dict[str, dict]) -> None:
        for name, data in files.items():
            (folder / name).write_text(json.dumps(data))

    monkeypatch.setattr(db, "_SHIPPED_DIRS", [folder])
    monkeypatch.setattr(db, "_shipped", None)
    monkeypatch.setattr(db, "_lookup_cache", {})
    monkeypatch.setattr(db, "_warned", set())
    return write


def _lookup(info, tmp_path):
    return lookup(K, info, SB, ZB, tmp_path / "user")


def _standard(write):
    write({"d-epyc2.json": device_file(EPYC2, 8), "d-epyc16.json": device_file(EPYC16, 16),
           "d-xeon.json": device_file(XEON, 32), "defaults.json": fallback_file("intel")})


@pytest.mark.parametrize("cores,expect", [(2, 8), (4, 8), (12, 16), (64, 16)])
def test_unseen_cpu_gets_nearest_class_entry(shipped, tmp_path, cores, expect):
    """An unseen Zen 5 (another name, another family) takes the EPYC entry of the
    closest core count: |log2(4/2)| = 1 < |log2(4/16)| = 2; |log2(12/16)| < |log2(12/2)|."""
    _standard(shipped)
    zen5 = fake("AMD Ryzen 9 9950X", cores=cores, vendor="amd", family="zen5")
    c = _lookup(zen5, tmp_path)
    assert c.source == "shipped:cpu_class"
    assert c.params == params(expect)


def test_same_family_beats_closer_cores(shipped, tmp_path):
    """Family ranks before core count: a zen5 4-core takes the zen5 16-core entry
    (|log2(4/16)| = 2) over the zen4 2-core one (|log2(4/2)| = 1)."""
    zen5_16 = fake("AMD EPYC 9B45", cores=16, vendor="amd", family="zen5")
    shipped({"d-epyc2.json": device_file(EPYC2, 8), "d-zen5.json": device_file(zen5_16, 64)})
    c = _lookup(fake("AMD Ryzen 5 9600", cores=4, vendor="amd", family="zen5"), tmp_path)
    assert (c.source, c.params) == ("shipped:cpu_class", params(64))


def test_cache_size_breaks_core_count_ties(shipped, tmp_path):
    """Two measured zen5 8-core CPUs differ by cache: the unseen one takes the entry of the
    closer size (1 MiB vs 512 KiB and 4 MiB); an unknown size ranks after a known one."""
    small = fake("AMD EPYC 9115", cores=8, vendor="amd", family="zen5", cache=512)
    large = fake("AMD EPYC 9575F", cores=8, vendor="amd", family="zen5", cache=4096)
    shipped({"d-small.json": device_file(small, 8), "d-large.json": device_file(large, 64)})
    c = _lookup(fake("AMD Ryzen 7 9700X", cores=8, vendor="amd", family="zen5", cache=1024),
                tmp_path)
    assert (c.source, c.params) == ("shipped:cpu_class", params(8))
    db._lookup_cache.clear()
    c = _lookup(fake("AMD Ryzen 9 9950X3D", cores=8, vendor="amd", family="zen5", cache=3072),
                tmp_path)
    assert c.params == params(64)
    a, b = (CpuClass("intel", "amd", "zen5", 512, 8, k) for k in (1024, 0))
    assert a.distance(a) < a.distance(b) and a.distance(b)[:3] == a.distance(a)[:3]
    assert a.key.endswith("|k1024") and b.key == "intel|amd|zen5|v512|c8"


def test_exact_device_still_wins(shipped, tmp_path):
    _standard(shipped)
    c = _lookup(fake("AMD EPYC 9654", cores=2, vendor="amd", family="zen4"), tmp_path)
    assert (c.source, c.params) == ("shipped:device", params(16))
    db._lookup_cache.clear()  # an unknown family: the name decides
    c = _lookup(fake("AMD EPYC 9654", cores=2, vendor="amd"), tmp_path)
    assert (c.source, c.params) == ("shipped:device", params(16))


def test_same_name_other_family_is_not_this_device(shipped, tmp_path):
    """A VM names a Zen 4 and a Zen 5 alike ("AMD EPYC"): the other family's entries under
    this device key are borrowed as a class (nearest first), never taken as this
    device's own; an entry of this family under the same key wins over them."""
    zen5 = fake("AMD EPYC", cores=2, vendor="amd", family="zen5")
    shipped({"d-epyc.json": device_file(EPYC2, 8), "defaults.json": fallback_file("intel")})
    c = _lookup(zen5, tmp_path)
    assert (c.source, c.params) == ("shipped:cpu_class", params(8))
    assert not db.same_cpu({**device_file(EPYC2, 8)["entries"].popitem()[1],
                            "cpu_class": EPYC2.cpu_class.as_dict()}, zen5)
    # both families' entries in one device file: each CPU takes its own
    own = device_file(zen5, 64)
    e4 = {**device_file(EPYC2, 8)["entries"].popitem()[1], "cpu_class": EPYC2.cpu_class.as_dict()}
    e5 = {**own["entries"].popitem()[1], "cpu_class": zen5.cpu_class.as_dict()}
    shipped({"d-epyc.json": {"format": db.FORMAT, "device": zen5.as_dict(), "entries": [e5, e4]}})
    db._shipped = None
    db._lookup_cache.clear()
    assert (_lookup(zen5, tmp_path).source, _lookup(zen5, tmp_path).params) == (
        "shipped:device", params(64))
    db._lookup_cache.clear()
    assert (_lookup(EPYC2, tmp_path).source, _lookup(EPYC2, tmp_path).params) == (
        "shipped:device", params(8))


@pytest.mark.parametrize("info,source,wg", [
    # another vendor: no AMD CPU borrows an Intel CPU's entry, nor the reverse
    (fake("Intel(R) Core(TM) i9-14900K", cores=2, vendor="intel", width=8), "shipped:vendor_type", 128),
    # another known SIMD width (AVX2, native float width 8) than every measured AMD (AVX-512)
    (fake("AMD Ryzen 7 5800X", cores=2, vendor="amd", family="zen3", width=8), "shipped:vendor_type", 128),
    # another runtime: PoCL borrows nothing from Intel's runtime; no pocl vendor_type here
    (fake("AMD Ryzen 9 9950X", runtime="pocl", cores=2, vendor="amd"), "shipped:global", 256),
])
def test_other_vendor_width_or_runtime_falls_through(shipped, tmp_path, info, source, wg):
    shipped({"d-epyc2.json": device_file(EPYC2, 8), "d-epyc16.json": device_file(EPYC16, 16),
             "defaults.json": fallback_file("intel")})
    c = _lookup(info, tmp_path)
    assert (c.source, c.params) == (source, params(wg))


def test_old_header_without_width_is_a_weaker_match(shipped, tmp_path):
    """Headers written before the class facts existed (the shipped files of 2026-11) read
    as unknown width and family: usable, but a known equal width wins."""
    old = {k: v for k, v in EPYC2.as_dict().items()
           if k not in ("native_vector_width_float", "cpu_vendor", "cpu_family", "cpu_simd_bits")}
    old_dev = fake("AMD EPYC", runtime="intel", cores=2)
    shipped({"d-old.json": device_file(old_dev, 8, header=old)})
    zen5 = fake("AMD Ryzen 9 9950X", cores=2, vendor="amd", family="zen5")
    assert _lookup(zen5, tmp_path).params == params(8)
    db._lookup_cache.clear()
    db._shipped = None
    shipped({"d-new.json": device_file(EPYC16, 16)})
    assert _lookup(zen5, tmp_path).params == params(16)


@pytest.mark.parametrize("bad", [{"runtime": 3, "vendor": "amd"}, "intel|amd", {"runtime": "intel",
                                  "vendor": "amd", "cores": -2}])
def test_malformed_class_is_skipped_with_warning(shipped, tmp_path, bad):
    """A bad stored class skips that entry (one warning) and the lookup goes on to the next
    CPU of the class, never fails."""
    broken = device_file(fake("AMD EPYC 7763", cores=2, vendor="amd"), 4)
    for e in broken["entries"].values():
        e["cpu_class"] = bad
    shipped({"d-broken.json": broken, "d-epyc16.json": device_file(EPYC16, 16)})
    zen5 = fake("AMD Ryzen 9 9950X", cores=2, vendor="amd", family="zen5")
    with pytest.warns(RuntimeWarning, match="CPU class"):
        c = _lookup(zen5, tmp_path)
    assert (c.source, c.params) == ("shipped:cpu_class", params(16))


def test_malformed_header_is_skipped_with_warning(shipped, tmp_path):
    header = {**EPYC2.as_dict(), "compute_units": "two"}
    shipped({"d-bad.json": device_file(EPYC2, 8, header=header), "defaults.json": fallback_file("intel")})
    with pytest.warns(RuntimeWarning, match="compute_units"):
        c = _lookup(fake("AMD Ryzen 9 9950X", vendor="amd"), tmp_path)
    assert c.source == "shipped:vendor_type"


def test_gpu_has_no_class_step(shipped, tmp_path):
    _standard(shipped)
    gpu = fake("AMD Radeon", runtime="intel", device_type="gpu", vendor="amd")
    assert gpu.cpu_class is None
    assert _lookup(gpu, tmp_path).source == "heuristic"


def test_writer_and_reader_agree():
    """make_entry stores the class the reader computes from the device facts."""
    zen5 = fake("AMD Ryzen 9 9950X", cores=8, vendor="amd", family="zen5")
    e = db.make_entry(K, zen5, SB, ZB, params(8), 1.0, params(8), 1.0)
    assert CpuClass.from_dict(e["cpu_class"]) == cpu_class(zen5.as_dict()) == zen5.cpu_class
    assert e["cpu_class_key"] == "intel|amd|zen5|v512|c8"
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert db.entry_cpu_class(e, "test") == zen5.cpu_class


def test_vendor_from_name_when_os_is_silent():
    c = cpu_class({**fake("pthread-AMD EPYC").as_dict(), "cpu_vendor": ""})
    assert (c.vendor, c.simd_bits, c.family) == ("amd", 512, "")
    assert cpu_class({**XEON.as_dict(), "native_vector_width_float": 0,
                      "cpu_simd_bits": 256}).simd_bits == 256


ZEN5 = """processor\t: 0
vendor_id\t: AuthenticAMD
cpu family\t: 26
model\t\t: 2
cache size\t: 1024 KB
flags\t\t: fpu sse2 avx avx2 avx512f avx512vl

processor\t: 1
vendor_id\t: GenuineIntel
"""
SKYLAKE = ("vendor_id : GenuineIntel\ncpu family : 6\nmodel : 85\ncache size : 36 MB\n"
           "flags : sse2 avx avx2\n")
NEOVERSE = "processor : 0\nFeatures : fp asimd\nCPU implementer : 0x41\nCPU part : 0xd0c\n"


@pytest.mark.parametrize("text,expect", [
    (ZEN5, {"cpu_vendor": "amd", "cpu_family": "zen5", "cpu_simd_bits": 512,
            "cpu_cache_kib": 1024}),
    (SKYLAKE, {"cpu_vendor": "intel", "cpu_family": "x86-f6-m85", "cpu_simd_bits": 256,
               "cpu_cache_kib": 36 * 1024}),
    (NEOVERSE, {"cpu_vendor": "arm", "cpu_family": "arm-0x41-0xd0c", "cpu_simd_bits": 128,
                "cpu_cache_kib": 0}),
    ("", {"cpu_vendor": "", "cpu_family": "", "cpu_simd_bits": 0, "cpu_cache_kib": 0}),
])
def test_parse_cpuinfo(text, expect):
    """AMD family 0x1A is Zen 5 (AMD's numbering); the first CPU block is the one read."""
    assert parse_cpuinfo(text) == expect


def test_real_shipped_epyc_entries_transfer(monkeypatch, tmp_path):
    """With the shipped files: an unseen 2-core Zen 5 on Intel's runtime gets the 2-core
    EPYC's measured xmap_skill entry instead of the vendor+type default."""
    from pyedmcl.kernels.xmap import XMAP_SKILL
    monkeypatch.setattr(db, "_lookup_cache", {})
    ent = next(e for e in db.shipped_entries() if e.get("kernel") == "xmap_skill"
               and e.get("key") == "intel|amd-epyc")
    zen5 = fake("AMD Ryzen 9 9950X", cores=2, vendor="amd", family="zen5")
    c = lookup(XMAP_SKILL, zen5, ent["spec_bucket"], ent["size_bucket"], tmp_path / "user")
    assert c.source == "shipped:cpu_class"
    # (with the values of parameters added to the space after the entry was measured)
    assert c.entry["key"] == "intel|amd-epyc" and c.params == XMAP_SKILL.space.complete(
        ent["params"])


def _gpu(name: str = "NVIDIA H100 80GB HBM3") -> DeviceInfo:
    return DeviceInfo(
        platform_index=0, device_index=0, platform_name="NVIDIA CUDA", runtime="nvidia",
        vendor="NVIDIA Corporation", name=name, normalised_name=normalise_name(name),
        driver_version="580", device_type="gpu", compute_units=132, clock_mhz=1980,
        local_mem_bytes=49152, global_mem_bytes=2**36, max_alloc_bytes=2**34,
        max_work_group_size=1024, max_work_item_sizes=(1024, 1024, 64), fp64=True,
        opencl_c_version="OpenCL C 1.2", native_vector_width_float=1)


@pytest.mark.parametrize("info", [_gpu(), fake("AMD EPYC", runtime="intel"),
                                  fake("AMD EPYC", runtime="pocl", width=8)],
                         ids=["gpu", "intel-cpu", "pocl-cpu"])
def test_every_heuristic_is_a_point_of_its_space(info):
    """A heuristic outside its own space is silently replaced by the space's first
    candidate (TuningSpace.default): e.g. a GPU heuristic naming VEC=2 in a space without
    2 ran RQA 6x slower. Every family's heuristic must be valid on each device kind."""
    from pyedmcl.kernels import registry

    for name, fam in registry().items():
        p = fam.space.heuristic(info)
        assert fam.space.valid(p, info), (name, info.device_type, info.runtime, p)


@pytest.mark.parametrize("bits, ph, wg, walk", [(1, 32, 16, 0), (1, 32, 8, 1), (1, 0, 32, 1),
                                                (2, 32, 32, 1), (2, 64, 16, 0), (1, 128, 4, 1)])
def test_intel_walk_crash_guard(bits, ph, wg, walk):
    """Intel's CPU compiler crashes the process on the WALK paths with direct private bins
    (PH at least a bit word: 32 rows with BITS=1, 64 with BITS=2) in work-groups of 16 or
    more: those builds take WALK=0 and tuning skips them; other runtimes keep WALK."""
    from pyedmcl.kernels.rqa_lines import RQA_LINES, LineSpec

    spec = LineSpec(5, 3, "euclidean", "float")
    p = {"VEC": 4, "WG": wg, "EDGE": 2048, "BITS": bits, "PH": ph, "SHARE": 0, "SYM": 0,
         "WALK": 1}
    intel, pocl = fake("AMD EPYC", runtime="intel"), fake("AMD EPYC", runtime="pocl", width=8)
    assert spec.template_params("vertical", p, intel)["WALK"] == walk
    assert RQA_LINES.space.valid(p, intel) == bool(walk)
    assert spec.template_params("vertical", p, pocl)["WALK"] == 1


@pytest.mark.parametrize("runtime,width,hint", [("intel", 8, 1), ("intel", 16, 0),
                                                ("pocl", 8, 0)],
                         ids=["intel-avx2", "intel-avx512", "pocl-avx2"])
def test_line_kernels_keep_their_own_vectors_on_avx2(runtime, width, hint):
    """Intel's CPU compiler for AVX2 (AMD Zen 3, runtime 2026.2) crashed vectorizing RQA's
    line kernels across work-items, or emitted code that segfaulted: there they carry
    vec_type_hint of their lane vector (VHINT), elsewhere they render as before."""
    from clkernels.devices import explicit_vectors_only
    from clkernels.templates import render
    from pyedmcl.kernels.rqa_lines import RQA_LINES, LineSpec

    info = replace(fake("AMD EPYC", runtime=runtime, width=width), cpu_simd_bits=width * 32)
    assert explicit_vectors_only(info) == bool(hint)
    spec = LineSpec(E=3, tau=1, metric="euclidean", real="float", exact=True)
    base = {"VEC": 16, "WG": 8, "BITS": 2, "PH": 32, "SHARE": 1, "WALK": 1}
    for vec in (16, 1):
        p = spec.template_params("vertical", {**base, "VEC": vec}, info)
        assert p["VHINT"] == (hint if vec > 1 else 0)
        src = render(RQA_LINES.template, p)
        assert ("vec_type_hint(int16)" in src) == bool(p["VHINT"])
