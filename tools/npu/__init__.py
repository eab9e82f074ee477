"""The Ascend NPU path of tritondx: compile a task's kernels with triton-ascend (no NPU needed),
read the TTIR and the adapter IR, and diagnose them.

- ``toolchain``: the separate triton-ascend venv (``find_python``, ``install``);
- ``targets``: ``ascend910b`` (A2), ``ascend910_93`` (A3), ``ascend950`` -> arch, cores, UB size;
- ``capture``: ``capture_ascend(task_path, target, out_dir, ...)`` -> ``AscendCapture``
  (runs ``capture_script.py``, a standalone script, inside the triton-ascend venv);
- ``adapter_ir``: the TTIR / adapter-IR region view with source locations (read with ``tools/ir/mlir.py``);
- ``kernel``: ``KernelContext``, what an Ascend detector sees of one kernel;
- ``detectors/``: the Ascend detectors, registered in the shared registry (``tools/ir/registry.py``);
- ``analyze``: ``analyze_capture(capture, tier)`` / ``analyze_kernel(...)`` -> ``Finding`` list;
- ``bridge``: ``analyze_ascend``, the IR and compiler tiers for Ascend targets.
"""
