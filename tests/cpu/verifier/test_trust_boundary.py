"""The trust boundary itself: the wire format, the verdict's seal, what the runner process holds."""

from __future__ import annotations

import io
from pathlib import Path

import pytest
import torch
from tritondx.tools.backends.registry import get_backend
from tritondx.tools.exec.sandbox import JobResult
from tritondx.tools.exec import jobs
from tritondx.tools.verify.judge import seal
from tritondx.tools.verify import verification
from tritondx.tools.verify.runner import wire

HERE = Path(__file__).parent
AXPY = HERE / "tiny_axpy.py"
HONEST = HERE.parents[2] / "examples" / "add_tiny_block.py"


def test_wire_keeps_values_strides_and_flattens_subclasses():
    class Sub(torch.Tensor):
        pass

    x = torch.randn(4, 3).t()
    e = torch.arange(5).expand(3, 5)
    s = torch.randn(3).as_subclass(Sub)
    buf = io.BytesIO()
    wire.send(buf, {"a": [x, e, s, 2.5, None, True]})
    buf.seek(0)
    got = wire.recv(buf)["a"]
    assert torch.equal(got[0], x) and got[0].stride() == x.stride()
    assert torch.equal(got[1], e) and got[1].stride() == (0, 1)
    assert type(got[2]) is torch.Tensor and torch.equal(got[2], s.as_subclass(torch.Tensor))
    assert got[3:] == [2.5, None, True]


def test_wire_carries_large_tensors_through_a_real_pipe_in_partial_reads():
    """A tensor many pipe buffers long arrives whole and equal (the receiver reads it in pieces straight
    into its own buffer), next to small ones and a bool tensor; the receiver's tensor is its own memory."""
    import os
    import threading
    big = torch.randn(3 << 18)            # 3 MiB: many reads of a 64 KiB - 1 MiB pipe
    flags = big[::3] > 0
    r, w = os.pipe()
    wire.widen_pipe(w)
    fr, fw = os.fdopen(r, "rb"), os.fdopen(w, "wb")
    got: dict = {}
    reader = threading.Thread(target=lambda: got.update(msg=wire.recv(fr)))
    reader.start()
    wire.send(fw, {"big": big, "small": [big[:7], 3], "flags": flags, "empty": torch.zeros(0, 4)})
    reader.join(timeout=30)
    fw.close()
    fr.close()
    msg = got["msg"]
    assert torch.equal(msg["big"], big) and msg["big"].data_ptr() != big.data_ptr()
    assert torch.equal(msg["small"][0], big[:7]) and msg["small"][1] == 3
    assert msg["flags"].dtype == torch.bool and torch.equal(msg["flags"], flags)
    assert msg["empty"].shape == (0, 4)


def test_wire_refuses_oversized_and_inconsistent_frames():
    buf = io.BytesIO()
    wire.send(buf, {"t": torch.zeros(1000)})
    buf.seek(0)
    with pytest.raises(wire.WireError):
        wire.recv(buf, cap=100)
    bad = io.BytesIO()
    header = b'{"body": {"__tensor__": 0, "dtype": "float32", "shape": [1000], "stride": [1], "span": 1000}, "blobs": 1}'
    bad.write(len(header).to_bytes(8, "little") + header + (8).to_bytes(8, "little") + b"\0" * 8)
    bad.seek(0)
    with pytest.raises(wire.WireError):
        wire.recv(bad)


def test_a_passing_answer_without_the_judges_seal_is_a_forgery(monkeypatch):
    """What a candidate could write as the job's result (passed, checks) is rejected unless the judge
    signed it with the key this verification gave it; a signed one passes."""
    answers = []

    def fake_run_job(job, timeout, env, memory_bytes=None, gpu_lock=False):
        body = {"passed": True, "checks": [{"shape": [1000], "dtype": "float32", "seed": 1}]}
        answers.append(env)
        result = seal.sign(env[seal.SEAL_ENV], body) if len(answers) == 2 else {**body, "seal": "0" * 64}
        return JobResult(kind="ok", returncode=0, seconds=1.0, result=result)

    monkeypatch.setattr(jobs, "run_job", fake_run_job)
    backend = get_backend("interpreter")
    forged = verification.verify_candidate(str(AXPY), str(HONEST), "c", backend)
    assert not forged.passed and forged.klass == "verdict_forgery", forged
    signed = verification.verify_candidate(str(AXPY), str(HONEST), "c", backend)
    assert signed.passed and signed.checks == 1, signed
    assert answers[0][seal.SEAL_ENV] != answers[1][seal.SEAL_ENV]  # a fresh key per job


