"""benchmarks/frontend_corpus.py on three of TVM's frontend test modules: both pass counts."""
from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
SCRIPT = REPO / "benchmarks" / "frontend_corpus.py"
CORPUS = Path("/work/shared/corpus/test_frontend_from_exported_program.py")
TESTS = REPO / "tests" / "data" / "tvm_frontend_corpus.py"


def _corpus() -> Path:
    for p in (TESTS, CORPUS):
        if p.is_file():
            return p
    pytest.skip("TVM's test_frontend_from_exported_program.py is not on this machine")


def test_corpus_subset_prints_both_counts(tmp_path):
    out = tmp_path / "corpus.json"
    proc = subprocess.run(
        [sys.executable, str(SCRIPT), str(_corpus()), "--filter", r"test_tril_triu|test_exponential",
         "--json", str(out), "--log", str(tmp_path / "workers.log")],
        capture_output=True, text=True, cwd=REPO, timeout=300)
    assert proc.returncode == 0, proc.stderr
    m = re.search(r"PASS: irviz (\d+) / (\d+), bare TVM (\d+) / (\d+)", proc.stdout)
    assert m, proc.stdout
    irviz, total, tvm, total2 = map(int, m.groups())
    assert total == total2 == 3
    data = json.loads(out.read_text())
    by_name = {c["name"]: c for c in data["cases"]}
    assert data["summary"]["irviz_pass"] == irviz and data["summary"]["tvm_pass"] == tvm
    tril = [c for n, c in by_name.items() if n.startswith("test_tril_triu")]
    assert len(tril) == 2 and all(c["irviz"]["status"] == "PASS" for c in tril)
    (exp,) = [c for n, c in by_name.items() if n.startswith("test_exponential")]
    for side in ("irviz", "tvm"):  # random: named as such on both sides, never a mismatch
        assert exp[side]["status"] == "NOT COMPARABLE"
        assert exp[side]["reason"].startswith("random op aten.exponential")
    assert irviz >= tvm
    assert "irviz passes every module bare TVM passes." in proc.stdout
