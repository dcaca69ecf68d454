"""Shared fixtures and helpers of the test suite.

Languages are parametrized with readable ids (numpy, numba, c, fortran). Every test that runs a
compiled kernel carries the marker `compiled`, so that tests/test_sanitize.py can rerun exactly
those under AddressSanitizer/UBSan with `-m compiled`.
"""

from __future__ import annotations

import atexit
import json
import os
import resource
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

# The book's STREAM reference (course.timing.STREAM_CACHE, build/stream-reference.json) is kept
# for the pages of `make book`. The tests run two workers on the cores it measures, so whatever
# they measure, the book built inside test_book.py included, goes to a folder of this run's own.
_STREAM_DIR = tempfile.mkdtemp(prefix="pfem-test-stream-")
atexit.register(shutil.rmtree, _STREAM_DIR, ignore_errors=True)
os.environ["COURSE_STREAM_CACHE"] = str(Path(_STREAM_DIR) / "stream-reference.json")

import numpy as np
import pytest
import scipy.sparse

from course import native, toolchain
from course.langs import LANGS
from course.sparse import CRS

ROOT = native.ROOT
PYTHON = sys.executable
COMPILED = native.COMPILED_LANGS              # ("c", "fortran")


def pytest_configure(config):
    config.addinivalue_line(
        "markers", "compiled: runs a C or Fortran kernel (rerun under the sanitizers)")


# The longest test files, longest first (minutes each: the nbgrader round trips, the book build,
# the sanitizer rerun). Under pytest-xdist with --dist loadfile (make test) each goes to a worker
# of its own early, instead of one of them starting last and running alone at the end.
LONGEST_FIRST = ("test_nbgrader.py", "test_book.py", "test_sanitize.py", "test_hub.py")


def pytest_collection_modifyitems(config, items):
    rank = {name: k for k, name in enumerate(LONGEST_FIRST)}
    items.sort(key=lambda item: rank.get(item.path.name, len(rank)))     # stable: the rest as is


@pytest.fixture(autouse=True)
def worker_keeps_its_cores():
    """Fails a test that pins the test worker to fewer CPUs (an in-process OpenMP library started
    under OMP_PROC_BIND binds the thread that starts it): every later subprocess of the worker
    would inherit the mask, run on one core, and OpenBLAS would cap its pool. The mask is restored
    so that the tests after it run as they would alone."""
    before = os.sched_getaffinity(0)
    yield
    after = os.sched_getaffinity(0)
    if after != before:
        os.sched_setaffinity(0, before)
        pytest.fail(f"the test pinned its worker to CPUs {sorted(after)} (was {sorted(before)}): "
                    "run what binds threads in a subprocess", pytrace=False)


def lang_params(langs=LANGS):
    """pytest.param per language, id = the language, compiled ones marked `compiled`."""
    return [pytest.param(lang, id=lang,
                         marks=[pytest.mark.compiled] if lang in COMPILED else [])
            for lang in langs]


ALL_LANGS = lang_params()
COMPILED_LANGS = lang_params(COMPILED)


# --- subprocesses --------------------------------------------------------------------------------

def env_with(**extra) -> dict[str, str]:
    """os.environ plus the MPI environment (run as root, oversubscribe) plus `extra`."""
    env = {**os.environ, **toolchain.mpi_env(), "MPLBACKEND": "Agg"}
    env.update({k: str(v) for k, v in extra.items()})
    return env


def run(cmd, *, timeout: float = 120, cwd=None, env=None, input=None, check=False,
        **kwargs) -> subprocess.CompletedProcess:
    """subprocess.run with text output captured, a timeout (a hang fails instead of blocking) and
    the MPI environment. Fails the test on a timeout with the command in the message."""
    cmd = [str(c) for c in cmd]
    try:
        result = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout,
                                cwd=cwd, env=env if env is not None else env_with(),
                                input=input, **kwargs)
    except subprocess.TimeoutExpired as err:
        pytest.fail(f"timed out after {timeout} s: {' '.join(cmd)}\n"
                    f"stdout: {err.stdout!r}\nstderr: {err.stderr!r}")
    if check and result.returncode != 0:
        pytest.fail(f"{' '.join(cmd)} exited {result.returncode}\n"
                    f"stdout:\n{result.stdout}\nstderr:\n{result.stderr}")
    return result


def run_program(path, *args, cwd, timeout: float = 60, **kwargs) -> subprocess.CompletedProcess:
    """A standalone program (fem1d_c, fem3d_f, ...); a program killed by a signal fails the test."""
    result = run([path, *args], cwd=cwd, timeout=timeout, **kwargs)
    assert result.returncode >= 0, f"killed by signal {-result.returncode}: {result.stderr}"
    return result


def limit_memory(n_bytes: int):
    """A preexec_fn that caps the address space of the child process at n_bytes."""
    return lambda: resource.setrlimit(resource.RLIMIT_AS, (n_bytes, n_bytes))


def run_course(*args, **kwargs) -> subprocess.CompletedProcess:
    """`python -m course ARGS` in the repository root."""
    return run([PYTHON, "-m", "course", *args], cwd=kwargs.pop("cwd", ROOT), **kwargs)


# the fields every `course solve ... --json` prints (DESIGN.md section 4)
COMMON_FIELDS = {"problem", "lang", "unknowns", "nnz", "iterations", "converged",
                 "relative_residual", "threads", "seconds"}


def solve_json(problem: str, *args, timeout: float = 240) -> dict:
    """`python -m course solve PROBLEM ARGS --json`: it succeeds and prints one JSON object."""
    result = run_course("solve", problem, *args, "--json", timeout=timeout)
    assert result.returncode == 0, result.stderr
    lines = result.stdout.strip().splitlines()
    assert len(lines) == 1, f"expected one JSON line, got {result.stdout!r}"
    return json.loads(lines[0])


