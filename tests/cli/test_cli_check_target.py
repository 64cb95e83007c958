"""`irviz check --target T`: built for T, run where T's device is here (a CPU whose features this
machine has), else stopped after the build with exit 3 and "built for T; no such device here, not
run", which is no failure of the model."""
import json

import pytest

from irviz.cli.main import main
from irviz.cli.check import EXIT_NOT_RUN
from irviz.core.target import not_runnable_here, resolve_target


def _cpu_has(flag: str) -> bool:
    with open("/proc/cpuinfo", encoding="utf-8") as f:
        return any(line.startswith("flags") and flag in line.split() for line in f)


def _check(capsys, *argv):
    code = main(["check", "sample:mlp", "--repeats", "2", "--json", "-", *argv])
    out = capsys.readouterr()
    return code, json.loads(out.out), out.err


def test_a_cpu_target_this_machine_has_is_built_for_it_run_and_compared(capsys):
    if not _cpu_has("avx2"):
        pytest.skip("this CPU has no AVX2")
    code, summary, log = _check(capsys, "--target", "x86-avx2")
    assert code == 0 and summary["ok"] and summary["ran"] and summary["not_run_reason"] is None
    assert summary["target"] == "x86-avx2" and summary["target_dict"]["mcpu"] == "haswell"
    assert summary["verdict"] == "pass" and summary["tvm_ms"] > 0
    assert '"mcpu":"haswell"' in log  # the build line names the target it compiled for


def test_a_cross_cpu_target_is_built_not_run_with_its_own_exit_status(capsys):
    code, summary, log = _check(capsys, "--target", "aarch64")
    assert code == EXIT_NOT_RUN == 3
    assert summary["ok"] and not summary["ran"] and summary["failed_stage"] is None
    assert summary["verdict"] == "built, not run" and "aarch64" in summary["not_run_reason"]
    assert summary["target_dict"] == {"kind": "llvm", "mtriple": "aarch64-linux-gnu", "mcpu": "cortex-a72"}
    assert summary["build_seconds"] > 0 and summary["tvm_ms"] is None
    assert "built for aarch64; no such device here, not run" in log


def test_no_estimate_for_a_target_not_here_since_kernels_are_timed_on_this_machine(capsys):
    code, summary, log = _check(capsys, "--target", "aarch64", "--estimate")
    assert code == EXIT_NOT_RUN and summary["estimated_ms"] is None
    assert "no estimate for aarch64" in summary["estimate"]["error"] and "no estimate for aarch64" in log


def test_cuda_without_a_gpu_is_built_not_run(capsys):
    if not_runnable_here(resolve_target("cuda")) is None:
        pytest.skip("a CUDA device is present: tests/core/test_gpu_run.py runs on it")
    assert main(["check", "sample:mlp", "--target", "cuda -arch=sm_86"]) == EXIT_NOT_RUN
    assert capsys.readouterr().out.strip().endswith("built for cuda -arch=sm_86; no such device here, not run")


def test_what_runs_here_is_read_from_the_cpu_features():
    assert not_runnable_here(resolve_target("host")) is None
    assert "x86_64" in not_runnable_here(resolve_target("aarch64"))
    if not _cpu_has("amx_tile"):
        why = not_runnable_here(resolve_target('{"kind": "llvm", "mcpu": "sapphirerapids"}'))
        assert why is not None and "amx-tile" in why


def test_an_extension_linux_leaves_off_is_not_the_hosts_though_llvm_lists_it(monkeypatch):
    # LLVM names the host by its model (emeraldrapids lists amx-tile); Linux lists amx_tile only
    # once it has enabled the tiles, and code using them faults before
    from irviz.core import target as target_mod

    monkeypatch.setattr(target_mod, "_isa_features", lambda tgt: {"avx2", "avx512f", "amx-tile", "amx-int8"})
    monkeypatch.setattr(target_mod, "_cpuinfo_flags", lambda: {"avx2", "avx512f", "amxint8"})
    assert target_mod.host_isa_features() == {"avx2", "avx512f", "amx-int8"}
    monkeypatch.setattr(target_mod, "_cpuinfo_flags", lambda: None)  # no list: LLVM's word stands
    assert "amx-tile" in target_mod.host_isa_features()


def test_export_with_a_target_not_here_builds_without_running(tmp_path, capsys):
    assert main(["export", "sample:mlp", "--target", "aarch64", "--out", str(tmp_path)]) == 0
    assert "built for aarch64; no such device here, not run" in capsys.readouterr().out
    assert (tmp_path / "code" / "aarch64").is_dir()


def test_the_pipeline_text_may_name_the_target_and_a_conflicting_option_is_an_error(capsys):
    code, summary, log = _check(capsys, "--pipeline", "target=aarch64; zero")
    assert code == EXIT_NOT_RUN and summary["target"] == "aarch64" and not summary["ran"]
    code = main(["check", "sample:mlp", "--pipeline", "target=aarch64; zero", "--target", "x86-avx2"])
    err = capsys.readouterr().err
    assert code != 0 and "'x86-avx2'" in err and "target=aarch64" in err
    same = main(["check", "sample:mlp", "--pipeline", "target=aarch64; zero", "--target", "aarch64"])
    assert same == EXIT_NOT_RUN
