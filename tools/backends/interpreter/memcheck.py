"""Bounds checks for the Triton interpreter (``TRITON_INTERPRET=1``): every load, store and atomic of a
launch must address the memory of a tensor argument of that launch.

Under the interpreter a kernel's pointers are host addresses, so an unmasked access past a tensor reads
or writes the process heap: garbage values, heap corruption ("malloc(): corrupted top size") or a crash
some calls later, found or missed by chance. With ``install()`` the access itself raises
:class:`OutOfBoundsAccess`, naming the operation, the kernel and how far the first bad address lies
from the nearest argument, on the call that makes it, every time: the CPU counterpart of
compute-sanitizer's memcheck on a GPU.

Installed in every verification runner (``tools/verify/runner/runner.py``, ``zygote.py``), the candidate's and
the original's alike. It is a correctness aid, not a defence: a candidate that removed it would only
get back undefined behaviour, and its outputs are still judged by the trusted side.
"""

from __future__ import annotations

import threading
from typing import Any

import numpy as np

#: the message prefix the judge classifies (``out_of_bounds``)
OOB_TAG = "OutOfBoundsAccess"


class OutOfBoundsAccess(RuntimeError):
    pass


_state = threading.local()


def _storage_ranges(args: Any, out: list[tuple[int, int]]) -> None:
    if isinstance(args, (tuple, list)):
        for a in args:
            _storage_ranges(a, out)
    elif isinstance(args, dict):
        for a in args.values():
            _storage_ranges(a, out)
    elif hasattr(args, "untyped_storage"):
        st = args.untyped_storage()
        out.append((int(st.data_ptr()), int(st.data_ptr()) + int(st.nbytes())))
    elif hasattr(args, "base") and (hasattr(args, "block_shape") or hasattr(args.base, "untyped_storage")):
        _storage_ranges(args.base, out)   # a TensorDescriptor, or ``triton.reinterpret(t, dtype)``'s wrapper


def _check(op: str, ptrs: Any, mask: Any) -> None:
    ranges = getattr(_state, "ranges", None)
    if ranges is None:
        return
    p = np.asarray(ptrs.data)
    if mask is not None:
        m = np.asarray(mask.data)
        if m.shape != p.shape:
            m = np.broadcast_to(m, p.shape)
        if not m.all():
            p = p[m.astype(bool, copy=False)]
    if p.size == 0:
        return
    if p.dtype != np.uint64:
        p = p.astype(np.uint64)
    try:
        size = max(1, int(ptrs.get_element_ty().primitive_bitwidth) // 8)
    except Exception:  # noqa: BLE001 - an element type without a width: one byte
        size = 1
    first_p, last_p = int(p.min()), int(p.max())
    for lo, hi in ranges:   # the usual case: the whole block inside one argument
        if first_p >= lo and last_p + size <= hi:
            return
    p = p.ravel()
    ok = np.zeros(p.shape, dtype=bool)
    for lo, hi in ranges:
        ok |= (p >= lo) & (p + size <= hi)
    if ok.all():
        return
    bad = p[~ok]
    first = int(bad[0])
    if ranges:
        lo, hi = min(ranges, key=lambda r: min(abs(first - r[0]), abs(first - r[1])))
        where = (f"{first - hi} bytes past the end of" if first >= hi else f"{lo - first} bytes before") + \
                f" an argument of {hi - lo} bytes"
    else:
        where = "the launch has no tensor argument"
    raise OutOfBoundsAccess(f"{OOB_TAG}: {op} out of bounds in kernel {getattr(_state, 'kernel', '?')}: "
                            f"{bad.size} of {p.size} addresses outside every tensor argument (first {where})")


def install() -> bool:
    """Wrap the interpreter's memory operations (once per process). False when Triton has no interpreter
    of the expected form (nothing changed)."""
    try:
        from triton.runtime import interpreter as ip
    except ImportError:
        return False
    if getattr(ip, "_tdx_memcheck", False):
        return True
    builder, executor = getattr(ip, "InterpreterBuilder", None), getattr(ip, "GridExecutor", None)
    if builder is None or executor is None or not hasattr(executor, "_init_args_hst"):
        return False
    init_args = executor._init_args_hst

    def _init_args_hst(self, args_dev, kwargs):
        args_hst, kwargs_hst = init_args(self, args_dev, kwargs)
        ranges: list[tuple[int, int]] = []
        _storage_ranges(args_hst, ranges)
        _storage_ranges(kwargs_hst, ranges)
        _state.ranges, _state.kernel = ranges, getattr(self.fn, "__name__", "?")
        return args_hst, kwargs_hst

    load, store = builder.create_masked_load, builder.create_masked_store
    rmw, cas = builder.create_atomic_rmw, builder.create_atomic_cas

    def create_masked_load(self, ptrs, mask, other, *rest):
        _check("load", ptrs, mask)
        return load(self, ptrs, mask, other, *rest)

    def create_masked_store(self, ptrs, value, mask, *rest):
        _check("store", ptrs, mask)
        return store(self, ptrs, value, mask, *rest)

    def create_atomic_rmw(self, op, ptr, val, mask, *rest):
        _check("atomic", ptr, mask)
        return rmw(self, op, ptr, val, mask, *rest)

    def create_atomic_cas(self, ptr, cmp, val, *rest):
        _check("atomic_cas", ptr, None)
        return cas(self, ptr, cmp, val, *rest)

    executor._init_args_hst = _init_args_hst
    builder.create_masked_load, builder.create_masked_store = create_masked_load, create_masked_store
    builder.create_atomic_rmw, builder.create_atomic_cas = create_atomic_rmw, create_atomic_cas
    ip._tdx_memcheck = True
    return True
