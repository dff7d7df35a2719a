"""Imports point down (ARCHITECTURE.md): an ast walk of every module's imports.

``ingestion`` imports nothing of ours; ``models_inference`` and ``analytics`` import only
``ingestion`` (and themselves); only ``orchestration`` imports Dagster and everything else.
Inside ``models_inference`` the floors are, lowest first: ``api_retry`` and ``image_store``;
``backends``, ``model_ref``, ``resumable`` and what the loop builds on (``audit_log``,
``error_share``, ``landing_locks``); generic ``scoring``; the family ``probes``.
No two dora modules import each other, directly or around a longer circle, and every
user-facing error type (:class:`ingestion.errors.DoraError`) lives in ``ingestion/errors.py``.
Lazy imports inside functions count the same as top-level ones.
"""

import ast
import re
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


#: ``models_inference``'s inner floors, lowest first (first dotted part after the package). A
#: module imports only its own floor and the floors below (a floor's modules may import each
#: other, without circles): backends know no scorer and no family, generic scoring knows no family.
INNER_FLOORS: tuple[tuple[str, ...], ...] = (
    ("api_retry", "image_store"),  # bottom: retries and the PNG store
    # how to call a model, what a model is, the landing loop and its audit events, failed-call
    # limit and locks
    ("backends", "model_ref", "resumable", "audit_log", "error_share", "landing_locks"),
    ("scoring",),  # generic scorers and the "score landed texts" loop
    ("probes",),  # the families: prompts, parsing, probes (BiasDora's association scoring too)
)


def package_files(root: Path = ROOT, packages=PACKAGES) -> list[Path]:
    """Every Python file of ``packages`` under ``root``, package by package, each in path order."""
    return [path for package in packages for path in sorted((root / package).rglob("*.py"))]


def imported_modules(path: Path) -> list[tuple[int, str]]:
    """(line, dotted module) of every import statement in a file (relative imports resolved).

    ``from pkg import name`` yields ``pkg.name`` when ``pkg/name.py`` (or ``pkg/name/``) exists,
    so importing a submodule through its package counts as importing the submodule.
    """
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
            subs = [f"{module}.{a.name}" for a in node.names if _module_path(f"{module}.{a.name}") is not None]
            found += [(node.lineno, m) for m in subs] or [(node.lineno, module)]
    return found


def _module_path(dotted: str) -> Path | None:
    """The file of a dora module (``pkg/mod.py`` or ``pkg/mod/__init__.py``), else None."""
    parts = dotted.split(".")
    if parts[0] not in PACKAGES:
        return None
    for path in (ROOT.joinpath(*parts).with_suffix(".py"), ROOT.joinpath(*parts, "__init__.py")):
        if path.is_file():
            return path
    return None


def _dotted(path: Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _floor(dotted: str) -> int | None:
    """The inner floor of a ``models_inference`` module (None: the package itself or outside)."""
    parts = dotted.split(".")
    if parts[0] != "models_inference" or len(parts) < 2:
        return None
    for level, names in enumerate(INNER_FLOORS):
        if parts[1] in names:
            return level
    raise AssertionError(f"{dotted} is on no floor of INNER_FLOORS: add it to tests/test_layering.py")


def inner_floor_violations() -> list[str]:
    """``models_inference`` imports that run up a floor (INNER_FLOORS)."""
    out = []
    for path in sorted((ROOT / "models_inference").rglob("*.py")):
        here = _floor(_dotted(path))
        if here is None:
            continue
        for line, module in imported_modules(path):
            there = _floor(module)
            if there is not None and there > here:
                out.append(f"{path.relative_to(ROOT)}:{line} imports {module} (floor {INNER_FLOORS[there]} above {INNER_FLOORS[here]})")
    return out


def import_graph() -> dict[str, set[str]]:
    """dora module -> the dora modules it imports (top-level and inside functions alike).

    Importing ``a.b.c`` also runs ``a/__init__.py`` and ``a/b/__init__.py``; package
    ``__init__`` files that import nothing are left out by construction (no edges)."""
    graph: dict[str, set[str]] = {}
    for path in package_files():
        targets = set()
        for _, module in imported_modules(path):
            # the deepest existing module the import names (``pkg.mod.Name`` -> ``pkg.mod``)
            parts = module.split(".")
            while parts and _module_path(".".join(parts)) is None:
                parts.pop()
            if parts:
                targets.add(".".join(parts))
        graph[_dotted(path)] = targets - {_dotted(path)}
    return graph


def import_circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Every strongly connected set of two or more modules (Tarjan), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    circles = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for nxt in graph.get(node, ()):
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in on_stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            component = []
            while True:
                top = stack.pop()
                on_stack.discard(top)
                component.append(top)
                if top == node:
                    break
            if len(component) > 1:
                circles.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return circles


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


def test_models_inference_inner_floors():
    """backends (and model_ref, resumable) import nothing from scoring or probes; generic
    scoring imports nothing from probes (a family's constants are passed in as arguments)."""
    assert inner_floor_violations() == []


def test_no_import_circles():
    """No dora module reaches itself through imports, function-level ones included."""
    assert import_circles(import_graph()) == []


def test_the_circle_check_finds_a_circle():
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}, "e": {"e"}}
    assert import_circles(graph) == [["a", "b", "c"]]


