"""Every model type the installed transformers ships, at a small size: irviz and bare TVM side by side.

    python benchmarks/transformers_corpus.py [--types bert,siglip,...] [--limit N] [--shard I/N]
        [--side both|irviz|tvm] [--timeout 300] [--json OUT [--resume]] [--keep DIR]
    python benchmarks/transformers_corpus.py --merge OUT1 OUT2 ...   # the tables of shards' rows

Each model type of ``transformers``' ``MODEL_MAPPING_NAMES`` is built from its own config class
with the sizes shrunk (hidden size 32, 2 layers, 4 heads, vocabulary 256, images 32x32; nested
text/vision/audio configs likewise), random weights from a fixed seed, no download, and run in
eager torch on small example inputs (token ids, pixels, audio samples, whatever its forward()
names first; the main input alone, else every input it names).  A type that does not build or
run in eager torch is skipped with the reason.  The others go, each in its own process with a
timeout, through

* **irviz**: ``irviz check`` on a model file that builds the same model (its verdict and stage);
* **bare TVM**: ``torch.export`` (non-strict) + ``from_exported_program`` + ``tvm.compile(mod,
  "llvm")`` + the VM, compared with eager torch with irviz's tolerances.

The tables: pass / graceful failure (a stage and a message) / crash (the process died or hung) per
side, the types bare TVM passes and irviz fails, and where irviz stops (stage and first line of
its message) per type.
"""
from __future__ import annotations

import argparse
import inspect
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
SEQ, IMAGE, AUDIO = 16, 32, 1600
INPUTS = ("input_ids", "pixel_values", "input_values", "input_features")

# config attribute -> small value (set only where the config has the attribute)
SMALL = {
    "hidden_size": 32, "d_model": 32, "n_embd": 32, "dim": 32, "embed_dim": 32, "embedding_size": 32,
    "num_hidden_layers": 2, "n_layer": 2, "n_layers": 2, "num_layers": 2, "encoder_layers": 2,
    "decoder_layers": 2, "num_decoder_layers": 2,
    "num_attention_heads": 4, "n_head": 4, "n_heads": 4, "encoder_attention_heads": 4,
    "decoder_attention_heads": 4, "num_heads": 4, "num_key_value_heads": 2,
    "intermediate_size": 64, "ffn_dim": 64, "encoder_ffn_dim": 64, "decoder_ffn_dim": 64, "d_ff": 64,
    "n_inner": 64, "hidden_dim": 64, "moe_intermediate_size": 32, "shared_expert_intermediate_size": 32,
    "head_dim": 8, "d_kv": 8, "kv_lora_rank": 16, "q_lora_rank": 16, "qk_rope_head_dim": 4,
    "qk_nope_head_dim": 4, "v_head_dim": 8,
    "vocab_size": 256, "image_size": IMAGE, "patch_size": 8, "projection_size": 32, "projection_dim": 32,
    "attention_window": 8, "max_position_embeddings": 64,
    "num_experts": 4, "num_local_experts": 4, "n_routed_experts": 4, "num_experts_per_tok": 2,
}


# ============================================================================================
# building one model type (in a worker process)


def _shrink_dict(d: dict, depth=0) -> dict:
    out = {}
    for key, value in d.items():
        if isinstance(value, dict) and depth < 3:
            value = _shrink_dict(value, depth + 1)
        elif key in SMALL and isinstance(value, int) and not isinstance(value, bool):
            value = SMALL[key]
        out[key] = value
    return _per_layer(out)


PER_LAYER = ("layer_types", "no_rope_layers", "attn_layers", "mlp_layer_types", "layers_block_type")


