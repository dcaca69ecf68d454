"""`python -m course dist learner DIR`: the learner copy holds everything a learner needs to run the
lectures and do the exercises, and no solution, no hidden test and no test suite.

Leaks are found by text, as tests/test_nbgrader.py finds them in the release: every line (longer
than 12 characters) of a solution region or a hidden-test region of solutions/*/*.ipynb, raw and as
it is escaped inside a notebook's JSON. A line that the course publishes on purpose anyway (the
reference kernels that the lectures show live in course/, src_c/ and src_fortran/; the release
keeps the code around a solution region) is not a leak; the others must not appear in the copy.
Fast: copies about a hundred files, runs `python -m course --help`, compiles nothing."""

import json
import re
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest

from course.classroom import dist
from course.grading import CELL_TIMEOUT

ROOT = Path(__file__).resolve().parent.parent
HIDDEN = re.compile(r"BEGIN HIDDEN TESTS\n(.*?)\n[^\n]*END HIDDEN TESTS", re.S)
SOLUTION = re.compile(r"BEGIN SOLUTION[^\n]*\n(.*?)\n[^\n]*END SOLUTION", re.S)
# what the course shows learners by design: a region's line found here is not a secret
PUBLISHED = ("notebooks", "exercises", "course", "src_c", "src_fortran", "examples")


def _texts(root: Path, folders=None) -> dict[str, str]:
    texts = {}
    paths = (p for f in folders for p in (root / f).rglob("*")) if folders else root.rglob("*")
    for path in paths:
        if path.is_file() and "__pycache__" not in path.parts:
            try:
                texts[str(path.relative_to(root))] = path.read_text()
            except UnicodeDecodeError:
                pass
    return texts


def _region_lines() -> dict[str, set[str]]:
    """The lines of the hidden-test and solution regions of the source notebooks."""
    found = {"hidden": set(), "solution": set()}
    for source in sorted((ROOT / "solutions").glob("*/*.ipynb")):
        for cell in nbformat.read(source, as_version=4).cells:
            for kind, pattern in (("hidden", HIDDEN), ("solution", SOLUTION)):
                for region in pattern.findall(cell.source):
                    found[kind] |= {line.strip() for line in region.splitlines()
                                    if len(line.strip()) > 12}
    return found


def _in(line: str, text: str) -> bool:
    return line in text or json.dumps(line)[1:-1] in text


@pytest.fixture(scope="module")
def secrets() -> dict[str, set[str]]:
    """Region lines that nothing published contains: these must never reach a learner."""
    published = "\n".join(_texts(ROOT, PUBLISHED).values())
    lines = _region_lines()
    found = {kind: {line for line in lines[kind] if not _in(line, published)} for kind in lines}
    # the check has teeth: most of the hidden tests and many solution lines are secret
    assert len(found["hidden"]) > 20 and len(found["solution"]) > 20, found
    return found


def leaks(copy: Path, secrets: dict[str, set[str]]) -> list[str]:
    """Every secret line in a file of `copy`, and every file that has no business there."""
    found = [f"{rel}: a file of solutions/, tests/ or .git" for rel in _texts(copy)
             if Path(rel).parts[0] in ("solutions", "tests", ".git")]
    found += [f"{name}: present" for name in ("solutions", "tests", ".git") if (copy / name).exists()]
    config = copy / "nbgrader_config.py"
    if config.exists() and config.read_text() != dist.LEARNER_NBGRADER_CONFIG.format(
            timeout=CELL_TIMEOUT):
        found.append("nbgrader_config.py: not the learner's (the instructors' settings)")
    for rel, text in _texts(copy).items():
        # (course/grading/__init__.py and the instructors page name the markers: only regions count)
        if rel.endswith(".ipynb") and ("HIDDEN TESTS" in text or "BEGIN SOLUTION" in text):
            found.append(f"{rel}: an nbgrader region marker")
        if rel.endswith(".md") and dist.INSTRUCTORS_ONLY.search(text):
            found.append(f"{rel}: the instructors' answers")
        found += [f"{rel}: {kind} line {line!r}" for kind, lines in secrets.items()
                  for line in sorted(lines) if _in(line, text)]
    return found


def course_cli(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "course", *args], cwd=cwd, capture_output=True,
                          text=True, timeout=120)


@pytest.fixture(scope="module")
def copy(tmp_path_factory) -> Path:
    target = tmp_path_factory.mktemp("dist") / "learner"
    result = course_cli("dist", "learner", str(target), cwd=ROOT)
    assert result.returncode == 0, result.stderr
    return target


def test_the_copy_has_no_solution_or_hidden_test(copy, secrets):
    assert leaks(copy, secrets) == []


def test_the_check_finds_leaks_in_a_wrong_copy(copy, secrets, tmp_path):
    wrong = tmp_path / "wrong"
    subprocess.run(["cp", "-r", str(copy), str(wrong)], check=True)
    source = next((ROOT / "solutions").glob("*/*.ipynb"))
    (wrong / "notebooks" / "extra.ipynb").write_bytes(source.read_bytes())
    hidden = sorted(secrets["hidden"])[0]
    (wrong / "course" / "extra.py").write_text(f"# {hidden}\n")
    found = leaks(wrong, secrets)
    assert any("extra.ipynb: an nbgrader region marker" in f for f in found)
    assert any(f.startswith("notebooks/extra.ipynb: solution line") for f in found)
    assert f"course/extra.py: hidden line {hidden!r}" in found
    (wrong / "solutions").mkdir()
    assert "solutions: present" in leaks(wrong, secrets)


