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
CONDA_ONLY = {"python", "c-compiler", "fortran-compiler", "cmake", "make", "openmpi", "fftw", "pip"}


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


def _locked() -> dict[str, str]:
    pins = {}
    for line in LOCK.read_text().splitlines():
        line = line.split("#", 1)[0].strip()
        if line:
            name, sep, version = line.partition("==")
            assert sep and version, f"requirements-lock.txt: {line!r} is not pinned with =="
            pins[_name(name)] = version.strip()
    return pins


def test_lock_file_pins_every_dependency_of_pyproject():
    from packaging.requirements import Requirement

    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    wanted = list(project["dependencies"])
    wanted += [d for extra in project["optional-dependencies"].values() for d in extra]
    pins = _locked()
    assert "course" not in pins, "the course itself is installed editable, not from the lock"
    for requirement in map(Requirement, wanted):
        name = _name(requirement.name)
        assert name in pins, f"{name} (pyproject.toml) is not in requirements-lock.txt: make lock"
        assert requirement.specifier.contains(pins[name], prereleases=True), \
            f"requirements-lock.txt pins {name}=={pins[name]}, pyproject.toml wants {requirement}"


def test_setup_installs_the_lock_file_and_the_course_editable():
    setup = (ROOT / "scripts" / "setup.sh").read_text()
    assert "lock=requirements-lock.txt" in setup
    assert re.search(r'locked=\(-r "\$lock"\)', setup)
    install = re.search(r'pip install -q \$\{locked\[@\]\+"\$\{locked\[@\]\}"\} -e "\.\[test\]"',
                        setup)
    assert install, "setup.sh must install the lock file and the course (editable) in one pip call"
    assert re.search(r'stamp=.*pyproject\.toml "\$lock"', setup), \
        "a changed lock file must trigger a reinstall"
    assert "COURSE_WHEELHOUSE" in setup and "PIP_NO_INDEX=1" in setup
    makefile = (ROOT / "Makefile").read_text()
    assert re.search(r"^lock:", makefile, flags=re.M) and "pip freeze" in makefile