def _per_layer(d: dict) -> dict:
    """Per-layer lists cut to the shrunk layer count; Reformer's axial positions fitted to the
    hidden size and the sequence (their sizes must sum / multiply to them)."""
    layers = d.get("num_hidden_layers")
    if isinstance(layers, int):
        for key in PER_LAYER:
            if isinstance(d.get(key), list) and len(d[key]) > layers:
                d[key] = d[key][:layers]
        if isinstance(d.get("moe_layers"), list):
            d["moe_layers"] = [i for i in d["moe_layers"] if isinstance(i, int) and i < layers]
    if "axial_pos_embds_dim" in d and isinstance(d.get("hidden_size"), int):
        half = d["hidden_size"] // 2
        d["axial_pos_embds_dim"] = [half, d["hidden_size"] - half]
        d["axial_pos_shape"] = [4, SEQ // 4]
        for key in ("local_attn_chunk_length", "lsh_attn_chunk_length"):
            if key in d:
                d[key] = 8
    return d


def _shrink(cfg):
    """The config rebuilt from its dict with the sizes shrunk (so derived sizes follow)."""
    d = _shrink_dict(cfg.to_dict())
    if "use_cache" in d:
        d["use_cache"] = False
    full = cfg.to_dict()
    # multi-head latent attention (DeepSeek-V2/V3) expands its one latent to every query head, so
    # the key/value heads are the query heads; fewer would be repeated past them
    if "kv_lora_rank" in d and "num_key_value_heads" in d:
        d["num_key_value_heads"] = d["num_attention_heads"]
        if "qk_rope_head_dim" in d and "head_dim" in d:  # what their configs derive, kept as given
            d["head_dim"] = d["qk_rope_head_dim"]
        if "qk_head_dim" in d and "qk_nope_head_dim" in d:
            d["qk_head_dim"] = d["qk_nope_head_dim"] + d["qk_rope_head_dim"]
    # a codebook as wide as the hidden states (Encodec's quantizer multiplies one by the other)
    if "codebook_dim" in d and full.get("codebook_dim") == full.get("hidden_size"):
        d["codebook_dim"] = d["hidden_size"]
    if "n_routed_experts" in d and d.get("num_experts_per_tok") is None:  # DeepSeek-V2's default
        d["num_experts_per_tok"] = SMALL["num_experts_per_tok"]
    cfg = type(cfg).from_dict(d)
    attn = getattr(cfg, "attn_config", None)
    if attn is not None and hasattr(attn, "clip_qkv") and not hasattr(attn, "rope_theta"):
        # DBRX's attention reads rope_theta from its attention config, which no longer has it
        # (this transformers keeps it in the model config's rope_parameters), and clamps to
        # [-clip_qkv, clip_qkv] with no check for the default None: DBRX's released value, 8
        attn.rope_theta = (getattr(cfg, "rope_parameters", None) or {}).get("rope_theta", 10000.0)
        attn.clip_qkv = attn.clip_qkv or 8.0
    return cfg


def _input(name: str, cfg, model):
    import torch

    g = torch.Generator().manual_seed(0)
    if name in ("input_ids", "decoder_input_ids"):
        vocab = getattr(cfg, "vocab_size", None) or getattr(getattr(cfg, "text_config", None), "vocab_size", 256)
        return torch.randint(3, min(int(vocab), 256), (1, SEQ), generator=g)
    if name == "pixel_values":
        vc = getattr(cfg, "vision_config", None) or cfg
        ch = getattr(vc, "num_channels", 3)
        size = getattr(vc, "image_size", IMAGE)
        size = size[0] if isinstance(size, (list, tuple)) else size
        return torch.randn(1, ch, int(size), int(size), generator=g)
    if name == "input_values":  # a codec (Encodec) takes (batch, channels, samples)
        channels = getattr(cfg, "audio_channels", None)
        return torch.randn(1, *([int(channels)] if channels else []), AUDIO, generator=g)
    if name == "input_features":
        bins = getattr(cfg, "num_mel_bins", None) or getattr(cfg, "feature_size", 80)
        return torch.randn(1, int(bins), 3000 if "whisper" in type(cfg).__name__.lower() else 64, generator=g)
    raise ValueError(name)


def build_case(model_type: str):
    """(module, example_inputs) for `model_type`: the model at a small size, wrapped so forward
    takes tensors positionally and returns its first output tensor; raises with the reason."""
    import torch
    import transformers
    from transformers.models.auto.configuration_auto import CONFIG_MAPPING
    from transformers.models.auto.modeling_auto import MODEL_MAPPING_NAMES

    name = MODEL_MAPPING_NAMES[model_type]
    name = name[0] if isinstance(name, (list, tuple)) else name  # funnel: (FunnelModel, FunnelBaseModel)
    cls = getattr(transformers, name, None)
    if cls is None:
        raise RuntimeError(f"transformers has no class {name}")
    cfg = _shrink(CONFIG_MAPPING[model_type]())
    cfg._attn_implementation = "eager"
    torch.manual_seed(0)
    model = cls(cfg).eval()
    params = inspect.signature(model.forward).parameters
    main = getattr(model, "main_input_name", "input_ids")
    tries = [[main]] if main in INPUTS else []
    tries.append([n for n in INPUTS if n in params])
    if "decoder_input_ids" in params and "input_ids" in params:  # encoder-decoder: both token ids
        tries.append(["input_ids", "decoder_input_ids"])
    last = None
    for names in tries:
        if not names:
            continue
        inputs = tuple(_input(n, cfg, model) for n in names)
        module = _Wrapper(model, names).eval()
        try:
            with torch.no_grad():
                module(*inputs)
        except Exception as e:
            last = e
            continue
        return module, inputs
    if last is None:
        raise RuntimeError(f"forward() takes none of {', '.join(INPUTS)}")
    raise last


def _wrapper_class():
    import torch

    class Wrapper(torch.nn.Module):
        def __init__(self, model, names):
            super().__init__()
            self.model, self.names = model, tuple(names)

        def forward(self, *inputs):  # the first tensor of the output, the inputs passed by name
            out = self.model(**dict(zip(self.names, inputs)), return_dict=True)
            for v in out.values():
                if isinstance(v, torch.Tensor):
                    return v
            raise RuntimeError("the model's output holds no tensor")

    return Wrapper


def _Wrapper(model, names):
    return _wrapper_class()(model, names)


def get_model():
    """The model-file entry irviz check calls: the type comes from IRVIZ_CORPUS_TYPE."""
    return build_case(os.environ["IRVIZ_CORPUS_TYPE"])


def bare_tvm(module, inputs) -> dict:
    import torch
    import tvm
    from tvm import relax
    from tvm.relax.frontend.torch import from_exported_program

    from irviz.core.backend.run import _compare_outputs, _to_tvm
    from irviz.core.errors import tvm_error_text

    stage = "capture"
    try:
        ep = torch.export.export(module, inputs, strict=False)
        stage = "import"
        mod = from_exported_program(ep)
        stage = "build"
        ex = tvm.compile(mod, target="llvm")
        stage = "run"
        dev = tvm.cpu()
        out = relax.VirtualMachine(ex, dev)["main"](*[_to_tvm(a, dev) for a in inputs])
        with torch.no_grad():
            ref = module(*inputs)
        stage = "compare"
        per_output = _compare_outputs(out, ref, "PyTorch", count_hint="", shape_hint="")
    except Exception as exc:
        text = tvm_error_text(exc) if stage != "capture" else f"{type(exc).__name__}: {exc}"
        return {"status": "FAIL", "stage": stage, "reason": _first_line(text)}
    if all(o["allclose"] for o in per_output):
        return {"status": "PASS"}
    worst = max((o["max_abs"] for o in per_output), default=0.0)
    return {"status": "FAIL", "stage": "compare", "reason": f"max abs error {worst:.3g}"}


def worker(model_type: str, out, tvm_side: bool = True) -> dict:
    """Build and run in eager torch (or say why not), then bare TVM: one JSON line on stdout."""
    try:
        module, inputs = build_case(model_type)
    except Exception as e:
        return {"type": model_type, "skip": _first_line(f"{type(e).__name__}: {e}")}
    if not tvm_side:
        return {"type": model_type, "built": True}
    out.write(json.dumps({"type": model_type, "built": True}) + "\n")  # bare TVM may crash next
    out.flush()
    return {"type": model_type, "tvm": bare_tvm(module, inputs)}


def build_worker(types: list[str], out, timeout: int) -> None:
    """Try to build each type in this one process (most types do not build, and a process per
    type spends most of its time importing): one JSON line per type, written as it is known."""
    import gc
    import signal

    def _alarm(*_):
        raise TimeoutError(f"building it took over {timeout} s")

    signal.signal(signal.SIGALRM, _alarm)
    for t in types:
        out.write(json.dumps({"type": t, "trying": True}) + "\n")  # a death is this type's
        out.flush()
        signal.alarm(timeout)
        try:
            build_case(t)
            row = {"type": t, "built": True}
        except BaseException as e:  # a type's failure is its row, whatever it is
            row = {"type": t, "skip": _first_line(f"{type(e).__name__}: {e}")}
        finally:
            signal.alarm(0)
        gc.collect()
        out.write(json.dumps(row) + "\n")
        out.flush()


def buildable(types: list[str], timeout: float):
    """Yield (type, None) where it builds and runs in eager torch, else (type, the reason), as
    each is known (one process tries them in turn, so the caller runs the built ones meanwhile);
    a build that kills the process is that type's reason, and the rest go on in a new process."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")]),
           "TOKENIZERS_PARALLELISM": "false"}
    left = list(types)
    while left:
        p = subprocess.Popen([sys.executable, __file__, "--build-worker", ",".join(left),
                              "--timeout", str(int(timeout))], stdout=subprocess.PIPE,
                             stderr=subprocess.DEVNULL, text=True, env=env, cwd=REPO)
        trying, answered = None, set()
        for line in p.stdout:
            if not line.startswith("{"):
                continue
            row = json.loads(line)
            if row.get("trying"):
                trying = row["type"]
                continue
            answered.add(row["type"])
            trying = None
            yield row["type"], row.get("skip")
        p.wait()
        if trying is not None:
            answered.add(trying)
            yield trying, f"building it died (exit code {p.returncode})"
        elif not answered:  # nothing answered at all: say so for every type rather than loop
            for t in left:
                yield t, f"the build worker died (exit code {p.returncode})"
            return
        left = [t for t in left if t not in answered]


# ============================================================================================
# the driver


def _first_line(text: str, width: int = 160) -> str:
    line = next((ln.strip() for ln in str(text).splitlines() if ln.strip()), "")
    return line if len(line) <= width else line[: width - 3] + "..."


def _reason(error: str) -> str:
    """A capture error's list of attempts ("... tried:") as its first attempt, on one line."""
    lines = [ln.strip() for ln in error.splitlines() if ln.strip()]
    if len(lines) > 1 and lines[0].endswith("tried:"):
        return f"{lines[0]} {lines[1]}"
    return error


def _run(cmd, env, timeout):
    try:
        p = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=timeout, cwd=REPO)
    except subprocess.TimeoutExpired as e:  # what it printed so far says where it was
        out, err = (x.decode(errors="replace") if isinstance(x, bytes) else (x or "")
                    for x in (e.stdout, e.stderr))
        return subprocess.CompletedProcess(cmd, -9, out, err), f"timed out after {timeout:.0f} s"
    return p, None