def test_the_floor_check_finds_an_upward_import(tmp_path, monkeypatch):
    """A backend importing a family's prompts inside a function is reported."""
    (tmp_path / "models_inference" / "backends").mkdir(parents=True)
    (tmp_path / "models_inference" / "probes").mkdir()
    (tmp_path / "models_inference" / "probes" / "prompts.py").write_text("X = 1\n")
    (tmp_path / "models_inference" / "backends" / "bad.py").write_text("def f():\n    from models_inference.probes import prompts\n")
    monkeypatch.setitem(globals(), "ROOT", tmp_path)
    assert inner_floor_violations() == [
        "models_inference/backends/bad.py:2 imports models_inference.probes.prompts "
        "(floor ('probes',) above ('backends', 'model_ref', 'resumable', 'audit_log', 'error_share', 'landing_locks'))"
    ]


def test_every_dora_error_lives_in_ingestion_errors():
    """The CLI recognises a user's mistake by the DoraError subclasses of ingestion/errors.py and
    the errors the family records declare (``ProbeFamily.errors``, each in its family's
    ``models_inference/probes/<family>/errors.py``): any other subclass would print a traceback
    instead of its message."""
    import ingestion.errors
    from orchestration.families import FAMILIES

    declared = {f"models_inference/probes/{f.name}/errors.py: {e.__name__}" for f in FAMILIES for e in f.errors}
    assert declared, "no family declares an input error of its own"

    names, todo = set(), [ingestion.errors.DoraError]
    while todo:
        cls = todo.pop()
        names.add(cls.__name__)
        todo.extend(cls.__subclasses__())
    elsewhere = []
    for path in package_files():
        if path == ROOT / "ingestion" / "errors.py":
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ClassDef):
                bases = {b.id if isinstance(b, ast.Name) else getattr(b, "attr", "") for b in node.bases}
                if bases & names:
                    elsewhere.append(f"{path.relative_to(ROOT)}: {node.name}")
    assert set(elsewhere) == declared


def test_every_package_is_walked():
    for package in PACKAGES:
        assert list((ROOT / package).rglob("*.py")), package


#: The longest a Python file of the four packages may be; a file that does several jobs is split
#: along them. ``ingestion/biasdora/descriptors.py`` is one long algorithm (the descriptor extraction).
MAX_LINES = 600
LONG_FILES_ALLOWED = {"ingestion/biasdora/descriptors.py"}


def long_files(root: Path = ROOT, limit: int = MAX_LINES) -> list[str]:
    """``path: lines`` of every Python file of :data:`PACKAGES` over ``limit`` lines, except
    :data:`LONG_FILES_ALLOWED`."""
    out = []
    for path in package_files(root):
        rel = path.relative_to(root).as_posix()
        lines = len(path.read_text(encoding="utf-8").splitlines())
        if lines > limit and rel not in LONG_FILES_ALLOWED:
            out.append(f"{rel}: {lines} lines")
    return out


def test_no_python_file_over_600_lines():
    assert long_files() == []


