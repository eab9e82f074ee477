"""tritondx: makes slow Triton kernels fast and explains why they were slow.

The repository root is the package: ``agents/`` is ``tritondx.agents``, ``tools/`` is
``tritondx.tools``, ``graph.py`` is ``tritondx.graph`` (see pyproject.toml's package-dir).
"""

__version__ = "0.1.0"