def run_type(model_type: str, timeout: float, keep: Path | None, side: str = "both") -> dict:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")]),
           "IRVIZ_CORPUS_TYPE": model_type, "TOKENIZERS_PARALLELISM": "false", "PYTHONUNBUFFERED": "1"}
    if side == "irviz":
        row = {"type": model_type, "tvm": {"status": "NOT RUN"}}
    else:
        p, timed_out = _run([sys.executable, __file__, "--worker", model_type], env, timeout)
        answers = [json.loads(ln) for ln in p.stdout.splitlines() if ln.startswith("{")]
        if not answers:
            why = timed_out or f"exit code {p.returncode}: {_first_line(p.stderr[-2000:])}"
            return {"type": model_type, "skip": f"building it died ({why})"}
        row = answers[-1]
        if "skip" in row:
            return row
        if "tvm" not in row:  # built, then bare TVM died or hung
            why = timed_out or f"exit code {p.returncode}: {_first_line(p.stderr[-2000:])}"
            row = {"type": model_type, "tvm": {"status": "CRASH", "reason": why}}
        if side == "tvm":
            return row
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "check.json"
        cmd = [sys.executable, "-m", "irviz", "check", f"{__file__}:get_model", "--repeats", "1",
               "--json", str(out)]
        p, timed_out = _run(cmd, env, timeout)
        if timed_out:
            last = [ln for ln in p.stdout.splitlines() if ln.strip()]
            row["irviz"] = {"status": "CRASH", "reason": timed_out + (
                f", its last line: {_first_line(last[-1], 100)}" if last else "")}
        elif not out.exists():
            row["irviz"] = {"status": "CRASH", "reason": f"exit code {p.returncode}, no verdict: "
                                                         f"{_first_line(p.stderr[-2000:])}"}
        else:
            s = json.loads(out.read_text())
            if s.get("ok"):
                row["irviz"] = {"status": "PASS"}
            else:
                row["irviz"] = {"status": "FAIL", "stage": s.get("failed_stage"),
                                "reason": _first_line(_reason(s.get("error") or ""))}
            notes = s.get("capture_notes") or [  # no session (a later stage failed): the log's
                ln[9:] for ln in p.stdout.splitlines() if ln.startswith("note     captured with")]
            if notes:  # "captured with X (...)": the fallback that captured it
                row["irviz"]["capture"] = notes[0].split(" (")[0]
        if keep is not None:
            keep.mkdir(parents=True, exist_ok=True)
            (keep / f"{model_type}.log").write_text(p.stdout + p.stderr)
    return row


