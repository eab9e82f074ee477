"""Framed messages between the judge and the candidate runner (no tritondx imports: the runner
loads this file by path).

A message is a JSON header frame followed by one frame per tensor it names; a frame is an 8-byte
little-endian length and that many bytes. A tensor travels as raw bytes of the smallest span of its
storage it covers, with its dtype, shape, strides and offset in that span: the receiver rebuilds a
plain ``torch.Tensor`` (a subclass is flattened, nothing is ever unpickled). Sizes are checked
against a cap, so a runner cannot make the judge allocate without bound.
"""

from __future__ import annotations

import json
import struct
from typing import Any, BinaryIO

import torch

DTYPES = {str(d).replace("torch.", ""): d for d in (
    torch.float64, torch.float32, torch.float16, torch.bfloat16, torch.int64, torch.int32, torch.int16,
    torch.int8, torch.uint8, torch.bool, torch.complex64, torch.complex128)}
for _name in ("float8_e4m3fn", "float8_e5m2", "uint16", "uint32", "uint64"):
    if isinstance(getattr(torch, _name, None), torch.dtype):
        DTYPES[_name] = getattr(torch, _name)

_LEN = struct.Struct("<Q")
#: fcntl's F_SETPIPE_SZ (Linux), and the pipe size asked for: fewer wake-ups per large tensor
_F_SETPIPE_SZ = 1031
PIPE_BYTES = 1 << 20


def widen_pipe(fd: int) -> None:
    """Ask for a 1 MiB pipe buffer (the most an unprivileged process gets by default); keep the default
    where the system refuses."""
    try:
        import fcntl
        fcntl.fcntl(fd, _F_SETPIPE_SZ, PIPE_BYTES)
    except (OSError, ImportError):
        pass


class WireError(Exception):
    """A malformed or oversized message (the peer is broken or hostile)."""


def _write_frame(f: BinaryIO, data: bytes | memoryview) -> None:
    """The length, then the bytes, written from where they are (a tensor's memory: no copy here)."""
    f.write(_LEN.pack(memoryview(data).nbytes))
    f.write(data)


def _read_exact(f: BinaryIO, n: int) -> bytearray:
    """``n`` bytes read straight into one buffer of the receiver's (no chunks joined, no copy after)."""
    buf = bytearray(n)
    view, got = memoryview(buf), 0
    while got < n:
        k = f.readinto(view[got:])
        if not k:
            raise WireError("the peer closed the pipe mid-message" if got or n else "the peer closed the pipe")
        got += k
    return buf


def _read_frame(f: BinaryIO, cap: int) -> bytearray:
    head = f.read(_LEN.size)
    if not head:
        raise EOFError("the peer closed the pipe")
    if len(head) < _LEN.size:
        head += bytes(_read_exact(f, _LEN.size - len(head)))
    (n,) = _LEN.unpack(head)
    if n > cap:
        raise WireError(f"a frame of {n} bytes is over the cap of {cap}")
    return _read_exact(f, n)


def _span(t: torch.Tensor) -> int:
    if t.numel() == 0:
        return 0
    return 1 + sum((s - 1) * st for s, st in zip(t.shape, t.stride()))


def _encode(obj: Any, blobs: list[memoryview]) -> Any:
    if isinstance(obj, torch.Tensor):
        t = torch.Tensor.detach(obj)
        t = t.as_subclass(torch.Tensor) if type(t) is not torch.Tensor else t
        t = t.to("cpu")
        span = _span(t)
        flat = torch.as_strided(t, (span,), (1,), t.storage_offset()) if span else t.reshape(0)
        raw = flat.contiguous().view(torch.uint8) if flat.dtype != torch.bool else flat.contiguous().to(torch.uint8)
        blobs.append(memoryview(raw.numpy()))   # written from the tensor's memory (it lives until sent)
        return {"__tensor__": len(blobs) - 1, "dtype": str(t.dtype).replace("torch.", ""), "shape": list(t.shape),
                "stride": list(t.stride()), "span": span}
    if isinstance(obj, (list, tuple)):
        return [_encode(x, blobs) for x in obj]
    if isinstance(obj, dict):
        return {str(k): _encode(v, blobs) for k, v in obj.items()}
    if obj is None or isinstance(obj, (bool, int, float, str)):
        return obj
    raise WireError(f"cannot send a {type(obj).__name__}")


