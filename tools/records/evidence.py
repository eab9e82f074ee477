"""Evidence records shared by every tier: findings, artifacts, measurements.

Every finding carries its evidence: the detector, the IR stage and line, the source line it maps
to, the metric and its value, and the rewrite families it suggests.
"""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, Field

Tier = Literal["triage", "profile", "ir", "compiler"]
TIERS: tuple[Tier, ...] = ("triage", "profile", "ir", "compiler")
Severity = Literal["info", "low", "medium", "high"]


class Finding(BaseModel):
    """One diagnosed fact about the kernel, with the evidence behind it."""

    id: str = Field(description="unique in a run, e.g. 'ir.vector_width:axpy_kernel:14'")
    detector: str = Field(description="detector id from the catalog, e.g. 'non_vectorized_global_access'")
    tier: Tier
    stage: str = Field(description="where the evidence was read: source, ttir, ttgir, llir, ptx, sass, passes, "
                                   "timing, ncu, ttadapter")
    kernel: str | None = None
    severity: Severity = "medium"
    message: str
    source_line: int | None = None
    source_text: str | None = None
    ir_line: str | None = None
    metric: dict[str, float | int | str | bool] = Field(default_factory=dict)
    suggests: list[str] = Field(default_factory=list, description="rewrite family ids this finding motivates")
    wants: dict[str, Literal["larger", "smaller"]] = Field(
        default_factory=dict, description="launch values (metric keys) the finding asks to change, and which way: "
                                          "a candidate cites it only when it changes them that way")
    subject: str | None = Field(None, description="which version the evidence was read from: 'initial' or a "
                                                  "candidate id")


class ArtifactRef(BaseModel):
    """A large artifact kept as a file in the run folder, referenced by path and content hash."""

    path: str
    sha256: str
    bytes: int
    kind: str

    @classmethod
    def write(cls, folder: Path, name: str, content: str | bytes, kind: str) -> "ArtifactRef":
        folder.mkdir(parents=True, exist_ok=True)
        data = content.encode() if isinstance(content, str) else content
        digest = hashlib.sha256(data).hexdigest()
        path = folder / name
        path.write_bytes(data)
        return cls(path=str(path), sha256=digest, bytes=len(data), kind=kind)

    def read_text(self) -> str:
        return Path(self.path).read_text()


def finding_id(detector: str, kernel: str | None, line: int | None) -> str:
    return f"{detector}:{kernel or '-'}:{line if line is not None else '-'}"
