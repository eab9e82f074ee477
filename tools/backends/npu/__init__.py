"""The Ascend NPU backend: ``backend`` (torch_npu) and ``target`` (``ascend*`` compile targets: triton-ascend's
environment, installed on first use, and its bridge for the IR, ``tools/npu/``)."""
