"""docs/detectors.md is generated from the catalog and must match it."""

from __future__ import annotations

from pathlib import Path

import importlib.util

from tritondx.tools.ir.registry import REGISTRY

ROOT = Path(__file__).resolve().parents[3]
DOC = ROOT / "docs" / "detectors.md"
_spec = importlib.util.spec_from_file_location("catalog_doc", ROOT / "scripts" / "catalog_doc.py")
catalog_doc = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(catalog_doc)   # registers the CUDA and the Ascend detectors


def test_doc_is_generated_from_catalog():
    text = catalog_doc.render()
    assert DOC.read_text() == text, "regenerate: .venv/bin/python scripts/catalog_doc.py > docs/detectors.md"
    for det_id, det in REGISTRY.items():
        assert f"| `{det_id}` | {det.tier} |" in text
        assert f"### `{det_id}`" in text  # every detector documents how it decides
