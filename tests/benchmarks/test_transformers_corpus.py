"""benchmarks/transformers_corpus.py, a recipe over `irviz corpus`: two small transformers types on both
sides, the tables of a finished run, the small values some types need."""
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
    pytest.importorskip("ray", reason="pip install 'irviz[corpus]'")
    out = tmp_path / "corpus.json"
    proc = subprocess.run([sys.executable, str(SCRIPT), "--types", "bert,siglip", "--json", str(out),
                           "--workers", "2"], capture_output=True, text=True, cwd=REPO, timeout=600)
    assert proc.returncode == 0, proc.stderr
    data = json.loads(out.read_text())
    assert data["types"] == {"bert": None, "siglip": None}  # both build in eager torch
    rows = {(r["model"].rpartition(":")[2], r["pipeline"]): r for r in data["models"]}
    assert rows["bert", "zero"]["result"] == rows["bert", "bare-tvm"]["result"] == "ok"
    # SigLIP's last-token pooling (x[:, -1]): bare TVM reads before the tensor, irviz does not
    assert rows["siglip", "zero"]["result"] == "ok"
    assert rows["siglip", "bare-tvm"]["result"] == "graceful" and rows["siglip", "bare-tvm"]["stage"] == "compare"
    text = proc.stdout
    assert "| 2 architectures | zero | bare-tvm |" in text
    assert "| pass (matches torch) | 2 | 1 |" in text
    assert "bare TVM passes, irviz fails (0): none" in text
    assert "| siglip | pass | graceful at compare: max abs error " in text


def test_unknown_type_is_named():
    proc = subprocess.run([sys.executable, str(SCRIPT), "--types", "bert,no_such_model"],
                          capture_output=True, text=True, cwd=REPO, timeout=120)
    assert proc.returncode == 2 and "unknown model types: no_such_model" in proc.stderr


def _row(model_type, pipeline, result, stage=None, error=None):
    return {"model": f"benchmarks/transformers_corpus.py:{model_type}", "pipeline": pipeline, "target": None,
            "result": result, "stage": stage, "error": error}


def _corpus():
    sys.path.insert(0, str(SCRIPT.parent))
    try:
        import transformers_corpus as corpus
    finally:
        sys.path.remove(str(SCRIPT.parent))
    return corpus


