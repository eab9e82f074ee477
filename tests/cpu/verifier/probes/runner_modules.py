"""Probe (not a cheat): reports, through the only channel an import error has, which tritondx
modules the candidate's runner process holds. Used by test_trust_boundary.py."""

import sys

import torch
import triton
import triton.language as tl

_names = sorted(n for n in vars(sys)["modules"] if n.startswith("tritondx") or n.startswith("_dx_"))
_env = sorted(k for k in __import__("os").environ if "SEAL" in k or "KEY" in k or "TOKEN" in k)
_cwd = sorted(__import__("os").listdir("."))
raise RuntimeError(f"modules={','.join(_names)} env={','.join(_env)} cwd={','.join(_cwd)}")


@triton.jit
def k(x_ptr):
    tl.store(x_ptr, 1.0)


def launch(x, y):
    return x
