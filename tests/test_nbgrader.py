"""The nbgrader round trip of every exercise: generate, submit, autograde, gradebook, feedback.

Proves that the autograder separates right from wrong: the solutions get full marks, the untouched
release gets zero, and a submission that loops forever or segfaults in its C code loses only the
points of that test."""

import html
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest

# seconds before nbgrader interrupts a cell: the course default (nbgrader_config.py). The broken
# submissions' endless loops run this long; the slowest right cells take about 10 s on a quiet
# machine, and more than 40 s were seen with the other pytest worker loading both cores
from course.grading import CELL_TIMEOUT
from nbgrader.api import Gradebook

ROOT = Path(__file__).resolve().parent.parent
ASSIGNMENTS = sorted(p.name for p in (ROOT / "solutions").iterdir() if p.is_dir())

pytestmark = pytest.mark.slow


def nbgrader(course: Path, *args: str, check: bool = True) -> subprocess.CompletedProcess:
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"}
    result = subprocess.run([sys.executable, "-m", "nbgrader", *args], cwd=course, env=env,
                            capture_output=True, text=True, timeout=900)
    if check and result.returncode != 0:
        raise AssertionError(f"nbgrader {' '.join(args)} failed:\n{result.stdout}\n{result.stderr}")
    return result


# what notebooks write next to themselves when run in place (gitignored): not part of the course
WRITTEN_BY_RUNS = ("*.c", "*.f90", "*.py", ".ipynb_checkpoints")


def course_files(folder: Path) -> list[Path]:
    def written_by_a_run(p: Path) -> bool:
        return any(p.match(pattern) or pattern in p.parts for pattern in WRITTEN_BY_RUNS)
    return sorted(p.relative_to(folder.parent) for p in folder.rglob("*")
                  if p.is_file() and not written_by_a_run(p))


@pytest.fixture(scope="module")
def course(tmp_path_factory) -> Path:
    """A fresh course directory: the config and the source notebooks, nothing generated."""
    course = tmp_path_factory.mktemp("course")
    shutil.copy(ROOT / "nbgrader_config.py", course)
    shutil.copytree(ROOT / "solutions", course / "solutions",
                    ignore=shutil.ignore_patterns(*WRITTEN_BY_RUNS))
    for key in ASSIGNMENTS:
        nbgrader(course, "generate_assignment", key, "--force")
    return course


@pytest.mark.parametrize("key", ASSIGNMENTS)
def test_release_is_what_nbgrader_generates(course, key):
    generated = course_files(course / "exercises" / key)
    committed = course_files(ROOT / "exercises" / key)
    assert generated == committed, "exercises/ differs from the nbgrader release: regenerate it"
    for rel in generated:
        assert (course / "exercises" / rel).read_bytes() == (ROOT / "exercises" / rel).read_bytes(), \
            f"exercises/{rel} is not what `nbgrader generate_assignment {key}` writes"


def _hidden_regions(nb) -> list[str]:
    pattern = re.compile(r"BEGIN HIDDEN TESTS\n(.*?)\n[^\n]*END HIDDEN TESTS", re.S)
    return [m.group(1) for c in nb.cells for m in pattern.finditer(c.source)]


@pytest.mark.parametrize("key", ASSIGNMENTS)
def test_release_hides_tests_and_solutions(key):
    for source in (ROOT / "solutions" / key).glob("*.ipynb"):
        release_text = (ROOT / "exercises" / key / source.name).read_text()
        hidden = _hidden_regions(nbformat.read(source, as_version=4))
        assert hidden, f"{source.name} has no hidden tests"
        assert "HIDDEN TESTS" not in release_text and "BEGIN SOLUTION" not in release_text
        for region in hidden:
            for line in region.splitlines():
                if len(line.strip()) > 12:
                    assert json.dumps(line.strip())[1:-1] not in release_text, \
                        f"hidden test line leaked into the release: {line.strip()}"


def _submit(course: Path, key: str, student: str, nb) -> None:
    folder = course / "submitted" / student / key
    folder.mkdir(parents=True, exist_ok=True)
    nbformat.write(nb, folder / f"{key}_exercise.ipynb")


def _replace_in_cell(nb, grade_id: str | None, old: str, new: str):
    """Replace `old` by `new` in the cell `grade_id` (None: the first cell that holds `old`, such
    as the LANGUAGE cell)."""
    def holds(c) -> bool:
        if grade_id is None:
            return old in c.source
        return c.metadata.get("nbgrader", {}).get("grade_id") == grade_id
    cell = next((c for c in nb.cells if holds(c)), None)
    assert cell is not None and old in cell.source, f"{old!r} not in cell {grade_id}"
    cell.source = cell.source.replace(old, new)
    return nb


def _plain_cell(nb, startswith: str, new: str):
    cell = next(c for c in nb.cells if c.source.startswith(startswith))
    cell.source = new
    return nb


