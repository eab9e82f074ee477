"""What ``tritondx capture`` recorded, as typed records (the hook inside the program writes plain JSON)."""

from __future__ import annotations

from typing import Any, Literal, Optional

from pydantic import BaseModel, Field


class ArgRecord(BaseModel):
    """One kernel argument of one launch signature."""

    kind: Literal["none", "bool", "int", "float", "str", "dtype", "tensor", "other"]
    value: Any = None
    shape: list[int] = []
    stride: list[int] = []
    dtype: str = ""
    offset: int = 0
    device: str = ""
    storage: int = 0            # the storage's address at capture: which arguments share memory
    storage_bytes: int = 0
    min: Optional[float] = None
    max: Optional[float] = None
    mean: Optional[float] = None
    std: Optional[float] = None
    values: Optional[list[int]] = None       # the distinct values of a small-range integer tensor
    sentinels: Optional[list[int]] = None    # a few negative values among non-negative indices
    nonneg_min: Optional[int] = None
    type: str = ""
    repr: str = ""

    @property
    def numel(self) -> int:
        n = 1
        for s in self.shape:
            n *= s
        return n

    @property
    def nbytes(self) -> int:
        import torch
        return self.numel * torch.empty(0, dtype=getattr(torch, self.dtype)).element_size() if self.dtype else 0


class FunctionInfo(BaseModel):
    """A Python function's source and where it lies in its file."""

    name: str
    qualname: str
    module: str
    file: str
    start_line: int            # first decorator line
    def_line: int
    end_line: int
    source: str
    params: list[str]
    constexprs: list[str] = []
    defaults: dict[str, Any] = {}


class ClosureItem(BaseModel):
    """A global the kernel's source names: a module, an importable object, a constant or a copied function."""

    name: str
    kind: Literal["module", "import", "constant", "function"]
    module: str = ""
    attr: str = ""
    value: Any = None
    constexpr: bool = False
    jit: bool = False
    info: Optional[FunctionInfo] = None


class KernelRecord(FunctionInfo):
    key: str
    closure: Optional[list[ClosureItem]] = None
    closure_error: str = ""


class GroupRecord(BaseModel):
    """All launches of one kernel with one signature (shapes, strides, dtypes, scalars, grid, options)."""

    kernel: str
    count: int
    total_ms: float
    timed: int = 0
    sites: dict[str, int] = {}
    args: dict[str, ArgRecord]
    options: dict[str, Any] = {}
    grid: Optional[list[int]] = None
    written: list[str] = []
    failed: str = ""            # the launch raised this (hook.describe_failure): no written tensors to read


class LaunchFailure(BaseModel):
    """A kernel whose launch raised (the first such launch; ``count``: all of them)."""

    kernel: str
    name: str
    file: str
    def_line: int
    site: str = ""
    count: int = 1
    interpreter: bool = False
    error: str
    line: Optional[int] = None
    line_text: str = ""
    why: str = ""
    interpreter_unsupported: bool = False


class ProgramError(BaseModel):
    """The program's uncaught exception (recorded by the hook's ``sys.excepthook``)."""

    error: str
    at: Optional[str] = None


class CaptureFile(BaseModel):
    """One process's records."""

    pid: int
    argv: list[str] = []
    timing: Literal["cuda_events", "wall"]
    interpreter: bool = False
    kernels: list[KernelRecord]
    groups: list[GroupRecord]
    overflow: dict[str, int] = {}
    errors: list[str] = []
    failures: list[LaunchFailure] = []
    program_error: Optional[ProgramError] = None


class KernelSummary(BaseModel):
    """One kernel over every process: its launch signatures, time and share."""

    kernel: KernelRecord
    groups: list[GroupRecord]
    launches: int
    total_ms: float
    share: float = 0.0
    call_share: float = 0.0
    sites: dict[str, int] = Field(default_factory=dict)
    overflow: int = 0

    @property
    def task_name(self) -> str:
        return self.kernel.name.strip("_") or "kernel"
