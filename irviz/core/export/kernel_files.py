"""What each kernel of a step became on a target, as files beside the exported steps:
`code/TARGET/NAME.s` and `NAME.ll` (CPU) or `NAME.cu` / `.cl` / `.wgsl` (GPU, each with the shared
includes so it stands alone), and the counts in steps.json under "code"."""
from __future__ import annotations

import json
import re
from pathlib import Path

from irviz.core.backend.kernel_code import kernel_code
from irviz.core.errors import ExportError


def target_slug(name: str) -> str:
    """A folder name for what the user called the target ("cuda -arch=sm_86" -> "cuda-arch-sm_86")."""
    return re.sub(r"[^A-Za-z0-9_.]+", "-", name).strip("-") or "target"


def write_kernel_code(out_dir, session, target: str, step: int | None = None) -> dict:
    """Write the kernels of step `step` (default: the cursor's) for `target`; returns the "code"
    record also merged into OUT/steps.json when that file exists."""
    out = Path(out_dir)
    index = session.cursor if step is None else step
    code = kernel_code(session.steps[index].mod, target)
    folder = Path("code") / target_slug(code.target_name)
    record = {**code.as_dict(), "step": index, "dir": str(folder)}
    try:
        (out / folder).mkdir(parents=True, exist_ok=True)
        for name, k in code.kernels.items():
            files = []
            for fmt, text in k.code.items():
                path = folder / f"{name}{code.suffix(fmt)}"
                (out / path).write_text((code.prelude + text) if code.gpu else text, encoding="utf-8")
                files.append(str(path))
            record["kernels"][name]["files"] = files
        steps_json = out / "steps.json"
        if steps_json.exists():
            summary = json.loads(steps_json.read_text(encoding="utf-8"))
            summary["code"] = record
            for rec in summary.get("steps", []):
                if rec.get("index") == index:
                    rec["code_totals"] = record["totals"]
            steps_json.write_text(json.dumps(summary, indent=2) + "\n", encoding="utf-8")
    except OSError as exc:
        raise ExportError(f"cannot write the kernels' code in {out / folder}: {exc}") from exc
    return record
