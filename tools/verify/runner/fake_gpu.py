"""Device answers as on an H200, for the flipped runner only (untrusted side; no tritondx imports: the
runner loads this file by path).

In a runner started with ``hello["flip"]`` (the judge's device flip, ``flip.py``) the candidate's
device-kind tests are constants of their CUDA side, so its CUDA-side code runs on CPU tensors. The
queries such code typically makes about the device answer as on a GPU, but only to calls made from
the candidate's own file (frames of torch, Triton and the runner get the real answers):

- ``torch.cuda.get_device_properties`` -> an object with an H200's numbers (132 SMs, ...);
- ``get_device_capability`` -> (9, 0); ``get_device_name`` -> its name;
- ``is_available`` -> True, ``device_count`` -> 1, ``current_device`` -> 0 (as on that GPU: a
  CUDA side that asked and got "no GPU" would be checked in a world no GPU run sees).

Not faked: anything that acts (``synchronize``, streams, events, allocation on a ``cuda`` device,
``.cuda()``): faking them would hide what the CUDA side really does, and the timing functions are
watched for replacement (``guard.TimingSnapshot``). A CUDA side that needs them fails here, and the
candidate is rejected with that reason: its CUDA side could not be verified on this device.
Install after ``guard.install`` (the guard keeps the real functions) and before the candidate import.
"""

from __future__ import annotations

import sys

#: what ``torch.cuda.get_device_properties`` reports on the H200 the project is measured on (sm_90)
H200 = {"name": "NVIDIA H200", "major": 9, "minor": 0, "multi_processor_count": 132,
        "total_memory": 143771 << 20, "L2_cache_size": 50 << 20, "max_threads_per_multi_processor": 2048,
        "regs_per_multiprocessor": 65536, "warp_size": 32, "shared_memory_per_block": 48 << 10,
        "shared_memory_per_block_optin": 227 << 10, "shared_memory_per_multiprocessor": 228 << 10,
        "max_threads_per_block": 1024, "is_integrated": False, "is_multi_gpu_board": False,
        "gcnArchName": "NVIDIA H200", "uuid": "GPU-00000000-0000-0000-0000-000000000000"}


class DeviceProperties:
    """Read-only stand-in for ``torch._C._CudaDeviceProperties``."""

    __slots__ = tuple(H200)

    def __init__(self) -> None:
        for k, v in H200.items():
            object.__setattr__(self, k, v)

    def __setattr__(self, name, value):
        raise AttributeError("read-only")

    def __repr__(self) -> str:
        return (f"_CudaDeviceProperties(name='{self.name}', major={self.major}, minor={self.minor}, "
                f"total_memory={self.total_memory >> 20}MB, multi_processor_count={self.multi_processor_count}, "
                f"L2_cache_size={self.L2_cache_size >> 20}MB)")


def install(candidate_path: str) -> list[str]:
    """Replace the device queries of ``torch.cuda`` with ones that answer as an H200 to the candidate's
    file; returns the names replaced."""
    import torch
    props = DeviceProperties()
    answers = {"get_device_properties": lambda *a, **k: props,
               "get_device_capability": lambda *a, **k: (H200["major"], H200["minor"]),
               "get_device_name": lambda *a, **k: H200["name"],
               "is_available": lambda *a, **k: True,
               "device_count": lambda *a, **k: 1,
               "current_device": lambda *a, **k: 0}
    done = []
    for name, answer in answers.items():
        real = getattr(torch.cuda, name, None)
        if real is None:
            continue

        def query(*args, _real=real, _answer=answer, **kwargs):
            if sys._getframe(1).f_code.co_filename == candidate_path:
                return _answer(*args, **kwargs)
            return _real(*args, **kwargs)

        query.__name__ = query.__qualname__ = name
        query.__doc__ = real.__doc__
        setattr(torch.cuda, name, query)
        done.append(name)
    return done
