"""load_model: the model-file contract, FILE:NAME, .pt2, sample:NAME and every bad-input case."""
from __future__ import annotations

import sys

import pytest
import torch

from irviz.core.errors import LoadError
from irviz.core.frontend.model_file import LoadedModel, load_model, parse_spec

GOOD = """
import torch

class Net(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = torch.nn.Linear(3, 2)
        self.drop = torch.nn.Dropout(0.5)

    def forward(self, x):
        return self.drop(self.fc(x))

def get_model():
    torch.manual_seed(0)
    return Net(), (torch.randn(4, 3),)

def other():
    return Net(), [torch.randn(5, 3)]

def get_dynamic_shapes():
    return {"x": {0: torch.export.Dim("batch", min=2, max=16)}}
"""


def load_err(spec) -> LoadError:
    with pytest.raises(LoadError) as info:
        load_model(str(spec))
    e = info.value
    assert e.stage == "load" and e.hint, e.user_message()
    assert "Traceback" not in e.message  # traceback text only in .detail
    return e


def test_good_file(tmp_model_file):
    path = tmp_model_file(GOOD, "my_model.py")
    m = load_model(str(path))
    assert isinstance(m, LoadedModel)
    assert m.name == "my_model" and m.spec == str(path) and m.exported is None
    assert not m.module.training and not m.module.drop.training  # eval mode
    assert len(m.example_inputs) == 1 and m.example_inputs[0].shape == (4, 3)
    assert set(m.dynamic_shapes) == {"x"}
    # eval mode => dropout off => deterministic forward
    a, b = m.module(*m.example_inputs), m.module(*m.example_inputs)
    assert torch.equal(a, b)


def test_file_colon_factory(tmp_model_file):
    path = tmp_model_file(GOOD)
    m = load_model(f"{path}:other")
    assert m.example_inputs[0].shape == (5, 3) and isinstance(m.example_inputs, tuple)
    assert m.name == "model:other"
    assert parse_spec(f"{path}:other") == ("file", str(path), "other")
    assert parse_spec("sample:mlp") == ("sample", "mlp", None)
    assert parse_spec("C:\\x\\m.py") == ("file", "C:\\x\\m.py", None)


def test_reload_after_edit_and_no_module_leak(tmp_model_file):
    path = tmp_model_file(GOOD.replace("Linear(3, 2)", "Linear(3, 2)"))
    before = {k for k in sys.modules if k.startswith("_irviz_model_")}
    m1 = load_model(str(path))
    assert m1.module(*m1.example_inputs).shape == (4, 2)
    path.write_text(path.read_text().replace("Linear(3, 2)", "Linear(3, 7)"))
    m2 = load_model(str(path))
    assert m2.module(*m2.example_inputs).shape == (4, 7)
    load_model(str(path))
    after = {k for k in sys.modules if k.startswith("_irviz_model_")}
    assert len(after - before) <= 1  # at most the latest load of this path stays registered


def test_sibling_helper_import_and_reload(tmp_model_file):
    tmp_model_file("WIDTH = 3\n", "helper_width.py")
    path = tmp_model_file("""
        import torch
        import helper_width
        def get_model():
            return torch.nn.Linear(helper_width.WIDTH, 2), (torch.randn(1, helper_width.WIDTH),)
    """)
    assert load_model(str(path)).example_inputs[0].shape == (1, 3)
    (path.parent / "helper_width.py").write_text("WIDTH = 6\n")
    assert load_model(str(path)).example_inputs[0].shape == (1, 6)


def test_missing_file(tmp_path):
    e = load_err(tmp_path / "nope.py")
    assert "No such file" in e.message and "nope.py" in e.message


def test_sample_name_without_prefix():
    e = load_err("mlp")
    assert "sample:mlp" in e.hint


def test_directory(tmp_path):
    e = load_err(tmp_path)
    assert "directory" in e.message


def test_unknown_extension(tmp_path):
    p = tmp_path / "model.onnx"
    p.write_text("x")
    e = load_err(p)
    assert "'.onnx'" in e.message and ".pt2" in e.hint


