"""Every model type the installed transformers ships, at a small size: irviz and bare TVM side by side,
each type × pipeline a row of an `irviz corpus` run (Ray tasks, local workers or a cluster).

    python benchmarks/transformers_corpus.py --json OUT [--html PAGE] [--types bert,siglip,...]
        [--limit N] [--side both|irviz|tvm] [--pipeline P]... [--workers N] [--address ADDR]
        [--timeout 300] [--memory-gb G] [--logs DIR]

Run it again with the same --json to go on where it stopped (Ctrl-C keeps the rows that finished);
the tables are printed from the file, so a rerun with nothing left to do just prints them.

Each model type of ``transformers``' ``MODEL_MAPPING_NAMES`` is built from its own config class
with the sizes shrunk (hidden size 32, 2 layers, 4 heads, vocabulary 256, images 32x32; nested
text/vision/audio configs likewise), random weights from a fixed seed, no download, and run in
eager torch on small example inputs (token ids, pixels, audio samples, whatever its forward()
names first; the main input alone, else every input it names).  A type that does not build or
run in eager torch is skipped with the reason (one process tries them in turn, most do not
build; the reasons are kept in the JSON's "types").  The others are the rows, each in its own
process with a timeout and a memory cap:

* **irviz**: ``irviz check benchmarks/transformers_corpus.py:TYPE`` (this file is the model file:
  its factory for TYPE builds that type), once per --pipeline;
* **bare TVM** (pipeline ``bare-tvm``): ``torch.export`` (non-strict) + ``from_exported_program``
  + ``tvm.compile(mod, "llvm")`` + the VM, compared with eager torch with irviz's tolerances.

The tables: ok / graceful failure (a stage and a message) / crash, timeout or memory per side,
the types bare TVM passes and irviz fails, and where irviz stops (stage and first line of its
message) per type.
"""
from __future__ import annotations

import argparse
import inspect
import json
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # irviz from this checkout

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


def worker(model_type: str, out) -> dict:
    """Build and run in eager torch (or say why not), then bare TVM: one JSON line on stdout."""
    try:
        module, inputs = build_case(model_type)
    except Exception as e:
        return {"type": model_type, "skip": _first_line(f"{type(e).__name__}: {e}")}
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


def _first_line(text: str, width: int = 160) -> str:
    line = next((ln.strip() for ln in str(text).splitlines() if ln.strip()), "")
    return line if len(line) <= width else line[: width - 3] + "..."


def __getattr__(name: str):
    """The model-file factory `irviz check transformers_corpus.py:TYPE` calls: TYPE built small."""
    model_type = _types_by_factory().get(name)
    if name.startswith("_") or model_type is None:
        raise AttributeError(name)
    return lambda: build_case(model_type)


def _known_types() -> set[str]:
    try:
        return set(all_types())
    except ImportError:  # no transformers: no factories
        return set()


def all_types() -> list[str]:
    from transformers.models.auto.modeling_auto import MODEL_MAPPING_NAMES

    return sorted(MODEL_MAPPING_NAMES)


# ============================================================================================
# the rows, as Ray tasks (this file's functions travel by value: run as a script, it is __main__)

BARE = "bare-tvm"  # the pipeline column of the bare TVM rows
MODEL_FILE = "benchmarks/transformers_corpus.py"


def factory_name(model_type: str) -> str:
    """The type as a Python name (FILE.py:NAME takes one): "xlm-roberta" -> "xlm_roberta"."""
    return re.sub(r"\W", "_", model_type)


def model_spec(model_type: str) -> str:
    return f"{MODEL_FILE}:{factory_name(model_type)}"


def type_of(spec: str) -> str:
    name = spec.rpartition(":")[2]
    return _types_by_factory().get(name, name)


def _types_by_factory() -> dict[str, str]:
    return {factory_name(t): t for t in _known_types()}


def row(job: dict, opts: dict) -> dict:
    """One row: bare TVM in a worker of this file, or irviz check (the corpus's own row)."""
    from irviz.core.corpus.rows import check_row

    if job["pipeline"] == BARE:
        return bare_row(job, opts)
    return check_row(job, opts)


