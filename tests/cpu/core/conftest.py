import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]
EXAMPLES = ROOT / "examples"


@pytest.fixture
def cli(tmp_path):
    """Run the installed CLI in a subprocess (as a user would)."""
    def run(*args, env=None, timeout=900):
        exe = shutil.which("tritondx") or str(Path(sys.executable).parent / "tritondx")
        e = {**os.environ, "TRITONDX_RUNS": str(tmp_path / "runs"), **(env or {})}
        return subprocess.run([exe, *args], capture_output=True, text=True, timeout=timeout, env=e, cwd=tmp_path)
    return run
