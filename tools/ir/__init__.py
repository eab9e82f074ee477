"""Triton IR, read as text (trusted side: nothing compiled here runs): stage parsers with source lines
(``parse``), a def-use view (``ssa``), what a detector sees (``context``), the NVIDIA detector catalog
(``detectors``), the work counted from IR (``work``), and the catalog survey over task files (``survey``)."""
