"""The packages depend one way, read from the source (ast): every import, those inside functions included.

    laya_common  <-  kernels  <-  bundle  <-  worker  <-  app (worker.contract and worker.version only)
                                                      <-  recipe (anything)

No module imports what its package may not, no chain of imports comes back to where it started, and
nothing the API package reaches imports torch.
"""

from __future__ import annotations

import ast
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("laya_common", "kernels", "bundle", "worker", "app", "recipe")
# What each package may import besides its own modules: packages, or single modules of one.
MAY_IMPORT = {
    "laya_common": (),
    "kernels": ("laya_common",),
    "bundle": ("laya_common", "kernels"),
    "worker": ("laya_common", "bundle"),
    "app": ("laya_common", "worker.contract", "worker.version"),
    "recipe": ("laya_common", "kernels", "bundle", "worker", "app"),
}
NOT_IN_THE_API = ("torch",)  # third-party packages nothing reachable from app/ may import


def module_name(path: Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


MODULES = {module_name(p): p for package in PACKAGES for p in sorted((ROOT / package).rglob("*.py"))}


def imported_names(module: str) -> set[str]:
    """Every module name `module` imports, absolute (relative imports resolved), at any depth of its code."""
    path = MODULES[module]
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    names = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            names |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*anchor, *([base] if base else [])])
            # `from pkg import mod` imports the module pkg.mod; `from mod import name` imports mod
            names |= {f"{base}.{a.name}" if f"{base}.{a.name}" in MODULES else base for a in node.names}
    return names


def project_imports(module: str) -> set[str]:
    """The project modules `module` imports (a name that is no file, such as worker._commit, is left out)."""
    return {name for name in imported_names(module) if name in MODULES}


def allowed(importer: str, imported: str) -> bool:
    package = importer.split(".")[0]
    if imported.split(".")[0] == package:
        return True
    return any(imported == rule or imported.startswith(rule + ".") for rule in MAY_IMPORT[package])


def test_every_module_is_read():
    assert {
        "laya_common.model",
        "bundle.manifest",
        "kernels.registry",
        "worker.engine",
        "app",
        "recipe.benchmark",
    } <= set(MODULES)


@pytest.mark.parametrize("module", sorted(MODULES))
def test_imports_follow_the_layers(module):
    wrong = sorted(name for name in project_imports(module) if not allowed(module, name))
    assert not wrong, f"{module} imports {', '.join(wrong)}, against the layering (tests/test_layering.py)"


def test_the_common_package_imports_the_standard_library_only():
    for module in (m for m in MODULES if m.split(".")[0] == "laya_common"):
        outside = {
            name
            for name in imported_names(module) - set(MODULES)
            if name.split(".")[0] not in sys.stdlib_module_names and name != "__future__"
        }
        assert not outside, f"{module} imports {', '.join(sorted(outside))}"


def test_no_import_cycle():
    graph = {module: project_imports(module) for module in MODULES}
    done: set[str] = set()

    def visit(module: str, path: list[str]) -> None:
        if module in path:
            cycle = path[path.index(module) :] + [module]
            pytest.fail(f"import cycle: {' -> '.join(cycle)}")
        if module in done:
            return
        for imported in sorted(graph[module]):
            visit(imported, [*path, module])
        done.add(module)

    for module in sorted(graph):
        visit(module, [])


def test_nothing_the_api_reaches_imports_torch():
    reached, todo = set(), [m for m in MODULES if m.split(".")[0] == "app"]
    while todo:
        module = todo.pop()
        if module not in reached:
            reached.add(module)
            todo.extend(project_imports(module))
    for module in sorted(reached):
        heavy = {n for n in imported_names(module) if n.split(".")[0] in NOT_IN_THE_API}
        assert not heavy, f"{module}, reached from app/, imports {', '.join(sorted(heavy))}"


@pytest.mark.parametrize(
    ("importer", "imported", "expected"),
    [
        ("bundle.build", "worker.checkpoint", False),
        ("kernels.registry", "bundle.manifest", False),
        ("app.errors", "worker.contract", True),
        ("app.serve", "worker.engine", False),
        ("worker.engine", "bundle.loader", True),
        ("worker.engine", "kernels.gemm", False),
        ("laya_common.model", "worker.contract", False),
        ("recipe.benchmark", "app", True),
    ],
)
def test_the_rule_itself(importer, imported, expected):
    assert allowed(importer, imported) is expected