def test_the_length_check_finds_a_long_file(tmp_path):
    (tmp_path / "analytics").mkdir()
    (tmp_path / "analytics" / "long.py").write_text("x = 1\n" * 601)
    (tmp_path / "analytics" / "short.py").write_text("x = 1\n" * 600)
    (tmp_path / "ingestion" / "biasdora").mkdir(parents=True)
    (tmp_path / "ingestion" / "biasdora" / "descriptors.py").write_text("x = 1\n" * 900)
    assert long_files(tmp_path) == ["analytics/long.py: 601 lines"]


#: The longest a function of the four packages may be: one screen. A longer one is split into
#: named steps (what each part does), not cut at a line count.
MAX_FUNCTION_LINES = 80


def long_functions(root: Path = ROOT, limit: int = MAX_FUNCTION_LINES) -> list[str]:
    """``path:line name: lines`` of every function or method of :data:`PACKAGES` longer than
    ``limit`` lines (``end_lineno - lineno + 1`` of its ``ast`` node: docstring and decorators'
    arguments included, nested functions counted in their parent too)."""
    out = []
    for path in package_files(root):
        rel = path.relative_to(root).as_posix()
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                lines = node.end_lineno - node.lineno + 1
                if lines > limit:
                    out.append(f"{rel}:{node.lineno} {node.name}: {lines} lines")
    return out


def test_no_function_over_80_lines():
    assert long_functions() == []


def test_the_length_check_finds_a_long_function(tmp_path):
    (tmp_path / "orchestration").mkdir()
    body = "".join(f"    x{i} = {i}\n" for i in range(79))
    (tmp_path / "orchestration" / "steps.py").write_text(
        f"def fits():\n{body}\n\nclass C:\n    async def too_long(self):\n{body.replace('    ', '        ')}        return 1\n"
    )
    assert long_functions(tmp_path) == ["orchestration/steps.py:84 too_long: 81 lines"]


# ----------------------------------------------------------------------------- the family seam

#: The packages whose shared code names no probe family: every family is reached through its
#: record (orchestration/family.py) in FAMILIES (orchestration/families.py, the one list).
SHARED_PACKAGES = ("orchestration", "analytics", "ingestion")


def family_names(root: Path = ROOT) -> list[str]:
    """The probe families: each folder of ``orchestration/defs/`` holding a ``family.py`` (its
    Dagster home, named after the family)."""
    return sorted(p.parent.name for p in (root / "orchestration" / "defs").glob("*/family.py"))


def _owner(rel: Path, names: list[str]) -> str | None:
    """The family a file belongs to: a path part (folder or file name) that is the family's name
    or starts with it (``orchestration/defs/biasdora/``, ``ingestion/contracts/modscan.py``,
    ``analytics/counterfactual_report.py``, ``ingestion/biasdora/``), else None."""
    for part in rel.with_suffix("").parts:
        for name in names:
            if part == name or part.startswith(name + "_"):
                return name
    return None


def shared_files(root: Path = ROOT) -> list[Path]:
    """The shared code: every Python file of :data:`SHARED_PACKAGES` that no family owns
    (:func:`_owner`), except ``orchestration/families.py`` (the one list that imports each
    family's record) and the contracts' package ``ingestion/contracts/__init__.py`` (which finds
    them with ``pkgutil``, by no name)."""
    names = family_names(root)
    out = []
    for path in package_files(root, SHARED_PACKAGES):
        rel = path.relative_to(root)
        if rel.as_posix() in ("orchestration/families.py",) or _owner(rel, names) is not None:
            continue
        out.append(path)
    return out


def family_imports(root: Path = ROOT) -> list[str]:
    """``path:line imports module`` of every import of a family's own code by shared code
    (:func:`shared_files`), top-level or inside a function: its landing contract
    (``ingestion.contracts.<family>``), its Dagster home (``orchestration.defs.<family>``), its
    reference-data loaders (``ingestion.<family>``) or its analytics (``analytics.<family>*``)."""
    names = family_names(root)
    out = []
    for path in shared_files(root):
        for line, module in imported_modules(path):
            parts = module.split(".")
            owned = (
                parts[:2] == ["ingestion", "contracts"]
                and len(parts) > 2
                and _owner(Path(parts[2]), names)
                or parts[:2] == ["orchestration", "defs"]
                and len(parts) > 2
                and _owner(Path(parts[2]), names)
                or parts[0] in ("ingestion", "analytics")
                and len(parts) > 1
                and _owner(Path(parts[1]), names)
            )
            if owned:
                out.append(f"{path.relative_to(root).as_posix()}:{line} imports {module}")
    return sorted(out)


