"""An IR file with symbolic sizes: `check` plans its memory at the sizes its get_inputs() gives,
as it does at a PyTorch model's example inputs, without --dim."""
import json

from irviz.cli.main import main

SYMBOLIC = '''
import numpy as np
from tvm.script import ir as I
from tvm.script import relax as R
from tvm.script import tirx as T


@I.ir_module
class Batched:
    @R.function
    def main(x: R.Tensor(("n", 16), "float32"), w: R.Tensor((16, 8), "float32")):
        n = T.int64()
        with R.dataflow():
            y = R.matmul(x, w)
            z = R.nn.relu(y)
            R.output(z)
        return z


def get_inputs():
    rng = np.random.default_rng(0)
    return rng.standard_normal((6, 16), dtype="float32"), rng.standard_normal((16, 8), dtype="float32")
'''


def test_memory_of_a_symbolic_ir_file_is_planned_at_its_get_inputs_sizes(tmp_path, capsys):
    src = tmp_path / "batched.py"
    src.write_text(SYMBOLIC)
    out = tmp_path / "check.json"
    code = main(["check", str(src), "--pipeline", "zero", "--repeats", "1", "--json", str(out)])
    capsys.readouterr()
    summary = json.loads(out.read_text())
    assert code == 0, summary["error"]
    memory = summary["memory"]
    assert memory is not None and memory["dims"] == {"n": 6}
    # the figures at other batch sizes, drawn around the one get_inputs() gave
    rows = memory["by_length"]["rows"]
    assert memory["by_length"]["dim"] == "n" and memory["by_length"]["drawn"] == 6
    assert len(rows) > 1 and all(r["value"] > 0 for r in rows)
