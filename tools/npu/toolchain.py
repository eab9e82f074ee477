"""The separate Python environment that holds triton-ascend.

triton-ascend installs itself as the package ``triton``, so it cannot live in the same environment as
upstream Triton (which tritondx itself uses for the GPU path). tritondx therefore keeps a second
virtual environment, by default ``<repo>/.npu-venv`` (git-ignored), and runs everything that needs
triton-ascend (``capture_script.py``) in a subprocess of that environment's interpreter.

Where the interpreter is looked for, first match wins:

1. an explicit ``python`` argument (a path to an interpreter or to a venv folder);
2. the environment variable ``TRITONDX_NPU_PYTHON`` (same forms);
3. the default venv ``<repo>/.npu-venv``.

``install(path)`` creates a venv there and pip installs :data:`REQUIREMENTS`.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from functools import lru_cache
from pathlib import Path

from tritondx.errors import BackendUnavailable

#: The repository root (it *is* the ``tritondx`` package folder).
REPO_ROOT = Path(__file__).resolve().parents[2]
#: Default location of the triton-ascend environment.
DEFAULT_VENV = REPO_ROOT / ".npu-venv"
#: Environment variable naming the interpreter (or venv folder) to use instead of the default.
ENV_VAR = "TRITONDX_NPU_PYTHON"

#: What the ascend environment needs. triton-ascend imports pybind11 at start-up; torch is pinned to
#: the CPU wheel kept on disk (plain ``torch`` would pull a multi-GB CUDA build); numpy<2.4 matches
#: the main environment.
REQUIREMENTS: tuple[str, ...] = (
    "triton-ascend==3.2.*",
    "pybind11",
    "torch==2.13.0",
    "numpy<2.4",
)

INSTALL_HINT = (
    f"install it with `{sys.executable} -m tritondx.tools.npu.toolchain install` "
    f"(creates {DEFAULT_VENV}) or point ${ENV_VAR} at a Python that has triton-ascend 3.2"
)


def venv_python(venv: str | Path) -> Path:
    """The interpreter inside a venv folder (POSIX layout, Windows layout as a fallback)."""
    venv = Path(venv)
    for rel in ("bin/python", "bin/python3", "Scripts/python.exe"):
        if (venv / rel).exists():
            return venv / rel
    return venv / "bin" / "python"


def _as_interpreter(spec: str | Path) -> Path:
    p = Path(spec).expanduser()
    return venv_python(p) if p.is_dir() else p


_PROBE = (
    "import json, sys\n"
    "from importlib import metadata\n"
    "out = {'python': sys.version.split()[0]}\n"
    "for dist in ('triton-ascend', 'torch', 'pybind11', 'numpy', 'torch_npu'):\n"
    "    try:\n"
    "        out[dist] = metadata.version(dist)\n"
    "    except metadata.PackageNotFoundError:\n"
    "        out[dist] = None\n"
    "print(json.dumps(out))\n"
)


@lru_cache(maxsize=8)
def _probe_cached(interpreter: str, mtime: float) -> dict:
    try:
        proc = subprocess.run([interpreter, "-I", "-c", _PROBE], capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return {"error": f"{type(exc).__name__}: {exc}"}
    if proc.returncode != 0:
        tail = (proc.stderr.strip().splitlines() or ["no output"])[-1]
        return {"error": tail}
    try:
        return json.loads(proc.stdout.strip().splitlines()[-1])
    except (json.JSONDecodeError, IndexError):
        return {"error": "probe printed no JSON"}


def probe(python: str | Path) -> dict:
    """Package versions in the environment of ``python`` (``{"error": ...}`` if it does not run)."""
    interp = _as_interpreter(python)
    try:
        mtime = interp.stat().st_mtime
    except OSError:
        return {"error": f"no interpreter at {interp}"}
    return dict(_probe_cached(str(interp), mtime))


def find_python(python: str | Path | None = None) -> str:
    """Path of an interpreter whose environment has triton-ascend.

    Raises ``BackendUnavailable`` with a one-line message (saying how to install) when none is found.
    """
    if python is not None:
        candidates = [(str(python), "the python argument")]
    elif os.environ.get(ENV_VAR):
        candidates = [(os.environ[ENV_VAR], f"${ENV_VAR}")]
    else:
        candidates = [(str(DEFAULT_VENV), "the default venv")]
    spec, origin = candidates[0]
    interp = _as_interpreter(spec)
    if not interp.exists():
        raise BackendUnavailable(f"no triton-ascend environment: {origin} names {interp}, which does not exist; "
                                 f"{INSTALL_HINT}")
    info = probe(interp)
    if "error" in info:
        raise BackendUnavailable(f"triton-ascend environment at {interp} ({origin}) does not run: {info['error']}; "
                                 f"{INSTALL_HINT}")
    if not info.get("triton-ascend"):
        raise BackendUnavailable(f"{interp} ({origin}) has no triton-ascend; {INSTALL_HINT}")
    if not info.get("pybind11"):
        raise BackendUnavailable(f"{interp} ({origin}) has triton-ascend but no pybind11 (it is imported at "
                                 f"start-up); {INSTALL_HINT}")
    return str(interp)


def install_command(python: str | Path, requirements: tuple[str, ...] = REQUIREMENTS) -> list[str]:
    """The pip command ``install`` runs inside the new venv (exposed for tests and dry runs)."""
    return [str(python), "-m", "pip", "install", "--disable-pip-version-check", *requirements]


def install(path: str | Path | None = None, *, base_python: str | None = None,
            requirements: tuple[str, ...] = REQUIREMENTS, quiet: bool = False, timeout: float = 1800) -> str:
    """Create a venv at ``path`` (default ``<repo>/.npu-venv``) and pip install ``requirements`` into it.

    Reuses an existing venv (pip is idempotent). ``base_python`` is the interpreter that creates the
    venv (default: the running one; the torch CPU wheel on disk is for CPython 3.11). Returns the
    path of the new interpreter; raises ``BackendUnavailable`` if venv creation or pip fails.
    """
    venv = Path(path) if path is not None else DEFAULT_VENV
    base = base_python or sys.executable
    stream = subprocess.DEVNULL if quiet else 2  # pip's progress on stderr: stdout stays the caller's
    if not venv_python(venv).exists():
        proc = subprocess.run([base, "-m", "venv", str(venv)], stdout=stream, stderr=subprocess.PIPE, text=True)
        if proc.returncode != 0:
            raise BackendUnavailable(f"could not create a venv at {venv}: {proc.stderr.strip().splitlines()[-1:]}")
    interp = venv_python(venv)
    try:
        proc = subprocess.run(install_command(interp, requirements), stdout=stream, stderr=subprocess.PIPE,
                              text=True, timeout=timeout)
    except subprocess.TimeoutExpired as exc:
        raise BackendUnavailable(f"pip install into {venv} took more than {timeout:.0f} s") from exc
    if proc.returncode != 0:
        tail = (proc.stderr.strip().splitlines() or ["pip failed"])[-1]
        raise BackendUnavailable(f"pip install into {venv} failed: {tail}")
    _probe_cached.cache_clear()
    return str(interp)


def main(argv: list[str] | None = None) -> int:
    """``python -m tritondx.tools.npu.toolchain [install|find] [PATH]``."""
    argv = list(sys.argv[1:] if argv is None else argv)
    cmd = argv[0] if argv else "find"
    arg = argv[1] if len(argv) > 1 else None
    try:
        if cmd == "install":
            print(install(arg))
        elif cmd == "find":
            interp = find_python(arg)
            print(interp, json.dumps(probe(interp)))
        else:
            print("usage: toolchain [install|find] [PATH]", file=sys.stderr)
            return 2
    except BackendUnavailable as exc:
        print(exc, file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