def test_the_copy_has_every_lecture_and_exercise(copy):
    for folder in ("notebooks", "exercises"):
        mine = sorted(p.relative_to(ROOT) for p in (ROOT / folder).glob("**/*.ipynb")
                      if ".ipynb_checkpoints" not in p.parts)
        assert mine, f"no notebooks in {folder}/"
        for rel in mine:
            assert (copy / rel).read_bytes() == (ROOT / rel).read_bytes(), f"{rel} differs"
    for name in (*dist.LEARNER_FILES, "course/__init__.py", "scripts/setup.sh", "book/_toc.yml",
                 "book/_config.yml", "book/start.md"):
        assert (copy / name).is_file(), f"{name} missing"
    for folder in ("src_c", "src_fortran", "examples"):
        mine = sorted(p.relative_to(ROOT) for p in (ROOT / folder).rglob("*") if p.is_file())
        assert [rel for rel in mine if not (copy / rel).is_file()] == []
    assert not list(copy.rglob("__pycache__")) and not list(copy.rglob("*.egg-info"))


def _validate_execute(folder: Path):
    """nbgrader's Execute of the Validate button for a JupyterLab started in `folder`: the
    configuration loaded as its handler loads it (the server's folder first, then Jupyter's
    configuration folders)."""
    from jupyter_core.paths import jupyter_config_path
    from nbgrader.apps import NbGrader
    from nbgrader.preprocessors import Execute

    app = NbGrader()
    app.config_file_paths.append([str(folder)] + jupyter_config_path())
    app.load_config_file()
    return Execute(config=app.config)


@pytest.mark.parametrize("where", ["copy", "repository"])
def test_validate_uses_the_course_cell_timeout(copy, where, monkeypatch):
    """nbgrader's own default is 30 s; the slowest right check cells need more on a busy laptop,
    and grading gives them CELL_TIMEOUT: Validate must too, in a learner copy and in the
    repository (make lab runs JupyterLab in the top folder)."""
    folder = copy if where == "copy" else ROOT
    monkeypatch.chdir(folder)
    execute = _validate_execute(folder)
    assert execute.timeout == CELL_TIMEOUT
    # nbgrader's default True fails the whole notebook when a cell interrupted at its timeout
    # inside compiled code answers after 4 s; the course goes on with the next cell instead
    assert execute.raise_on_iopub_timeout is False


def test_the_toc_of_the_copy_finds_its_pages(copy):
    toc = (copy / "book" / "_toc.yml").read_text()
    for page in re.findall(r"file:\s*(\S+)", toc):
        assert list(copy.glob(page + ".*")), f"the book's {page} is not in the copy"


def test_the_course_runs_from_the_copy(copy):
    result = course_cli("--help", cwd=copy)
    assert result.returncode == 0 and "dist" in result.stdout, result.stderr
    where = subprocess.run([sys.executable, "-c", "import course; print(course.__file__)"],
                           cwd=copy, capture_output=True, text=True, timeout=60)
    assert Path(where.stdout.strip()).is_relative_to(copy), where.stdout + where.stderr


def test_the_instructors_answers_stay_out(copy):
    text = (ROOT / "book" / "instructors.md").read_text()
    answers = dist.INSTRUCTORS_ONLY.findall(text)
    assert answers, "book/instructors.md has no answers for instructors between the markers"
    learner = (copy / "book" / "instructors.md").read_text()
    assert "left out of this learner copy" in learner
    for region in answers:
        for line in region.splitlines()[1:-1]:
            if len(line.strip()) > 12:
                assert line.strip() not in learner, f"answer leaked: {line.strip()}"


def test_run_outputs_and_caches_are_not_copied(tmp_path):
    root = tmp_path / "course"
    for folder in dist.LEARNER_FOLDERS:
        (root / folder).mkdir(parents=True)
    for name in dist.LEARNER_FILES:
        (root / name).write_text("x\n")
    (root / "exercises" / "01_fem1d").mkdir()
    (root / "exercises" / "01_fem1d" / "01_fem1d_exercise.ipynb").write_text("{}")
    (root / "exercises" / "01_fem1d" / "kernel.c").write_text("int main;\n")       # a learner's
    (root / "course" / "__pycache__").mkdir()
    (root / "course" / "__pycache__" / "cli.cpython-311.pyc").write_bytes(b"\0")
    (root / "src_c" / "kernel.c").write_text("int kernel;\n")                     # the course's
    (root / "notebooks" / ".ipynb_checkpoints").mkdir()
    (root / "notebooks" / ".ipynb_checkpoints" / "a-checkpoint.ipynb").write_text("{}")
    (root / "solutions").mkdir()
    (root / "solutions" / "secret.ipynb").write_text("{}")
    files = {str(f) for f in dist.learner(tmp_path / "copy", root=root)}
    assert files == {*dist.LEARNER_FILES, "exercises/01_fem1d/01_fem1d_exercise.ipynb",
                     "src_c/kernel.c"}


@pytest.mark.parametrize("case", ["not empty", "a file", "inside the course", "under a file"])
def test_a_bad_dir_is_refused_in_one_line(case, tmp_path):
    target = {"not empty": tmp_path, "a file": tmp_path / "f", "inside the course":
              ROOT / "book" / "learner", "under a file": tmp_path / "f" / "learner"}[case]
    (tmp_path / "f").write_text("x")
    result = course_cli("dist", "learner", str(target), cwd=tmp_path)
    assert result.returncode == 2
    assert len(result.stderr.strip().splitlines()) == 1, result.stderr
    assert result.stderr.startswith("course dist: error:") and str(target) in result.stderr
    assert not (ROOT / "book" / "learner").exists()
