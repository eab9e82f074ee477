"""Triton IR, read as text (trusted side: nothing compiled here runs): the one MLIR reader (``mlir``: splitter,
op heads, locations) shared with the Ascend path, stage parsers with source lines (``parse``), layouts and
tensor types (``layouts``), a def-use view (``ssa``) and the strides read from it (``strides``), what a CUDA
detector sees (``context``), the detector registry of every target (``registry``), the CUDA detector catalog
(``detectors/``) and the work counted from IR (``work``)."""
