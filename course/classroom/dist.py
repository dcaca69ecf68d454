"""`python -m course dist learner DIR`: the course as a learner gets it.

Everything a learner needs to run the lectures and do the exercises, and nothing more: the package,
the lecture notebooks, the student versions of the exercises, the C and Fortran sources, the input
files, the book, the set-up; no `solutions/` (nbgrader's source notebooks, with the solutions and
the hidden tests), no `tests/`, no `.git`, not the instructors' `nbgrader_config.py` (its course
folders are theirs) but a learner's one that gives Validate the course's cell timeout. The
instructors page keeps its answers between two markers; the copy of it says where they went
instead.
"""

from __future__ import annotations

import fnmatch
import re
import shutil
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

# what the copy holds, relative to the repository root (folders are copied whole, less JUNK)
LEARNER_FOLDERS = ("course", "notebooks", "exercises", "src_c", "src_fortran", "examples", "book",
                   "scripts")
LEARNER_FILES = ("Makefile", "pyproject.toml", "environment.yml", "README.md", "CMakeLists.txt",
                 "LICENSE", "requirements-lock.txt")

# build outputs, caches and what runs write next to the notebooks (as .gitignore): never copied
JUNK = ("__pycache__", "*.py[cod]", ".ipynb_checkpoints", "*.egg-info", "*.so", "*.o", "*.mod",
        "*.a", "_build", ".jupyter_cache", ".pytest_cache", "*~", "*.swp", ".DS_Store",
        "gradebook.db", "submitted", "autograded", "feedback", "nbgrader_step*")
# a learner's own %%writefile kernels next to an exercise notebook (gitignored) are not course files
WRITTEN_BY_RUNS = {"exercises": ("*.c", "*.f90")}

# the answers of the instructors page: between these markers in book/*.md, left out of the copy
INSTRUCTORS_ONLY = re.compile(r"<!-- BEGIN INSTRUCTORS ONLY -->.*?<!-- END INSTRUCTORS ONLY -->",
                              re.S)
REMOVED_NOTE = ("<!-- the answers for instructors are not part of a learner copy "
                "(python -m course dist learner) -->\n"
                "*The answers for instructors are left out of this learner copy of the course.*")
# nbgrader's settings on the learner's side: Validate reads them from the folder JupyterLab runs in
LEARNER_NBGRADER_CONFIG = (
    '"""nbgrader\'s settings for a learner: Validate interrupts a cell after the course\'s cell\n'
    'timeout, as grading does (the instructors\' settings stay with them)."""\n'
    "c = get_config()  # noqa: F821  (provided by nbgrader)\n"
    "c.Execute.timeout = {timeout}\n"
    "c.Execute.raise_on_iopub_timeout = False   # an interrupted cell may answer late\n")
LEARNER_README = ("> This is a learner copy of the course, made by `python -m course dist learner`:"
                  " the exercises'\n> solutions, their hidden tests and the test suite stay with "
                  "the instructors.\n\n")


def _junk(path: Path, top: str) -> bool:
    patterns = JUNK + WRITTEN_BY_RUNS.get(top, ())
    return any(fnmatch.fnmatch(part, pattern) for part in path.parts for pattern in patterns)


def learner_files(root: Path = ROOT) -> list[Path]:
    """The files of a learner copy, relative to `root`, sorted."""
    files = []
    for name in LEARNER_FOLDERS:
        folder = root / name
        if not folder.is_dir():
            raise FileNotFoundError(f"{folder} is missing: run this from a full course repository")
        files += [p.relative_to(root) for p in folder.rglob("*")
                  if p.is_file() and not p.is_symlink()
                  and not _junk(p.relative_to(folder), name)]
    for name in LEARNER_FILES:
        if not (root / name).is_file():
            raise FileNotFoundError(f"{root / name} is missing: run this from a full course "
                                    "repository")
        files.append(Path(name))
    return sorted(files)


def _check_target(target: Path, root: Path) -> None:
    if target.exists() and not target.is_dir():
        raise ValueError(f"{target} is a file: give a new or empty folder")
    if target.exists() and any(target.iterdir()):
        raise ValueError(f"{target} exists and is not empty: give a new or empty folder")
    inside = target.resolve()
    for name in LEARNER_FOLDERS:
        if inside.is_relative_to((root / name).resolve()):
            raise ValueError(f"{target} is inside the course's {name}/: give a folder outside it")


def learner(target, root: Path = ROOT) -> list[Path]:
    """Write the learner copy of the course in `target` (new or empty); return its files."""
    target = Path(target)
    _check_target(target, root)
    files = learner_files(root)
    try:
        _write(files, target, root)
    except OSError as err:
        raise ValueError(f"cannot write the learner copy in {target}: "
                         f"{err.strerror or err}") from err
    return files


def _write(files: list[Path], target: Path, root: Path) -> None:
    target.mkdir(parents=True, exist_ok=True)
    for rel in files:
        dest = target / rel
        dest.parent.mkdir(parents=True, exist_ok=True)
        if rel.parts[0] == "book" and rel.suffix == ".md":
            text = (root / rel).read_text()
            dest.write_text(INSTRUCTORS_ONLY.sub(REMOVED_NOTE, text))
            shutil.copymode(root / rel, dest)
        elif rel == Path("README.md"):
            dest.write_text(LEARNER_README + (root / rel).read_text())
        else:
            shutil.copy2(root / rel, dest)
    from ..grading import CELL_TIMEOUT

    (target / "nbgrader_config.py").write_text(LEARNER_NBGRADER_CONFIG.format(timeout=CELL_TIMEOUT))


def main(args) -> int:
    """The CLI verb: `dist learner DIR`."""
    files = learner(args.dir)
    notebooks = sum(1 for f in files if f.suffix == ".ipynb")
    print(f"learner copy in {args.dir}: {len(files)} files ({notebooks} notebooks); no solutions, "
          "hidden tests or test suite")
    print(f"next: cd {args.dir} && make lab   (or make book)")
    return 0
