"""Where a batch's tasks run: pinned to the local GPUs (``visible_gpus``, ``plan_slots``), or one Ray task each
(``--ray-address``: ``_run_ray``)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from tritondx.batch_task import run_one
from tritondx.tools.backends.registry import lookup


FAKE_GPUS_ENV = "TRITONDX_FAKE_GPUS"


def visible_gpus(backend_name: str) -> list[str]:
    """The GPU ids task processes can be pinned to: ``$TRITONDX_FAKE_GPUS`` (a count, tests), else the ones the
    backend names (``Backend.pinnable_devices``: on cuda the ids in ``$CUDA_VISIBLE_DEVICES`` or the ``GPU n:``
    lines of ``nvidia-smi -L``; no CUDA context is created in this process), else none."""
    fake = os.environ.get(FAKE_GPUS_ENV, "").strip()
    if fake:
        return [str(i) for i in range(int(fake))]
    backend = lookup(backend_name)
    return backend.pinnable_devices() if backend else []


def plan_slots(gpus: list[str], workers: int, out_dir: Path) -> list[dict[str, str]]:
    """One environment overlay per concurrent task: ``workers`` per GPU when there are several GPUs (each
    GPU's own lock folder), else ``workers`` sharing the batch's one lock folder (the single-GPU batch)."""
    workers = max(1, workers)
    caller = os.environ.get("TRITONDX_LOCK_DIR")  # a caller's lock folder is shared with its other work
    if len(gpus) <= 1:
        return [{"TRITONDX_LOCK_DIR": caller or str(out_dir / ".locks")} for _ in range(workers)]
    base = Path(caller) if caller else out_dir / "locks"
    return [{"CUDA_VISIBLE_DEVICES": g, "TRITONDX_LOCK_DIR": str(base / f"gpu{g}")}
            for _ in range(workers) for g in gpus]  # round-robin order: the first tasks spread over the GPUs


def _ray_one(task: str, run_dir: str, backend_name: str, extra_args: list[str] | None, final_rounds: int,
             env_extra: dict[str, str], not_after: float | None, lock_key: str, lock_base: str = ""
             ) -> dict[str, Any]:
    """Body of one Ray task: Ray has set ``CUDA_VISIBLE_DEVICES`` to the GPU it granted (if any); tasks
    sharing a GPU (``--workers`` > 1) share a node-local lock folder for it: ``lock_base/gpu<id>`` on a
    local instance (the batch's own lock folder, or its caller's, so other work of the caller on the
    same GPUs takes turns with the Ray tasks), else one under the node's temporary folder."""
    import socket
    import tempfile
    env_extra = dict(env_extra)
    gpu = os.environ.get("CUDA_VISIBLE_DEVICES", "")
    if lookup(backend_name).ray_grants_gpus and gpu:
        env_extra["CUDA_VISIBLE_DEVICES"] = gpu
        base = Path(lock_base) if lock_base else Path(tempfile.gettempdir()) / "tritondx-locks" / lock_key
        env_extra["TRITONDX_LOCK_DIR"] = str(base / f"gpu{gpu.replace(',', '_')}")
    entry = run_one(task, run_dir, backend_name, extra_args, final_rounds, env_extra, not_after)
    entry["node"] = socket.gethostname()
    return entry


def _ray_init(address: str, backend_name: str, workers: int):
    try:
        import ray
    except ImportError:
        from tritondx.errors import TritonDXError
        raise TritonDXError("--ray-address needs Ray: pip install 'tritondx[scale]'") from None
    kw: dict[str, Any] = {"include_dashboard": False, "log_to_driver": False, "configure_logging": False}
    if address == "local":  # a fresh single-node instance owned by this process
        if not lookup(backend_name).ray_grants_gpus:
            kw["num_cpus"] = max(1, workers)  # --workers bounds the tasks at once, as without Ray
        ray.init(address="local", **kw)
    else:
        kw.pop("include_dashboard")
        ray.init(address=address, **kw)
    return ray


def _run_ray(todo: list[str], address: str, backend_name: str, workers: int, out_dir: Path,
             extra_args: list[str] | None, final_rounds: int, env_extra: dict[str, str], not_after: float | None,
             on_result) -> None:
    if not todo:
        return
    ray = _ray_init(address, backend_name, workers)
    try:
        import hashlib
        lock_key = hashlib.sha256(str(out_dir.resolve()).encode()).hexdigest()[:12]
        lock_base = os.environ.get("TRITONDX_LOCK_DIR", "") if address == "local" else ""
        gpus = (1.0 / max(1, workers)) if lookup(backend_name).ray_grants_gpus else 0
        remote = ray.remote(num_cpus=1, num_gpus=gpus, max_retries=0)(_ray_one)
        refs = {remote.remote(t, str((out_dir / "runs" / Path(t).stem).resolve()), backend_name, extra_args,
                              final_rounds, env_extra, not_after, lock_key, lock_base): t for t in todo}
        pending = list(refs)
        while pending:
            ready, pending = ray.wait(pending, num_returns=1)
            task = refs[ready[0]]
            try:
                entry = ray.get(ready[0])
            except Exception as exc:  # the Ray task itself failed (worker died, node lost): record, go on
                from tritondx.tools.llm.redact import redact_text
                entry = {"task": Path(task).stem, "path": task, "exit": None, "wall_s": 0.0, "status": "failed",
                         "stderr_tail": redact_text(f"ray: {type(exc).__name__}: {exc}")[-800:]}
            on_result(entry)
    finally:
        ray.shutdown()