def bare_row(job: dict, opts: dict) -> dict:
    from irviz.core.corpus.isolate import run_isolated
    from irviz.core.corpus.rows import base_row, classify

    t = type_of(job["model"])
    env = {**os.environ, "PYTHONUNBUFFERED": "1", "TOKENIZERS_PARALLELISM": "false"}
    with tempfile.TemporaryDirectory() as tmp:
        out = run_isolated([sys.executable, str(REPO / MODEL_FILE), "--worker", t], cwd=str(REPO), env=env,
                           timeout=opts["timeout"], memory_bytes=opts.get("memory_bytes"),
                           log_dir=opts.get("log_dir") or tmp, log_name=f"{t}_{BARE}")
    r = base_row(job, out)
    answers = [json.loads(ln) for ln in out.stdout.splitlines() if ln.startswith("{")]
    tvm = answers[-1].get("tvm") if answers else None
    if out.timed_out or out.over_memory or tvm is None:  # killed, or died: as the corpus says it
        r.update(classify(out, None, opts["timeout"], opts.get("memory_bytes")))
        if answers and "skip" in answers[-1]:
            r.update(result="graceful", stage="build", error=answers[-1]["skip"])
        elif r["result"] == "crash":
            r["stage"] = "bare TVM" if answers else "build"
    elif tvm["status"] == "PASS":
        r.update(result="ok", stage=None, error=None)
    else:
        r.update(result="graceful", stage=tvm.get("stage"), error=tvm.get("reason"))
    return r


def probe(types: list[str], store, timeout: float) -> dict:
    """{type: None if it builds and runs in eager torch, else why not}, kept in the file's "types"
    (so a rerun probes only the new ones)."""
    known = store.data.setdefault("types", {})
    # a worker that died before answering said nothing about the types themselves: ask again
    todo = [t for t in types if t not in known or str(known[t]).startswith("the build worker died")]
    t0 = time.monotonic()
    answers = buildable(todo, timeout) if len(todo) > 1 else ((t, None) for t in todo)
    for k, (t, reason) in enumerate(answers, 1):
        known[t] = reason
        print(f"[build {k}/{len(todo)} {time.monotonic() - t0:.0f} s] {t}: "
              + ("builds" if reason is None else f"skipped ({reason})"), file=sys.stderr, flush=True)
        if k % 20 == 0:
            store.write()
    store.write()
    return {t: known[t] for t in types}


# ============================================================================================
# the tables


def tables(store, types: list[str], sides: list[str]) -> str:
    by = {(type_of(r["model"]), r["pipeline"]): r for r in store.rows}
    built = [t for t in types if store.data["types"].get(t) is None]
    skipped = [t for t in types if store.data["types"].get(t) is not None]

    def count(side, results):
        return sum(1 for t in built if by.get((t, side), {}).get("result") in results)

    lines = [f"| {len(built)} architectures | " + " | ".join(sides) + " |", "|---" * (len(sides) + 1) + "|"]
    for label, results in (("pass (matches torch)", ("ok",)), ("graceful failure", ("graceful",)),
                           ("crash", ("crash",)), ("timeout or memory", ("timeout", "memory")),
                           ("not run yet", (None,))):
        lines.append(f"| {label} | " + " | ".join(str(count(s, results)) for s in sides) + " |")
    if BARE in sides:
        regress = [t for t in built if by.get((t, BARE), {}).get("result") == "ok"
                   and any(by.get((t, s), {}).get("result") not in ("ok", None) for s in sides if s != BARE)]
        lines.append(f"\nbare TVM passes, irviz fails ({len(regress)}): {', '.join(regress) or 'none'}")
    lines += ["", "| type | " + " | ".join(sides) + " |", "|---" * (len(sides) + 1) + "|"]
    lines += [f"| {t} | " + " | ".join(_cell(by.get((t, s))) for s in sides) + " |" for t in built]
    if skipped:
        lines += ["", f"skipped ({len(skipped)}, do not build or run in eager torch at this size):"]
        lines += [f"  {t}: {store.data['types'][t]}" for t in skipped]
    return "\n".join(lines)