# Per exercise: the points of each graded cell, and two broken solutions — a Python function
# that never returns, and C code that segfaults — with the graded cell each one must lose. The
# endless loop sleeps instead of spinning: what is tested is that a cell that never ends is stopped
# (by nbgrader's interrupt at CELL_TIMEOUT) and costs only its task, and a spinning loop would take
# a core from the other test worker for the whole cell timeout. Every exercise has a segfault; the
# endless loop, which costs a whole CELL_TIMEOUT of waiting, is graded in 01 (a serial task) and 05
# (beside MPI tasks), the same interrupt in any notebook. For each case:
# (grade_id of the solution cell, text in it, what replaces that text, test that loses its points).
# An exercise without compiled code (07_cluster) has instead "wrong": typical wrong answers, a few
# per submission, each in another task: {student: ([(grade_id, text, replacement), ...], tests that
# lose their points)}; "languages": False where the notebook has no LANGUAGE cell.
FOREVER = "while True:\n        __import__('time').sleep(0.1)"     # a function body's endless loop
EXERCISES = {
    "01_fem1d": {
        "points": {"test_element": 2, "test_assemble": 3, "test_crs_matvec": 3},
        "endless_loop": ("assemble", "for e in range(n - 1):",
                         FOREVER + "\n    for e in range(n - 1):", "test_assemble"),
        "segfault": ("crs_matvec_c", "y[i] = sum;",
                     "y[i] = sum;\n        *(volatile double *)0 = sum;", "test_crs_matvec"),
        # (fem1d_element and fem1d_assemble are also the names of the C and Fortran answers)
        "references": ("assembly.fem1d_element", "assembly.fem1d_assemble"),
        "wrong": {
            # k = cond * h, in C: alone, it costs task 1 only (the assembly, here a right one in
            # Fortran, is checked with the course's element in place of the learner's)
            "wrong_element": ([(None, 'TASK1_LANGUAGE = "python"', 'TASK1_LANGUAGE = "c"'),
                               ("element_c", "double k = cond / h;", "double k = cond * h;"),
                               (None, 'TASK2_LANGUAGE = "python"', 'TASK2_LANGUAGE = "fortran"')],
                              ["test_element"]),
            # the whole load on each node; elements written over, not added; the last entry of
            # each row forgotten
            "wrong_load": ([("element", "return 0.5 * qvol * h * np.ones(2)",
                             "return qvol * h * np.ones(2)"),
                            ("assemble", "K[np.ix_(nodes, nodes)] += element_matrix(h, cond)",
                             "K[np.ix_(nodes, nodes)] = element_matrix(h, cond)"),
                            ("crs_matvec_c", "k < row_ptr[i + 1]; k++",
                             "k < row_ptr[i + 1] - 1; k++")],
                           ["test_element", "test_assemble", "test_crs_matvec"]),
            # the course's own answers returned
            "calls_reference": ([("element", "return cond / h * np.array([[1.0, -1.0], "
                                  "[-1.0, 1.0]])", "return assembly.fem1d_element(h, cond, 0.0)[0]"),
                                 ("assemble", "    for e in range(n - 1):",
                                  "    a, f = assembly.fem1d_assemble(x, cond, qvol)\n"
                                  "    return a.to_dense(), f\n    for e in range(n - 1):")],
                                ["test_element", "test_assemble"]),
            # the last element skipped; the row sum not reset between rows (and a right element
            # in Fortran)
            "wrong_loops": ([(None, 'TASK1_LANGUAGE = "python"', 'TASK1_LANGUAGE = "fortran"'),
                             ("assemble", "for e in range(n - 1):", "for e in range(n - 2):"),
                             ("crs_matvec_c", "    for (int i = 0; i < n; i++) {\n"
                              "        double sum = 0.0;",
                              "    double sum = 0.0;\n    for (int i = 0; i < n; i++) {")],
                            ["test_assemble", "test_crs_matvec"]),
        },
    },
    "02_fem3d": {
        "points": {"test_shape_derivatives": 2, "test_jacobian_and_gradients": 2,
                   "test_element_matrix": 3, "test_fem3d_assemble": 3},
        "segfault": ("fem3d_assemble_c", "rhs[node[a]] += fe[a];",
                     "rhs[node[a]] += fe[a];\n            *(volatile double *)0 = fe[a];",
                     "test_fem3d_assemble"),
        "references": ("hex8_dshape", "hex8_jacobian", "hex8_element"),
        "wrong": {
            # a factor xi_a missing, in Fortran: alone, it costs task 1 only (the review's "7 of
            # 10 points lost" case); tasks 2 in Fortran and 3 in C, right, stand alone
            "wrong_shape": ([(None, 'TASK1_LANGUAGE = "python"', 'TASK1_LANGUAGE = "fortran"'),
                             ("shape_derivatives_fortran", "dN(:, a) = corner(:, a) * [",
                              "dN(:, a) = ["),
                             (None, 'TASK2_LANGUAGE = "python"', 'TASK2_LANGUAGE = "fortran"'),
                             (None, 'TASK3_LANGUAGE = "python"', 'TASK3_LANGUAGE = "c"')],
                            ["test_shape_derivatives"]),
            # 1/4 for 1/8, in C; J transposed, in Fortran; loads written over, not added
            "wrong_scale": ([(None, 'TASK1_LANGUAGE = "python"', 'TASK1_LANGUAGE = "c"'),
                             ("shape_derivatives_c", "/ 8.0;", "/ 4.0;"),
                             (None, 'TASK2_LANGUAGE = "python"', 'TASK2_LANGUAGE = "fortran"'),
                             ("jacobian_and_gradients_fortran",
                              "jac = matmul(xyz8, transpose(dN))",
                              "jac = matmul(dN, transpose(xyz8))"),
                             ("fem3d_assemble_c", "rhs[node[a]] += fe[a];",
                              "rhs[node[a]] = fe[a];")],
                            ["test_shape_derivatives", "test_jacobian_and_gradients",
                             "test_fem3d_assemble"]),
            # the course's own answers returned (task 2 in C, right)
            "calls_reference": ([(None, 'TASK2_LANGUAGE = "python"', 'TASK2_LANGUAGE = "c"'),
                                 ("shape_derivatives", "    c = CORNERS\n",
                                  "    return element.hex8_dshape(xi, eta, zeta)\n"),
                                 ("element_matrix", "    g = 1.0 / np.sqrt(3.0)",
                                  "    return element.hex8_element(xyz8, cond, np.zeros(8))[0]")],
                                ["test_shape_derivatives", "test_element_matrix"]),
            # no inverse of J, in Python; Gauss points at +-1/2, in Fortran; only half of each
            # element matrix added
            "wrong_rules": ([("jacobian_and_gradients", "dN @ np.linalg.inv(jac)", "dN @ jac"),
                             (None, 'TASK3_LANGUAGE = "python"', 'TASK3_LANGUAGE = "fortran"'),
                             ("element_matrix_fortran", "g = [-1, 1] / sqrt(3.0_c_double)",
                              "g = [-0.5_c_double, 0.5_c_double]"),
                             ("fem3d_assemble_c", "for (int b = 0; b < 8; b++)",
                              "for (int b = 0; b < a; b++)")],
                            ["test_jacobian_and_gradients", "test_element_matrix",
                             "test_fem3d_assemble"]),
        },
    },
    "04_iccg": {
        "points": {"test_multicolor": 4, "test_ic0_apply": 4, "test_incompatible_nodes": 2},
        # (not in multicolor: the ungraded part 4 runs it too, and would wait out a second timeout)
        "segfault": ("ic0_apply_c", "                z[i] = s / fac_diag[i];",
                     "                z[i] = s / fac_diag[i];\n"
                     "                *(volatile double *)0 = s;", "test_ic0_apply"),
        "references": ("_multicolor", "_apply_numpy"),
        "wrong": {
            # neighbours not blocked (coupled unknowns share a color); the forward sweep over
            # all rows at once, colors ignored (a race); the unknowns of color 0 counted only
            "no_blocking": ([("multicolor", "                blocked[adj[ptr[v]:ptr[v + 1]]] = c\n",
                              ""),
                             ("ic0_apply_c", "        for (int c = 0; c < ncolor; c++) {"
                              "            /* forward: the colors in order */\n"
                              "#pragma omp for schedule(static)\n"
                              "            for (int i = color_ptr[c]; i < color_ptr[c + 1]; i++) {",
                              "        {\n#pragma omp for schedule(static)\n"
                              "            for (int i = 0; i < n; i++) {"),
                             ("incompatible_nodes", "    return int(n - has_earlier.sum())",
                              "    return int(np.sum(color == 0))")],
                            ["test_multicolor", "test_ic0_apply", "test_incompatible_nodes"]),
            # no cap of ceil(n / K) (the target ignored); the colors shared among the threads
            # instead of the rows of a color (a race across colors); "no neighbour in a LATER color"
            "no_cap": ([("multicolor", "                if size == target:\n"
                         "                    break\n", ""),
                        ("ic0_apply_c", "        for (int c = 0; c < ncolor; c++) {            "
                         "/* forward: the colors in order */\n#pragma omp for schedule(static)\n",
                         "#pragma omp for schedule(static)\n        for (int c = 0; c < ncolor; "
                         "c++) {            /* forward: the colors in order */\n"),
                        ("incompatible_nodes", "color[adj] < color[rows]",
                         "color[adj] > color[rows]")],
                       ["test_multicolor", "test_ic0_apply", "test_incompatible_nodes"]),
            # in Fortran, colors counted from 0 (as in C); a Fortran-style inclusive upper bound of
            # a row in C
            "one_based": ([(None, 'TASK1_LANGUAGE = "python"', 'TASK1_LANGUAGE = "fortran"'),
                           ("multicolor_fortran", "  color = 0\n  blocked = 0\n",
                            "  color = -1\n  blocked = -1\n"),
                           ("multicolor_fortran", "  c = 0\n", "  c = -1\n"),
                           ("multicolor_fortran", "color(v) > 0", "color(v) >= 0"),
                           ("ic0_apply_c", "k < lower_ptr[i + 1]; k++",
                            "k <= lower_ptr[i + 1]; k++")],
                          ["test_multicolor", "test_ic0_apply"]),
            # the course's coloring and count called; a serial kernel (num_threads(1): right z)
            "calls_reference": ([("multicolor", "    ### BEGIN SOLUTION\n",
                                  "    ### BEGIN SOLUTION\n"
                                  "    color = np.empty(n, dtype=np.int32)\n"
                                  "    ordering._multicolor(ptr, adj, target_colors, color)\n"
                                  "    return color\n"),
                                 ("ic0_apply_c", "#pragma omp parallel\n",
                                  "#pragma omp parallel num_threads(1)\n"),
                                 ("incompatible_nodes", "    ### BEGIN SOLUTION\n",
                                  "    ### BEGIN SOLUTION\n    return ordering.incompatible_nodes("
                                  "ptr, adj, np.argsort(color, kind=\"stable\"))\n")],
                                ["test_multicolor", "test_ic0_apply", "test_incompatible_nodes"]),
            # K taken for the size of a color (n / K colors, beyond K + max degree); `nowait` on
            # the forward loop (no barrier between two colors: a race that the values rarely
            # show); unknowns without any neighbour left out of the count
            "k_as_size": ([("multicolor", "    target = -(-n // target_colors)",
                            "    target = target_colors"),
                           ("ic0_apply_c", "#pragma omp for schedule(static)\n            for "
                            "(int i = color_ptr[c]; i < color_ptr[c + 1]; i++) {\n"
                            "                double s = r[i];",
                            "#pragma omp for schedule(static) nowait\n            for "
                            "(int i = color_ptr[c]; i < color_ptr[c + 1]; i++) {\n"
                            "                double s = r[i];"),
                           ("incompatible_nodes", "    return int(n - has_earlier.sum())",
                            "    return int(np.unique(rows).size - has_earlier.sum())")],
                          ["test_multicolor", "test_ic0_apply", "test_incompatible_nodes"]),
            # one color per unknown (valid, n colors); the backward sweep in the forward order; in
            # C, every coupling to an earlier color counted instead of the unknowns without one
            "per_unknown": ([("multicolor", "    ### BEGIN SOLUTION\n",
                              "    ### BEGIN SOLUTION\n    return np.arange(n)\n"),
                             ("ic0_apply_c", "for (int c = ncolor - 1; c >= 0; c--) {       "
                              "/* backward: the colors in reverse */",
                              "for (int c = 0; c < ncolor; c++) {            /* backward */"),
                             (None, 'TASK3_LANGUAGE = "python"', 'TASK3_LANGUAGE = "c"'),
                             ("incompatible_nodes_c", "count += earlier == 0;",
                              "count += earlier;")],
                            ["test_multicolor", "test_ic0_apply", "test_incompatible_nodes"]),
            # the backward sweep without D^-1 (M taken as (D + L)(I + L^T))
            "wrong_diagonal": ([("ic0_apply_c", "                z[i] -= s / fac_diag[i];",
                                 "                z[i] -= s;")], ["test_ic0_apply"]),
            # the course's ordering.order called (its public door); a `parallel for` per color
            # and sweep, no outer region (right z, no race, shared rows: 2 ncolor regions a call)
            "region_per_color": ([("multicolor", "    ### BEGIN SOLUTION\n",
                                   "    ### BEGIN SOLUTION\n"
                                   "    from course.sparse import CRS\n"
                                   "    a = CRS(np.asarray(ptr, dtype=np.int32), "
                                   "np.asarray(adj, dtype=np.int32), np.ones(len(adj)))\n"
                                   "    found = ordering.order(a, \"mc\", target_colors)\n"
                                   "    color = np.empty(n, dtype=np.int32)\n"
                                   "    color[found.perm] = np.repeat(np.arange(found.colors), "
                                   "np.diff(found.color_ptr))\n"
                                   "    return color\n"),
                                  ("ic0_apply_c", "#pragma omp parallel\n    {\n", "    {\n"),
                                  ("ic0_apply_c", "#pragma omp for", "#pragma omp parallel for")],
                                 ["test_multicolor", "test_ic0_apply"]),
            # NOT wrong: in Fortran, another greedy coloring (first fit, last unknown first); a
            # dynamic schedule with nowait and an explicit barrier; in C, a count that stops at
            # the first earlier neighbour: full marks
            "different_but_right": ([(None, 'TASK1_LANGUAGE = "python"',
                                      'TASK1_LANGUAGE = "fortran"'),
                                     ("multicolor_fortran", "  integer :: target, left, c, taken, "
                                      "v, k\n", "  integer :: target, left, c, taken, v, k\n"
                                      "  integer :: cap, ncolor\n"
                                      "  integer, allocatable :: sizes(:)\n"),
                                     ("multicolor_fortran", "  ! ### BEGIN SOLUTION\n",
                                      "  ! ### BEGIN SOLUTION\n"
                                      "  cap = (n - 1) / target_colors + 1\n"
                                      "  allocate(sizes(n))\n"
                                      "  sizes = 0\n"
                                      "  ncolor = 0\n"
                                      "  color = 0\n"
                                      "  do v = n, 1, -1\n"
                                      "    do c = 1, ncolor\n"
                                      "      if (sizes(c) == cap) cycle\n"
                                      "      if (all(color(adj(ptr(v):ptr(v + 1) - 1)) /= c)) "
                                      "exit\n"
                                      "    end do\n"
                                      "    ncolor = max(ncolor, c)\n"
                                      "    color(v) = c\n"
                                      "    sizes(c) = sizes(c) + 1\n"
                                      "  end do\n"
                                      "  return\n"),
                                     ("ic0_apply_c", "#pragma omp for schedule(static)\n            "
                                      "for (int i = color_ptr[c]; i < color_ptr[c + 1]; i++) {\n"
                                      "                double s = r[i];",
                                      "#pragma omp for schedule(dynamic, 4) nowait\n            "
                                      "for (int i = color_ptr[c]; i < color_ptr[c + 1]; i++) {\n"
                                      "                double s = r[i];"),
                                     ("ic0_apply_c", "            }                                "
                                      "         /* implied barrier: color c is done */\n",
                                      "            }\n#pragma omp barrier\n"),
                                     (None, 'TASK3_LANGUAGE = "python"', 'TASK3_LANGUAGE = "c"'),
                                     ("incompatible_nodes_c", "        int earlier = 0;",
                                      "        int k = ptr[i];\n"
                                      "        while (k < ptr[i + 1] && "
                                      "color[adj[k]] >= color[i])\n"
                                      "            k++;\n"
                                      "        count += k == ptr[i + 1];\n"
                                      "        continue;\n"
                                      "        int earlier = 0;")],
                                    []),
        },
    },
    "03_openmp": {
        "points": {"test_crs_to_ell": 3, "test_ell_matvec": 4, "test_race_free_cg": 3},
        "segfault": ("ell_matvec_c", "y[i] = s;", "y[i] = s;\n        *(volatile double *)0 = s;",
                     "test_ell_matvec"),
        "references": ("from_crs",),
        "wrong": {
            # in C, padding with column 0; the accumulator shared by the threads (a race that
            # -O2 hides in a register: the results are right, the race detector sees it)
            "shared_sum": ([(None, 'TASK1_LANGUAGE = "python"', 'TASK1_LANGUAGE = "c"'),
                            ("crs_to_ell_c", ": i;", ": 0;"),
                            ("ell_matvec_c", "#pragma omp parallel for schedule(static)\n"
                             "    for (int i = 0; i < n; i++) {\n        double s = d[i] * x[i];",
                             "    double s;\n#pragma omp parallel for schedule(static)\n"
                             "    for (int i = 0; i < n; i++) {\n        s = d[i] * x[i];")],
                           ["test_crs_to_ell", "test_ell_matvec"]),
            # a row too long cut short instead of refused; every thread computes every row; the
            # CG's races "fixed" by a `parallel for` per loop, no outer region, the `single`s
            # orphaned (right, race-free, shared loops: but a region per loop, not one)
            "no_worksharing": ([("crs_to_ell", "raise ValueError(f\"row {i} has {last - first} "
                                 "entries, more than width = {width}\")", "last = first + width"),
                                ("ell_matvec_c", "#pragma omp parallel for schedule(static)",
                                 "#pragma omp parallel"),
                                ("cg_fixed_c", "#pragma omp parallel\n    {", "    {"),
                                ("cg_fixed_c", "#pragma omp for", "#pragma omp parallel for")],
                               ["test_crs_to_ell", "test_ell_matvec", "test_race_free_cg"]),
            # the course's ELL returned; every thread resets the shared pq (the lecture's race 3)
            "reset_race": ([("crs_to_ell", "    item_ell = np.repeat(",
                             "    _ell = sparse.ELL.from_crs(sparse.CRS(index, item, amat), width)\n"
                             "    return _ell.item, _ell.val\n    item_ell = np.repeat("),
                            ("cg_fixed_c", "                pq = 0.0;           /* Race 1: reset "
                             "by one thread, before the barrier */\n            }",
                             "            }\n            pq = 0.0;")],
                           ["test_crs_to_ell", "test_race_free_cg"]),
            # race-free, but serial: one thread in the product and in the CG
            "serial": ([("ell_matvec_c", "#pragma omp parallel for schedule(static)",
                         "#pragma omp parallel for schedule(static) num_threads(1)"),
                        ("cg_fixed_c", "#pragma omp parallel\n    {",
                         "#pragma omp parallel if (0)\n    {")],
                       ["test_ell_matvec", "test_race_free_cg"]),
            # NOT wrong: ELL filled row by row in 2-D arrays; dynamic and guided schedules in the
            # product and in the CG's loops without a reduction (those with one keep static: the
            # task asks for bitwise repeatable sums): full marks
            "different_but_right": ([("crs_to_ell", "    ### BEGIN SOLUTION\n",
                                      "    ### BEGIN SOLUTION\n"
                                      "    lengths = np.diff(index)\n"
                                      "    if np.any(lengths > width):\n"
                                      "        i = int(np.argmax(lengths > width))\n"
                                      "        raise ValueError(f\"row {i} does not fit: "
                                      "{lengths[i]} entries\")\n"
                                      "    rows = np.arange(n, dtype=np.int32)\n"
                                      "    item_2d = np.tile(rows[:, None], (1, width))\n"
                                      "    amat_2d = np.zeros((n, width))\n"
                                      "    for i in range(n):\n"
                                      "        own = slice(index[i], index[i + 1])\n"
                                      "        item_2d[i, :lengths[i]] = item[own]\n"
                                      "        amat_2d[i, :lengths[i]] = amat[own]\n"
                                      "    return item_2d.ravel(), amat_2d.ravel()\n"),
                                     ("ell_matvec_c", "#pragma omp parallel for schedule(static)",
                                      "#pragma omp parallel for schedule(dynamic, 8)"),
                                     ("cg_fixed_c", "#pragma omp for schedule(static)\n        for "
                                      "(int i = 0; i < n; i++)\n            r[i] = z[i] =",
                                      "#pragma omp for schedule(guided)\n        for "
                                      "(int i = 0; i < n; i++)\n            r[i] = z[i] ="),
                                     ("cg_fixed_c", "#pragma omp for schedule(static)\n"
                                      "            for (int i = 0; i < n; i++)                  "
                                      "   /* p = z + beta p",
                                      "#pragma omp for schedule(dynamic, 16)\n"
                                      "            for (int i = 0; i < n; i++)                  "
                                      "   /* p = z + beta p")],
                                    []),
            # NOT wrong, in Fortran: the ELL conversion (compiled, called in a child process), a
            # guided schedule in the product, dynamic and guided ones in the CG's loops without a
            # reduction: full marks
            "different_but_right_fortran": ([(None, 'TASK1_LANGUAGE = "python"',
                                              'TASK1_LANGUAGE = "fortran"'),
                                             (None, 'LANGUAGE = "c"', 'LANGUAGE = "fortran"'),
                                             ("ell_matvec_fortran", "!$omp parallel do "
                                              "schedule(static)", "!$omp parallel do "
                                              "schedule(guided)"),
                                             ("cg_fixed_fortran", "  !$omp do schedule(static)\n"
                                              "  do i = 1, n\n    r(i) = 0.0_c_double",
                                              "  !$omp do schedule(guided)\n"
                                              "  do i = 1, n\n    r(i) = 0.0_c_double"),
                                             ("cg_fixed_fortran", "    !$omp do schedule(static)\n"
                                              "    do i = 1, n                                 "
                                              "        ! p = z + beta p",
                                              "    !$omp do schedule(dynamic, 16)\n"
                                              "    do i = 1, n                                 "
                                              "        ! p = z + beta p")],
                                            []),
        },
    },
    "05_halo": {
        "points": {"test_local_tables": 3, "test_halo_exchange": 4},
        "endless_loop": ("local_tables", "mine = owner == rank",
                         FOREVER + "\n    mine = owner == rank",
                         "test_local_tables"),
        # the exchange runs under mpiexec: a crashing rank ends that job, not the grading
        "segfault": ("halo_exchange_c", "MPI_STATUSES_IGNORE);",
                     "MPI_STATUSES_IGNORE);\n    *(volatile double *)0 = x[0];",
                     "test_halo_exchange"),
        "wrong": {
            # externals in global order, not grouped by owner; the send buffer packed from the
            # first entries of x instead of the exported ones
            "external_order": ([("local_tables", "external = external[np.lexsort((external, "
                                 "owner[external]))]", "external = np.sort(external)"),
                                ("halo_exchange_c", "send_buf[k] = x[export_index[k]];",
                                 "send_buf[k] = x[k];")],
                               ["test_local_tables", "test_halo_exchange"]),
            # export tables in global numbers; a blocking receive first on every rank (deadlock)
            "global_export": ([("local_tables", "export_index.append(to_local[shared])",
                                "export_index.append(shared)"),
                               ("halo_exchange_c", "        MPI_Irecv(recv_buf + import_ptr[m], "
                                "import_ptr[m + 1] - import_ptr[m], MPI_DOUBLE,\n"
                                "                  neighbours[m], TAG, comm, &requests[m]);",
                                "        MPI_Recv(recv_buf + import_ptr[m], import_ptr[m + 1] - "
                                "import_ptr[m], MPI_DOUBLE,\n                 neighbours[m], TAG, "
                                "comm, MPI_STATUS_IGNORE);")],
                              ["test_local_tables", "test_halo_exchange"]),
            # import_ptr without its leading 0; values unpacked over the first entries of x
            "no_leading_zero": ([("local_tables", '"import_ptr": np.concatenate([[0], '
                                  'np.cumsum(counts)])', '"import_ptr": np.cumsum(counts)'),
                                 ("halo_exchange_c", "x[import_index[k]] = recv_buf[k];",
                                  "x[k] = recv_buf[k];")],
                                ["test_local_tables", "test_halo_exchange"]),
            # neighbours in descending order; in mpi4py, receiving into x[import_index[...]] (a
            # temporary copy: the values never reach x)
            "fancy_receive": ([("local_tables", "    to_local = np.full(owner.size, -1)",
                                "    neighbours, counts = neighbours[::-1], counts[::-1]\n"
                                "    to_local = np.full(owner.size, -1)"),
                               (None, 'LANGUAGE = "c"', 'LANGUAGE = "python"'),
                               ("halo_exchange_python", "part = recv[import_ptr[m]:import_ptr[m + 1]]",
                                "part = x[import_index[import_ptr[m]:import_ptr[m + 1]]]"),
                               ("halo_exchange_python", "    x[import_index] = recv ", "    # ")],
                              ["test_local_tables", "test_halo_exchange"]),
            # task 1 computed with the course's private helper local._offsets (the whole module
            # is blocked); MPI_Sendrecv per neighbour: NOT wrong, the exchange keeps its points
            "sendrecv": ([("local_tables", "    mine = owner == rank\n",
                           "    from course.parallel.local import _offsets\n"
                           "    mine = owner == rank\n"),
                          ("local_tables", '"import_ptr": np.concatenate([[0], np.cumsum(counts)])',
                           '"import_ptr": _offsets(counts)'),
                          ("halo_exchange_c", "    enum { TAG = 5 };\n",
                           "    enum { TAG = 5 };\n"
                           "    for (int k = 0; k < export_ptr[n_neighbours]; k++)\n"
                           "        send_buf[k] = x[export_index[k]];\n"
                           "    for (int m = 0; m < n_neighbours; m++)\n"
                           "        MPI_Sendrecv(send_buf + export_ptr[m], export_ptr[m + 1] - "
                           "export_ptr[m], MPI_DOUBLE,\n"
                           "                     neighbours[m], TAG, recv_buf + import_ptr[m],\n"
                           "                     import_ptr[m + 1] - import_ptr[m], MPI_DOUBLE, "
                           "neighbours[m], TAG,\n"
                           "                     comm, MPI_STATUS_IGNORE);\n"
                           "    for (int k = 0; k < import_ptr[n_neighbours]; k++)\n"
                           "        x[import_index[k]] = recv_buf[k];\n"
                           "    return;\n")],
                         ["test_local_tables"]),
            # NOT wrong: all in Fortran, the tables (compiled, called in a child process) and
            # persistent requests made, started, completed and freed in every call: full marks
            "persistent_fortran": ([(None, 'TASK1_LANGUAGE = "python"',
                                     'TASK1_LANGUAGE = "fortran"'),
                                    (None, 'LANGUAGE = "c"', 'LANGUAGE = "fortran"'),
                                    ("halo_exchange_fortran",
                                     "  integer(c_int) :: m, k, first, last\n",
                                     "  integer(c_int) :: m, k, first, last\n"
                                     "  do m = 1, n_neighbours\n"
                                     "    call MPI_Recv_init(recv_buf(import_ptr(m)), "
                                     "import_ptr(m + 1) - import_ptr(m), &\n"
                                     "      MPI_DOUBLE_PRECISION, neighbours(m), TAG, comm, "
                                     "requests(m))\n"
                                     "    call MPI_Send_init(send_buf(export_ptr(m)), "
                                     "export_ptr(m + 1) - export_ptr(m), &\n"
                                     "      MPI_DOUBLE_PRECISION, neighbours(m), TAG, comm, "
                                     "requests(n_neighbours + m))\n"
                                     "  end do\n"
                                     "  do k = 1, export_ptr(n_neighbours + 1) - 1\n"
                                     "    send_buf(k) = x(export_index(k))\n"
                                     "  end do\n"
                                     "  call MPI_Startall(2 * n_neighbours, requests)\n"
                                     "  call MPI_Waitall(2 * n_neighbours, requests, "
                                     "MPI_STATUSES_IGNORE)\n"
                                     "  do m = 1, 2 * n_neighbours\n"
                                     "    call MPI_Request_free(requests(m))\n"
                                     "  end do\n"
                                     "  do k = 1, import_ptr(n_neighbours + 1) - 1\n"
                                     "    x(import_index(k)) = recv_buf(k)\n"
                                     "  end do\n"
                                     "  return\n")],
                                   []),
            # the exchange on MPI_COMM_WORLD, not on the comm it is given (the check's comm has
            # its ranks rotated, and other traffic waits on MPI_COMM_WORLD)
            "comm_world": ([("halo_exchange_c", "neighbours[m], TAG, comm, &requests[m]);",
                             "neighbours[m], TAG, MPI_COMM_WORLD, &requests[m]);"),
                            ("halo_exchange_c",
                             "neighbours[m], TAG, comm, &requests[n_neighbours + m]);",
                             "neighbours[m], TAG, MPI_COMM_WORLD, &requests[n_neighbours + m]);")],
                           ["test_halo_exchange"]),
            # local elements = those with ALL corners internal; in Fortran, MPI_Waitall over the
            # receives only (the send requests never completed: the MPI monitor counts them)
            "send_leak": ([("local_tables", "np.any(mine[elements], axis=1)",
                            "np.all(mine[elements], axis=1)"),
                           (None, 'LANGUAGE = "c"', 'LANGUAGE = "fortran"'),
                           ("halo_exchange_fortran", "call MPI_Waitall(2 * n_neighbours, requests,",
                            "call MPI_Waitall(n_neighbours, requests,")],
                          ["test_local_tables", "test_halo_exchange"]),
            # the neighbour's own nodes exported; a receive one value too small (MPI_ERR_TRUNCATE,
            # ended at once: tests/test_halo_exercise.py checks the message)
            "receive_too_small": ([("local_tables", "shared = near_q[mine[near_q]]",
                                    "shared = near_q[owner[near_q] == q]"),
                                   ("halo_exchange_c",
                                    "import_ptr[m + 1] - import_ptr[m], MPI_DOUBLE,",
                                    "import_ptr[m + 1] - import_ptr[m] - 1, MPI_DOUBLE,")],
                                  ["test_local_tables", "test_halo_exchange"]),
            # in Python, a pickling collective: comm.alltoall of a list of arrays
            "pickling_alltoall": ([(None, 'LANGUAGE = "c"', 'LANGUAGE = "python"'),
                                   ("halo_exchange_python", "    tag = 5\n",
                                    "    out = [[] for _ in range(comm.Get_size())]\n"
                                    "    for m, rank in enumerate(neighbours):\n"
                                    "        out[rank] = x[export_index[export_ptr[m]:"
                                    "export_ptr[m + 1]]]\n"
                                    "    got = comm.alltoall(out)\n"
                                    "    for m, rank in enumerate(neighbours):\n"
                                    "        x[import_index[import_ptr[m]:import_ptr[m + 1]]] = "
                                    "got[rank]\n"
                                    "    return\n")],
                                  ["test_halo_exchange"]),
            # in Python, the course's exchange reached behind its front door: Halo._update_p2p
            "private_helper": ([(None, 'LANGUAGE = "c"', 'LANGUAGE = "python"'),
                                ("halo_exchange_python", "    tag = 5\n",
                                 "    from types import SimpleNamespace\n"
                                 "    from course.parallel.halo import Halo\n"
                                 "    halo = object.__new__(Halo)\n"
                                 "    halo.comm = comm\n"
                                 "    halo.send = np.empty(len(export_index))\n"
                                 "    halo.recv = np.empty(len(import_index))\n"
                                 "    halo.local = SimpleNamespace(\n"
                                 "        neighbours=neighbours, import_ptr=import_ptr, "
                                 "import_index=import_index,\n"
                                 "        export_ptr=export_ptr, export_index=export_index)\n"
                                 "    halo._update_p2p(x)\n"
                                 "    return\n")],
                               ["test_halo_exchange"]),
        },
    },
    "06_pipecg": {
        "points": {"test_next_alpha": 3, "test_chronopoulos_gear": 5},
        # the solver runs under mpiexec: a crashing rank ends that job, not the grading
        "segfault": ("chronopoulos_gear_c", "    free(work);",
                     "    free(work);\n    *(volatile double *)0 = x[0];",
                     "test_chronopoulos_gear"),
        "wrong": {
            # beta upside down; the three dot products in two global sums (2 per iteration)
            "two_sums": ([("next_alpha", "beta = gamma_new / gamma", "beta = gamma / gamma_new"),
                          ("chronopoulos_gear_c", "global_sum(sums, 3);",
                           "global_sum(sums, 2);\n        global_sum(sums + 2, 1);")],
                         ["test_next_alpha", "test_chronopoulos_gear"]),
            # alpha = gamma / delta (the beta term dropped); r updated with w instead of s
            "plain_alpha": ([("next_alpha", "return gamma_new / (delta - beta * gamma_new / alpha)",
                              "return gamma_new / delta"),
                             ("chronopoulos_gear_c", "r[i] -= alpha * s[i];",
                              "r[i] -= alpha * w[i];")],
                            ["test_next_alpha", "test_chronopoulos_gear"]),
            # + for -; in Python, the course's own Chronopoulos-Gear called with an adapter
            "calls_reference": ([("next_alpha", "(delta - beta", "(delta + beta"),
                                 (None, 'LANGUAGE = "c"', 'LANGUAGE = "python"'),
                                 ("chronopoulos_gear_python", "    ### BEGIN SOLUTION\n",
                                  "    ### BEGIN SOLUTION\n"
                                  "    from course.solvers import krylov\n\n"
                                  "    class Sums:\n"
                                  "        count = 0\n\n"
                                  "        def start(self, *values):\n"
                                  "            self.count += 1\n"
                                  "            self.sums = np.array(values, dtype=float)\n"
                                  "            global_sum(self.sums)\n"
                                  "            return self\n\n"
                                  "        def wait(self):\n"
                                  "            return self.sums\n\n"
                                  "    result = krylov(matvec, b, lambda r: dinv * r, Sums(), "
                                  "\"chronopoulos-gear\", x0=x.copy(), tol=tol, "
                                  "max_iter=max_iter)\n"
                                  "    x[:] = result.x\n"
                                  "    return result.iterations\n")],
                                ["test_next_alpha", "test_chronopoulos_gear"]),
            # alpha times the old one; no convergence test (always max_iter iterations)
            "no_stop": ([("next_alpha", "beta * gamma_new / alpha)", "beta * gamma_new * alpha)"),
                         ("chronopoulos_gear_c", "while (sqrt(rr) > tol * bnorm && "
                          "iterations < max_iter)", "while (iterations < max_iter)")],
                        ["test_next_alpha", "test_chronopoulos_gear"]),
            # gamma for gamma_new; the stopping test on the rank's own (r,r), left out of the sum
            "local_norm": ([("next_alpha", "beta * gamma_new / alpha)", "beta * gamma / alpha)"),
                            ("chronopoulos_gear_c", "global_sum(sums, 3);",
                             "global_sum(sums, 2);")],
                           ["test_next_alpha", "test_chronopoulos_gear"]),
            # alpha right but written otherwise; an absolute tolerance (Fortran)
            "absolute_tol": ([("next_alpha", "    beta = gamma_new / gamma\n    return gamma_new / "
                               "(delta - beta * gamma_new / alpha)",
                               "    return gamma_new / (delta - gamma_new**2 / (gamma * alpha))"),
                              (None, 'LANGUAGE = "c"', 'LANGUAGE = "fortran"'),
                              ("chronopoulos_gear_fortran", "sqrt(rr) > tol * bnorm",
                               "sqrt(rr) > tol")],
                             ["test_chronopoulos_gear"]),
            # the 1/alpha forgotten; s = A p by a second product (a second halo exchange)
            "second_product": ([("next_alpha", "beta * gamma_new / alpha)", "beta * gamma_new)"),
                                (None, 'LANGUAGE = "c"', 'LANGUAGE = "python"'),
                                ("chronopoulos_gear_python", "s = w + beta * s",
                                 "s = matvec(p)")],
                               ["test_next_alpha", "test_chronopoulos_gear"]),
            # the sums on MPI_COMM_WORLD with mpi4py, around the counted global_sum
            "mpi4py": ([(None, 'LANGUAGE = "c"', 'LANGUAGE = "python"'),
                        ("chronopoulos_gear_python", "import numpy as np\n",
                         "import numpy as np\nfrom mpi4py import MPI\n"),
                        ("chronopoulos_gear_python", "        global_sum(sums)\n",
                         "        MPI.COMM_WORLD.Allreduce(MPI.IN_PLACE, sums)\n")],
                       ["test_chronopoulos_gear"]),
            # right, written otherwise (full marks): next_alpha in Fortran; in C, (r,r) and (r,u)
            # summed in the update loop, (u,w) after the product, the three in another order
            "different_c": ([(None, 'TASK1_LANGUAGE = "python"', 'TASK1_LANGUAGE = "fortran"'),
                             ("chronopoulos_gear_c", "        for (int i = 0; i < n; i++) {\n"
                              "            p[i] = u[i] + beta * p[i];",
                              "        double sums[3] = {0.0, 0.0, 0.0};    /* (r,r), (u,w), "
                              "(r,u) */\n        for (int i = 0; i < n; i++) {\n"
                              "            p[i] = u[i] + beta * p[i];"),
                             ("chronopoulos_gear_c", "            u[i] = dinv[i] * r[i];\n"
                              "        }\n        matvec(u, w);\n"
                              "        double sums[3] = {0.0, 0.0, 0.0};"
                              "                /* (r,u), (w,u), (r,r): ONE sum */\n"
                              "        for (int i = 0; i < n; i++) {\n"
                              "            sums[0] += r[i] * u[i];\n"
                              "            sums[1] += w[i] * u[i];\n"
                              "            sums[2] += r[i] * r[i];\n        }\n",
                              "            u[i] = dinv[i] * r[i];\n"
                              "            sums[0] += r[i] * r[i];\n"
                              "            sums[2] += r[i] * u[i];\n        }\n"
                              "        matvec(u, w);\n        for (int i = 0; i < n; i++)\n"
                              "            sums[1] += u[i] * w[i];\n"),
                             ("chronopoulos_gear_c", "        beta = sums[0] / gamma;\n"
                              "        alpha = sums[0] / (sums[1] - beta * sums[0] / alpha);\n"
                              "        gamma = sums[0];\n        rr = sums[2];\n",
                              "        beta = sums[2] / gamma;\n"
                              "        alpha = sums[2] / (sums[1] - beta * sums[2] / alpha);\n"
                              "        gamma = sums[2];\n        rr = sums[0];\n")],
                            []),
            # right, written otherwise (full marks): next_alpha in C (switched after LANGUAGE:
            # 'TASK1_LANGUAGE = "c"' holds 'LANGUAGE = "c"'); in Python, no A x0 (x = 0), np.dot,
            # the sums in another order, p and s updated in place
            "different_python": ([(None, 'LANGUAGE = "c"', 'LANGUAGE = "python"'),
                                  ("chronopoulos_gear_python", "r = b - matvec(x)",
                                   "r = b.copy()"),
                                  ("chronopoulos_gear_python",
                                   "sums = np.array([r @ u, w @ u, r @ r])",
                                   "sums = np.array([np.dot(r, r), np.dot(u, w), np.dot(r, u)])"),
                                  ("chronopoulos_gear_python", "gamma_new, delta, rr = sums",
                                   "rr, delta, gamma_new = sums"),
                                  ("chronopoulos_gear_python", "        p = u + beta * p\n"
                                   "        s = w + beta * s\n",
                                   "        p *= beta\n        p += u\n        s *= beta\n"
                                   "        s += w\n"),
                                  (None, 'TASK1_LANGUAGE = "python"', 'TASK1_LANGUAGE = "c"')],
                                 []),
        },
    },
    "07_cluster": {
        "points": {"test_slurm_hybrid": 3, "test_pjm_hybrid": 2, "test_slurm_openmp": 3,
                   "test_odyssey_queue": 2},
        "languages": False,
        "wrong": {
            # OMP_NUM_THREADS not the threads of a rank; the OpenMP job run with 1 thread
            "wrong_threads": ([("slurm_hybrid", "OMP_NUM_THREADS=12", "OMP_NUM_THREADS=4"),
                               ("slurm_openmp", "OMP_NUM_THREADS=$SLURM_CPUS_PER_TASK",
                                "OMP_NUM_THREADS=1")],
                              ["test_slurm_hybrid", "test_slurm_openmp"]),
            # no --cpus-per-task (12 threads on one core), and a bare `mpiexec -n 8` under OpenMP
            # binding alone (Open MPI binds each rank to a socket: two ranks' threads on the same
            # cores); the PJM queue `debug` (Oakbridge-CX's)
            "wrong_cpus": ([("slurm_hybrid", "#SBATCH --cpus-per-task=12         # one core per "
                             "OpenMP thread\n", ""),
                            ("slurm_hybrid", " --map-by ppr:4:node:PE=12 --bind-to core", ""),
                            ("pjm_hybrid", "rscgrp=debug-o", "rscgrp=debug")],
                           ["test_slurm_hybrid", "test_pjm_hybrid"]),
            # --ntasks (the whole job's) for the tasks per node; elapse over debug-o's 30 min;
            # the routed class named as the queue; the OpenMP job without --cpus-per-task
            "wrong_ntasks": ([("slurm_hybrid", "--ntasks-per-node=4", "--ntasks=4"),
                              ("pjm_hybrid", "elapse=0:20:00", "elapse=1:00:00"),
                              ("odyssey_queue", "    return name, runs_in",
                               "    return runs_in, runs_in"),
                              ("slurm_openmp", "#SBATCH -c 2\n", "")],
                             ["test_slurm_hybrid", "test_pjm_hybrid", "test_odyssey_queue",
                              "test_slurm_openmp"]),
            # mpiexec -n of the ranks of one node; no -g group; a queue chosen without its node
            # range; the OpenMP program started twice
            "wrong_mpiexec": ([("slurm_hybrid", "mpiexec -n 8", "mpiexec -n 4"),
                               ("pjm_hybrid", "#PJM -g gz01\n", ""),
                               ("odyssey_queue", "if queue.min_nodes <= nodes <= queue.max_nodes "
                                "and", "if"),
                               ("slurm_openmp", "./build/native/release/bin/solc",
                                "srun -n 2 ./build/native/release/bin/solc")],
                              ["test_slurm_hybrid", "test_pjm_hybrid", "test_odyssey_queue",
                               "test_slurm_openmp"]),
            # 8 ranks x 12 threads on a 48-core node; no `module load fj` on Odyssey; the nodes of
            # 800 ranks at 1 rank per node
            "wrong_cores": ([("slurm_hybrid", "--ntasks-per-node=4", "--ntasks-per-node=8"),
                             ("pjm_hybrid", "module load fj\n", ""),
                             ("odyssey_queue", "nodes_800 = 800 // 4", "nodes_800 = 800")],
                            ["test_slurm_hybrid", "test_pjm_hybrid", "test_odyssey_queue"]),
            # binding switched off: --bind-to none as the only binding, OMP_PROC_BIND=false (with
            # OMP_PLACES=cores); the OpenMP job run from the folder it was submitted from (no cd);
            # the queue found by asking the generator's rule check (blocked like first_queue)
            "wrong_binding": ([("slurm_hybrid", "export OMP_PLACES=cores\nexport OMP_PROC_BIND=close"
                                "\nmpiexec -n 8 --map-by ppr:4:node:PE=12 --bind-to core",
                                "mpiexec -n 8 --bind-to none"),
                               ("pjm_hybrid", "OMP_PROC_BIND=close", "OMP_PROC_BIND=false"),
                               ("slurm_openmp", "cd {COURSE}\n", ""),
                               ("odyssey_queue", "if queue.min_nodes <= nodes <= queue.max_nodes "
                                "and \\\n                _hms(elapse) <= _hms(queue.elapse_limit("
                                "nodes)):", "if _takes(name, nodes, elapse):"),
                               ("odyssey_queue", "def odyssey_queue(nodes, elapse):",
                                "def _takes(name, nodes, elapse):\n"
                                "    from course.cluster import jobscript\n"
                                "    try:\n"
                                "        jobscript.check(JobRequest(program=['x'], scheduler='pjm', "
                                "system='odyssey', nodes=nodes, time=elapse, queue=name, "
                                "group='g'))\n"
                                "    except jobscript.JobScriptError:\n"
                                "        return False\n"
                                "    return True\n\n\n"
                                "def odyssey_queue(nodes, elapse):")],
                              ["test_slurm_hybrid", "test_pjm_hybrid", "test_slurm_openmp",
                               "test_odyssey_queue"]),
            # Open MPI's --map-by puts 8 ranks of 12 cores on a 48-core node; the x86-64 build
            # started on Odyssey's A64FX nodes; more memory than the local Slurm's node has
            "wrong_layout": ([("slurm_hybrid", "--map-by ppr:4:node:PE=12",
                               "--map-by ppr:8:node:PE=12"),
                              ("pjm_hybrid", "release-a64fx-fujitsu/bin", "release/bin"),
                              ("slurm_openmp", "#SBATCH -c 2\n", "#SBATCH -c 2 --mem=64G\n")],
                             ["test_slurm_hybrid", "test_pjm_hybrid", "test_slurm_openmp"]),
            # right but different: ranks and their cores placed by Open MPI alone (no -n, no
            # OpenMP binding); the A64FX build found on the PATH, threads spread; --chdir, the
            # partition named, memory within the node's
            "right_layout": ([("slurm_hybrid", "export OMP_PLACES=cores\nexport OMP_PROC_BIND=close\n"
                               "mpiexec -n 8 --map-by", "mpiexec --map-by"),
                              ("pjm_hybrid", "module load fj\n", "module load fj\nexport PATH="
                               "$PWD/build/native/release-a64fx-fujitsu/bin:$PATH\n"),
                              ("pjm_hybrid", "./build/native/release-a64fx-fujitsu/bin/fem3d_mpi_c",
                               "fem3d_mpi_c"),
                              ("pjm_hybrid", "OMP_PROC_BIND=close", "OMP_PROC_BIND=spread"),
                              ("slurm_openmp", "\ncd {COURSE}\n", "#SBATCH --chdir={COURSE} "
                               "--partition=debug --mem=1G\n")],
                             []),
        },
    },
    "08_hybrid": {
        "points": {"test_internal_block": 4, "test_asdd_apply": 6},
        # the sweeps run under mpiexec: a crashing rank ends that job, not the grading (task 1,
        # right in Python, keeps its points)
        "segfault": ("asdd_apply_c", "    free(t);",
                     "    free(t);\n    *(volatile double *)0 = z[0];", "test_asdd_apply"),
        "references": ("LocalizedIC0", "solve_block", "precond.internal_block"),
        "wrong": {
            # the external columns kept (no filter); in C, z = B t in place of z += B t
            "no_filter": ([("internal_block", "            if col[k] < n_internal:\n",
                            "            if True:\n"),
                           ("asdd_apply_c", "            z[i] += bt[i];",
                            "            z[i] = bt[i];")],
                          ["test_internal_block", "test_asdd_apply"]),
            # in C, `<= n_internal` (the first external node kept); in Python, K products from
            # z = 0 (a halo exchange for A 0)
            # (LANGUAGE first: once TASK1_LANGUAGE is "c", its cell holds 'LANGUAGE = "c"' too)
            "first_external": ([(None, 'LANGUAGE = "c"', 'LANGUAGE = "python"'),
                                (None, 'TASK1_LANGUAGE = "python"', 'TASK1_LANGUAGE = "c"'),
                                ("internal_block_c", "if (col[k] < n_internal)",
                                 "if (col[k] <= n_internal)"),
                                ("asdd_apply_python", "    z = local_solve(r)        "
                                 "                 # the first sweep: z = B r\n",
                                 "    z = np.zeros_like(r)\n"),
                                ("asdd_apply_python", "range(sweeps - 1)", "range(sweeps)")],
                               ["test_internal_block", "test_asdd_apply"]),
            # in Fortran, the input's row_ptr copied (not recounted); in C, K + 1 local solves
            "ptr_copied": ([(None, 'TASK1_LANGUAGE = "python"', 'TASK1_LANGUAGE = "fortran"'),
                            ("internal_block_fortran", "block_ptr(i + 1) = nnz + 1",
                             "block_ptr(i + 1) = row_ptr(i + 1)"),
                            ("asdd_apply_c", "for (int k = 1; k < sweeps; k++)",
                             "for (int k = 0; k < sweeps; k++)")],
                           ["test_internal_block", "test_asdd_apply"]),
            # the diagonal dropped; in Fortran, the correction subtracted
            "no_diagonal": ([("internal_block", "            if col[k] < n_internal:\n",
                              "            if col[k] < n_internal and col[k] != i:\n"),
                             (None, 'LANGUAGE = "c"', 'LANGUAGE = "fortran"'),
                             ("asdd_apply_fortran", "z = z + bt", "z = z - bt")],
                            ["test_internal_block", "test_asdd_apply"]),
            # in Fortran, `< n_internal` with 1-based columns (the last internal node dropped);
            # in C, r overwritten with r - A z through a cast
            "base_and_r": ([(None, 'TASK1_LANGUAGE = "python"', 'TASK1_LANGUAGE = "fortran"'),
                            ("internal_block_fortran", "if (col(k) <= n_internal) then",
                             "if (col(k) < n_internal) then"),
                            ("asdd_apply_c", "            t[i] = r[i] - t[i];\n        "
                             "local_solve(t, bt);", "            ((double *)r)[i] -= t[i];\n"
                             "        local_solve(r, bt);")],
                           ["test_internal_block", "test_asdd_apply"]),
        },
    },
    "09_petsc": {
        "points": {"test_petsc_options": 3, "test_petsc_matrix": 4},
        "languages": False,          # task 1's options are every language's; task 2 is petsc4py
        "references": ("global_columns", "local_mat", "KSP_TYPES"),
        "wrong": {
            # PETSc's default (preconditioned) norm; the local column numbers handed to PETSc
            "default_norm": ([("petsc_options", '              "ksp_norm_type": "unpreconditioned",'
                               "    # the course's rule: ||r||, not ||M^-1 r||\n", ""),
                              ("petsc_matrix", "columns = numbers.astype(PETSc.IntType)[col]",
                               "columns = col.astype(PETSc.IntType)")],
                             ["test_petsc_options", "test_petsc_matrix"]),
            # PETSc's absolute tolerance kept; the rows numbered by an inclusive scan
            "atol_and_scan": ([("petsc_options", '"ksp_rtol": tol, "ksp_atol": 0}',
                                '"ksp_rtol": tol}'),
                               ("petsc_matrix", "first = comm.exscan(n_internal) or 0",
                                "first = comm.scan(n_internal)")],
                              ["test_petsc_options", "test_petsc_matrix"]),
            # pipelined as plain cg (only the hidden configurations have it); the assembly on
            # rank 0 only (the others wait for ever: stopped)
            "pipelined_as_cg": ([("petsc_options", '"pipelined": "pipecg"', '"pipelined": "cg"'),
                                 ("petsc_matrix", "    mat.assemble()        ",
                                  "    if comm.Get_rank() == 0:\n        mat.assemble()  ")],
                                ["test_petsc_options", "test_petsc_matrix"]),
            # one sweep too few; a preallocation guessed, not counted
            "sweeps_and_guess": ([("petsc_options", "ksp_ksp_max_it=sweeps,",
                                   "ksp_ksp_max_it=sweeps - 1,"),
                                  ("petsc_matrix", "nnz=(d_nnz, o_nnz),", "nnz=27,")],
                                 ["test_petsc_options", "test_petsc_matrix"]),
            # no single reduction for Chronopoulos-Gear; no preallocation at all (PETSc crashes)
            "no_preallocation": ([("petsc_options", "        chosen[\"ksp_cg_single_reduction\"] = 1\n",
                                   "        pass\n"),
                                  ("petsc_matrix", ", nnz=(d_nnz, o_nnz),", ",")],
                                 ["test_petsc_options", "test_petsc_matrix"]),
            # the options right; the external columns never exchanged (update not called)
            "no_exchange": ([("petsc_matrix", "    update(numbers)  ", "    pass  ")],
                            ["test_petsc_matrix"]),
            # the inner Richardson solve tests a norm; the matrix right
            "inner_norm": ([("petsc_options", 'ksp_ksp_norm_type="none", ', "")],
                           ["test_petsc_options"]),
        },
    },
}


