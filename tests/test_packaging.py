"""The repository itself: packaging lists agree, notebooks are stripped, no build outputs tracked."""

import json
import re
import subprocess
import tomllib
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parent.parent
# conda packages that provide the toolchain (pip cannot) and are not in pyproject.toml
# (petsc4py too: setup.sh compiles it against the PETSc it finds, outside pyproject.toml)
CONDA_ONLY = {"python", "c-compiler", "fortran-compiler", "cmake", "make", "openmpi", "fftw", "pip",
              "petsc", "petsc4py"}


def _name(requirement: str) -> str:
    return re.split(r"[<>=!~ \[;]", requirement.strip(), maxsplit=1)[0].lower().replace("_", "-")


def _environment_packages() -> set[str]:
    env = yaml.safe_load((ROOT / "environment.yml").read_text())
    names = set()
    for dep in env["dependencies"]:
        if isinstance(dep, dict):
            names |= {_name(d) for d in dep["pip"]}
        else:
            names.add(_name(dep))
    return names


def test_environment_yml_matches_pyproject():
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    wanted = {_name(d) for d in project["dependencies"]}
    wanted |= {_name(d) for extra in project["optional-dependencies"].values() for d in extra}
    have = _environment_packages() - CONDA_ONLY
    assert wanted - have == set(), f"in pyproject.toml, missing from environment.yml: {wanted - have}"
    assert have - wanted == set(), f"in environment.yml, missing from pyproject.toml: {have - wanted}"


def test_environment_yml_brings_petsc_with_petsc4py():
    """Lecture 09 and its exercise need PETSc with petsc4py: the conda route (macOS) gets both
    from conda-forge, or every PETSc cell of lecture 09 skips."""
    assert {"petsc", "petsc4py"} <= _environment_packages()


def _tracked(*patterns: str) -> list[str]:
    out = subprocess.run(["git", "ls-files", *patterns], cwd=ROOT, capture_output=True, text=True)
    if out.returncode != 0:
        pytest.skip("not a git checkout")
    return out.stdout.split()


def test_notebooks_are_committed_without_outputs():
    notebooks = _tracked("*.ipynb")
    assert notebooks, "no notebooks tracked"
    dirty = []
    for path in notebooks:
        nb = json.loads((ROOT / path).read_text())
        for cell in nb["cells"]:
            if cell["cell_type"] == "code" and (cell.get("outputs") or cell.get("execution_count")):
                dirty.append(path)
                break
    assert not dirty, f"strip the outputs of {dirty}"


def test_no_build_outputs_or_junk_tracked():
    junk = re.compile(r"(__pycache__|\.pyc$|~$|\.ipynb_checkpoints|gradebook\.db|_build/|"
                      r"\.o$|\.so$|\.mod$|\.a$|^build/|^\.venv/)")
    assert [f for f in _tracked() if junk.search(f)] == []


def test_every_lecture_notebook_has_objectives_and_key_points():
    paths = sorted((ROOT / "notebooks").glob("*.ipynb"))
    assert paths, "no lecture notebooks"
    for path in paths:
        nb = json.loads(path.read_text())
        text = "\n".join("".join(c["source"]) for c in nb["cells"] if c["cell_type"] == "markdown")
        for heading in ("Objectives", "Time", "Prerequisites", "Key points"):
            assert heading in text, f"{path.name} lacks '{heading}'"
        tags = [c.get("metadata", {}).get("tags", []) for c in nb["cells"] if c["cell_type"] == "code"]
        assert ["parameters"] in tags or any("parameters" in t for t in tags), \
            f"{path.name} has no cell tagged 'parameters'"


# -- the lock file: exact versions for reproducible installs (workshops) -------------------------

LOCK = ROOT / "requirements-lock.txt"


def _lock_pythons() -> list[str]:
    """The Pythons the lock is made for, from its header line `# python 3.10 3.11 ...`."""
    found = re.search(r"^# python ([0-9. ]+)$", LOCK.read_text(), flags=re.M)
    assert found, "requirements-lock.txt has no '# python X.Y ...' line (make lock writes it)"
    return found.group(1).split()


