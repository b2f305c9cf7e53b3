"""The packages depend one way, read from the source (ast): every import, those inside functions included.

    laya_common  <-  kernels  <-  bundle  <-  worker  <-  recipe (anything)
    laya_common  <-  app

and inside worker/: engine  <-  service  <-  commands (the engine knows no Celery, no Redis, no service).
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
    "app": ("laya_common",),
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
    """The project modules `module` imports (a name that is no file, such as laya_common._commit, is left out)."""
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
        "worker.engine.engine",
        "app",
        "recipe.benchmark",
    } <= set(MODULES)


@pytest.mark.parametrize("module", sorted(MODULES))
def test_imports_follow_the_layers(module):
    wrong = sorted(name for name in project_imports(module) if not allowed(module, name))
    assert not wrong, f"{module} imports {', '.join(wrong)}, against the layering (tests/test_layering.py)"


# The common package needs nothing the API's base install lacks, but for two rooms: the broker speaks Celery, kombu
# and redis-py (base dependencies), and the RoPE math needs torch (the worker's; nothing the API reaches imports it).
COMMON_THIRD_PARTY = {"laya_common.broker": ("celery", "kombu", "redis"), "laya_common.rope": ("torch",)}


def test_the_common_package_imports_the_standard_library_and_its_named_packages_only():
    for module in (m for m in MODULES if m.split(".")[0] == "laya_common"):
        room = next((r for r in COMMON_THIRD_PARTY if module == r or module.startswith(r + ".")), None)
        outside = {
            name
            for name in imported_names(module) - set(MODULES)
            if name.split(".")[0] not in (*sys.stdlib_module_names, *COMMON_THIRD_PARTY.get(room, ()))
            and name not in ("__future__", "laya_common._commit")  # written at build time, in the package
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


ENGINE_MAY_NOT = ("worker.service", "worker.commands", "celery", "kombu", "redis")


@pytest.mark.parametrize("module", sorted(m for m in MODULES if m.startswith("worker.engine")))
def test_the_engine_knows_no_service(module):
    """The decision engine runs alone (laya-run, the recipes): nothing of the Celery shell, nor Redis."""
    wrong = sorted(n for n in imported_names(module) if any(n == r or n.startswith(r + ".") for r in ENGINE_MAY_NOT))
    assert not wrong, f"{module} imports {', '.join(wrong)}: the engine knows no service (tests/test_layering.py)"


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
        ("bundle.build", "worker.engine.checkpoint", False),
        ("kernels.registry", "bundle.manifest", False),
        ("app.errors", "laya_common.contract", True),
        ("app.dispatch", "worker.service.tasks", False),
        ("app.serve", "worker.engine.engine", False),
        ("worker.engine.engine", "bundle.loader", True),
        ("worker.engine.engine", "kernels.gemm", False),
        ("laya_common.model", "worker.engine.batch", False),
        ("recipe.benchmark", "app", True),
    ],
)
def test_the_rule_itself(importer, imported, expected):
    assert allowed(importer, imported) is expected