def all_types() -> list[str]:
    from transformers.models.auto.modeling_auto import MODEL_MAPPING_NAMES

    return sorted(MODEL_MAPPING_NAMES)


def tables(rows: list[dict]) -> str:
    ran = [r for r in rows if "skip" not in r]
    skipped = [r for r in rows if "skip" in r]

    def count(side, status):
        n = sum(1 for r in ran if r.get(side, {"status": "NOT RUN"}).get("status") == status)
        return "—" if status != "NOT RUN" and all(
            r.get(side, {"status": "NOT RUN"})["status"] == "NOT RUN" for r in ran) and ran else n

    lines = [f"| {len(ran)} architectures | irviz | bare TVM |", "|---|---|---|"]
    lines += [f"| pass (matches torch) | {count('irviz', 'PASS')} | {count('tvm', 'PASS')} |",
              f"| graceful failure | {count('irviz', 'FAIL')} | {count('tvm', 'FAIL')} |",
              f"| crash | {count('irviz', 'CRASH')} | {count('tvm', 'CRASH')} |"]
    regress = [r["type"] for r in ran
               if r["tvm"]["status"] == "PASS" and r.get("irviz", {}).get("status", "PASS") != "PASS"]
    lines.append(f"| bare passes, irviz fails | {len(regress)} | |")
    if regress:
        lines.append(f"\nbare TVM passes, irviz fails: {', '.join(regress)}")
    lines += ["", "| type | irviz | bare TVM |", "|---|---|---|"]
    for r in ran:
        lines.append(f"| {r['type']} | {_cell(r.get('irviz', {'status': 'NOT RUN'}))} | {_cell(r['tvm'])} |")
    if skipped:
        lines += ["", f"skipped ({len(skipped)}, do not build or run in eager torch at this size):"]
        lines += [f"  {r['type']}: {r['skip']}" for r in skipped]
    return "\n".join(lines)


