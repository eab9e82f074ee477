"""Ascend targets tritondx knows: the names the CLI accepts, the arch string triton-ascend compiles
for, and the hardware figures the detectors compare against.

Where each figure comes from
----------------------------
Arch names
    The list of arch strings that triton-ascend 3.2.0 accepts is ``valid_arch_list`` in
    ``triton/backends/ascend/utils.py::get_ascend_arch_from_env`` of the installed wheel
    (Ascend910B1-4, Ascend910_9362/9372/9381/9382/9391/9392, Ascend310B1-4,
    Ascend910_9579/9581/9589/9599). The 950 path is chosen by the backend option
    ``compile_on_910_95`` (``NPUOptions`` in ``triton/backends/ascend/compiler.py``), which the
    adapter passes receive as ``compile-on-910-95=...``.

Core counts (cube = AIC, vector = AIV)
    CANN writes them in ``<cann>/<arch>-linux/data/platform_config/<SoC>.ini``, section
    ``[SoCInfo]`` (``cube_core_cnt`` / ``vector_core_cnt``). Ascend910B4.ini and Ascend910B3.ini:
    20 / 40; Ascend910B1/B2: 24 / 48 (values quoted from those files in public Ascend tutorials).
    A3 (Ascend910_93xx, per die): 24 / 48 is the example CANN's ATC ``--aicore_num`` page gives for
    A2/A3 products; the smaller A3 bins may expose fewer cores, so the real figure should be read
    from the .ini on the machine. Ascend 950PR (e.g. 950PR_9589 / 958b platform_config):
    ``cube_core_cnt=32``, ``vector_core_cnt=64``. triton-ascend itself launches one vector-core
    block per program for ``mix_mode == "aiv"`` kernels and one AI-core block otherwise
    (``num_physical_blocks`` in ``triton/backends/ascend/driver.py``).

Unified buffer (UB) per vector core
    A2/A3: 192 KB -- triton-ascend docs, ``docs/en/migration_guide/architecture_difference.md``
    ("Atlas 800T/I A2 has an on-chip memory capacity of 192 KB").
    950: 248 KB usable -- CANN Ascend C API doc ``GetRuntimeUBSize`` (asc-devkit
    ``docs/api/context/GetRuntimeUBSize.md``): on Ascend 950PR/950DT the runtime UB is a fixed
    248 KB, capped at 216 KB when SIMD and SIMT code are mixed (the 216 KB figure also appears in
    triton-ascend 3.2 ``driver.py`` as ``cfgInfo.localMemorySize = 216 * 1024`` for SIMT launches).

Grid limit
    triton-ascend 3.2 ``JITFunction.run`` raises "grid should be less than 65536!" when
    ``grid[0]*grid[1]*grid[2] > 65535`` unless ``TRITON_ALL_BLOCKS_PARALLEL=1``.
"""

from __future__ import annotations

from pydantic import BaseModel
from tritondx.errors import BackendUnavailable

#: Arch strings the triton-ascend 3.2 backend accepts (utils.get_ascend_arch_from_env).
VALID_ARCHES: tuple[str, ...] = (
    "Ascend910B1", "Ascend910B2", "Ascend910B3", "Ascend910B4",
    "Ascend910_9362", "Ascend910_9372", "Ascend910_9381", "Ascend910_9382",
    "Ascend910_9391", "Ascend910_9392",
    "Ascend310B1", "Ascend310B2", "Ascend310B3", "Ascend310B4",
    "Ascend910_9579", "Ascend910_9581", "Ascend910_9589", "Ascend910_9599",
)

MAX_GRID = 65535
KB = 1024


class AscendTarget(BaseModel):
    """One Ascend compile target and the figures detectors compare against."""

    name: str                       # tritondx target name, e.g. "ascend910b"
    arch: str                       # what GPUTarget("npu", arch, 0) gets, e.g. "Ascend910B4"
    generation: str                 # "A2", "A3", "950", "310B"
    compile_on_910_95: bool = False
    cube_cores: int
    vector_cores: int
    ub_bytes: int
    ub_source: str
    cores_source: str

    def cores_for(self, mix_mode: str | None) -> int:
        """Physical blocks one launch can occupy: vector cores for "aiv" kernels, else AI cores."""
        return self.vector_cores if (mix_mode or "aiv").lower().startswith("aiv") else self.cube_cores


