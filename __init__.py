"""tritondx: makes slow Triton kernels fast and explains why they were slow.

The repository root is the package: ``agents/`` is ``tritondx.agents``, ``tools/`` is
``tritondx.tools``, ``graph.py`` is ``tritondx.graph`` (see pyproject.toml's package-dir).
"""

import time as _time

__version__ = "0.1.0"
#: when this process imported the package: the start of a CLI run's "startup" phase (runner.py); the
#: process's own start time would also count whatever the process ran before an ``exec`` (a shell script)
IMPORTED_AT = _time.time()
