"""Imports point down (HELPERS.md, ARCHITECTURE.md): an ast walk of every module's imports.

``ingestion`` imports nothing of ours; ``models_inference`` and ``analytics`` import only
``ingestion`` (and themselves); only ``orchestration`` imports Dagster and everything else.
Lazy imports inside functions count the same as top-level ones.
"""

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("ingestion", "models_inference", "analytics", "orchestration")
#: package -> top-level packages it must never import.
FORBIDDEN = {
    "ingestion": {"models_inference", "analytics", "orchestration", "dagster", "dagster_dbt", "dagster_duckdb"},
    "models_inference": {"analytics", "orchestration", "dagster", "dagster_dbt", "dagster_duckdb"},
    "analytics": {"models_inference", "orchestration", "dagster", "dagster_dbt", "dagster_duckdb"},
}


def imported_modules(path: Path) -> list[tuple[int, str]]:
    """(line, dotted module) of every import statement in a file (relative imports resolved)."""
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    package = ".".join(path.relative_to(ROOT).with_suffix("").parts[:-1])
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found += [(node.lineno, alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:  # from . import x / from ..y import z
                base = package.split(".")[: len(package.split(".")) - node.level + 1]
                module = ".".join([*base, node.module] if node.module else base)
            else:
                module = node.module or ""
            found.append((node.lineno, module))
    return found


def violations(package: str) -> list[str]:
    out = []
    for path in sorted((ROOT / package).rglob("*.py")):
        for line, module in imported_modules(path):
            if module.split(".")[0] in FORBIDDEN[package]:
                out.append(f"{path.relative_to(ROOT)}:{line} imports {module}")
    return out


@pytest.mark.parametrize("package", sorted(FORBIDDEN))
def test_imports_point_down(package):
    assert violations(package) == []


def test_the_walk_finds_a_violation(tmp_path, monkeypatch):
    """The check can fail: an ingestion module importing models_inference (also lazily) is reported."""
    fake = tmp_path / "ingestion"
    fake.mkdir()
    (fake / "bad.py").write_text("import os\n\ndef f():\n    from models_inference.model_ref import model_version\n")
    (fake / "rel.py").write_text("from ..orchestration import instance\n")
    monkeypatch.setitem(globals(), "ROOT", tmp_path)
    found = violations("ingestion")
    assert found == ["ingestion/bad.py:4 imports models_inference.model_ref", "ingestion/rel.py:1 imports orchestration"]


def test_every_package_is_walked():
    for package in PACKAGES:
        assert list((ROOT / package).rglob("*.py")), package