def family_names_in_shared_code(root: Path = ROOT) -> list[str]:
    """``path:line: name`` of every string in shared code (:func:`shared_files`; docstrings and
    comments aside: prose) that names a probe family as a word: a value (``"biasdora"``), a
    default, a help text, an f-string part. Lines of ``dora ...`` usage examples in help texts
    (documentation) are left out; a path (``probes/biasdora/parsing.py``) is not a word."""
    names = family_names(root)
    out = []
    for path in shared_files(root):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        prose = {id(n.value) for n in ast.walk(tree) if isinstance(n, ast.Expr) and isinstance(n.value, ast.Constant)}
        for node in ast.walk(tree):
            if not (isinstance(node, ast.Constant) and isinstance(node.value, str)) or id(node) in prose:
                continue
            text = "\n".join(ln for ln in node.value.splitlines() if not ln.lstrip().startswith("dora "))
            for name in names:
                if re.search(rf"(?<![\w/.-]){name}(?![\w/.-])", text):
                    out.append(f"{path.relative_to(root).as_posix()}:{node.lineno}: {name}")
    return out


def test_shared_code_never_imports_a_familys_code():
    """The CLI, the audits' sensors and schedules, the definitions, the shared analytics and
    ingestion reach a family through its record in FAMILIES (or take its name as an argument),
    never by importing its contract, its orchestration/defs/<family>/ modules or its loaders."""
    assert family_imports() == []


def test_shared_code_names_no_family():
    """git grep '"biasdora"' in shared code (and every other family's name) finds nothing."""
    assert family_names_in_shared_code() == []


def test_the_family_checks_find_a_family_named_in_shared_code(tmp_path, monkeypatch):
    for folder in ("orchestration/defs/fam", "orchestration/cli", "analytics", "ingestion/contracts", "ingestion/fam"):
        (tmp_path / folder).mkdir(parents=True)
    (tmp_path / "orchestration/defs/fam/family.py").write_text("X = 1\n")
    (tmp_path / "orchestration/defs/fam/__init__.py").write_text("")
    (tmp_path / "orchestration/cli/bad.py").write_text(
        '"""Say fam here: prose."""\n\ndef f(x="fam"):\n    from orchestration.defs.fam import family\n    return f"{x} (default: fam)"\n'
    )
    (tmp_path / "orchestration/cli/ok.py").write_text('HELP = "see probes/fam/parsing.py"\nEX = """\n  dora audit --family fam\n"""\n')
    (tmp_path / "orchestration/families.py").write_text("from orchestration.defs.fam.family import X\n")
    (tmp_path / "ingestion/contracts/fam.py").write_text('FAMILY = "fam"\n')
    (tmp_path / "ingestion/fam/loader.py").write_text('from ingestion.contracts.fam import FAMILY\nSOURCE = "fam"\n')
    (tmp_path / "ingestion/shared_loader.py").write_text("from ingestion.contracts import fam\n\ndef f():\n    from ingestion.fam import loader\n")
    (tmp_path / "analytics/fam_report.py").write_text('NAME = "fam"\n')
    (tmp_path / "analytics/pages.py").write_text("from ingestion.contracts.fam import FAMILY\nfrom analytics import fam_report\n")
    monkeypatch.setitem(globals(), "ROOT", tmp_path)
    assert family_imports(tmp_path) == [
        "analytics/pages.py:1 imports ingestion.contracts.fam",
        "analytics/pages.py:2 imports analytics.fam_report",
        "ingestion/shared_loader.py:1 imports ingestion.contracts.fam",
        "ingestion/shared_loader.py:4 imports ingestion.fam.loader",
        "orchestration/cli/bad.py:4 imports orchestration.defs.fam.family",
    ]
    assert family_names_in_shared_code(tmp_path) == ["orchestration/cli/bad.py:3: fam", "orchestration/cli/bad.py:5: fam"]