@pytest.mark.skipif(not hf.available(), reason="transformers is not installed")
def test_a_finished_corpus_prints_its_tables_without_running_anything(tmp_path):
    out = tmp_path / "corpus.json"
    out.write_text(json.dumps({"format": "irviz-corpus/1", "recipe": _corpus().recipe_version(),
                               "types": {"bert": None, "albert": None, "dpt": "ValueError: no"},
                               "models": [_row("bert", "zero", "ok"), _row("bert", "bare-tvm", "ok"),
                                          _row("albert", "zero", "crash", "build", "killed by SIGSEGV"),
                                          _row("albert", "bare-tvm", "ok")]}))
    proc = subprocess.run([sys.executable, str(SCRIPT), "--types", "albert,bert,dpt", "--json", str(out)],
                          capture_output=True, text=True, cwd=REPO, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert "0 to run" in proc.stderr and "Ray started" not in proc.stdout
    assert "| 2 architectures | zero | bare-tvm |" in proc.stdout
    assert "| pass (matches torch) | 1 | 2 |" in proc.stdout and "| crash | 1 | 0 |" in proc.stdout
    assert "bare TVM passes, irviz fails (1): albert" in proc.stdout
    assert "| albert | crash at build: killed by SIGSEGV | pass |" in proc.stdout
    assert "  dpt: ValueError: no" in proc.stdout


@pytest.mark.skipif(not hf.available(), reason="transformers is not installed")
def test_a_rerun_tries_again_what_did_not_build_with_another_recipe(tmp_path):
    """A "does not build" reason from an older recipe is stale: --builds-only asks again, and says
    how many build."""
    out = tmp_path / "corpus.json"
    out.write_text(json.dumps({"format": "irviz-corpus/1", "recipe": "an older one",
                               "types": {"dpt": "ValueError: an older recipe's reason"}, "models": []}))
    proc = subprocess.run([sys.executable, str(SCRIPT), "--types", "dpt", "--json", str(out), "--builds-only"],
                          capture_output=True, text=True, cwd=REPO, timeout=300)
    assert proc.returncode == 0, proc.stderr
    data = json.loads(out.read_text())
    assert data["types"] == {"dpt": None} and data["recipe"] == _corpus().recipe_version()
    assert "1 of 1 types build and run in eager torch" in proc.stdout


@pytest.mark.skipif(not hf.available(), reason="transformers is not installed")
@pytest.mark.parametrize("model_type", ["dbrx", "encodec", "deepseek_v2"])
def test_types_that_need_particular_small_values_build(model_type):
    module, inputs = _corpus().build_case(model_type)
    out = module(*inputs)
    assert out.ndim >= 3 and out.isfinite().all()


# what each needed: a special token id inside the shrunk vocabulary (glm's padding index); a
# per-layer map and a layer kind kept (gemma4_text); backbone stages renamed by the layer count
# (dinov2); per-stage head counts (swinv2); Mamba-2's heads x head size = expand x hidden; a rotary
# size within the head (codegen); a head size where the config leaves None (hunyuan_v1_dense);
# video frames (videomae); a time series' past values (patchtst), and a forecaster's horizon, time
# features and observed mask (time_series_transformer); a conformer's (batch, frames, bins) features
# (parakeet_encoder); a detector's queries within its anchors, and a staged backbone's outputs kept
# (rt_detr); a zamba's two layers as released, when one of each kind cannot build (its shared
# attention ties its weights across two layers); an indexed attention with no indexer sizes in the
# default config (qwen4_exp_text)
@pytest.mark.skipif(not hf.available(), reason="transformers is not installed")
@pytest.mark.parametrize("model_type", ["glm", "gemma4_text", "dinov2", "swinv2", "mamba2", "codegen",
                                        "hunyuan_v1_dense", "videomae", "patchtst", "time_series_transformer",
                                        "parakeet_encoder", "rt_detr", "zamba", "qwen4_exp_text"])
def test_types_whose_derived_sizes_the_recipe_keeps_consistent_build(model_type):
    module, inputs = _corpus().build_case(model_type)
    out = module(*inputs)
    assert out.numel() > 0 and out.isfinite().all()


@pytest.mark.skipif(not hf.available(), reason="transformers is not installed")
def test_a_type_whose_name_is_not_a_python_name_is_a_model_file_factory():
    """transformers names 31 types with hyphens or dots (xlm-roberta, kosmos-2.5); FILE.py:NAME takes a
    Python name, so their rows spell it with underscores and the factory maps it back."""
    from irviz.core.frontend.files import parse_spec

    corpus = _corpus()
    spec = corpus.model_spec("xlm-roberta")
    kind, path, factory = parse_spec(spec)
    assert (kind, path, factory) == ("file", "benchmarks/transformers_corpus.py", "xlm_roberta")
    assert corpus.type_of(spec) == "xlm-roberta"
    module, inputs = getattr(corpus, factory)()
    assert module(*inputs).isfinite().all()
    assert len({corpus.factory_name(t) for t in corpus.all_types()}) == len(corpus.all_types())


# a vision tower fed an image as its patches and a grid made from the config: the grid counted in
# patches with the patches flattened through the temporal patch, and a window in pixels that holds
# a merged patch (qwen2_5_vl_vision); the grid counted in merged patches, one channels-last image
# per merged patch (inkling2_vision); (patches, channels, patch, patch) images (kimi_k25_vision)
@pytest.mark.skipif(not hf.available(), reason="transformers is not installed")
@pytest.mark.parametrize("model_type, grid, rows", [("qwen2_5_vl_vision", [1, 4, 4], 16),
                                                    ("inkling2_vision", [1, 2, 2], 4),
                                                    ("kimi_k25_vision", [1, 4, 4], 16)])
def test_a_vision_tower_that_takes_a_grid_gets_one_from_its_config(model_type, grid, rows):
    module, inputs = _corpus().build_case(model_type)
    (patches,) = inputs
    (grid_thw,) = [v for k, v in module.fixed.items() if k.endswith("grid_thw")]
    assert grid_thw.tolist() == [grid] and patches.shape[0] == rows
    out = module(*inputs)
    assert out.numel() > 0 and out.isfinite().all()


# a multimodal RoPE's sections when neither config names them: the model's own default, read from
# its code and scaled to the small head (paddleocr_vl: [16, 24, 24] in its text model)
@pytest.mark.skipif(not hf.available(), reason="transformers is not installed")
def test_a_multimodal_rope_without_sections_gets_the_models_default_scaled():
    module, inputs = _corpus().build_case("paddleocr_vl")
    assert module(*inputs).isfinite().all()
    text = module.model.config.text_config
    assert sum(text.rope_parameters["mrope_section"]) == text.head_dim // 2


# what the configs' validators check: a zero left zero (glm5_next_text's rotary size on its NoPE
# layers); another config's width named in a head (pocket_tts's flow head condition_dim); a rotary
# part large enough for the multimodal sections (hy_v4_vl_text); a projector's feature layers within
# the vision tower's (molmo2); per-stage lists as long as a staged network's "layers" (muse_spark)
@pytest.mark.skipif(not hf.available(), reason="transformers is not installed")
@pytest.mark.parametrize("model_type", ["glm5_next_text", "pocket_tts", "hy_v4_vl_text", "molmo2", "muse_spark"])
def test_types_whose_config_validators_the_recipe_satisfies_build(model_type):
    module, inputs = _corpus().build_case(model_type)
    out = module(*inputs)
    assert out.numel() > 0 and out.isfinite().all()


def test_a_config_validators_reason_says_what_it_checked():
    class StrictDataclassClassValidationError(Exception):
        pass

    e = StrictDataclassClassValidationError("Class validation error for validator 'validate_architecture':\n"
                                            "ValueError: n_input_layers + n_output_layers must equal num_hidden_layers")
    assert _corpus().reason(e).endswith(": ValueError: n_input_layers + n_output_layers must equal num_hidden_layers")


# sizes named per layer or per stage, and inputs in the layout the model reads: per-layer key/value
# heads as a share of the query heads (sapiens2); a mono codec's (batch, 1, samples) audio (omniasr_ctc);
# a spectrogram of (batch, frames, mel bins) (audio-spectrogram-transformer); hook layers within the
# tower's (depth_pro); per-stage widths from the stem up and a neck's channels over them (sam2_vision_model);
# a pooler's output as wide as its tower (vision-text-dual-encoder)
@pytest.mark.skipif(not hf.available(), reason="transformers is not installed")
@pytest.mark.parametrize("model_type", ["sapiens2", "omniasr_ctc", "audio-spectrogram-transformer", "depth_pro",
                                        "sam2_vision_model", "vision-text-dual-encoder"])
def test_types_whose_layouts_the_recipe_reads_from_the_config_build(model_type):
    module, inputs = _corpus().build_case(model_type)
    out = module(*inputs)
    assert out.numel() > 0 and out.isfinite().all()
