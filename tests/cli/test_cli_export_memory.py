"""`irviz export` writes what memory planning decided for main at each step: in steps.json
the same numbers as irviz.core.backend.memory, and a row per step in report.html."""
import json

from irviz.cli.main import main
from irviz.core.passes import parse_pipeline
from irviz.core.backend import memory
from irviz.core.workspace import Workspace


def test_export_has_memory_per_step(tmp_path):
    assert main(["export", "sample:mlp", "--pipeline", "default_build", "--out", str(tmp_path)]) == 0
    records = json.loads((tmp_path / "steps.json").read_text())["steps"]
    ws = Workspace()
    ws.open("sample:mlp", planned=parse_pipeline("default_build"))
    ws.run_to_end()
    for rec in records:
        plan, own = memory.memory_of_step(ws.session.steps[rec["index"]].mod)
        assert rec["memory"] == dict(plan.summary(), planned_by_step=own), rec["pass"]
    by_pass = {r["pass"]: r["memory"] for r in records}
    assert not by_pass["import"]["planned_by_step"] and by_pass["StaticPlanBlockMemory"]["planned_by_step"]
    page = (tmp_path / "report.html").read_text()
    table = page.split("<h2>Memory per step</h2>")[1].split("</table>")[0]
    planned = by_pass["StaticPlanBlockMemory"]
    assert table.count("<tr>") == len(records) + 1  # a header and one row per step
    assert f'title="{planned["planned_bytes"]} bytes"' in table
    assert f'title="{planned["peak_bytes"]} bytes"' in table
    assert "planned on a copy" in table
