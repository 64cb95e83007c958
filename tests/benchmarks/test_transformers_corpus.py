"""benchmarks/transformers_corpus.py on two small transformers types: both sides, the tables."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from irviz.core.frontend import hf

REPO = Path(__file__).resolve().parents[2]
SCRIPT = REPO / "benchmarks" / "transformers_corpus.py"


@pytest.mark.skipif(not hf.available(), reason="transformers is not installed")
def test_corpus_subset_prints_the_tables(tmp_path):
    out = tmp_path / "corpus.json"
    proc = subprocess.run([sys.executable, str(SCRIPT), "--types", "bert,siglip", "--json", str(out)],
                          capture_output=True, text=True, cwd=REPO, timeout=600)
    assert proc.returncode == 0, proc.stderr
    rows = {r["type"]: r for r in json.loads(out.read_text())["rows"]}
    assert rows["bert"]["irviz"]["status"] == rows["bert"]["tvm"]["status"] == "PASS"
    # SigLIP's last-token pooling (x[:, -1]): bare TVM reads before the tensor, irviz does not
    assert rows["siglip"]["irviz"]["status"] == "PASS"
    assert rows["siglip"]["tvm"]["status"] == "FAIL" and rows["siglip"]["tvm"]["stage"] == "compare"
    text = proc.stdout
    assert "| 2 architectures | irviz | bare TVM |" in text
    assert "| pass (matches torch) | 2 | 1 |" in text
    assert "| bare passes, irviz fails | 0 | |" in text
    assert "| siglip | pass | fail at compare: max abs error " in text


def test_unknown_type_is_named():
    proc = subprocess.run([sys.executable, str(SCRIPT), "--types", "bert,no_such_model"],
                          capture_output=True, text=True, cwd=REPO, timeout=120)
    assert proc.returncode == 2 and "unknown model types: no_such_model" in proc.stderr


def test_shards_merge_into_one_table(tmp_path):
    one, two = tmp_path / "1.json", tmp_path / "2.json"
    one.write_text(json.dumps({"rows": [
        {"type": "bert", "irviz": {"status": "PASS"}, "tvm": {"status": "PASS"}},
        {"type": "dpt", "skip": "ValueError: no"}]}))
    two.write_text(json.dumps({"rows": [
        {"type": "albert", "irviz": {"status": "FAIL", "stage": "build", "reason": "x"},
         "tvm": {"status": "PASS"}}]}))
    proc = subprocess.run([sys.executable, str(SCRIPT), "--merge", str(one), str(two)],
                          capture_output=True, text=True, cwd=REPO, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert "| 2 architectures | irviz | bare TVM |" in proc.stdout
    assert "| pass (matches torch) | 1 | 2 |" in proc.stdout
    assert "bare TVM passes, irviz fails: albert" in proc.stdout
    assert "  dpt: ValueError: no" in proc.stdout


@pytest.mark.skipif(not hf.available(), reason="transformers is not installed")
@pytest.mark.parametrize("model_type", ["dbrx", "encodec", "deepseek_v2"])
def test_types_that_need_particular_small_values_build(model_type):
    sys.path.insert(0, str(SCRIPT.parent))
    try:
        import transformers_corpus as corpus
    finally:
        sys.path.remove(str(SCRIPT.parent))
    module, inputs = corpus.build_case(model_type)
    out = module(*inputs)
    assert out.ndim >= 3 and out.isfinite().all()
