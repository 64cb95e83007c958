"""A .pt2 is loaded without running code that it carries (torch.export.load alone would)."""
from __future__ import annotations

import io
import subprocess
import zipfile

import pytest
import torch

from irviz.core.errors import LoadError
from irviz.core.frontend.model_file import TRUST_PT2_ENV, load_model


class Small(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = torch.nn.Linear(4, 2)

    def forward(self, x):
        return self.fc(x).relu()


class Planted:
    """What a hostile file could hold: unpickling it runs a command."""

    def __init__(self, marker):
        self.marker = marker

    def __reduce__(self):
        return (subprocess.call, (["touch", self.marker],))


def _save(tmp_path):
    path = tmp_path / "small.pt2"
    torch.export.save(torch.export.export(Small().eval(), (torch.randn(1, 4),)), str(path))
    return path


def _with_planted_inputs(path, marker):
    """The same archive with its example inputs replaced by a pickle that runs a command."""
    buf = io.BytesIO()
    torch.save(((Planted(str(marker)),), {}), buf)
    out = path.with_name("planted.pt2")
    with zipfile.ZipFile(path) as src, zipfile.ZipFile(out, "w") as dst:
        names = [n for n in src.namelist() if n.endswith("sample_inputs/model.pt")]
        assert names, src.namelist()
        for info in src.infolist():
            data = buf.getvalue() if info.filename in names else src.read(info.filename)
            dst.writestr(info, data)
    return out


def test_a_plain_pt2_still_loads(tmp_path):
    loaded = load_model(str(_save(tmp_path)))
    assert loaded.exported is not None and tuple(loaded.example_inputs[0].shape) == (1, 4)


def test_a_pt2_carrying_a_pickle_is_refused_without_running_it(tmp_path, monkeypatch):
    monkeypatch.delenv(TRUST_PT2_ENV, raising=False)
    marker = tmp_path / "ran"
    planted = _with_planted_inputs(_save(tmp_path), marker)
    with pytest.raises(LoadError, match="pickled Python objects") as err:
        load_model(str(planted))
    assert TRUST_PT2_ENV in err.value.hint
    assert not marker.exists()
    assert torch.load.__name__ == "load"  # torch.load is torch's own again


def test_the_planted_pickle_is_real(tmp_path):
    """What irviz refuses, torch's own unpickling runs (so the test above proves something)."""
    marker = tmp_path / "ran"
    buf = io.BytesIO()
    torch.save(((Planted(str(marker)),), {}), buf)
    buf.seek(0)
    torch.load(buf, weights_only=False)
    assert marker.exists()