def test_every_exercise_has_its_grading_cases():
    assert sorted(EXERCISES) == ASSIGNMENTS


@pytest.fixture(scope="module", params=ASSIGNMENTS)
def graded(request, course) -> dict:
    """Submit the notebooks of one exercise (the solution, the untouched release, the broken and
    the wrong ones), autograde them all at once, and read the scores from the gradebook."""
    key = request.param
    notebook = f"{key}_exercise.ipynb"
    cases = EXERCISES[key]
    solution = lambda: nbformat.read(ROOT / "solutions" / key / notebook, as_version=4)  # noqa
    submissions = {
        "solution": solution(),
        "untouched": nbformat.read(course / "exercises" / key / notebook, as_version=4),
    }
    if cases.get("languages", True):
        submissions["solution_fortran"] = _plain_cell(solution(), "LANGUAGE =",
                                                      'LANGUAGE = "fortran"')
    # one submission holds both broken kernels (they are in different tasks): each must cost
    # only its own task's points
    broken = [cases[kind] for kind in ("endless_loop", "segfault") if kind in cases]
    if broken:
        submissions["broken"] = solution()
        for grade_id, old, new, _ in broken:
            _replace_in_cell(submissions["broken"], grade_id, old, new)
    for student, (edits, _) in cases.get("wrong", {}).items():
        submissions[student] = solution()
        for edit in edits:
            _replace_in_cell(submissions[student], *edit)
    for student, nb in submissions.items():
        _submit(course, key, student, nb)
    nbgrader(course, "autograde", key, "--create", "--force",
             f"--Execute.timeout={CELL_TIMEOUT}")
    nbgrader(course, "generate_feedback", key, "--force")
    scores = {}
    with Gradebook(f"sqlite:///{course / 'gradebook.db'}") as gb:
        for student in submissions:
            sub = gb.find_submission(key, student)
            nb = gb.find_submission_notebook(notebook[:-6], key, student)
            scores[student] = {
                "total": sub.score, "max": sub.max_score,
                "tests": {g.name: g.score for g in nb.grades},
            }
    return {"key": key, "cases": cases, "scores": scores,
            "feedback": course / "feedback", "notebook": notebook}


