"""What the candidate's runner reported about one call (``diag``: its error, launch count, side streams, threads,
torch ops and host reads its recorders saw, replaced timing functions, launch hooks), checked by the judge: a
report can only reject the candidate, never pass it."""

from __future__ import annotations

from tritondx.tools.backends.interpreter.memcheck import OOB_TAG
from tritondx.tools.exec.rejected import Rejected
from tritondx.tools.exec.sandbox import ILLEGAL_ACCESS_RE
from tritondx.tools.verify.runner.guard import HOST_READ_PREFIX
from tritondx.tools.verify.judge.probe import _OOM_TEXT
from tritondx.tools.verify.judge.trail import CALL_OK, HOOKS, LAUNCHES, OPS, STREAM, THREADS, TIMING


#: most tensor elements one call may read to the host one by one (``.item()``): sizes and flags, not data
SCALAR_READS = 64


def call_failed(diag: dict, where: str) -> Rejected:
    err = diag.get("error", "")
    oob = next((t for t in (err, str(diag.get("kernel_error") or "")) if OOB_TAG in t), None)
    if oob is not None:   # interpreter_memcheck: an access outside every tensor argument of the launch
        return Rejected("out_of_bounds", f"{where}: {oob[oob.find(OOB_TAG):][:400]}")
    if diag.get("kernel_error"):
        return Rejected("compile_error", f"{where}: {diag['kernel_error']}")
    if ILLEGAL_ACCESS_RE.search(err):
        return Rejected("illegal_memory_access", f"{where}: {err}")
    if diag.get("oom") or any(m in err.lower() for m in _OOM_TEXT):
        return Rejected("out_of_memory", f"{where}: launch() ran out of memory: {err}")
    if "CompilationError" in err:
        return Rejected("compile_error", f"{where}: {err}")
    return Rejected("exception", f"{where}: launch() raised {err}")


def _noted(name: str) -> None:
    """``check_diag``'s default note of the check it is about to run (a Judge passes ``Judge._ran``)."""


def check_ops(diag: dict, where: str, allowed: set[str], ran=_noted) -> None:
    ran(OPS)
    forbidden = sorted(set(diag.get("forbidden") or []) - allowed)
    host = [op[len(HOST_READ_PREFIX):] for op in forbidden if op.startswith(HOST_READ_PREFIX)]
    if host:
        raise Rejected("host_compute", f"{where}: launch() read tensor data to the host ({', '.join(host)}): "
                                       "outputs must come from Triton kernels")
    if forbidden:
        raise Rejected("torch_compute", f"{where}: launch() called torch compute ops {forbidden[:6]} "
                                        "(outputs must come from Triton kernels)")
    reads = diag.get("scalar_reads")
    if isinstance(reads, int) and reads > SCALAR_READS:
        raise Rejected("host_compute", f"{where}: launch() read {reads} tensor elements to the host one by one "
                                       "(.item()): outputs must come from Triton kernels")


def check_diag(diag: dict, where: str, allowed: set[str], ran=_noted) -> None:
    """What the runner saw during the watched call (it can only make things worse for itself). ``ran(name)`` is
    told each check before it runs (``Judge.trail``)."""
    ran(CALL_OK)
    if diag.get("error") or diag.get("aborted"):
        raise call_failed(diag, where)
    ran(LAUNCHES)
    if not isinstance(diag.get("launches"), int) or diag["launches"] <= 0:
        raise Rejected("no_triton_kernel", f"{where}: launch() ran no Triton kernel")
    ran(STREAM)
    if diag.get("side_stream"):
        raise Rejected("side_stream", f"{where}: {diag['side_stream']} kernel launch(es) on a non-default stream "
                                      "the timer does not see")
    ran(THREADS)
    if diag.get("threads"):
        raise Rejected("threads", f"{where}: candidate code started Python thread(s) {diag['threads'][:3]}; "
                                  "a launcher computes in Triton kernels, not in other threads")
    check_ops(diag, where, allowed, ran)
    ran(TIMING)
    if diag.get("tampered"):
        raise Rejected("timing_tampering", f"{where}: launch() replaced {', '.join(diag['tampered'])}")
    ran(HOOKS)
    if diag.get("hooked"):
        raise Rejected("verifier_tampering", f"{where}: {diag['hooked']} Triton launch(es) ran Python hooks "
                                             "(pre-run / launch hooks run unobserved)")