def _cell(r: dict | None) -> str:
    if r is None:
        return "not run"
    how = f" ({r['capture']})" if r.get("capture") not in (None, "export") else ""  # a fallback's name
    if r["result"] == "ok":
        return "pass" + how
    at = f" at {r['stage']}" if r.get("stage") else ""
    return f"{r['result']}{at}{how}: {_first_line(r.get('error') or '')}".replace("|", "\\|")


# ============================================================================================
# the driver


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--types", help="comma-separated model types (default: every one)")
    ap.add_argument("--limit", type=int, help="only the first N types")
    ap.add_argument("--side", choices=("both", "irviz", "tvm"), default="both",
                    help="run irviz check, bare TVM or both (default)")
    ap.add_argument("--pipeline", action="append", metavar="P",
                    help="irviz's pipeline (repeat for several; default: check's)")
    ap.add_argument("--workers", type=int, default=os.cpu_count() or 1, help="local Ray workers")
    ap.add_argument("--address", help="an existing Ray cluster instead of a local instance")
    ap.add_argument("--timeout", type=float, default=300, help="seconds per row (and per type's build)")
    ap.add_argument("--memory-gb", type=float, default=None,
                    help="resident memory per row (default: this machine's divided by --workers)")
    ap.add_argument("--json", metavar="OUT",
                    help="the corpus's results file, required (rewritten after each row; a rerun resumes it)")
    ap.add_argument("--html", metavar="PAGE", help="the rows as a sortable HTML table")
    ap.add_argument("--logs", metavar="DIR", help="keep each row's output in DIR")
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
        out.write(json.dumps(worker(args.worker, out)) + "\n")
        out.flush()
        return 0

    known = all_types()
    types = [t.strip() for t in args.types.split(",")] if args.types else known
    unknown = [t for t in types if t not in known]
    if unknown:
        print(f"unknown model types: {', '.join(unknown)} (transformers' MODEL_MAPPING_NAMES has "
              f"{len(known)}, e.g. {', '.join(known[:5])})", file=sys.stderr)
        return 2
    clash = sorted(set(types) & set(globals()))
    if clash:  # this file's own function would be called instead of the factory
        print(f"model types named like this file's functions: {', '.join(clash)}", file=sys.stderr)
        return 2
    if not args.json:
        ap.error("--json OUT is required: the rows go there as they finish")
    from irviz.cli.corpus import default_pipeline, memory_cap, progress
    from irviz.core.corpus.html_table import write_html
    from irviz.core.corpus.pool import run_jobs
    from irviz.core.corpus.store import Store

    types = types[: args.limit] if args.limit else types
    store = Store(args.json)
    t0 = time.perf_counter()
    builds = probe(types, store, args.timeout)
    pipelines = args.pipeline or [default_pipeline()]
    sides = (pipelines if args.side != "tvm" else []) + ([BARE] if args.side != "irviz" else [])
    jobs = [{"model": model_spec(t), "pipeline": s, "target": None}
            for t in types if builds[t] is None for s in sides]
    opts = {"timeout": args.timeout, "memory_bytes": memory_cap(args), "repeats": 1, "cwd": str(REPO),
            "env": {"TOKENIZERS_PARALLELISM": "false"},
            "log_dir": os.path.abspath(args.logs) if args.logs else None}
    todo = store.todo(jobs)
    print(f"{len(jobs)} rows ({sum(b is None for b in builds.values())} types build, sides {', '.join(sides)}): "
          f"{len(jobs) - len(todo)} already in {args.json}, {len(todo)} to run", file=sys.stderr, flush=True)
    res = run_jobs(jobs, store, opts, workers=args.workers, address=args.address, task=row,
                   on_row=progress(time.monotonic()))
    store.write()
    if args.html:
        write_html(args.html, store.rows, store.summary(), title="transformers corpus: irviz and bare TVM")
    print(tables(store, types, sides))
    print(f"\n{res.finished} rows run in {time.perf_counter() - t0:.0f} s"
          + (f" (Ray started in {res.startup_seconds:.1f} s)" if res.finished else "")
          + ("; interrupted: run the same command again to go on" if res.interrupted else ""))
    return 130 if res.interrupted else 0


if __name__ == "__main__":
    sys.exit(main())
