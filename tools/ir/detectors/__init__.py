"""The CUDA detector catalog, grouped by what the detectors read: global memory access (``memory``), layouts
(``layouts``), the tensor-core path (``dot``), resources and launch shape (``resources``), the compiler's passes
(``pipelining``, ``pass_summary``). Importing this package registers every one of them, in that order, in
``tools/ir/registry.py``; docs/detectors.md lists them (``scripts/catalog_doc.py``)."""

from tritondx.tools.ir.detectors import memory, layouts, dot, resources, pipelining, pass_summary  # noqa: F401, I001