def test_the_seal_covers_what_the_report_says_was_checked():
    """A sealed answer whose coverage (the branches each case reached) or list of checks run was changed
    after the judge signed it no longer carries a valid seal (it covered only passed / class / error /
    checks)."""
    key = seal.new_key()
    body = {"passed": True, "checks": [{"shape": [1000], "dtype": "float32", "seed": 1}],
            "coverage": [{"line": 13, "covered": False}], "ran": ["values vs reference"],
            "device_usage": {"shared_s": 1.0}}
    signed = seal.sign(key, body)
    assert seal.valid(key, signed)
    for k, v in (("coverage", [{"line": 13, "covered": True}]), ("ran", []), ("error", "x"), ("scope", "full")):
        assert not seal.valid(key, {**signed, k: v}), k


def test_a_screen_answer_is_no_full_verdict():
    """Staged verification (verify/staged.py): the screen checks the listed shapes only. A sealed screen
    answer handed back where the full checks were asked for is rejected, so no candidate is called
    verified on the screen's evidence."""
    from tritondx.tools.verify.verification import _verdict_from
    key = seal.new_key()
    answer = seal.sign(key, {"passed": True, "checks": [], "coverage": [], "ran": [], "scope": "screen"})
    cand = {"id": "c"}
    backend = get_backend("interpreter")
    assert _verdict_from(cand, answer, key, backend, 1.0, True, "screen").passed
    full = _verdict_from(cand, answer, key, backend, 1.0, True, "full")
    assert not full.passed and full.klass == "verdict_forgery" and "'screen'" in full.reason


class _Probe:
    id, cost = "probe:runner_modules", 8.0

    def run(self):
        return verification.verify_candidate(str(AXPY), str(HERE / "probes" / "runner_modules.py"), "probe",
                                             get_backend("interpreter"), static_policy=False)


@pytest.mark.parametrize("case", [_Probe()], ids=["runner_modules"])
def test_the_runner_holds_no_verifier_module_no_seal_and_only_the_candidate(case, outcomes):
    v = outcomes[case.id].result()
    assert v.klass == "import_error", v
    modules = v.reason.split("modules=")[1].split(" env=")[0].split(",")
    assert not [m for m in modules if m.startswith("tritondx.tools.verify")], modules
    assert "env= " in v.reason, v.reason           # no seal / key / token variable
    assert v.reason.rstrip().endswith("cwd=candidate.py"), v.reason


def _hw(ini_ns: float, best_ns: float, best_kernels=("axpy_kernel",), initial_kernels=("axpy_kernel",)):
    return {"initial": {"ns_per_call": ini_ns, "kernels": list(initial_kernels)},
            "best": {"ns_per_call": best_ns, "kernels": list(best_kernels)}}


def test_the_hardware_check_confirms_a_claim_within_ten_percent_only():
    from tritondx.tools.verify.timing import judge_hardware
    assert judge_hardware(_hw(100e3, 50e3), 2.0).confirmed            # 2.00x measured, 2.00x claimed
    assert judge_hardware(_hw(100e3, 50e3), 2.2).confirmed            # 2.00 >= 2.2 * 0.9
    bad = judge_hardware(_hw(100e3, 50e3), 2.3)                       # 2.00 < 2.07
    assert not bad.confirmed and "2.00x" in bad.note and "claimed 2.30x" in bad.note
    assert not judge_hardware(_hw(100e3, 0.0), 2.0).confirmed         # no kernel time at all


def test_the_hardware_check_refuses_library_kernels_the_initial_does_not_launch():
    from tritondx.tools.verify.timing import judge_hardware
    aten = "void at::native::vectorized_elementwise_kernel<4, at::native::CUDAFunctor_add<float>>"
    fill = "void at::native::vectorized_elementwise_kernel<4, at::native::FillFunctor<float>>"
    hidden = judge_hardware(_hw(100e3, 50e3, ("axpy_kernel", aten)), 2.0)
    assert not hidden.confirmed and "library kernels" in hidden.note
    assert judge_hardware(_hw(100e3, 50e3, ("axpy_kernel", fill)), 2.0).confirmed   # torch.zeros is allowed
    assert judge_hardware(_hw(100e3, 50e3, ("k", aten), ("k", aten)), 2.0).confirmed  # the initial launches it too