def assert_one_error(result, name: str, by_course: bool) -> None:
    """A bad `course solve` command line: exit status 2, nothing on stdout, no traceback, one error line naming
    `name`. Errors course finds itself are that one line alone; argparse prints its usage first."""
    assert result.returncode == 2, (result.returncode, result.stderr)
    assert result.stdout == ""
    assert "Traceback" not in result.stderr
    lines = result.stderr.strip().splitlines()
    error_lines = [line for line in lines if "error:" in line]
    assert len(error_lines) == 1, lines
    assert name in error_lines[0], error_lines[0]
    if by_course:
        assert lines == [error_lines[0]], f"expected one line on stderr, got {lines!r}"
        assert lines[0].startswith("course solve: error:")
    else:
        assert lines[-1] == error_lines[0]


# --- fixtures ------------------------------------------------------------------------------------

@pytest.fixture(scope="session")
def root() -> Path:
    return ROOT


@pytest.fixture(scope="session")
def fem3d_c() -> Path:
    """The serial C program of 02_fem3d: the reference of the MPI programs' tests."""
    return native.binary("fem3d_c")


@pytest.fixture(scope="session")
def random_crs():
    """A random non-symmetric 40 x 40 CRS matrix whose rows have different lengths, with empty
    rows (one in the middle, the last one), plus the scipy matrix it came from."""
    rng = np.random.default_rng(20240607)
    n = 40
    a = scipy.sparse.random(n, n, density=0.15, format="lil", random_state=rng,
                            data_rvs=lambda k: rng.uniform(-1.0, 1.0, k))
    a[0, 0] = 2.0                       # row 0 not empty, at least one full-ish row
    a[5, :] = rng.uniform(-1, 1, n)
    a[17, :] = 0.0                      # an empty row in the middle ...
    a[n - 1, :] = 0.0                   # ... and at the end
    a = scipy.sparse.csr_matrix(a)
    a.eliminate_zeros()
    crs = CRS.from_scipy(a)
    lengths = np.diff(crs.row_ptr)
    assert lengths[17] == 0 and lengths[-1] == 0
    assert len(set(lengths.tolist())) > 3, "rows should have different lengths"
    assert (abs(a - a.T)).max() > 0, "should be non-symmetric"
    return crs, a


@pytest.fixture(scope="session")
def nonuniform_mesh():
    """Node coordinates of [0, 2] cut at random points: elements of very different lengths."""
    rng = np.random.default_rng(7)
    inner = np.sort(rng.uniform(0.0, 2.0, 59))
    x = np.concatenate([[0.0], inner, [2.0]])
    assert np.all(np.diff(x) > 0)
    assert np.diff(x).max() / np.diff(x).min() > 10
    return x


def rel_close(actual, expected, rtol=1e-12):
    """True when ||actual - expected||_inf <= rtol * max(||expected||_inf, tiny)."""
    actual, expected = np.asarray(actual, float), np.asarray(expected, float)
    if actual.shape != expected.shape:
        return False
    scale = max(np.max(np.abs(expected), initial=0.0), np.finfo(float).tiny)
    return np.max(np.abs(actual - expected), initial=0.0) <= rtol * scale


def assert_refused(case, lang: str, case_id: str) -> None:
    """case = (call, exception type, name): call(lang) must raise that exception (never reach the
    kernel) with a one-line message that names the offending argument."""
    call, exc_type, name = case
    with pytest.raises((TypeError, ValueError)) as info:
        call(lang)
    assert isinstance(info.value, exc_type), \
        f"{case_id}: expected {exc_type.__name__}, got {type(info.value).__name__}: {info.value}"
    message = str(info.value)
    assert name in message, f"{case_id}: message does not name {name!r}: {message!r}"
    assert "\n" not in message.strip()


def assert_rel_close(actual, expected, rtol=1e-12, what="values"):
    actual, expected = np.asarray(actual, float), np.asarray(expected, float)
    assert actual.shape == expected.shape, f"{what}: shape {actual.shape} != {expected.shape}"
    scale = max(np.max(np.abs(expected), initial=0.0), np.finfo(float).tiny)
    err = np.max(np.abs(actual - expected), initial=0.0) / scale
    assert err <= rtol, f"{what}: relative difference {err:.3e} > {rtol:.1e}"


# --- the solution notebooks of the exercises -----------------------------------------------------

def solution_cell(key: str, grade_id: str) -> str:
    """The source of the cell `grade_id` of solutions/KEY/KEY_exercise.ipynb."""
    import nbformat

    notebook = nbformat.read(ROOT / "solutions" / key / f"{key}_exercise.ipynb", as_version=4)
    return next(c.source for c in notebook.cells
                if c.metadata.get("nbgrader", {}).get("grade_id") == grade_id)


def written_file(key: str, grade_id: str) -> str:
    """What the %%writefile cell `grade_id` of that notebook writes."""
    first, rest = solution_cell(key, grade_id).split("\n", 1)
    assert first.startswith("%%writefile"), first
    return rest + "\n"


def book_prose() -> dict[str, str]:
    """Prose of the book: the markdown cells of the lecture notebooks, and the book's own pages."""
    found = {}
    for path in sorted((ROOT / "notebooks").glob("*.ipynb")):
        cells = json.loads(path.read_text())["cells"]
        found[path.name] = "\n\n".join("".join(c["source"]) for c in cells
                                       if c["cell_type"] == "markdown")
    for path in sorted((ROOT / "book").glob("*.md")):
        found[f"book/{path.name}"] = path.read_text()
    return found
