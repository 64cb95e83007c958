"""Where measured decisions are kept between runs: one JSON file in the user's cache directory.

Decisions hold only on the machine and versions they were measured with, so every entry sits under
a key naming the CPU model, its vector ISA and lanes, the thread count, the TVM and torch
versions, and the version of irviz's schedule rules (a TensorIR time measured with older rules says
nothing about today's). A file that cannot be read, or was written by something else, is ignored
with a warning and rewritten. Several processes share the file (the engine, `irviz check`, a
benchmark): each write merges what it measured into the file as it is then, so one does not drop
the others'.

A decision measured while the machine was busy, or too close to call, is stored with a
"provisional" reason (``conditions``): this process keeps using it, a later one reuses it only while
the machine is still busy and measures it again once it is quiet, and it never replaces a final
decision already stored.

    cache = DecisionCache.shared()
    cache.get("conv2d 1x64x56x56 w64x64x3x3 s1_1 p1_1 d1_1 g1")   # dict or None
    cache.put(workload, record); cache.save()
"""
from __future__ import annotations

import json
import os
import tempfile
import warnings
from contextlib import contextmanager
from pathlib import Path

try:
    import fcntl
except ImportError:  # Windows: writes are merged, not locked
    fcntl = None

FORMAT = "irviz-cpu-decisions/1"
_state = {"enabled": True, "shared": None}


def cache_dir() -> Path:
    """IRVIZ_CACHE_DIR, else $XDG_CACHE_HOME/irviz, else ~/.cache/irviz."""
    if os.environ.get("IRVIZ_CACHE_DIR"):
        return Path(os.environ["IRVIZ_CACHE_DIR"])
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "irviz"


def set_cache_enabled(enabled: bool) -> None:
    """False: measure again (`--no-cache`, the app's "Re-measure"); new results are still saved."""
    _state["enabled"] = bool(enabled)


def cache_enabled() -> bool:
    return _state["enabled"]


def machine_key() -> str:
    # lazy: `irviz --no-cache` and the engine set the switch above without loading torch or TVM
    import torch
    import tvm

    from irviz.core.backend.run import tvm_threads
    from irviz.core.schedules.rules import RULES_VERSION
    from irviz.core.target import cpu_info

    info = cpu_info()
    return json.dumps({"cpu": info.model, "mcpu": info.mcpu, "isa": info.isa, "lanes": info.vector_lanes,
                       "threads": tvm_threads(), "tvm": tvm.__version__, "torch": torch.__version__,
                       "rules": RULES_VERSION}, sort_keys=True)


class DecisionCache:
    def __init__(self, path: Path | None = None):
        self.path = Path(path) if path is not None else cache_dir() / "cpu_decisions.json"
        self.machine = machine_key()
        self.entries: dict[str, dict] = {}
        self._all: dict[str, dict] = {}
        self._mine: dict[str, dict] = {}  # what this process measured: kept over the file's on save
        self._load()

    @classmethod
    def shared(cls) -> DecisionCache:
        """One cache per process and cache file (the file can change between tests)."""
        c = _state["shared"]
        want = cache_dir() / "cpu_decisions.json"
        if c is None or c.path != want:
            c = _state["shared"] = cls(want)
        return c

    def _load(self, quiet: bool = False) -> None:
        if not self.path.exists():
            return
        try:
            data = json.loads(self.path.read_text(encoding="utf-8"))
            if not isinstance(data, dict) or data.get("format") != FORMAT:
                raise ValueError(f"not an irviz decision cache (format {data.get('format') if isinstance(data, dict) else None!r})")
            machines = data["machines"]
            if not isinstance(machines, dict) or not all(isinstance(v, dict) for v in machines.values()):
                raise ValueError("machines is not a mapping of mappings")
        except (OSError, ValueError, KeyError, TypeError) as exc:
            if not quiet:
                warnings.warn(f"ignoring the decision cache {self.path} ({exc}); it will be rewritten",
                              stacklevel=2)
            return
        self._all = machines
        self.entries = dict(machines.get(self.machine, {}))

    def get(self, workload: str) -> dict | None:
        """The stored record, or None: to measure it (no entry, `--no-cache`, or a provisional one
        from an earlier run while the machine is quiet now)."""
        if not cache_enabled():
            return None
        rec = self.entries.get(workload)
        if not isinstance(rec, dict):
            return None
        if rec.get("provisional") and workload not in self._mine:
            # lazy, as machine_key: `--no-cache` sets the switch above without loading TVM
            from irviz.core.tuning.conditions import busy_now

            still = busy_now()
            if still is None:
                return None
            return {**rec, "reused": f"the machine is still busy ({still})"}
        return dict(rec)

    def previous(self, workload: str) -> dict | None:
        """The stored record whatever it is (a provisional one's tries are counted from it)."""
        rec = self.entries.get(workload)
        return dict(rec) if isinstance(rec, dict) else None

    def put(self, workload: str, record: dict) -> None:
        """Keep `record`; a provisional one does not replace a final one (this process still uses
        it: the caller has it)."""
        old = self.entries.get(workload)
        if record.get("provisional") and isinstance(old, dict) and not old.get("provisional"):
            return
        self.entries[workload] = dict(record)
        self._mine[workload] = dict(record)
        self.save()

    @contextmanager
    def _locked(self):
        """The file to itself between reading and replacing it (where the OS can lock)."""
        if fcntl is None:
            yield
            return
        with open(self.path.parent / ".decisions.lock", "a") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            try:
                yield
            finally:
                fcntl.flock(lock, fcntl.LOCK_UN)

    def save(self) -> None:
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            with self._locked():
                self._write()
        except OSError as exc:  # a read-only home still gets its decisions, just not kept
            warnings.warn(f"could not write the decision cache {self.path}: {exc}", stacklevel=2)

    def _write(self) -> None:
        self._load(quiet=True)  # what other processes wrote since, under ours
        self.entries.update(self._mine)
        self._all[self.machine] = self.entries
        try:
            fd, tmp = tempfile.mkstemp(dir=self.path.parent, prefix=".decisions-", suffix=".json")
            with os.fdopen(fd, "w", encoding="utf-8") as fh:
                json.dump({"format": FORMAT, "machines": self._all}, fh, indent=1, sort_keys=True)
            os.replace(tmp, self.path)
        except OSError as exc:  # a read-only home still gets its decisions, just not kept
            warnings.warn(f"could not write the decision cache {self.path}: {exc}", stacklevel=2)
