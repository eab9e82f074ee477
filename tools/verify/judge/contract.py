"""The original kernel's contract: whether the user's own kernel computes the reference on a derived case.

A derived check case (an odd size, a larger size, a branch side, stressed values) holds a candidate to
what the *original* kernel gets right there. An unmasked original launched on ``n // BLOCK`` programs
leaves the tail of an odd size unwritten; an original that reads past its inputs may crash. Such a
case checks nothing a candidate could be held to. When a candidate fails a derived case, the judge
asks this module whether the original fails it too; if so the case is dropped from the plan, with the
original's own result as the reason, and the checks go on (``judge.candidate.Judge._outside_contract``). Only
failures pay for it: a candidate that passes every case never starts the original.

The original is trusted code, but outside its contract it can crash the interpreter or poison a CUDA
context: it runs in a runner process of its own (``spawn.RunnerProcess``, the same sandboxed process
a candidate gets, started on the first failure), never in the judge. A
crash ends that runner only; the next check starts another. Results are kept per (shape, dtype,
values) for the judge job: a round's candidates share them.
"""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import torch

from tritondx.tools.task.module import tolerance, to_dtype
from tritondx.tools.verify.judge.compare import compare

#: seconds the original may take on one derived case before it counts as "does not finish"
ORIGINAL_CASE_TIMEOUT = 300.0


class OriginalContract:
    """``check(shape, dtype, values, inputs, refs)`` -> None (the original is right there) or why not."""

    def __init__(self, task_path: str, task_mod: Any, device: str, hide: list[str]) -> None:
        self.task_path, self.mod, self.device, self.hide = task_path, task_mod, device, hide
        self._runner = None
        # runners are started from this one thread, kept until close(): a runner gets a parent-death
        # signal, which Linux sends when the *thread* that started it ends
        self._starter = ThreadPoolExecutor(max_workers=1, thread_name_prefix="tritondx-original")
        self._done: dict[tuple, str | None] = {}
        self._lock = threading.Lock()
        self.calls = 0

    def check(self, shape: Any, dtype: str, values: str, inputs: tuple, refs: tuple) -> str | None:
        key = (repr(shape), dtype, values)
        with self._lock:
            if key not in self._done:
                self._done[key] = self._run(inputs, refs, dtype)
                self.calls += 1
            return self._done[key]

    def _start(self):
        from tritondx.tools.verify.judge.spawn import RunnerProcess
        runner = RunnerProcess(self.task_path, self.device, [], hide=self.hide)
        hello = runner.hello
        if not isinstance(hello, dict) or not hello.get("ok"):
            runner.close()
            raise RuntimeError(f"the original does not import in a runner: {(hello or {}).get('error')}")
        return runner

    def _run(self, inputs: tuple, refs: tuple, dtype: str) -> str | None:
        from tritondx.tools.verify.judge.spawn import RunnerDied
        try:
            if self._runner is None:
                self._runner = self._starter.submit(self._start).result()
            runner = self._runner
            timer = threading.Timer(ORIGINAL_CASE_TIMEOUT, runner.proc.kill)
            timer.daemon = True
            timer.start()
            try:
                ans = runner.call(list(inputs))
                runner.reset()
            finally:
                timer.cancel()
        except RunnerDied as exc:
            self._end()
            return f"it {'crashes' if exc.kind != 'timeout' else 'does not finish'}: {exc.message[:160]}"
        except RuntimeError as exc:
            self._end()
            return str(exc)[:200]
        outs = ans.get("outs") if isinstance(ans, dict) else None
        if not isinstance(outs, list):
            diag = (ans.get("diag") or {}) if isinstance(ans, dict) else {}
            return f"it raises {diag.get('error') or 'or returns nothing'}"[:200]
        if len(outs) != len(refs):
            return f"it returns {len(outs)} outputs, the reference {len(refs)}"
        for i, (o, r) in enumerate(zip(outs, refs)):
            if isinstance(r, torch.Tensor):
                if not isinstance(o, torch.Tensor):
                    return f"output {i} is {type(o).__name__}"
                atol, rtol = tolerance(self.mod, to_dtype(dtype), output=i)
                bad = compare(o.detach().cpu(), r.detach().cpu(), atol, rtol)
                if bad:
                    return f"output {i}: {bad['reason'][:160]}"
        return None

    def _end(self) -> None:
        if self._runner is not None:
            try:
                self._runner.close()
            except Exception:  # noqa: BLE001 - a dead runner
                pass
        self._runner = None

    def close(self) -> None:
        with self._lock:
            self._end()
        self._starter.shutdown(wait=True)
