"""The Ascend detector catalog, grouped by what the detectors read: global memory access (``access``), the
unified buffer (``buffers``), the launch and the cube (``launch``). Importing this package registers every one
of them, in that order, in ``tools/ir/registry.py``; ``tools/npu/analyze.py`` runs them."""

from tritondx.tools.npu.detectors import access, buffers, launch  # noqa: F401
