"""CPU backend: the Triton interpreter (TRITON_INTERPRET=1). Checks correctness; cannot time."""

from __future__ import annotations

from tritondx.tools.backends.base import Backend


class InterpreterBackend(Backend):
    name = "interpreter"
    torch_device = "cpu"
    can_time = False
    kernels_run_where = " under the Triton interpreter"

    def available(self) -> bool:
        return True

    def job_env(self) -> dict[str, str]:
        return {"TRITON_INTERPRET": "1"}

    def describe(self) -> str:
        return "Triton interpreter on CPU: correctness only, speed not measured"
