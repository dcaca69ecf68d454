"""The package's layers, read from its imports: which folder may import which.

Every `import` and `from ... import` between modules of `course` (at the top of a module or inside a
function) is an arrow of the import graph. The contracts below say which arrows may not exist; each
test names the arrows that break it, file and line, so that a new module cannot quietly lean on a
layer above it. The graph is read from the source with `ast`: nothing is imported to build it."""

import ast
import shutil
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parent.parent / "course"

# the grading of the exercises (course.grading): it checks a learner's answer against the course's
# solvers, distributed track and cluster tools, so it sits above them; only the command line and
# the classroom tools (the learner copy, the hub) build on it
GRADING = "course.grading"
MAY_IMPORT_GRADING = ("course.cli", "course.classroom")
GRADING_MAY_NOT_IMPORT = ("course.cli", "course.classroom", "course.bench",
                          "course.parallel.bench", "course.parallel.bench_rank",
                          "course.parallel.fft_bench")


def module_name(path: Path, root: Path) -> str:
    parts = list(path.relative_to(root.parent).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imports(path: Path, root: Path = PACKAGE) -> list[tuple[str, int]]:
    """(module imported, line) for every import of a course module in the file at `path`; `from X
    import name` counts as X.name where that is a module of the package, else as X."""
    here = module_name(path, root)
    package = here if path.name == "__init__.py" else here.rpartition(".")[0]
    modules = {module_name(p, root) for p in root.rglob("*.py")}
    found = []
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, ast.Import):
            found += [(alias.name, node.lineno) for alias in node.names
                      if alias.name.split(".")[0] == root.name]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[:len(package.split(".")) - (node.level - 1)]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            if target.split(".")[0] != root.name:
                continue
            for alias in node.names:
                child = f"{target}.{alias.name}"
                found.append((child if child in modules else target, node.lineno))
    return found


def graph(root: Path = PACKAGE) -> dict[str, list[tuple[str, int, str]]]:
    """module -> [(imported module, line, file)] over the whole package."""
    return {module_name(p, root): [(target, line, str(p.relative_to(root.parent)))
                                   for target, line in imports(p, root)]
            for p in sorted(root.rglob("*.py"))}


def within(name: str, prefix: str) -> bool:
    return name == prefix or name.startswith(prefix + ".")


def arrows(edges, source_test, target_test) -> list[str]:
    return [f"{file}:{line}: {source} imports {target}"
            for source, targets in edges.items() if source_test(source)
            for target, line, file in targets if target_test(target)]


def grading_imported_from_below(edges) -> list[str]:
    return arrows(edges, lambda s: not within(s, GRADING)
                  and not any(within(s, m) for m in MAY_IMPORT_GRADING),
                  lambda t: within(t, GRADING))


def grading_importing_upward(edges) -> list[str]:
    return arrows(edges, lambda s: within(s, GRADING),
                  lambda t: any(within(t, m) for m in GRADING_MAY_NOT_IMPORT))


def test_only_the_command_line_and_the_classroom_import_grading():
    wrong = grading_imported_from_below(graph())
    assert not wrong, "imports of course.grading from below it:\n" + "\n".join(wrong)


def test_grading_imports_no_benchmark_and_no_command_line():
    wrong = grading_importing_upward(graph())
    assert not wrong, "imports from course.grading upward or sideways:\n" + "\n".join(wrong)


@pytest.mark.parametrize("source, line", [
    ("course/parallel/halo.py", "from ..grading.halo_driver import guarded"),
    ("course/grading/halo.py", "from ..bench import best_of"),
    ("course/grading/cluster.py", "from .. import cli"),
])
def test_the_contracts_fail_on_an_arrow_the_wrong_way(tmp_path, source, line):
    """A copy of the package with one import added the wrong way (inside a function, where it is
    easiest to miss) breaks a contract, named with its file and line."""
    copy = tmp_path / "course"
    shutil.copytree(PACKAGE, copy, ignore=shutil.ignore_patterns("__pycache__"))
    path = copy / Path(source).relative_to("course")
    path.write_text(path.read_text() + f"\n\ndef _wrong():\n    {line}\n")
    edges = graph(copy)
    wrong = grading_imported_from_below(edges) + grading_importing_upward(edges)
    assert wrong and all(w.startswith(source) for w in wrong), wrong
