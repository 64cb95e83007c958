"""irviz export --latency: every step built and timed, report.html carries the chart."""
import json

from irviz.cli.main import main


def test_export_latency_writes_the_chart(tmp_path, capsys):
    out = tmp_path / "trace"
    code = main(["export", "sample:mlp", "--pipeline", "zero", "--out", str(out), "--latency",
                 "--repeats", "2"])
    assert code == 0
    printed = capsys.readouterr().out
    assert "FuseTIR" in printed and "tvm" in printed
    html = (out / "report.html").read_text(encoding="utf-8")
    assert "Latency per step" in html and "<svg" in html and 'class="torch"' in html
    assert html.count('class="point"') == 6  # import + 5 zero passes, all built
    steps = json.loads((out / "steps.json").read_text())
    assert [e["pass"] for e in steps["latency"]][-1] == "FuseTIR"
    assert all(e["ok"] and e["tvm_ms"] > 0 for e in steps["latency"])
