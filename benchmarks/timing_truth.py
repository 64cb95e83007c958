"""Do the engine's timing figures, after a realistic session, say what each runtime takes alone?

    python benchmarks/timing_truth.py [--models small_cnn,hf_vit,resnet18,FILE.py] [--pipeline fast-cpu]
                                      [--load] [--spare] [--repeats 10]

For each model, one engine process (`python -m irviz.engine`, as the app starts it) goes through
what a user does: open the model, step twice, build_run, compare with another pipeline (builds and
runs both), run to the end, build_run again. `--spare` starts a second engine that warms up while
the last build_run runs, as the app's spare engine does when the user acts within its warm-up.
Then torch eager and the TVM build of the last step are each timed alone in a fresh process
(benchmarks/timing_alone.py's ALONE). `--load` keeps one core busy with a `while True: pass`
process for the whole script (the engine and the alone processes see the same load).

Prints each build_run's figures (median, min, `reliable`/`reason` when the engine gives them) next
to the alone figures, and the ratios engine/alone. No pass/fail: read the ratios (target: within
1.25x on a quiet machine; under load, no ratio more than 2x off unless marked unreliable).
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from timing_alone import ALONE, _last_json  # after the path: the benchmarks folder is not a package


class EngineProcess:
    def __init__(self, env: dict):
        self.p = subprocess.Popen([sys.executable, "-m", "irviz.engine"], stdin=subprocess.PIPE,
                                  stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, env=env)
        self.n = 0
        self._read()   # the ready event

    def _read(self) -> dict:
        while True:
            line = self.p.stdout.readline()
            if not line:
                raise RuntimeError("the engine exited")
            msg = json.loads(line)
            if "progress" not in msg:
                return msg

    def send(self, cmd: str, **args) -> int:
        self.n += 1
        self.p.stdin.write(json.dumps({"id": self.n, "cmd": cmd, "args": args}) + "\n")
        self.p.stdin.flush()
        return self.n

    def ask(self, cmd: str, **args):
        self.send(cmd, **args)
        msg = self._read()
        if not msg.get("ok"):
            raise RuntimeError(f"{cmd}: {msg.get('error', {}).get('message')}")
        return msg["result"]

    def close(self):
        try:
            self.p.stdin.close()
            self.p.wait(timeout=20)
        except Exception:
            self.p.kill()
            self.p.wait()


def _fig(res: dict) -> dict:
    tt, pt = res.get("tvm_timing") or {}, res.get("torch_timing") or {}
    return {"tvm": res["tvm_ms"], "tvm_min": tt.get("min_ms"), "torch": res["torch_ms"],
            "torch_min": pt.get("min_ms"), "others": max(tt.get("others") or 0, pt.get("others") or 0),
            "reliable": res.get("reliable"), "reason": res.get("reason")}


def session(spec: str, pipeline: str, repeats: int, env: dict, spare: bool) -> list[tuple[str, dict]]:
    eng = EngineProcess(env)
    out = []
    try:
        eng.ask("open", spec=spec, pipeline=pipeline)
        eng.ask("step")
        eng.ask("step")
        out.append(("build_run at step 2", _fig(eng.ask("build_run", repeats=repeats))))
        eng.ask("compare", pipeline_b="zero" if pipeline != "zero" else "course", measure=True, repeats=5)
        eng.ask("run_to_end")
        out.append(("build_run, last step", _fig(eng.ask("build_run", repeats=repeats))))
        second = None
        if spare:
            second = EngineProcess(env)
            second.send("warm")
        try:
            out.append(("again" + (" (spare warming)" if spare else ""),
                        _fig(eng.ask("build_run", repeats=repeats))))
        finally:
            if second is not None:
                second.close()
    finally:
        eng.close()
    return out


def alone(which: str, spec: str, pipeline: str, repeats: int, env: dict) -> dict:
    p = subprocess.run([sys.executable, "-c", ALONE, which, spec, pipeline, str(repeats)],
                       capture_output=True, text=True, env=env)
    return _last_json(p.stdout)


def _uptime() -> str:
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--models", default="small_cnn,hf_vit,resnet18")
    ap.add_argument("--pipeline", default="fast-cpu")
    ap.add_argument("--repeats", type=int, default=10)
    ap.add_argument("--load", action="store_true", help="keep one core busy while measuring")
    ap.add_argument("--spare", action="store_true", help="a second engine warms during the last build_run")
    args = ap.parse_args()
    env = dict(os.environ, TVM_NUM_THREADS=os.environ.get("TVM_NUM_THREADS", str(os.cpu_count() or 1)))
    from irviz.core.target import cpu_info

    info = cpu_info()
    print(f"CPU: {info.model}, {info.mcpu}, {info.isa} ({info.vector_lanes} float32 lanes); "
          f"{os.cpu_count()} cores; threads {env['TVM_NUM_THREADS']}; pipeline {args.pipeline}; "
          f"load {'one busy loop' if args.load else 'none added'}; load average before {_uptime()}")
    hog = None
    try:
        if args.load:
            hog = subprocess.Popen([sys.executable, "-c", "while True: pass"])
            time.sleep(1.0)
        for name in args.models.split(","):
            spec = name if name.endswith(".py") or ":" in name else f"sample:{name}"
            t0 = time.perf_counter()
            try:
                runs = session(spec, args.pipeline, args.repeats, env, args.spare)
            except RuntimeError as exc:
                print(f"{name}: {exc}")
                continue
            torch_alone = [alone("torch", spec, args.pipeline, args.repeats, env) for _ in range(2)]
            tvm_alone = alone("tvm", spec, args.pipeline, args.repeats, env)
            ta = statistics.median(t["median_ms"] for t in torch_alone)
            va = tvm_alone["median_ms"]
            print(f"\n{name} ({time.perf_counter() - t0:.0f} s): alone torch {ta:.3f} ms "
                  f"(min {min(t['min_ms'] for t in torch_alone):.3f}), TVM {va:.3f} ms "
                  f"(min {tvm_alone['min_ms']:.3f}), ratio TVM/torch {va / ta:.3g}")
            for label, f in runs:
                mark = "" if f["reliable"] is None else (" reliable" if f["reliable"] else
                                                          f" UNRELIABLE: {f['reason']}")
                tvm_part = (f"TVM {f['tvm']:.3f} ({f['tvm'] / va:.2f}x alone)"
                            if "last" in label or "again" in label else f"TVM {f['tvm']:.3f}")
                print(f"  {label:28} torch {f['torch']:.3f} ms min {f['torch_min']:.3f} "
                      f"({f['torch'] / ta:.2f}x alone)  {tvm_part}  ratio {f['tvm'] / f['torch']:.3g}  "
                      f"others {f['others']:.0%}{mark}", flush=True)
    finally:
        if hog is not None:
            hog.kill()
            hog.wait()
    print(f"\nload average after {_uptime()}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