def test_syntax_error_names_file_and_line(tmp_model_file):
    p = tmp_model_file("import torch\n\ndef get_model(:\n    pass\n", "broken.py")
    e = load_err(p)
    assert "Syntax error" in e.message and "broken.py:3" in e.message
    assert "def get_model(:" in e.message and e.detail


def test_exception_while_importing(tmp_model_file):
    p = tmp_model_file("import torch\nX = 1\nraise ValueError('bad config')\n", "boom.py")
    e = load_err(p)
    assert "while importing" in e.message and "boom.py" in e.message
    assert "ValueError: bad config" in e.message and "boom.py:3" in e.message
    assert "Traceback" in e.detail


def test_import_error_in_file(tmp_model_file):
    p = tmp_model_file("import torch\nimport no_such_module_xyz\n", "imp.py")
    e = load_err(p)
    assert "ModuleNotFoundError" in e.message and "no_such_module_xyz" in e.message


def test_sys_exit_in_file(tmp_model_file):
    e = load_err(tmp_model_file("import sys\nsys.exit(2)\n"))
    assert "sys.exit(2)" in e.message and "__main__" in e.hint


def test_no_get_model_lists_callables(tmp_model_file):
    p = tmp_model_file("""
        import torch
        class Net(torch.nn.Module):
            pass
        def make_net():
            return Net()
        VALUE = 3
    """)
    e = load_err(p)
    assert "get_model" in e.message and "Net" in e.message and "make_net" in e.message
    assert "VALUE" not in e.message and "torch" not in e.message.split("defines:")[1]
    assert ":NAME" in e.hint


def test_missing_named_factory(tmp_model_file):
    p = tmp_model_file(GOOD)
    e = load_err(f"{p}:nope")
    assert "'nope'" in e.message and "get_model" in e.message and "other" in e.message


def test_factory_not_callable(tmp_model_file):
    e = load_err(f"{tmp_model_file('get_model = 3')}")
    assert "not a function" in e.message


def test_factory_raises(tmp_model_file):
    p = tmp_model_file("""
        import torch
        def get_model():
            raise RuntimeError("weights missing")
    """, "fac.py")
    e = load_err(p)
    assert "get_model()" in e.message and "RuntimeError: weights missing" in e.message
    assert "fac.py:3" in e.message


@pytest.mark.parametrize("ret, expect", [
    ("torch.nn.Linear(2, 2)", "returned a torch.nn.modules.linear.Linear"),
    ("None", "returned None"),
    ("(torch.nn.Linear(2, 2), torch.randn(1, 2), 3)", "a tuple of 3 item(s)"),
    ("('model', (torch.randn(1, 2),))", "returned a str as the module"),
])
def test_wrong_return_type(tmp_model_file, ret, expect):
    e = load_err(tmp_model_file(f"import torch\ndef get_model():\n    return {ret}\n"))
    assert expect in e.message, e.message
    assert "(module, example_inputs)" in e.user_message()


def test_example_inputs_single_tensor(tmp_model_file):
    e = load_err(tmp_model_file("import torch\ndef get_model():\n    return torch.nn.ReLU(), torch.randn(2)\n"))
    assert "single tensor" in e.message and "(x,)" in e.hint


def test_example_inputs_not_tensors(tmp_model_file):
    e = load_err(tmp_model_file(
        "import torch\ndef get_model():\n    return torch.nn.ReLU(), (torch.randn(2), 'a')\n"))
    assert "example_inputs[1]" in e.message and "str" in e.message
    e = load_err(tmp_model_file("import torch\ndef get_model():\n    return torch.nn.ReLU(), {'x': 1}\n"))
    assert "a dict" in e.message and "example_inputs" in e.message


def test_forward_raises_names_line(tmp_model_file):
    p = tmp_model_file("""
        import torch
        class Net(torch.nn.Module):
            def __init__(self):
                super().__init__()
                self.fc = torch.nn.Linear(4, 2)
            def forward(self, x):
                y = x + 1
                return self.fc(y)
        def get_model():
            return Net(), (torch.randn(1, 3),)
    """, "fwd.py")
    e = load_err(p)
    assert "forward raised RuntimeError" in e.message and "(1, 3) float32" in e.message
    assert "fwd.py:8" in e.message and "self.fc(y)" in e.message


