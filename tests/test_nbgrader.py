"""The nbgrader round trip of every exercise: generate, submit, autograde, gradebook, feedback.

Proves that the autograder separates right from wrong: the solutions get full marks, the untouched
release gets zero, and a submission that loops forever or segfaults in its C code loses only the
points of that test."""

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest
from nbgrader.api import Gradebook

ROOT = Path(__file__).resolve().parent.parent
ASSIGNMENTS = sorted(p.name for p in (ROOT / "solutions").iterdir() if p.is_dir())
KEY = "01_fem1d"
NOTEBOOK = f"{KEY}_exercise.ipynb"
CELL_TIMEOUT = 20      # seconds before nbgrader interrupts a cell (the course default is 60)

pytestmark = pytest.mark.slow


def nbgrader(course: Path, *args: str, check: bool = True) -> subprocess.CompletedProcess:
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"}
    result = subprocess.run([sys.executable, "-m", "nbgrader", *args], cwd=course, env=env,
                            capture_output=True, text=True, timeout=900)
    if check and result.returncode != 0:
        raise AssertionError(f"nbgrader {' '.join(args)} failed:\n{result.stdout}\n{result.stderr}")
    return result


# what notebooks write next to themselves when run in place (gitignored): not part of the course
WRITTEN_BY_RUNS = ("*.c", "*.f90", ".ipynb_checkpoints")


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


def _submit(course: Path, student: str, nb) -> None:
    folder = course / "submitted" / student / KEY
    folder.mkdir(parents=True, exist_ok=True)
    nbformat.write(nb, folder / NOTEBOOK)


def _replace_in_cell(nb, grade_id: str, old: str, new: str):
    cell = next(c for c in nb.cells if c.metadata.get("nbgrader", {}).get("grade_id") == grade_id)
    assert old in cell.source, f"{old!r} not in cell {grade_id}"
    cell.source = cell.source.replace(old, new)
    return nb


def _plain_cell(nb, startswith: str, new: str):
    cell = next(c for c in nb.cells if c.source.startswith(startswith))
    cell.source = new
    return nb


@pytest.fixture(scope="module")
def graded(course) -> dict:
    """Submit five notebooks, autograde them all, and read the scores from the gradebook."""
    solution = lambda: nbformat.read(ROOT / "solutions" / KEY / NOTEBOOK, as_version=4)  # noqa
    submissions = {
        "solution": solution(),
        "solution_fortran": _plain_cell(solution(), "LANGUAGE =", 'LANGUAGE = "fortran"'),
        "untouched": nbformat.read(course / "exercises" / KEY / NOTEBOOK, as_version=4),
        "endless_loop": _replace_in_cell(solution(), "assemble", "for e in range(n - 1):",
                                         "while True:\n        pass\n    for e in range(n - 1):"),
        "segfault": _replace_in_cell(solution(), "crs_matvec_c", "y[i] = sum;",
                                     "y[i] = sum;\n        *(volatile double *)0 = sum;"),
    }
    for student, nb in submissions.items():
        _submit(course, student, nb)
    nbgrader(course, "autograde", KEY, "--create", "--force",
             f"--Execute.timeout={CELL_TIMEOUT}")
    nbgrader(course, "generate_feedback", KEY, "--force")
    scores = {}
    with Gradebook(f"sqlite:///{course / 'gradebook.db'}") as gb:
        for student in submissions:
            sub = gb.find_submission(KEY, student)
            nb = gb.find_submission_notebook(NOTEBOOK[:-6], KEY, student)
            scores[student] = {
                "total": sub.score, "max": sub.max_score,
                "tests": {g.name: g.score for g in nb.grades},
            }
    return scores


def test_solution_gets_full_marks(graded):
    assert graded["solution"]["max"] == 8
    assert graded["solution"]["total"] == 8, graded["solution"]


def test_fortran_solution_gets_full_marks(graded):
    assert graded["solution_fortran"]["total"] == 8, graded["solution_fortran"]


def test_untouched_release_gets_zero(graded):
    assert graded["untouched"]["total"] == 0, graded["untouched"]


def test_endless_loop_loses_only_that_test(graded):
    tests = graded["endless_loop"]["tests"]
    assert tests["test_assemble"] == 0
    assert tests["test_element"] == 2 and tests["test_crs_matvec"] == 3, tests


def test_segfault_loses_only_that_test(graded):
    tests = graded["segfault"]["tests"]
    assert tests["test_crs_matvec"] == 0
    assert tests["test_element"] == 2 and tests["test_assemble"] == 3, tests


def test_feedback_is_written(course, graded):
    for student in graded:
        html = course / "feedback" / student / KEY / NOTEBOOK.replace(".ipynb", ".html")
        assert html.exists() and html.stat().st_size > 1000, html
    text = (course / "feedback" / "segfault" / KEY / NOTEBOOK.replace(".ipynb", ".html")).read_text()
    assert "SIGSEGV" in text, "the learner should be told that the kernel crashed"
