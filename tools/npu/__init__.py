"""The Ascend NPU path of tritondx: compile a task's kernels with triton-ascend (no NPU needed),
read the TTIR and the adapter IR, and diagnose them.

- ``toolchain``: the separate triton-ascend venv (``find_python``, ``install``);
- ``targets``: ``ascend910b`` (A2), ``ascend910_93`` (A3), ``ascend950`` -> arch, cores, UB size;
- ``capture``: ``capture_ascend(task_path, target, out_dir, ...)`` -> ``AscendCapture``
  (runs ``capture_script.py``, a standalone script, inside the triton-ascend venv);
- ``adapter_ir``: TTIR / adapter-IR parser with source locations;
- ``detectors``: ``run_detectors(capture)`` / ``analyze_kernel(...)`` -> ``Finding`` list;
- ``runtime``: ``NpuRuntime`` for a real NPU (untested on hardware);
- ``bridge``: ``analyze_ascend``, the IR and compiler tiers for Ascend targets.
"""