def test_get_dynamic_shapes_raises(tmp_model_file):
    e = load_err(tmp_model_file(GOOD.replace('return {"x"', 'raise KeyError("dim")\n    return {"x"')))
    assert "get_dynamic_shapes()" in e.message and "KeyError" in e.message


def test_get_alt_inputs_is_kept_on_the_loaded_model(tmp_model_file):
    m = load_model(str(tmp_model_file(GOOD + "\ndef get_alt_inputs():\n    return torch.randn(6, 3)\n")))
    assert len(m.alt_inputs) == 1 and m.alt_inputs[0].shape == (6, 3)  # a lone tensor becomes a tuple
    assert load_model(str(tmp_model_file(GOOD))).alt_inputs is None


def test_get_alt_inputs_raises(tmp_model_file):
    e = load_err(tmp_model_file(GOOD + "\ndef get_alt_inputs():\n    raise ValueError('sizes')\n", "alt.py"))
    assert "get_alt_inputs() in" in e.message and "ValueError: sizes" in e.message
    assert "alt.py:" in e.message


def test_pt2_round_trip(tmp_path, tmp_model_file):
    m = load_model(str(tmp_model_file(GOOD)))
    ep = torch.export.export(m.module, m.example_inputs)
    path = tmp_path / "net.pt2"
    torch.export.save(ep, str(path))
    loaded = load_model(str(path))
    assert loaded.exported is not None and loaded.name == "net"
    assert len(loaded.example_inputs) == 1 and loaded.example_inputs[0].shape == (4, 3)
    assert not loaded.module.training
    assert torch.allclose(loaded.module(*loaded.example_inputs), m.module(*m.example_inputs))


def test_corrupt_pt2(tmp_path, capfd):
    p = tmp_path / "bad.pt2"
    p.write_bytes(b"not a zip at all")
    e = load_err(p)
    assert "not a readable torch.export archive" in e.message and "torch.export.save" in e.hint
    q = tmp_path / "ckpt.pt2"  # a zip, but a torch.save checkpoint, not an exported program
    torch.save({"w": torch.zeros(2)}, str(q))
    e = load_err(q)
    assert "not a readable torch.export archive" in e.message and "torch.save" in e.hint
    assert "Traceback" not in capfd.readouterr().err  # torch's logged traceback is kept in .detail


def test_pt2_with_factory_rejected(tmp_path):
    p = tmp_path / "x.pt2"
    p.write_bytes(b"")
    e = load_err(f"{p}:get_model")
    assert ".pt2" in e.message


def test_unknown_sample_lists_known():
    e = load_err("sample:nope")
    assert "'nope'" in e.message
    for name in ("mlp", "matmul_relu", "mul_add", "small_cnn", "resnet18", "gpt"):
        assert name in e.hint


def test_sample_spec():
    m = load_model("sample:mul_add")
    assert m.name == "mul_add" and m.spec == "sample:mul_add"
    assert [t.shape for t in m.example_inputs] == [(3, 4), (3, 4)]


def test_a_model_whose_layers_live_in_a_sibling_file_is_captured_whole(tmp_model_file):
    """torch.export looks a class up by its module's name: the sibling module stays registered
    after the load (and is dropped when the directory's files are loaded again)."""
    from irviz.core.frontend.capture import capture

    tmp_model_file("""
        import torch

        class Block(torch.nn.Module):
            def __init__(self):
                super().__init__()
                self.fc = torch.nn.Linear(4, 4)

            def forward(self, x):
                return torch.relu(self.fc(x))[:, -1]
    """, "sibling_layers.py")
    path = tmp_model_file("""
        import torch
        import sibling_layers
        def get_model():
            torch.manual_seed(0)
            return sibling_layers.Block().eval(), (torch.randn(2, 3, 4),)
    """)
    m = load_model(str(path))
    assert "sibling_layers" in sys.modules
    captured = capture(m)
    assert captured.fallback == "" and captured.exported is not None, (captured.fallback, captured.notes)
