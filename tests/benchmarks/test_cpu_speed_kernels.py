"""benchmarks/cpu_speed.py --kernels: each kernel's roof, and a kernel timed above its roof shown as
not real instead of as a share of the peak over 100%."""
from __future__ import annotations

import importlib.util
from pathlib import Path
from types import SimpleNamespace

SCRIPT = Path(__file__).resolve().parents[2] / "benchmarks" / "cpu_speed.py"


def _script():
    spec = importlib.util.spec_from_file_location("cpu_speed_under_test", SCRIPT)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _entry(name, **kw):
    e = {"name": name, "pct_of_roof": None, "bound": None, "level": None, "above_roof": False,
         "above_roof_reason": None}
    e.update(kw)
    return e


def test_kernel_rows_name_the_roof_and_mark_one_above_it(capsys):
    cpu_speed = _script()
    kernels = [SimpleNamespace(name="fast_one", ms=3.0, calls=3),
               SimpleNamespace(name="depthwise", ms=2.0, calls=2),
               SimpleNamespace(name="matmul", ms=1.0, calls=1)]
    # 100 GFLOP/s peak: fast_one does 150 GFLOP/s, depthwise 20, matmul 80
    work = {"fast_one": (0.45e9, 1), "depthwise": (0.04e9, 1), "matmul": (0.08e9, 1)}
    roof = {"kernels": [
        _entry("fast_one", pct_of_roof=150.0, bound="compute", level="L2", above_roof=True,
               above_roof_reason="timed faster than the FMA peak measured here (100 GFLOP/s)"),
        _entry("depthwise", pct_of_roof=61.0, bound="memory", level="L2"),
        _entry("matmul", pct_of_roof=80.0, bound="compute", level="L2")]}
    cpu_speed._print_kernels(kernels, work, roof, 100.0, 3)
    out = capsys.readouterr().out.splitlines()
    fast = next(line for line in out if line.endswith("fast_one"))
    assert "ABOVE ROOF" in fast and "150.0%" not in fast and "%" not in fast.split("GFLOP/s")[1]
    assert any("not real: timed faster than the FMA peak" in line for line in out)
    dw = next(line for line in out if line.endswith("depthwise"))
    assert "20.0%" in dw and "L2 mem" in dw and "61%" in dw
    mm = next(line for line in out if line.endswith("matmul"))
    assert "80.0%" in mm and "compute" in mm


def test_a_kernel_over_the_peak_is_marked_without_a_roofline(capsys):
    cpu_speed = _script()
    kernels = [SimpleNamespace(name="k", ms=1.0, calls=1)]
    cpu_speed._print_kernels(kernels, {"k": (0.2e9, 1)}, None, 100.0, 1)
    out = capsys.readouterr().out
    assert "ABOVE ROOF" in out and "200.0%" not in out and "not real" in out
