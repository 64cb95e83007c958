"""The memory view agrees with the R.memory.alloc_storage / alloc_tensor calls printed in the IR."""
import json
import re

import pytest

from irviz.cli.main import main
from irviz.core.passes import parse_pipeline
from irviz.core.backend import memory
from irviz.core.workspace import Workspace


@pytest.fixture(scope="module")
def mlp_steps():
    ws = Workspace()
    ws.open("sample:mlp", planned=parse_pipeline("default_build"))
    ws.run_to_end()
    return ws.session.steps


def _from_text(mod):
    """{storage: bytes}, {tensor: (storage, bytes)} read from the printed main, not from the IR objects."""
    text = mod["main"].script()
    storages = {m[0]: int(m[1]) for m in re.findall(
        r"(\w+): R\.Any = R\.memory\.alloc_storage\(R\.shape\(\[(\d+)\]\)", text)}
    tensors = {}
    for name, storage, dims in re.findall(
            r"(\w+): R\.Tensor\(.*?\) = R\.memory\.alloc_tensor\((\w+), 0, R\.shape\(\[([\d, ]+)\]\)", text):
        n = 4  # the MLP is float32 throughout
        for d in dims.split(","):
            n *= int(d)
        tensors[name] = (storage, n)
    return storages, tensors


def test_tokens_sharing_and_bytes_agree_with_alloc_storage(mlp_steps):
    st = next(s for s in mlp_steps if s.pass_name == "StaticPlanBlockMemory")
    plan, own = memory.memory_of_step(st.mod)
    assert own
    storages, tensors = _from_text(st.mod)
    assert {t.name: t.bytes for t in plan.tokens} == storages
    assert plan.planned_bytes == sum(storages.values())
    assert plan.tensor_bytes == sum(b for _, b in tensors.values())
    assert {t.name: (t.token, t.bytes) for t in plan.tensors if t.token} == tensors
    shared = {t.name: sorted(t.tensors) for t in plan.tokens if len(t.tensors) > 1}
    by_text = {}
    for name, (storage, _) in tensors.items():
        by_text.setdefault(storage, []).append(name)
    assert shared == {k: sorted(v) for k, v in by_text.items() if len(v) > 1} and shared
    # tensors that share a token never live at the same time
    for tok in plan.tokens:
        spans = sorted((t.start, t.end) for t in plan.tensors if t.token == tok.name)
        assert all(a[1] <= b[0] for a, b in zip(spans, spans[1:]))
    # sharing saves memory, and no plan can go below the peak of live bytes
    assert plan.peak_bytes <= plan.planned_bytes < plan.tensor_bytes


def test_a_step_before_planning_is_planned_on_a_copy(mlp_steps):
    plan0, own = memory.memory_of_step(mlp_steps[0].mod)
    planned = next(s for s in mlp_steps if s.pass_name == "StaticPlanBlockMemory")
    assert not own
    assert plan0.summary() == memory.memory_plan(planned.mod).summary()
    assert not memory._has_plan(mlp_steps[0].mod, "main")  # the step itself is untouched


def test_check_json_reports_memory(capsys):
    assert main(["check", "sample:mlp", "--pipeline", "zero", "--json", "-", "--repeats", "1"]) == 0
    mem = json.loads(capsys.readouterr().out)["memory"]
    assert set(mem) == {"tokens", "planned_bytes", "tensor_bytes", "peak_bytes", "activation_dtypes",
                        "weights_bytes", "weights", "weights_dtypes"}
    assert mem["tokens"] >= 1 and 0 < mem["peak_bytes"] <= mem["planned_bytes"] <= mem["tensor_bytes"]
    # the weights bound as constants: 784*128 + 128 + 128*10 + 10 float32 values
    assert mem["weights_dtypes"] == {"float32": mem["weights_bytes"]}
    assert mem["weights_bytes"] == (784 * 128 + 128 + 128 * 10 + 10) * 4
    assert mem["activation_dtypes"] == ["float32"]


def test_a_module_without_main_gets_a_reason_not_a_crash():
    from types import SimpleNamespace

    from tvm import relax

    bb = relax.BlockBuilder()
    x = relax.Var("x", relax.TensorType((2,), "float32"))
    with bb.function("other", [x]):
        bb.emit_func_output(x)
    out = memory.step_memory_summaries([SimpleNamespace(index=0, mod=bb.get())])
    assert out == {0: {"error": "no Relax function main to plan"}}


SYMBOLIC_NO_INPUTS = '''
from tvm.script import ir as I
from tvm.script import relax as R


@I.ir_module
class Batched:
    @R.function
    def main(x: R.Tensor(("n", 16), "float32"), w: R.Tensor((16, 8), "float32")):
        with R.dataflow():
            y = R.nn.relu(R.matmul(x, w))
            R.output(y)
        return y
'''


def test_memory_of_an_ir_file_with_symbolic_sizes_says_why_with_a_hint(tmp_path):
    """An IR file whose main takes (n, 16) and no get_inputs(): its storage is n * ... bytes, not a
    number; course_mymodule's get_inputs() gives n, and its memory is planned at it."""
    import irviz.engine as engine_mod

    e = engine_mod.Engine(type("C", (), {"send": lambda self, m: None})())
    assert e.handle({"id": 1, "cmd": "open", "args": {"spec": "sample:course_mymodule"}})["ok"]
    planned = e.handle({"id": 2, "cmd": "memory", "args": {"step": 0}})
    assert planned["ok"] and planned["result"]["dims_source"], planned
    src = tmp_path / "batched.py"
    src.write_text(SYMBOLIC_NO_INPUTS)
    assert e.handle({"id": 1, "cmd": "open", "args": {"spec": str(src)}})["ok"]
    reply = e.handle({"id": 2, "cmd": "memory", "args": {"step": 0}})
    assert reply["ok"] is False
    err = reply["error"]
    assert err["stage"] == "build"
    assert "symbolic" in err["message"] and "TypeError" not in err["message"]
    assert "int() argument" not in err["message"]
    assert err["hint"] and "fixed shapes" in err["hint"]
    # the session is untouched: the step is still there and other requests still work
    state = e.handle({"id": 3, "cmd": "state", "args": {}})["result"]
    assert state["model"] and state["cursor"] == 0 and state["error"] is None
    # a TE module with fixed shapes plans fine
    assert e.handle({"id": 4, "cmd": "open", "args": {"spec": "sample:course_te"}})["ok"]
    plan = e.handle({"id": 5, "cmd": "memory", "args": {"step": 0}})
    assert plan["ok"] and plan["result"]["step"] == 0
