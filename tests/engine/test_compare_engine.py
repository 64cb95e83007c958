"""The engine's compare / compare_diff commands, in-process (no subprocess)."""
import json

from irviz.protocol import commands as protocol
from irviz.engine import Engine

NO_FOLD = "LegalizeOps,AnnotateTIROpPattern,FuseOps,FuseTIR"


def test_compare_then_pair_and_pass_diffs():
    sent = []
    eng = Engine(type("C", (), {"send": lambda self, m: sent.append(m)})())
    assert eng.handle({"id": 1, "cmd": "compare_diff", "args": {"a": 0, "b": 0}})["ok"] is False
    assert eng.handle({"id": 1, "cmd": "compare_graphs", "args": {"a": 0, "b": 0}})["ok"] is False
    assert eng.handle({"id": 2, "cmd": "open", "args": {"spec": "sample:mlp"}})["ok"]
    assert eng.handle({"id": 3, "cmd": "run_to_end"})["ok"]
    # A defaults to the open session's pipeline (zero)
    rep = eng.handle({"id": 4, "cmd": "compare", "args": {"pipeline_b": NO_FOLD, "measure": False}})
    assert rep["ok"], rep
    json.dumps(rep, allow_nan=False, default=protocol.json_default)
    res = rep["result"]
    assert res["aligned"][3] == [3, None] and res["pipelines"][1]["pipeline"] == NO_FOLD
    assert res["pipelines"][0]["steps"][-1] == "FuseTIR"
    pair = eng.handle({"id": 5, "cmd": "compare_diff", "args": {"a": 5, "b": 4}})["result"]
    assert pair["graph"]["functions"]["only_b"] == ["transpose", "transpose1"] and pair["functions"]
    graphs = eng.handle({"id": 9, "cmd": "compare_graphs", "args": {"a": 5, "b": 4}})["result"]
    json.dumps(graphs, allow_nan=False, default=protocol.json_default)
    assert graphs["only_b"] == pair["graph"]["nodes"]["main"]["only_b"] and graphs["graph_b"]["nodes"]
    same = eng.handle({"id": 6, "cmd": "compare_diff", "args": {"a": 1, "b": 1, "mode": "pass"}})["result"]
    assert same["same_effect"] is True
    bad = eng.handle({"id": 7, "cmd": "compare_diff", "args": {"a": 1, "b": 1, "mode": "both"}})
    assert bad["ok"] is False and "mode" in bad["error"]["message"]
    bad = eng.handle({"id": 8, "cmd": "compare", "args": {"pipeline_b": "FuseOps("}})
    assert bad["ok"] is False and "column" in bad["error"]["message"]