_A2_UB = "triton-ascend docs/en/migration_guide/architecture_difference.md (A2: 192 KB on-chip)"
_950_UB = "CANN asc-devkit docs GetRuntimeUBSize.md (950PR/950DT: 248 KB, 216 KB with SIMT mixed)"
_INI = "CANN platform_config/{soc}.ini [SoCInfo] cube_core_cnt / vector_core_cnt"

#: Per-arch hardware table (see the module docstring for sources).
ARCH_TABLE: dict[str, dict] = {
    "Ascend910B1": dict(generation="A2", cube_cores=24, vector_cores=48, ub_bytes=192 * KB),
    "Ascend910B2": dict(generation="A2", cube_cores=24, vector_cores=48, ub_bytes=192 * KB),
    "Ascend910B3": dict(generation="A2", cube_cores=20, vector_cores=40, ub_bytes=192 * KB),
    "Ascend910B4": dict(generation="A2", cube_cores=20, vector_cores=40, ub_bytes=192 * KB),
    **{a: dict(generation="A3", cube_cores=24, vector_cores=48, ub_bytes=192 * KB)
       for a in ("Ascend910_9362", "Ascend910_9372", "Ascend910_9381", "Ascend910_9382",
                 "Ascend910_9391", "Ascend910_9392")},
    **{a: dict(generation="950", cube_cores=32, vector_cores=64, ub_bytes=248 * KB)
       for a in ("Ascend910_9579", "Ascend910_9581", "Ascend910_9589", "Ascend910_9599")},
}

#: tritondx target names -> default arch.
TARGET_ARCH: dict[str, str] = {
    "ascend910b": "Ascend910B4",      # Atlas A2
    "ascend910_93": "Ascend910_9391",  # Atlas A3
    "ascend950": "Ascend910_9589",     # Ascend 950 (compile_on_910_95)
}
TARGET_ALIASES = {"a2": "ascend910b", "a3": "ascend910_93", "910b": "ascend910b", "910_93": "ascend910_93",
                  "950": "ascend950", "ascend910_95": "ascend950"}


def resolve_target(target: str) -> AscendTarget:
    """Map a tritondx target name (``ascend950``, ``ascend910b``, ``ascend910_93``) or a raw arch
    string (``Ascend910B2``) to an :class:`AscendTarget`; raise ``BackendUnavailable`` otherwise."""
    key = target.strip()
    low = TARGET_ALIASES.get(key.lower(), key.lower())
    if low in TARGET_ARCH:
        name, arch = low, TARGET_ARCH[low]
    else:
        arch = next((a for a in VALID_ARCHES if a.lower() == low), "")
        if not arch:
            raise BackendUnavailable(
                f"unknown Ascend target {target!r}: use one of {', '.join(TARGET_ARCH)} "
                f"or an arch triton-ascend 3.2 accepts ({', '.join(VALID_ARCHES)})")
        name = next((n for n, a in TARGET_ARCH.items() if a == arch), arch.lower())
    spec = ARCH_TABLE.get(arch)
    if spec is None:
        raise BackendUnavailable(f"Ascend arch {arch} is accepted by triton-ascend but tritondx has no "
                                 "hardware figures for it (only A2, A3 and 950 are tabled)")
    gen = spec["generation"]
    return AscendTarget(
        name=name, arch=arch, compile_on_910_95=(gen == "950"), **spec,
        ub_source=_950_UB if gen == "950" else _A2_UB,
        cores_source=_INI.format(soc=arch),
    )


def core_table() -> list[dict]:
    """The table of every tabled arch (for reports and docs)."""
    rows = []
    for arch, spec in ARCH_TABLE.items():
        t = resolve_target(arch)
        rows.append({"arch": arch, "generation": spec["generation"], "cube_cores": t.cube_cores,
                     "vector_cores": t.vector_cores, "ub_kb": t.ub_bytes // KB,
                     "cores_source": t.cores_source, "ub_source": t.ub_source})
    return rows