def test_solution_gets_full_marks(graded):
    points = graded["cases"]["points"]
    for student in {"solution", "solution_fortran"} & set(graded["scores"]):
        assert graded["scores"][student]["tests"] == points, (student, graded["scores"][student])
        assert graded["scores"][student]["max"] == sum(points.values())


def test_untouched_release_gets_zero(graded):
    assert graded["scores"]["untouched"]["total"] == 0, graded["scores"]["untouched"]


def test_a_broken_kernel_loses_only_its_test(graded):
    kinds = [kind for kind in ("endless_loop", "segfault") if kind in graded["cases"]]
    if not kinds:
        pytest.skip(f"{graded['key']} has no broken-kernel case")
    losers = {graded["cases"][kind][3] for kind in kinds}
    assert len(losers) == len(kinds), "the broken kernels must be in different tasks"
    expected = {**graded["cases"]["points"], **{loser: 0 for loser in losers}}
    assert graded["scores"]["broken"]["tests"] == expected, graded["scores"]["broken"]


def test_feedback_is_written(graded):
    html = graded["notebook"].replace(".ipynb", ".html")
    for student in graded["scores"]:
        path = graded["feedback"] / student / graded["key"] / html
        assert path.exists() and path.stat().st_size > 1000, path
    if "segfault" in graded["cases"]:
        text = (graded["feedback"] / "broken" / graded["key"] / html).read_text()
        assert "SIGSEGV" in text, "the learner should be told that the kernel crashed"


