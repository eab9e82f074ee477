"""Verify one candidate the way the verifier agent does, in a process of its own (so that the test can
give that process the environment a real run has: API keys, proxy credentials, its own cwd).

    python verify_one.py TASK CANDIDATE [BACKEND]  ->  one JSON line: verification, sandbox isolation, log events

BACKEND: interpreter (the default) or cuda (tests/gpu/reliability/test_gpu_sandbox.py).
"""

from __future__ import annotations

import json
import sys

import structlog

from tritondx.tools.backends.registry import get_backend
from tritondx.tools.exec.sandbox import isolation
from tritondx.tools.verify.verification import verify_candidate

if __name__ == "__main__":
    task, candidate = sys.argv[1], sys.argv[2]
    backend = sys.argv[3] if len(sys.argv) > 3 else "interpreter"
    with structlog.testing.capture_logs() as logs:
        iso = isolation()
        # the source policy would refuse the snoop's imports: what is tested is what the sandbox lets through
        v = verify_candidate(task, candidate, "snoop", get_backend(backend), timeout=300, static_policy=False)
    print(json.dumps({"verification": v.model_dump(), "isolation": iso.model_dump(),
                      "logs": [{k: str(val) for k, val in e.items()} for e in logs]}))
