"""The corpus's driver: each job a Ray task (one CPU each), on a local Ray instance with N worker
slots or on an existing cluster, its row written to the store as soon as it finishes.

Ray is the `corpus` extra (`pip install irviz[corpus]`), imported here only when a run starts.
On a cluster every node needs irviz, and the model files at the same paths.
"""
from __future__ import annotations

import logging
import os
import socket
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from irviz.core.corpus.rows import check_row, failed_task_row
from irviz.core.corpus.store import Store

# Ray keeps large objects in shared memory; rows are small, and a big store only takes memory from
# the checks (Ray's floor is 75 MB)
OBJECT_STORE_BYTES = 100 * 2**20
POLL_S = 1.0
CONNECT_S = 10.0


class RayMissing(RuntimeError):
    pass


@dataclass
class RunResult:
    finished: int
    left: int
    interrupted: bool
    seconds: float
    startup_seconds: float


def _run_task(task: Callable[[dict, dict], dict], job: dict, opts: dict) -> dict:
    return task(job, opts)


def _import_ray():
    os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")  # no prompt, nothing sent
    try:
        import ray
    except ImportError:
        raise RayMissing("irviz corpus runs its checks as Ray tasks, and Ray is not installed: "
                         "pip install 'irviz[corpus]' (or ray>=2.40)") from None
    return ray


class ClusterUnreachable(RuntimeError):
    pass


def _token_available() -> bool:
    return bool(os.environ.get("RAY_AUTH_TOKEN") or os.environ.get("RAY_AUTH_TOKEN_PATH")
                or (Path.home() / ".ray" / "auth_token").is_file())


def _offer_token() -> None:
    # `ray start` turns token authentication on by default, but a client connecting to an address
    # does not send its token unless told to; sending one to a cluster without authentication is
    # harmless, so a token on this machine is offered.  Ray reads the mode when it is imported.
    if "RAY_AUTH_MODE" not in os.environ and _token_available():
        os.environ["RAY_AUTH_MODE"] = "token"


def _reachable(address: str) -> None:
    # ray.init retries an address where nothing listens for minutes; a plain connection says so
    # at once
    host, _, port = address.rpartition(":")
    if address.startswith("ray://") or not port.isdigit():
        return
    try:
        socket.create_connection((host or "127.0.0.1", int(port)), timeout=CONNECT_S).close()
    except OSError as e:
        raise ClusterUnreachable(
            f"nothing answered at {address} ({e}): give the address that `ray start --head` printed "
            f"(host:port of its GCS, port 6379 by default), and check that this machine can reach "
            f"it") from None


def _connect(ray, address: str, quiet: dict) -> None:
    _reachable(address)
    try:
        ray.init(address=address, **quiet)
    except ConnectionError as e:
        auth = os.environ.get("RAY_AUTH_MODE", "unset")
        raise ClusterUnreachable(
            f"the Ray cluster at {address} did not accept this connection: {e}. A cluster with token "
            f"authentication needs its token on this machine (~/.ray/auth_token or RAY_AUTH_TOKEN; "
            f"RAY_AUTH_MODE is {auth})") from None


def start_ray(workers: int, address: str | None):
    """A fresh local Ray instance with `workers` CPUs (never one a `ray start` left running), or a
    connection to the cluster at `address`; quiet either way."""
    if address:
        _offer_token()
    ray = _import_ray()
    quiet = {"log_to_driver": False, "logging_level": logging.ERROR}
    if address:
        _connect(ray, address, quiet)
    else:
        # the workers import irviz from where this process does, installed or not
        source = str(Path(__file__).resolve().parents[3])
        path = os.pathsep.join(p for p in (source, os.environ.get("PYTHONPATH")) if p)
        ray.init(address="local", num_cpus=workers, include_dashboard=False,
                 object_store_memory=OBJECT_STORE_BYTES, runtime_env={"env_vars": {"PYTHONPATH": path}},
                 **quiet)
    return ray


def run_jobs(jobs: list[dict], store: Store, opts: dict, *, workers: int, address: str | None = None,
             task: Callable[[dict, dict], dict] = check_row,
             on_row: Callable[[dict, int, int], None] | None = None) -> RunResult:
    """Run the jobs the store has no row for; each row goes into the store (and the file) as it
    finishes. Ctrl-C cancels what is queued or running and keeps what finished."""
    todo = store.todo(jobs)
    t0 = time.monotonic()
    if not todo:
        return RunResult(0, 0, False, 0.0, 0.0)
    ray = start_ray(workers, address)
    startup = time.monotonic() - t0
    remote = ray.remote(num_cpus=1, max_retries=0)(_run_task)
    finished, interrupted, pending = 0, False, {}
    try:
        pending = {remote.remote(task, job, opts): job for job in todo}
        while pending:
            ready, _ = ray.wait(list(pending), num_returns=len(pending), timeout=POLL_S)
            for ref in ready:
                job = pending.pop(ref)
                try:
                    row = ray.get(ref)
                except ray.exceptions.RayError as e:  # the worker died or the node went away
                    row = failed_task_row(job, f"{type(e).__name__}: {e}")
                store.add(row)
                store.write()
                finished += 1
                if on_row is not None:
                    on_row(row, finished, len(todo))
    except KeyboardInterrupt:
        interrupted = True
        for ref in pending:
            try:
                ray.cancel(ref)  # a running check's process group is killed as the task unwinds
            except Exception:  # already finished or gone: nothing to cancel
                pass
    finally:
        ray.shutdown()
    return RunResult(finished, len(todo) - finished, interrupted, time.monotonic() - t0, startup)