def _locked(python: str, platform: str = "linux") -> dict[str, str]:
    """{package: version} of the lock for one Python (`3.11.2`) on one platform: the lines whose
    markers hold there. A package pinned twice for the same Python is an error."""
    from packaging.requirements import Requirement

    environment = {"python_version": ".".join(python.split(".")[:2]),
                   "python_full_version": python, "sys_platform": platform, "os_name": "posix",
                   "platform_system": "Linux", "implementation_name": "cpython",
                   "platform_python_implementation": "CPython", "platform_machine": "x86_64"}
    pins = {}
    for line in LOCK.read_text().splitlines():
        line = line.split(" #", 1)[0].strip()
        if not line or line.startswith("#"):
            continue
        requirement = Requirement(line)
        specifiers = list(requirement.specifier)
        assert len(specifiers) == 1 and specifiers[0].operator == "==", \
            f"requirements-lock.txt: {line!r} is not pinned with =="
        if requirement.marker is None or requirement.marker.evaluate(environment):
            name = _name(requirement.name)
            assert name not in pins, f"requirements-lock.txt pins {name} twice for Python {python}"
            pins[name] = specifiers[0].version
    return pins


def test_the_lock_is_made_for_every_supported_python():
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    oldest = re.fullmatch(r">=\s*(3\.\d+)", project["requires-python"]).group(1)
    pythons = _lock_pythons()
    assert pythons[0] == oldest, f"the lock starts at Python {pythons[0]}, pyproject at {oldest}"
    assert pythons == [f"3.{minor}" for minor in range(int(oldest[2:]), int(oldest[2:]) +
                                                      len(pythons))], pythons
    assert len(pythons) >= 4, "the course supports Python 3.10 to 3.13 at least"
    makefile = (ROOT / "Makefile").read_text()
    assert f"LOCK_PYTHONS := {' '.join(pythons)}" in makefile, "make lock must write these"


@pytest.mark.parametrize("python", ["3.10.0", "3.11.2", "3.11.7", "3.12.0", "3.13.0"])
def test_lock_file_pins_every_dependency_of_pyproject(python):
    """For each supported Python (3.11.2 is Debian 12's, which an earlier lock did not fit), one
    exact version of every dependency, within pyproject.toml's range."""
    from packaging.requirements import Requirement

    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    wanted = list(project["dependencies"])
    wanted += [d for extra in project["optional-dependencies"].values() for d in extra]
    pins = _locked(python)
    assert "course" not in pins, "the course itself is installed editable, not from the lock"
    for requirement in map(Requirement, wanted):
        name = _name(requirement.name)
        assert name in pins, f"{name} (pyproject.toml) is not in requirements-lock.txt: make lock"
        assert requirement.specifier.contains(pins[name], prereleases=True), \
            f"requirements-lock.txt pins {name}=={pins[name]}, pyproject.toml wants {requirement}"


def test_the_lock_is_what_this_venv_runs():
    """The tests run with the lock's versions for this Python (setup.sh installs them), so the
    lock is what the tests passed with."""
    import platform
    import sysconfig
    from importlib.metadata import distributions

    if ".".join(platform.python_version().split(".")[:2]) not in _lock_pythons():
        pytest.skip(f"Python {platform.python_version()}: the lock is not made for it")
    # the venv's own packages (not the copies setuptools vendors and puts on sys.path once
    # imported: its importlib_metadata, platformdirs, wheel, zipp)
    site = sorted({sysconfig.get_paths()[key] for key in ("purelib", "platlib")})
    installed = {_name(d.metadata["Name"]): d.version for d in distributions(path=site)}
    differ = {name: (version, installed.get(name))
              for name, version in _locked(platform.python_version()).items()
              if installed.get(name) != version}
    assert not differ, f"(locked, installed) differ: {differ}; run make setup-test"


def test_setup_installs_the_lock_file_and_the_course_editable():
    setup = (ROOT / "scripts" / "setup.sh").read_text()
    assert "lock=requirements-lock.txt" in setup
    assert re.search(r'locked=\(-r "\$lock"\)', setup)
    assert re.search(r'pip install -q "\$@" \\\n\s+-e "\.\[test\]"', setup), \
        "setup.sh must install the lock file and the course (editable) in one pip call"
    assert 'install ${locked[@]+"${locked[@]}"}' in setup
    assert re.search(r'stamp=.*pyproject\.toml "\$lock"', setup), \
        "a changed lock file must trigger a reinstall"
    assert "COURSE_WHEELHOUSE" in setup and "PIP_NO_INDEX=1" in setup
    makefile = (ROOT / "Makefile").read_text()
    assert re.search(r"^lock:", makefile, flags=re.M) and "uv pip compile" in makefile
