"""The engine's peer command (torch.compile beside the TVM run of a step), in-process, and the trace
folder's peer files and report.html section written from its result."""
import json

from irviz.core.export.peer_files import write_peer
from irviz.engine import Engine
from irviz.protocol import commands as protocol


def test_peer_command_puts_inductor_beside_the_run_and_export_writes_it(tmp_path):
    eng = Engine(type("C", (), {"send": lambda self, m: None})())
    assert eng.handle({"id": 1, "cmd": "open", "args": {"spec": "sample:small_cnn"}})["ok"]
    assert eng.handle({"id": 2, "cmd": "run_to_end"})["ok"]
    assert eng.handle({"id": 3, "cmd": "build_run", "args": {"repeats": 1}})["ok"]
    bad = eng.handle({"id": 4, "cmd": "peer", "args": {"compiler": "xla"}})
    assert bad["ok"] is False and "inductor" in bad["error"]["message"]
    rep = eng.handle({"id": 5, "cmd": "peer", "args": {"repeats": 5}})
    assert rep["ok"], rep
    json.dumps(rep, allow_nan=False, default=protocol.json_default)
    res = rep["result"]
    assert res["error"] is None and res["tvm_ran"] is True
    assert res["stamp"]["step"] == res["step"] and res["stamp"]["pass"] == "FuseTIR"
    assert all(k["fx_nodes"] for k in res["kernels"])
    rows = {r["fx_node"]: r for r in res["by_fx_node"]}
    assert rows["convolution"]["tvm"]["kernels"] and rows["convolution"]["inductor"]["kernels"]

    (tmp_path / "report.html").write_text("<html><body><h1>trace</h1></body></html>")
    written = write_peer(tmp_path, res)
    write_peer(tmp_path, res)  # again: one section, the kernels' files replaced
    page = (tmp_path / "report.html").read_text()
    assert page.count('<section id="peer">') == 1 and page.endswith("</body></html>")
    for name, f in written["kernels"].items():
        code = (tmp_path / "peer" / "kernels" / f).read_text()
        assert code == next(k["code"] for k in res["kernels"] if k["name"] == name)
        assert f'href="peer/kernels/{f}"' in page
    assert json.loads((tmp_path / "peer" / "peer.json").read_text())["total_ms"] == res["total_ms"]


def test_export_command_writes_the_peer_with_freezing_as_the_cli_does(tmp_path):
    eng = Engine(type("C", (), {"send": lambda self, m: None})())
    assert eng.handle({"id": 1, "cmd": "open", "args": {"spec": "sample:small_cnn"}})["ok"]
    assert eng.handle({"id": 2, "cmd": "run_to_end"})["ok"]
    # not run yet: the export runs the step for TVM's side, as irviz export --peer does
    for bad, says in (({"peer_freezing": True}, "give `peer`"), ({"peer": "xla"}, "inductor")):
        rep = eng.handle({"id": 4, "cmd": "export", "args": {"out_dir": str(tmp_path / "bad"), **bad}})
        assert rep["ok"] is False and says in rep["error"]["message"]
        assert not (tmp_path / "bad").exists()  # refused before anything was written
    out = tmp_path / "trace"
    cursor = eng.handle({"id": 5, "cmd": "state"})["result"]["cursor"]
    rep = eng.handle({"id": 6, "cmd": "export", "args": {"out_dir": str(out), "steps": [cursor], "peer": "inductor",
                                                         "peer_freezing": True}})
    assert rep["ok"], rep
    json.dumps(rep, allow_nan=False, default=protocol.json_default)
    res = rep["result"]
    assert res["peer"]["error"] is None and res["peer"]["freezing"] is True and res["peer"]["step"] == cursor
    assert "peer/peer.json" in res["files"]
    peer = json.loads((out / "peer" / "peer.json").read_text())
    assert peer["freezing"] is True and peer["stamp"]["freezing"] is True and peer["stamp"]["step"] == cursor
    assert peer["options"]["inductor_config"]["freezing"] is True and peer["tvm_ran"] is True
    assert all(k["fx_nodes"] for k in peer["kernels"])
    kernel_files = [f for f in res["files"] if f.startswith("peer/kernels/")]
    assert len(kernel_files) == len(peer["kernels"]) == res["peer"]["kernels"]
    page = (out / "report.html").read_text()
    assert page.count('<section id="peer">') == 1 and "torch.compile (inductor, freezing) beside TVM" in page
    assert all(f'href="{f}"' in page for f in kernel_files)
