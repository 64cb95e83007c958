"""`irviz check` on a model that neither torch.export nor irviz's other fallbacks capture: each
graph torch.compile cuts it into at its graph breaks is imported, built and compared on its own."""
from __future__ import annotations

import json
import textwrap

import pytest

pytest.importorskip("tvm")

from irviz.cli.main import main

SORTED_ROWS = textwrap.dedent('''
    import torch


    class SortedRows(torch.nn.Module):
        """Rows reordered by a Python sort of their sums: no capture traces it whole (draft
        export guesses the comparisons; one order in 8! is eager torch's)."""

        def __init__(self):
            super().__init__()
            torch.manual_seed(0)
            self.a = torch.nn.Linear(4, 4)
            self.b = torch.nn.Linear(4, 4)

        def forward(self, x):
            y = self.a(x)
            sums = y.sum(1).tolist()
            order = sorted(range(len(sums)), key=sums.__getitem__)
            return self.b(y[order]).relu()


    def get_model():
        return SortedRows().eval(), (torch.randn(8, 4),)
''')


def test_check_falls_back_to_graph_breaks(tmp_path, capsys):
    model = tmp_path / "sorted_rows.py"
    model.write_text(SORTED_ROWS)
    out = tmp_path / "check.json"
    code = main(["check", str(model), "--json", str(out), "--repeats", "1"])
    summary = json.loads(out.read_text())
    assert code == 0, summary
    assert summary["ok"] and summary["capture"] == "graph breaks"
    note = summary["capture_notes"][0]
    assert note.startswith("captured with graph breaks as separate subgraphs")
    assert "torch.export (non-strict)" in note and "symbolic_trace" in note  # what failed first
    graphs = summary["graph_breaks"]
    assert len(graphs) == 2  # the linear and sums before the sort, the rest after
    assert all(g["ok"] and g["allclose"] and g["fx_nodes"] for g in graphs)
    assert summary["max_abs_error"] < 1e-5 and summary["verdict"] == f"matches in {len(graphs)} graphs"
    assert "failed" not in capsys.readouterr().err  # a capture the fallback rescued is no failure
    # each graph went through the whole pipeline (zero: 5 passes after the import), not step 0 alone
    assert all(g["steps"] == 6 for g in graphs), [g["steps"] for g in graphs]


def test_a_graph_that_does_not_import_is_named(tmp_path, capsys):
    model = tmp_path / "sorted_erfinv.py"
    model.write_text(SORTED_ROWS.replace("return self.b(y[order]).relu()",
                                         "return torch.special.erfinv(self.b(y[order]).tanh() * 0.5)"))
    out = tmp_path / "check.json"
    code = main(["check", str(model), "--json", str(out), "--repeats", "1"])
    summary = json.loads(out.read_text())
    assert code == 1 and not summary["ok"] and summary["capture"] == "graph breaks"
    first, second = summary["graph_breaks"]
    assert first["ok"] and not second["ok"] and second["failed_stage"] == "import"
    assert summary["failed_stage"] == "import"
    assert summary["error"].startswith("graph 2 of 2 (graph breaks): ") and "erfinv" in summary["error"]
    err = capsys.readouterr().err
    assert "irviz: import failed: graph 2 of 2" in err and "capture failed" not in err


def test_export_writes_one_folder_per_graph(tmp_path, capsys):
    model = tmp_path / "sorted_rows.py"
    model.write_text(SORTED_ROWS)
    out = tmp_path / "out"
    code = main(["export", str(model), "--out", str(out)])
    printed = capsys.readouterr()
    assert code == 0, printed.err
    assert "one folder per graph (2 graphs)" in printed.out
    assert "capture failed" not in printed.err
    listing = json.loads((out / "graphs.json").read_text())
    assert listing["capture"] == "graph breaks" and listing["note"].startswith("captured with graph breaks")
    assert [g["folder"] for g in listing["graphs"]] == ["graph_01", "graph_02"]
    for g in listing["graphs"]:
        assert g["error"] is None and g["allclose"] and g["max_abs_error"] < 1e-5
        steps = json.loads((out / g["folder"] / "steps.json").read_text())
        assert len(steps["steps"]) == g["steps"] > 1
        assert (out / g["folder"] / "step_00_import.py").exists()
        assert (out / g["folder"] / "report.html").exists()


def test_export_of_a_model_nothing_captures_names_every_try(tmp_path, capsys):
    model = tmp_path / "unsplittable.py"
    source = SORTED_ROWS.replace("    def forward(self, x):", "    @torch._dynamo.disable\n    def forward(self, x):")
    assert source != SORTED_ROWS
    model.write_text(source)
    code = main(["export", str(model), "--out", str(tmp_path / "out")])
    err = capsys.readouterr().err
    assert code == 1
    assert err.count("irviz: capture failed") == 1
    assert "5. graph breaks as separate subgraphs: torch.compile made no graph" in err
    assert not (tmp_path / "out" / "graphs.json").exists()