class Packed:
    """A message made ready to send: its header and its tensors' bytes in host memory (every device-to-host copy
    done). ``nbytes``: the tensors' bytes."""

    def __init__(self, obj: Any) -> None:
        self.blobs: list[memoryview] = []
        self.header = json.dumps({"body": _encode(obj, self.blobs), "blobs": len(self.blobs)}).encode()
        self.nbytes = sum(b.nbytes for b in self.blobs)

    def write(self, f: BinaryIO) -> None:
        _write_frame(f, self.header)
        for b in self.blobs:
            _write_frame(f, b)
        f.flush()


def send(f: BinaryIO, obj: Any) -> None:
    Packed(obj).write(f)


def _decode(obj: Any, blobs: list[bytearray], device: str, pool: list | None, pool_used: list) -> Any:
    if isinstance(obj, dict) and "__tensor__" in obj:
        dtype = DTYPES.get(obj.get("dtype"))
        i, shape, stride, span = obj["__tensor__"], obj["shape"], obj["stride"], obj["span"]
        if dtype is None or not isinstance(i, int) or not 0 <= i < len(blobs):
            raise WireError(f"bad tensor descriptor {str(obj)[:120]}")
        if not all(isinstance(x, int) and x >= 0 for x in shape + stride + [span]) or len(shape) != len(stride):
            raise WireError(f"bad tensor shape/stride {shape} {stride}")
        itemsize = torch.empty(0, dtype=dtype).element_size()
        if len(blobs[i]) != span * itemsize or (span and span < 1 + sum((s - 1) * st for s, st in zip(shape, stride))):
            raise WireError("tensor bytes do not match its descriptor")
        if span == 0:
            return torch.empty(shape, dtype=dtype, device=device)
        raw = torch.frombuffer(blobs[i], dtype=torch.uint8)   # the receiver's own buffer (_read_exact)
        flat = raw.to(torch.bool) if dtype == torch.bool else raw.view(dtype)
        k = len(pool_used)
        pool_used.append(None)
        if pool is not None and k < len(pool) and pool[k] is not None and pool[k].dtype == dtype \
                and pool[k].numel() == span and pool[k].device.type == torch.device(device).type:
            pool[k].copy_(flat)   # same memory as the previous call's input: a data_ptr cache goes stale
            flat = pool[k]
        else:
            try:
                flat = flat.to(device)
            except RuntimeError as exc:   # out of device memory: the answer is too large to judge here
                raise WireError(f"a tensor of {span * itemsize} bytes does not fit on {device}: "
                                f"{str(exc).splitlines()[0][:120]}") from None
        pool_used[k] = flat
        return torch.as_strided(flat, shape, stride, 0)
    if isinstance(obj, list):
        return [_decode(x, blobs, device, pool, pool_used) for x in obj]
    if isinstance(obj, dict):
        return {k: _decode(v, blobs, device, pool, pool_used) for k, v in obj.items()}
    return obj


def recv_raw(f: BinaryIO, cap: int = 1 << 34) -> tuple[Any, list[bytearray]]:
    """One message as it came: its body (tensors still descriptors) and its tensors' bytes (``decode`` rebuilds it,
    at once or later: a runner keeps a staged case's inputs in host memory until a call names them)."""
    header = json.loads(_read_frame(f, min(cap, 64 << 20)))
    n = header.get("blobs", 0)
    if not isinstance(n, int) or n < 0 or n > 4096:
        raise WireError(f"bad blob count {n!r}")
    blobs, total = [], 0
    for _ in range(n):
        b = _read_frame(f, cap - total)
        total += len(b)
        blobs.append(b)
    return header.get("body"), blobs


def decode(body: Any, blobs: list[bytearray], device: str = "cpu", pool: list | None = None) -> Any:
    """A message received with ``recv_raw``, tensors rebuilt on ``device`` (``recv``'s ``pool``); the bytes stay
    the receiver's, so the same message decodes again into fresh tensors."""
    used: list = []
    out = _decode(body, blobs, device, pool, used)
    if pool is not None:
        pool[:] = used
    return out


def recv(f: BinaryIO, cap: int = 1 << 34, device: str = "cpu", pool: list | None = None) -> Any:
    """One message; tensors rebuilt on ``device`` with their strides. ``cap``: most bytes in all.
    ``pool``: storage spans of an earlier message to write this one's tensors into (in order, when
    dtype and size match); on return it holds this message's spans."""
    body, blobs = recv_raw(f, cap)
    return decode(body, blobs, device, pool)
