"""The records of a launch analysis (``launches.analyze``): each Triton launch reachable from ``launch()``
(``LaunchSite``), where each of its launch values is defined (``ParamDef``, of a ``DefKind``) and its grid
(``GridDef``); and Triton's default launch options, the definition of an option no launch sets."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field


DEFAULT_OPTIONS = {"num_warps": 4, "num_stages": 3}   # Triton's defaults on NVIDIA


DefKind = Literal["literal", "local", "signature_default", "module_constant", "dict_entry", "helper_return",
                  "autotune_config", "heuristic", "kernel_default", "computed", "unset"]


class ParamDef(BaseModel):
    """Where one launch value is defined."""

    param: str                      # kernel constexpr, num_warps or num_stages
    kind: DefKind
    function: str                   # qualified name of the function holding the definition; "<module>" for constants
    line: int = 0                   # file position of the defining expression (1-based line, 0-based column)
    col: int = 0
    name: str = ""                  # the local / parameter / constant / dict key that carries it
    source: str = ""                # the defining expression's code
    value: int | None = None        # its value where static
    values: list[int] = Field(default_factory=list)     # autotune_config: the values across the configs
    chain: list[str] = Field(default_factory=list)      # how the launch argument reaches the definition
    shared_with: list[str] = Field(default_factory=list)   # "site_id:param" of other launches using it
    grid_tied: bool = False         # this launch's grid reads the same definition (they move together)
    other_uses: int = 0             # reads of the carrier name outside launch arguments and grids
    editable: bool = False          # an int the rewrites may replace where it stands


class GridDef(BaseModel):
    kind: Literal["tuple", "lambda", "function", "computed"]
    function: str
    line: int = 0
    source: str = ""
    meta_keys: list[str] = Field(default_factory=list)   # META["..."] the grid reads
    names: list[str] = Field(default_factory=list)       # free names it reads


class LaunchSite(BaseModel):
    id: str                          # "kernel@function:line" (+ "#n" for the n-th path to the same call)
    kernel: str
    function: str                    # qualified name of the launching function
    path: list[str]                  # calls from launch() down to it
    line: int
    autotuned: bool = False
    autotune_configs: list[dict[str, int]] = Field(default_factory=list)
    heuristics: list[str] = Field(default_factory=list)
    params: dict[str, ParamDef] = Field(default_factory=dict)
    grid: GridDef | None = None


class LaunchAnalysis(BaseModel):
    sites: list[LaunchSite] = Field(default_factory=list)

    def for_kernel(self, kernel: str) -> list[LaunchSite]:
        return [s for s in self.sites if s.kernel == kernel]
