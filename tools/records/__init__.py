"""Plain records shared by every layer, at the bottom of the import graph: they import pydantic and nothing of
tritondx. ``evidence``: findings and artifacts; ``verify``: verdicts, checks, timings, hardware checks."""
