"""Entry point of a sandboxed job: ``python -m tritondx.tools.exec.worker JOB.json RESULT.json``.

The job's ``kind`` picks the work: the function registered for it in ``exec/kinds.py`` (probe, verify,
bench, capture, ...), implemented by the module that owns it and imported only when a job of that kind runs
(the worker imports nothing above ``exec/``, and only modules named in that allowlist). A task problem is
written as ``{"error": ..., "class": ...}``; anything else that goes wrong (crash, hang, CUDA fault) ends
the process and is classified by the parent.
"""

from __future__ import annotations

import json
import os
import sys
import traceback

from tritondx.tools.exec import kinds


def main(job_path: str, result_path: str) -> int:
    from tritondx.tools.exec.sandbox import watch_lifeline
    watch_lifeline()  # first thing: a job never outlives the run that started it
    import os
    if os.environ.get("TRITON_INTERPRET") == "1":  # before any task is imported: libdevice on CPU
        from tritondx.tools.backends.interpreter.libdevice import install
        install()
    with open(job_path) as f:
        job = json.load(f)
    first = kinds.early(job["kind"])   # e.g. a round's warm runners, which start beside this process's
    if first is not None:              # torch import
        first(job)
    if os.environ.get("TRITON_INTERPRET") != "1":   # a compile in a device phase gives the device back meanwhile
        from tritondx.tools.exec.gpulock import install_compile_aside
        install_compile_aside()
    result = run(job)
    if isinstance(result, dict):
        from tritondx.tools.exec.gpulock import usage
        result["device_usage"] = usage()
    with open(result_path, "w") as f:
        json.dump(result, f, default=str)
    return 0


def run(job: dict, fn=None) -> dict:
    """One job's work (``fn``, else the function for its ``kind``); whatever task or candidate code
    raises becomes the result's ``class`` and ``error`` (a crash, hang or CUDA fault ends the process:
    the parent classifies it)."""
    from tritondx.errors import TaskFormatError
    from tritondx.tools.exec.rejected import Rejected
    try:
        fn = fn if fn is not None else kinds.handler(job["kind"])
        result = fn(job)
    except Rejected as exc:
        result = {"passed": False, "class": exc.klass, "error": exc.reason}
    except TaskFormatError as exc:
        result = {"passed": False, "ok": False, "class": "task_format", "error": str(exc), "problem": exc.problem}
    except SystemExit as exc:  # task or candidate code called sys.exit(): say so instead of vanishing
        result = {"passed": False, "ok": False, "class": "exited", "problem": f"task code called sys.exit({exc.code!r})",
                  "error": f"task code called sys.exit({exc.code!r})"}
    except Exception as exc:
        tb = traceback.format_exc(limit=6)
        text = str(exc).strip().splitlines()
        first = text[0] if text else ""
        klass = "compile_error" if "CompilationError" in type(exc).__name__ or "PTXAS" in tb else "exception"
        # A CUDA fault surfaces as a RuntimeError at the next synchronization: name it for what it is
        # (the parent would otherwise only see a job that exited normally).
        from tritondx.tools.exec.sandbox import ILLEGAL_ACCESS_RE, OOM_RE
        if ILLEGAL_ACCESS_RE.search(f"{type(exc).__name__}: {exc}"):
            klass = "illegal_memory_access"
        elif klass == "exception" and OOM_RE.search(f"{type(exc).__name__}: {first}"):
            klass = "out_of_memory"
        result = {"passed": False, "ok": False, "class": klass, "error": f"{type(exc).__name__}: {first[:400]}",
                  "traceback": tb[-3000:]}
    return result


def serve(job_path: str) -> int:
    """``--serve JOB.json``: a long-lived job (``exec/server.py``). Requests come as JSON lines on the
    descriptor pair in ``TRITONDX_SERVE_FDS`` (never inherited by anything this process starts); each
    is answered with one line ``{"result": ...}``, plus ``"ending": why`` when the service cannot go on
    (it then exits). The job's ``kind`` names the service (``kinds.SERVICES``; ``judge``: ``verify/judge/server.py``)."""
    from tritondx.tools.exec.sandbox import watch_lifeline
    watch_lifeline()
    if os.environ.get("TRITON_INTERPRET") == "1":
        from tritondx.tools.backends.interpreter.libdevice import install
        install()
    from tritondx.tools.exec.sandbox import make_undumpable
    from tritondx.tools.exec.server import SERVE_FDS_ENV
    # before anything else runs: inside a bubblewrap job the runners it starts share its PID namespace and
    # user; non-dumpable, its /proc/PID/fd (the request pipe: the next request's seal key) is closed to them
    make_undumpable()
    r_fd, w_fd = (int(x) for x in os.environ.pop(SERVE_FDS_ENV).split(","))
    os.set_inheritable(r_fd, False)
    os.set_inheritable(w_fd, False)
    with open(job_path) as f:
        job = json.load(f)
    if os.environ.get("TRITON_INTERPRET") != "1":
        from tritondx.tools.exec.gpulock import install_compile_aside
        install_compile_aside()
    service = kinds.service(job["kind"])(job)
    requests = os.fdopen(r_fd, "rb")
    for line in requests:
        answer = service.handle(json.loads(line))
        data = (json.dumps(answer, default=str) + "\n").encode()
        view = memoryview(data)
        while view:
            view = view[os.write(w_fd, view):]
        if answer.get("ending"):
            break
    return 0


if __name__ == "__main__":
    if sys.argv[1] == "--serve":
        code = serve(sys.argv[2])
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)
    code = main(sys.argv[1], sys.argv[2])
    # The result is written: end now. A normal exit would wait for every non-daemon thread task code
    # left running (the job then ended only at its timeout, 300 s for a probe).
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)
