"""The verdict's seal: the orchestrator gives each judge job a fresh key in its environment; the
judge takes it out before any other code runs and signs its verdict with it; the orchestrator
accepts a "passed" verdict only with a valid signature. The runner is started after the key left
the environment, with an environment of its own, so a result file it forges cannot carry one."""

from __future__ import annotations

import hashlib
import hmac
import json
import os
import secrets
from typing import Any

SEAL_ENV = "TRITONDX_JOB_SEAL"
#: the answer's parts the seal covers
SEALED = ("passed", "class", "error", "checks", "coverage", "ran", "scope")


def new_key() -> str:
    return secrets.token_hex(32)


def take_key() -> str:
    return os.environ.pop(SEAL_ENV, "")


def _digest(key: str, result: dict[str, Any]) -> str:
    """Over every part of the judge's answer a verdict or report is made from (``SEALED``): it was only
    passed / class / error / checks, so a forged ``coverage`` (what the report says was checked) kept the
    seal. (The worker adds its own figures, such as ``device_usage``, after the judge has signed.)"""
    body = {k: result.get(k) for k in SEALED}
    return hmac.new(key.encode(), json.dumps(body, sort_keys=True, default=str).encode(), hashlib.sha256).hexdigest()


def sign(key: str, result: dict[str, Any]) -> dict[str, Any]:
    return {**result, "seal": _digest(key, result) if key else ""}


def valid(key: str, result: dict[str, Any] | None) -> bool:
    return bool(key and result and isinstance(result.get("seal"), str)
                and hmac.compare_digest(result["seal"], _digest(key, result)))
