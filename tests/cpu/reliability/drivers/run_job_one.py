"""Run one sandboxed probe job of a task file the way the orchestrator does, in a process of its own
(so that the test can give this "orchestrator" a secret in its environment, like a real run's API key).

    python run_job_one.py TASK  ->  one JSON line: the job's result and the sandbox isolation used
"""

from __future__ import annotations

import json
import sys

from tritondx.tools.exec.sandbox import isolation, run_job

if __name__ == "__main__":
    iso = isolation()
    r = run_job({"kind": "probe", "task": sys.argv[1], "device": "cpu"}, timeout=300,
                env={"TRITON_INTERPRET": "1"})
    print(json.dumps({"job": r.model_dump(), "isolation": iso.model_dump()}))
