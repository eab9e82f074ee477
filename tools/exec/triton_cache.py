"""A Triton cache that reuses compiles across the jobs of one task and cannot be poisoned by a candidate.

Triton keys a compiled kernel by a hash of its source, signature, specialization, options and
compiler version (``triton.compiler.compile``): the same kernel source compiled the same way hits,
any other misses. A cache folder that several jobs write would let one candidate write a bad binary
under the key of another kernel (the initial kernel's, say) and the next job would run it. So:

- the **trusted layer** (``trusted_dir``: one folder per original task source) is written only by
  jobs that run nothing but the user's original task (the probe); every other job reads it and
  cannot write it: the sandbox makes the file system read-only (``tools/exec/sandbox_fs.py``), a warm
  runner makes its own mounts read-only (``verify/runner/zygote.py``);
- each job's own compiles go to its private cache (``TRITON_CACHE_DIR``, in its scratch folder),
  gone with the job.

``LayeredCache`` is the cache manager jobs use (``TRITON_CACHE_MANAGER``): lookups try the trusted
layer first, then the private one; writes go to the private one only. It imports nothing of
tritondx (a candidate's runner loads it).
"""

from __future__ import annotations

import hashlib
import os
import re
from pathlib import Path

from triton.runtime.cache import FileCacheManager

#: Triton keeps autotuning results in its cache (``triton.knobs.autotuning.cache``): set for a job or runner whose
#: cache folder a later one of the same source starts from (``hwcheck._Prewarm``, ``ncu._prewarm``)
AUTOTUNE_CACHE_ENV = "TRITON_CACHE_AUTOTUNING"
#: a source that autotunes, e.g. "@triton.autotune(configs=[triton.Config({'BLOCK': 1024}, num_warps=4)], key=['n'])":
#: its first call benchmarks every config; under ncu that call holds the batch's profiler lock (flag_gems argmax: 4.5-5.2 s
#: in a hardware check; an autotuned int4 matmul: 45.8 s in a profile session; H200, 2026-12-03). A plain kernel's first
#: call under ncu is mostly CUDA's start (1.3-2.2 s on the suite with or without a prewarm, which then only added 8-27 s
#: outside the lock to a check's wall), so it gets no prewarm
AUTOTUNE_RE = re.compile(r"\bautotune\s*\(")


def autotunes(path: str) -> bool:
    """Whether the source at ``path`` autotunes (``AUTOTUNE_RE``); False when it cannot be read."""
    try:
        return bool(AUTOTUNE_RE.search(Path(path).read_text(errors="replace")))
    except OSError:
        return False


def prewarm_wanted(path: str, switch: str) -> bool:
    """Whether the source at ``path`` gets a prewarm (a run of its first call outside ncu, whose cache the session
    under ncu starts from): the environment variable ``switch`` says "1" (always), "0" (never) or, by default, "auto"
    (a source that autotunes)."""
    mode = os.environ.get(switch, "auto")
    return mode == "1" if mode in ("0", "1") else autotunes(path)


#: the read-only layer a job reads (set by the orchestrator; absent: no trusted layer)
TRUSTED_ENV = "TRITONDX_JOB_TRUSTED_CACHE"  # TRITONDX_JOB_*: passes the scrubbed environment
MANAGER = "tritondx.tools.exec.triton_cache:LayeredCache"


class LayeredCache(FileCacheManager):
    """Trusted layer (read-only) over the job's private cache (read-write)."""

    def __init__(self, key, override=False, dump=False):
        super().__init__(key, override, dump)
        root = os.environ.get(TRUSTED_ENV, "")
        self.trusted = os.path.join(root, key) if root and not (override or dump) else ""

    def _trusted_path(self, filename: str) -> str | None:
        if not self.trusted:
            return None
        p = os.path.join(self.trusted, filename)
        return p if os.path.isfile(p) else None

    def get_file(self, filename):
        return self._trusted_path(filename) or super().get_file(filename)

    def get_group(self, filename):
        p = self._trusted_path(f"__grp__{filename}")
        if p is not None:
            import json
            with open(p) as f:
                children = json.load(f).get("child_paths")
            if isinstance(children, dict):
                # a trusted group names only trusted files
                ok = {c: q for c, q in children.items()
                      if isinstance(q, str) and os.path.dirname(os.path.abspath(q)) == os.path.abspath(self.trusted)
                      and os.path.isfile(q)}
                if len(ok) == len(children):
                    return ok
        return super().get_group(filename)


def trusted_dir(task_source: str, root: str | Path | None = None) -> Path:
    """The trusted layer of a task: keyed by the hash of the original task's source."""
    base = Path(root or os.environ.get("TRITONDX_CACHE") or Path.home() / ".cache" / "tritondx") / "triton-trusted"
    return base / hashlib.sha256(task_source.encode()).hexdigest()[:20]


def reader_env(task_source: str) -> dict[str, str]:
    """Environment of a job that reads the trusted layer (and writes only its private cache)."""
    d = trusted_dir(task_source)
    return {TRUSTED_ENV: str(d), "TRITON_CACHE_MANAGER": MANAGER} if d.is_dir() else {}


def enabled() -> bool:
    """Whether jobs may use the trusted layer: only where the sandbox makes the whole file system
    read-only for every job (bubblewrap or unshare in ``tools/exec/sandbox.py``), so that no candidate
    can write it; ``TRITONDX_TRUSTED_CACHE=0`` turns it off."""
    if os.environ.get("TRITONDX_TRUSTED_CACHE", "1") == "0":
        return False
    from tritondx.tools.exec.sandbox import isolation
    iso = isolation()
    return bool(iso.readonly) and getattr(iso, "mechanism", "none") in ("bwrap", "unshare")


def writer_env(task_source: str) -> dict[str, str]:
    """Environment of a trusted job (only the original task runs in it): it compiles into the layer."""
    d = trusted_dir(task_source)
    d.mkdir(parents=True, exist_ok=True)
    return {"TRITON_CACHE_DIR": str(d)}