def _cell(v: dict) -> str:
    status = v.get("status", "?")
    how = f" ({v['capture']})" if v.get("capture") else ""  # a capture fallback's name
    if status == "PASS":
        return "pass" + how
    if status == "NOT RUN":
        return "not run"
    at = f" at {v['stage']}" if v.get("stage") else ""
    text = f"{status.lower()}{at}{how}: {v.get('reason')}"
    return text.replace("|", "\\|")


def _shard(text: str) -> tuple[int, int]:
    try:
        i, n = (int(x) for x in text.split("/"))
    except ValueError:
        raise argparse.ArgumentTypeError(f"--shard takes I/N, e.g. 1/2, not {text!r}") from None
    if not 1 <= i <= n:
        raise argparse.ArgumentTypeError(f"--shard {text}: I must be between 1 and N")
    return i, n


def _load_rows(paths) -> list[dict]:
    rows: dict[str, dict] = {}
    for path in paths:
        for r in json.loads(Path(path).read_text())["rows"]:
            rows[r["type"]] = r
    return [rows[t] for t in sorted(rows)]


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--types", help="comma-separated model types (default: every one)")
    ap.add_argument("--limit", type=int, help="only the first N types")
    ap.add_argument("--shard", type=_shard, metavar="I/N",
                    help="only every N-th type from the I-th (run N of these side by side)")
    ap.add_argument("--side", choices=("both", "irviz", "tvm"), default="both",
                    help="run irviz check, bare TVM or both (default)")
    ap.add_argument("--timeout", type=float, default=300, help="seconds per type and side")
    ap.add_argument("--json", metavar="OUT", help="write every row as JSON (rewritten after each type)")
    ap.add_argument("--resume", action="store_true", help="keep the rows already in --json OUT and "
                                                          "run only the other types")
    ap.add_argument("--keep", metavar="DIR", help="keep each irviz check log in DIR")
    ap.add_argument("--merge", nargs="+", metavar="OUT", help="print the tables of these --json files")
    ap.add_argument("--worker", metavar="TYPE", help=argparse.SUPPRESS)
    ap.add_argument("--build-worker", metavar="TYPES", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.worker or args.build_worker:
        import warnings

        warnings.filterwarnings("ignore")
        out = os.fdopen(os.dup(1), "w")
        os.dup2(2, 1)  # torch's and TVM's own prints stay out of the answer
        if args.build_worker:
            build_worker(args.build_worker.split(","), out, int(args.timeout))
            return 0
        out.write(json.dumps(worker(args.worker, out, args.side != "irviz")) + "\n")
        out.flush()
        return 0
    if args.merge:
        rows = _load_rows(args.merge)
        print(tables(rows))
        return 0
    known = all_types()
    types = [t.strip() for t in args.types.split(",")] if args.types else known
    unknown = [t for t in types if t not in known]
    if unknown:
        print(f"unknown model types: {', '.join(unknown)} (transformers' MODEL_MAPPING_NAMES has "
              f"{len(known)}, e.g. {', '.join(known[:5])})", file=sys.stderr)
        return 2
    types = types[: args.limit] if args.limit else types
    if args.shard:
        i, n = args.shard
        types = types[i - 1::n]
    rows = _load_rows([args.json]) if args.resume and args.json and Path(args.json).exists() else []
    done = {r["type"] for r in rows}
    todo = [t for t in types if t not in done]
    t0 = time.perf_counter()
    # one process tries to build them in turn: a type that does not build costs no process
    answers = buildable(todo, args.timeout) if len(todo) > 1 else ((t, None) for t in todo)
    for k, (t, reason) in enumerate(answers, 1):
        if reason is not None:
            row = {"type": t, "skip": reason}
        else:
            row = run_type(t, args.timeout, Path(args.keep) if args.keep else None, args.side)
        rows.append(row)
        print(f"[{k}/{len(todo)} {time.perf_counter() - t0:.0f} s] {t}: " + (
            f"skipped ({row['skip']})" if "skip" in row else
            f"irviz {_cell(row.get('irviz', {'status': 'NOT RUN'}))}; bare TVM {_cell(row['tvm'])}"),
            file=sys.stderr, flush=True)
        if args.json:
            Path(args.json).write_text(json.dumps({"rows": rows}, indent=1))
    print(tables(rows))
    print(f"\n{len(todo)} types in {time.perf_counter() - t0:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
