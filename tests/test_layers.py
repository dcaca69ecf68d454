"""The package's layers, read from its imports: which folder may import which.

Every `import` and `from ... import` between modules of `course` (at the top of a module or inside a
function) is an arrow of the import graph. The layers below say which arrows may exist, and no
arrows may close a circle; each test names the arrows that break it, file and line, so that a new
module cannot quietly lean on a layer above it. The graph is read from the source with `ast`:
nothing is imported to build it."""

import ast
import shutil
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parent.parent / "course"

# The layers of the package, top to bottom. A module may import modules of its own package and of
# the layers below its own, never of a layer above; the packages named together in one layer are
# independent (neither imports the other). Every module of the package is in exactly one layer.
LAYERS = (
    ("course.__main__",),
    ("course.cli",),                                 # the command line: builds on everything
    ("course.classroom",),                           # the learner copy, the JupyterHub classroom
    ("course.grading", "course.bench"),              # the exercises' checks; the benchmarks
    ("course.parallel", "course.cluster"),           # the distributed track; jobs and systems
    ("course.problems",),                            # complete problems, end to end
    ("course.timing",),                              # best-of-N, STREAM, the SpMV timing
    ("course.fem", "course.solvers"),                # the discretisation; solvers and orderings
    ("course.resources", "course.show", "course.sparse"),  # threads, memory; display; formats
    ("course.native",),                              # the bindings of the C and Fortran kernels
    ("course.toolchain", "course.cache", "course.langs"),  # compilers, MPI, cores; build cache
)


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


def layer_of(name: str) -> tuple[int, str]:
    """(index of the layer, the package of that layer that holds module `name`)."""
    for index, packages in enumerate(LAYERS):
        for package in packages:
            if within(name, package):
                return index, package
    raise KeyError(f"{name} is in no layer of LAYERS: give it one")


def layer_violations(edges) -> list[str]:
    """Arrows up the layers, or between two independent packages of one layer."""
    wrong = []
    for source, targets in edges.items():
        if source == "course":
            continue
        here, home = layer_of(source)
        for target, line, file in targets:
            there, package = layer_of(target)
            if there < here:
                wrong.append(f"{file}:{line}: {source} imports {target}, a layer above")
            elif there == here and package != home:
                wrong.append(f"{file}:{line}: {source} imports {target}, which is independent")
    return wrong


def circles(edges) -> list[str]:
    """Every import circle (a strongly connected component of more than one module), by Tarjan's
    algorithm; a package's __init__ importing its own modules is an arrow like any other."""
    index, low, stack, on_stack, found = {}, {}, [], set(), []

    def visit(node):
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for target, _, _ in edges.get(node, ()):
            if target not in edges:
                continue
            if target not in index:
                visit(target)
                low[node] = min(low[node], low[target])
            elif target in on_stack:
                low[node] = min(low[node], index[target])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                found.append(" <-> ".join(sorted(component)))

    for node in sorted(edges):
        if node not in index:
            visit(node)
    return found


def test_every_module_has_a_layer():
    missing = []
    for name in graph():
        try:
            layer_of(name) if name != "course" else None
        except KeyError as error:
            missing.append(str(error))
    assert not missing, "\n".join(missing)


def test_imports_only_point_down_the_layers():
    wrong = layer_violations(graph())
    assert not wrong, "imports against the layers:\n" + "\n".join(wrong)


def test_no_import_circles():
    found = circles(graph())
    assert not found, "import circles:\n" + "\n".join(found)


@pytest.mark.parametrize("source, line", [
    ("course/parallel/halo.py", "from ..grading.halo_driver import guarded"),    # from below
    ("course/grading/halo.py", "from ..bench import distributed"),                # independent
    ("course/grading/cluster.py", "from .. import cli"),                         # the command line
    ("course/timing.py", "from .problems import fem3d"),                         # the old circle
    ("course/solvers/krylov.py", "from ..fem import mesh"),                      # independent
    ("course/parallel/local.py", "from ..cluster import systems"),                # independent
])
def test_the_layers_fail_on_an_arrow_the_wrong_way(tmp_path, source, line):
    """A copy of the package with one import added the wrong way (inside a function, where it is
    easiest to miss) breaks the layers, named with its file and line."""
    wrong = layer_violations(graph(package_with(tmp_path, source, line)))
    assert wrong and all(w.startswith(source) for w in wrong), wrong


@pytest.mark.parametrize("source, line", [
    ("course/grading/exercise.py", "from . import halo"),        # grading.halo imports exercise
    ("course/fem/mesh.py", "from . import vtk"),                  # vtk imports mesh
])
def test_a_circle_inside_a_package_is_found(tmp_path, source, line):
    """Within one package the layers allow any arrow; a circle there is still refused."""
    edges = graph(package_with(tmp_path, source, line))
    assert not layer_violations(edges)
    assert circles(edges), "the circle was not found"


def package_with(tmp_path, source: str, line: str) -> Path:
    copy = tmp_path / "course"
    shutil.copytree(PACKAGE, copy, ignore=shutil.ignore_patterns("__pycache__"))
    path = copy / Path(source).relative_to("course")
    path.write_text(path.read_text() + f"\n\ndef _wrong():\n    {line}\n")
    return copy