def test_a_demonstration_is_not_run_while_grading(graded):
    """05's not-graded distributed solve with the learner's exchange waited for a deadlocking
    exchange until the cell timeout in every wrong submission: while nbgrader grades it is skipped,
    and says so (course.grading.autograding)."""
    if graded["key"] != "05_halo":
        pytest.skip("the demonstration that autograding skips is in 05_halo")
    for student in graded["scores"]:
        if student != "untouched":
            assert "not run while the exercise is graded" in _feedback_text(graded, student), student


def _feedback_text(graded, student) -> str:
    page = graded["feedback"] / student / graded["key"] / \
        graded["notebook"].replace(".ipynb", ".html")
    return html.unescape(re.sub(r"<[^>]+>", "", page.read_text()))


def test_feedback_shows_no_hidden_test(graded):
    """Every feedback page: not one line of the hidden tests (nor of a failing hidden test's
    traceback), and not the name of a reference function they compare with; a failed hidden
    check still says what failed."""
    source = nbformat.read(ROOT / "solutions" / graded["key"] / graded["notebook"], as_version=4)
    hidden = [line.strip() for region in _hidden_regions(source) for line in region.splitlines()
              if len(line.strip()) > 12 and not line.strip().startswith("#")]
    for student in graded["scores"]:
        text = _feedback_text(graded, student)
        for line in hidden:
            assert line not in text, f"{student}'s feedback shows the hidden test line {line!r}"
        submitted = (graded["feedback"].parent / "submitted" / student / graded["key"] /
                     graded["notebook"]).read_text()
        for name in graded["cases"].get("references", ()):
            if name not in submitted:           # (a learner who calls it sees their own code)
                assert name not in text, f"{student}'s feedback names the reference {name}"
    for student, (_, losers) in graded["cases"].get("wrong", {}).items():
        autograded = nbformat.read(graded["feedback"].parent / "autograded" / student /
                                   graded["key"] / graded["notebook"], as_version=4)
        for cell in autograded.cells:
            test = cell.metadata.get("nbgrader", {}).get("grade_id")
            errors = [o for o in cell.get("outputs", []) if o.get("output_type") == "error"]
            if test in losers:
                assert errors and all(e["evalue"].strip() for e in errors), \
                    f"{student}: {test} fails without a message: {errors}"


def test_a_wrong_answer_loses_only_its_tasks_points(graded):
    """Each wrong submission holds typical mistakes in some tasks: exactly those tasks lose their
    points, the others keep them (the tasks do not depend on each other)."""
    wrong = graded["cases"].get("wrong", {})
    if not wrong:
        pytest.skip(f"{graded['key']} has no wrong-answer table")
    for student, (_, losers) in wrong.items():
        expected = {**graded["cases"]["points"], **{test: 0 for test in losers}}
        assert graded["scores"][student]["tests"] == expected, (student, graded["scores"][student])
    if "calls_reference" in wrong:      # lost for the right reason, not for a name error
        assert "is not available while your answer is checked" in \
            _feedback_text(graded, "calls_reference")
