"""docs/detectors.md is generated from the catalog and must match it."""

from __future__ import annotations

from pathlib import Path

from tritondx.tools.ir.catalog_doc import render
from tritondx.tools.ir.detectors import REGISTRY

DOC = Path(__file__).resolve().parents[3] / "docs" / "detectors.md"


def test_doc_is_generated_from_catalog():
    text = render()
    assert DOC.read_text() == text, "regenerate: python -m tritondx.tools.ir.catalog_doc > docs/detectors.md"
    for det_id, det in REGISTRY.items():
        assert f"| `{det_id}` | {det.tier} |" in text
        assert f"### `{det_id}`" in text  # every detector documents how it decides
