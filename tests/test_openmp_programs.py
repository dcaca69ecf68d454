"""Lecture 03_openmp, the standalone programs solc and solf: every version v0 .. v3 of the OpenMP
PCG ladder on good INPUT.DAT files (the same iterations and checksum across versions, languages,
thread counts, and as the Python side), the default arguments and the learners' example file; one
clear line on stderr and exit status 2 on bad input files and command lines."""

from __future__ import annotations

import re

import numpy as np
import pytest

from conftest import ROOT, env_with, limit_memory, run_program
from course import native, resources, solvers, toolchain
from course.fem import fvm

PROGRAMS = [pytest.param("solc", id="c"), pytest.param("solf", id="fortran")]
NAMES = ("solc", "solf")
VERSIONS = ("v0", "v1", "v2", "v3")
EXAMPLE = ROOT / "examples" / "03_openmp" / "INPUT.DAT"

pytestmark = pytest.mark.timeout(300)


@pytest.fixture(scope="module")
def binaries():
    return {name: native.binary(name) for name in NAMES}


def input_text(cells="8 6 5", size="0.5 1.0 2.0", eps="1e-10"):
    return f"{cells}   NX NY NZ\n{size}   DX DY DZ\n{eps}   EPSICCG\n"


GOOD = input_text()


def parse_summary(stdout: str) -> dict:
    """The numbers of the summary both programs print."""
    out = {}
    m = re.search(r"sol \((C|Fortran)\): (\d+) x (\d+) x (\d+) cells, N = (\d+), (\d+) "
                  r"off-diagonal nonzeros in (CRS|ELL \(6 per row\))\n", stdout)
    assert m, stdout
    out["lang"], out["cells"] = m[1], tuple(map(int, m.groups()[1:4]))
    out["n"], out["offdiag"], out["format"] = int(m[5]), int(m[6]), m[7].split()[0]
    m = re.search(r"\n  version (v\d), threads (\d+)\n", stdout)
    assert m, stdout
    out["version"], out["threads"] = m[1], int(m[2])
    m = re.search(r"\n  CG: (\d+) iterations, relative residual (\S+) "
                  r"\((converged|NOT converged)\)\n", stdout)
    assert m, stdout
    out["iterations"], out["relres"], out["status"] = int(m[1]), float(m[2]), m[3]
    m = re.search(r"\n  time: generate (\S+) s, solve (\S+) s\n", stdout)
    assert m, stdout
    out["seconds"] = (float(m[1]), float(m[2]))
    m = re.search(r"\n  phi\(max\) = (\S+) at cell (\d+) \(i j k = (\d+) (\d+) (\d+)\)\n",
                  stdout)
    assert m, stdout
    out["phi_max"], out["cell"] = float(m[1]), int(m[2])
    out["ijk"] = tuple(map(int, m.groups()[2:]))
    m = re.search(r"\n  phi\(checksum\) = (\S+)\n", stdout)
    assert m, stdout
    out["checksum"] = float(m[1])
    return out


def solve(binaries, name, *args, cwd, threads=None):
    """Run a program that must succeed; its summary."""
    env = env_with(OMP_NUM_THREADS=threads) if threads is not None else None
    result = run_program(binaries[name], *args, cwd=cwd, env=env)
    assert result.returncode == 0, (result.returncode, result.stdout, result.stderr)
    assert result.stderr == ""
    return parse_summary(result.stdout)


def python_reference(path) -> dict:
    """The same problem read and solved on the Python side (numpy generator, Numba v0)."""
    params = fvm.read_input(path)
    p = fvm.poisson(*(params[k] for k in ("nx", "ny", "nz", "dx", "dy", "dz")))
    result = solvers.pcg_ladder(p, "v0", "numba", tol=params["eps"], max_iter=10 * p.n)
    return {"params": params, "n": p.n, "offdiag": fvm.offdiag_nnz(p.nx, p.ny, p.nz),
            "iterations": result.iterations, "checksum": float(result.x.sum()),
            "phi_max": float(result.x.max()), "cell": int(np.argmax(result.x))}


@pytest.fixture(scope="module")
def good_reference(tmp_path_factory):
    path = tmp_path_factory.mktemp("reference") / "INPUT.DAT"
    path.write_text(GOOD)
    return python_reference(path)


def check_against(s: dict, ref: dict) -> None:
    params = ref["params"]
    assert s["cells"] == (params["nx"], params["ny"], params["nz"])
    assert (s["n"], s["offdiag"]) == (ref["n"], ref["offdiag"])
    assert s["status"] == "converged" and s["relres"] <= params["eps"]
    assert s["iterations"] == ref["iterations"]
    assert s["checksum"] == pytest.approx(ref["checksum"], rel=1e-10)
    assert s["phi_max"] == pytest.approx(ref["phi_max"], rel=1e-10)
    assert s["cell"] == ref["cell"]
    i, j, k = s["ijk"]
    assert s["cell"] == i + params["nx"] * (j + params["ny"] * k)


# --- good input -----------------------------------------------------------------------------------

@pytest.mark.parametrize("version", VERSIONS)
@pytest.mark.parametrize("name", PROGRAMS)
def test_every_version_matches_python(name, version, binaries, tmp_path, good_reference):
    (tmp_path / "case.dat").write_text(GOOD)
    s = solve(binaries, name, "case.dat", version, cwd=tmp_path)
    assert s["lang"] == ("C" if name == "solc" else "Fortran")
    assert s["version"] == version and s["threads"] >= 1
    assert s["format"] == ("CRS" if version in ("v0", "v1") else "ELL")
    assert all(t >= 0 for t in s["seconds"])
    check_against(s, good_reference)


@pytest.mark.parametrize("threads", [None, 1])
def test_versions_and_languages_agree(binaries, tmp_path, threads):
    """All eight runs take the same iterations and agree in the checksum; with one thread they do
    the same floating-point operations in the same order (pcg.c: "with one thread, bit for
    bit"), so they print the same digits."""
    (tmp_path / "case.dat").write_text(input_text("9 7 6", "0.3 0.2 0.7", "1e-11"))
    env = env_with(OMP_NUM_THREADS=threads) if threads else None
    outputs = {(name, v): run_program(binaries[name], "case.dat", v, cwd=tmp_path, env=env,
                                      check=True).stdout
               for name in NAMES for v in VERSIONS}
    summaries = {key: parse_summary(out) for key, out in outputs.items()}
    first = summaries["solc", "v0"]
    for key, s in summaries.items():
        assert s["iterations"] == first["iterations"], key
        assert s["checksum"] == pytest.approx(first["checksum"], rel=1e-10), key
        assert s["phi_max"] == pytest.approx(first["phi_max"], rel=1e-10), key
        assert s["relres"] == pytest.approx(first["relres"], rel=1e-6), key
        if threads == 1:
            phi_lines = [line for line in outputs[key].splitlines() if "phi(" in line]
            assert phi_lines == [line for line in outputs["solc", "v0"].splitlines()
                                 if "phi(" in line], key


@pytest.mark.parametrize("cells,size", [("1 1 1", "1 1 1"), ("13 1 1", "0.1 1 1"),
                                        ("1 11 1", "1 0.25 1"), ("1 1 12", "2 2 0.5"),
                                        ("5 4 17", "0.01 100 3")])
@pytest.mark.parametrize("name", PROGRAMS)
def test_thin_and_odd_boxes(name, binaries, tmp_path, cells, size):
    """Boxes one cell thick in some directions (rows with fewer than 6 neighbours, ELL padding)
    and strongly anisotropic cells: v0 and v3 agree with the Python side."""
    (tmp_path / "case.dat").write_text(input_text(cells, size, "1e-12"))
    ref = python_reference(tmp_path / "case.dat")
    for version in ("v0", "v3"):
        check_against(solve(binaries, name, "case.dat", version, cwd=tmp_path), ref)


@pytest.mark.parametrize("name", PROGRAMS)
def test_default_arguments(name, binaries, tmp_path, good_reference):
    """No arguments: ./INPUT.DAT and v3; one argument: that file and v3."""
    (tmp_path / "INPUT.DAT").write_text(GOOD)
    s = solve(binaries, name, cwd=tmp_path)
    assert s["version"] == "v3" and s["format"] == "ELL"
    check_against(s, good_reference)
    (tmp_path / "other.dat").write_text(GOOD)
    s = solve(binaries, name, "other.dat", cwd=tmp_path)
    assert s["version"] == "v3"
    check_against(s, good_reference)


@pytest.mark.parametrize("name", PROGRAMS)
def test_default_input_file_missing(name, binaries, tmp_path):
    result = run_program(binaries[name], cwd=tmp_path)
    assert result.returncode == 2 and result.stdout == ""
    assert result.stderr.splitlines() == [
        f"{name}: INPUT.DAT: cannot open input file: No such file or directory"]


@pytest.fixture(scope="module")
def example_reference():
    return python_reference(EXAMPLE)


@pytest.mark.parametrize("version", ["v1", "v3"])
@pytest.mark.parametrize("name", PROGRAMS)
def test_example_input(name, version, binaries, tmp_path, example_reference):
    """The file the learners run (32^3 cells, EPSICCG 1e-8), given by path and as ./INPUT.DAT."""
    s = solve(binaries, name, EXAMPLE, version, cwd=tmp_path)
    assert s["cells"] == (32, 32, 32) and s["n"] == 32**3
    assert s["offdiag"] == 6 * 32**3 - 6 * 32**2
    check_against(s, example_reference)
    (tmp_path / "INPUT.DAT").write_bytes(EXAMPLE.read_bytes())
    assert solve(binaries, name, cwd=tmp_path)["iterations"] == example_reference["iterations"]


@pytest.mark.parametrize("version", ["v1", "v3"])
@pytest.mark.parametrize("name", PROGRAMS)
def test_thread_counts_give_the_same_iterations(name, version, binaries, tmp_path):
    """OMP_NUM_THREADS = 1 .. 4 (3 and 4 oversubscribe a 2-core machine): the program reports the
    threads it ran with, takes the same iterations and agrees in the checksum to round-off."""
    (tmp_path / "case.dat").write_text(input_text("12 10 9", "0.5 1.0 2.0", "1e-10"))
    runs = {t: solve(binaries, name, "case.dat", version, cwd=tmp_path, threads=t)
            for t in (1, 2, 3, 4)}
    for threads, s in runs.items():
        assert s["threads"] == threads
        assert s["iterations"] == runs[1]["iterations"], threads
        assert s["checksum"] == pytest.approx(runs[1]["checksum"], rel=1e-10), threads


@pytest.mark.parametrize("eps", ["1.0d-10", "1.0D-10", "1d-10", "1.0E-10"])
@pytest.mark.parametrize("name", PROGRAMS)
def test_fortran_style_exponent(name, binaries, tmp_path, eps, good_reference):
    (tmp_path / "case.dat").write_text(input_text(eps=eps))
    check_against(solve(binaries, name, "case.dat", "v2", cwd=tmp_path), good_reference)


# --- bad input ------------------------------------------------------------------------------------

# id -> (file contents or None for "no such file", expected line number or None, text in message)
BAD_INPUTS = {
    "missing-file": (None, None, "cannot open input file"),
    "empty-file": ("", 1, "missing line, expected NX NY NZ"),
    "missing-size-line": ("8 6 5\n", 2, "missing line, expected DX DY DZ"),
    "missing-eps-line": ("8 6 5\n1 1 1\n", 3, "missing line, expected EPSICCG"),
    "blank-first-line": ("\n" + GOOD, 1, "found 0"),
    "two-cells": ("8 6\n1 1 1\n1e-8\n", 1, "expected 3 integer(s) (NX NY NZ"),
    "two-sizes": ("8 6 5\n1.0 1.0\n1e-8\n", 2, "expected 3 real number(s) (DX DY DZ"),
    "no-eps-value": ("8 6 5\n1 1 1\n  \n", 3, "expected 1 real number(s) (EPSICCG"),
    # the comment is read as the missing value
    "two-cells-and-comment": (input_text(cells="8 6"), 1, "got 'NX'"),
    "two-sizes-and-comment": (input_text(size="1.0 1.0"), 2, "got 'DX'"),
    "nx-abc": (input_text(cells="abc 6 5"), 1, "'abc'"),
    "ny-real": (input_text(cells="8 1.5 5"), 1, "'1.5'"),
    "nz-exponent": (input_text(cells="8 6 1e3"), 1, "'1e3'"),
    "nx-int-overflow": (input_text(cells="99999999999 6 5"), 1, "'99999999999'"),
    "nx-zero": (input_text(cells="0 6 5"), 1, "NX must be positive"),
    "ny-negative": (input_text(cells="8 -6 5"), 1, "NY must be positive"),
    "nz-zero": (input_text(cells="8 6 0"), 1, "NZ must be positive"),
    "n-overflows-32-bit": (input_text(cells="2000 2000 2000"), 1, "mesh too large"),
    "6n-overflows-32-bit": (input_text(cells="1000 1000 358"), 1, "mesh too large"),
    "dx-zero": (input_text(size="0 1 1"), 2, "DX must be positive"),
    "dy-negative": (input_text(size="1 -0.5 1"), 2, "DY must be positive"),
    "dz-zero": (input_text(size="1 1 0.0"), 2, "DZ must be positive"),
    "dx-abc": (input_text(size="abc 1 1"), 2, "'abc'"),
    "dx-inf": (input_text(size="inf 1 1"), 2, "'inf'"),
    "dy-nan": (input_text(size="1 nan 1"), 2, "'nan'"),
    "dz-overflow": (input_text(size="1 1 1e400"), 2, "'1e400'"),
    "dz-hex": (input_text(size="1 1 0x1p3"), 2, "'0x1p3'"),
    "dx-trailing-garbage": (input_text(size="1.0x 1 1"), 2, "'1.0x'"),
    "eps-zero": (input_text(eps="0"), 3, "EPSICCG must be positive"),
    "eps-negative": (input_text(eps="-1e-8"), 3, "EPSICCG must be positive"),
    "eps-inf": (input_text(eps="inf"), 3, "'inf'"),
    "eps-missing-exponent": (input_text(eps="1e"), 3, "'1e'"),
    "line-too-long": ("8 6 5 " + "x" * 1100 + "\n1 1 1\n1e-8\n", 1, "line longer"),
}


def _write_case(tmp_path, case_id):
    contents = BAD_INPUTS[case_id][0]
    path = tmp_path / f"{case_id}.dat"
    if contents is not None:
        path.write_text(contents)
    return path.name


def _check_one_line_error(result, name, file_name, line):
    """Exit status 2, nothing on stdout, one line `PROG: FILE:LINE: ...` on stderr."""
    assert result.returncode == 2, (result.returncode, result.stdout, result.stderr)
    assert result.stdout == "", "nothing should be computed or printed on bad input"
    lines = result.stderr.splitlines()
    assert len(lines) == 1, f"expected one line on stderr, got {lines!r}"
    message = lines[0]
    prefix = f"{name}: {file_name}:{line}: " if line is not None else f"{name}: {file_name}: "
    assert message.startswith(prefix), message
    assert "Traceback" not in message and "Error termination" not in message
    return message


@pytest.mark.parametrize("case_id", list(BAD_INPUTS))
@pytest.mark.parametrize("name", PROGRAMS)
def test_bad_input(name, binaries, tmp_path, case_id):
    """Refused before anything is allocated: the address space is capped at 1 GiB, far below
    what the "mesh too large" cases would need."""
    file_name = _write_case(tmp_path, case_id)
    _, line, text = BAD_INPUTS[case_id]
    for version in ("v0", "v3"):
        result = run_program(binaries[name], file_name, version, cwd=tmp_path,
                             preexec_fn=limit_memory(1 << 30))
        message = _check_one_line_error(result, name, file_name, line)
        assert text in message, message


@pytest.mark.parametrize("name", PROGRAMS)
def test_directory_as_input(name, binaries, tmp_path):
    (tmp_path / "adir").mkdir()
    result = run_program(binaries[name], "adir", cwd=tmp_path)
    assert result.returncode == 2 and result.stdout == ""
    assert len(result.stderr.splitlines()) == 1 and "adir" in result.stderr


@pytest.mark.parametrize("version", ["v0", "v3"])
@pytest.mark.parametrize("name", PROGRAMS)
def test_huge_mesh_runs_out_of_memory_cleanly(name, version, binaries, tmp_path):
    """700^3 cells fit the 32-bit indices but need about 33 GB: with the address space capped at
    4 GiB the allocation fails, and the program says so in one line and exits 1."""
    (tmp_path / "big.dat").write_text(input_text(cells="700 700 700", size="1 1 1"))
    result = run_program(binaries[name], "big.dat", version, cwd=tmp_path,
                         preexec_fn=limit_memory(4 << 30))
    assert result.returncode == 1, (result.returncode, result.stdout, result.stderr)
    assert result.stdout == ""
    assert result.stderr.splitlines() == [f"{name}: out of memory for NX NY NZ = 700 700 700"]


# id -> (arguments; the input file is written first as case.dat)
BAD_COMMAND_LINES = {
    "unknown-version": ["case.dat", "v7"],
    "version-upper-case": ["case.dat", "V3"],
    "version-trailing-blank": ["case.dat", "v3 "],
    "version-empty": ["case.dat", ""],
    "version-first": ["v3", "case.dat"],
}


@pytest.mark.parametrize("case_id", list(BAD_COMMAND_LINES))
@pytest.mark.parametrize("name", PROGRAMS)
def test_bad_version(name, binaries, tmp_path, case_id):
    (tmp_path / "case.dat").write_text(GOOD)
    args = BAD_COMMAND_LINES[case_id]
    result = run_program(binaries[name], *args, cwd=tmp_path)
    assert result.returncode == 2, (result.returncode, result.stdout, result.stderr)
    assert result.stdout == ""
    lines = result.stderr.splitlines()
    assert len(lines) == 1, lines
    assert lines[0] == f"{name}: unknown version '{args[1]}' (expected v0, v1, v2 or v3)"


@pytest.mark.parametrize("name", PROGRAMS)
def test_too_many_arguments(name, binaries, tmp_path):
    (tmp_path / "case.dat").write_text(GOOD)
    result = run_program(binaries[name], "case.dat", "v3", "extra", cwd=tmp_path)
    assert result.returncode == 2 and result.stdout == ""
    lines = result.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("usage:"), lines
    assert lines[0].endswith(" [INPUT.DAT] [v0|v1|v2|v3]"), lines


def _normalise(message: str, binary, name: str) -> str:
    return message.replace(str(binary), "PROG").replace(name, "PROG")


@pytest.mark.parametrize("case_id", [*BAD_INPUTS, *BAD_COMMAND_LINES, "too-many-arguments"])
def test_c_and_fortran_messages_agree(binaries, tmp_path, case_id):
    if case_id in BAD_INPUTS:
        args = [_write_case(tmp_path, case_id), "v3"]
    elif case_id in BAD_COMMAND_LINES:
        (tmp_path / "case.dat").write_text(GOOD)
        args = BAD_COMMAND_LINES[case_id]
    else:
        (tmp_path / "case.dat").write_text(GOOD)
        args = ["case.dat", "v3", "extra"]
    messages = {}
    for name in NAMES:
        result = run_program(binaries[name], *args, cwd=tmp_path)
        messages[name] = (result.returncode, result.stdout,
                          _normalise(result.stderr, binaries[name], name))
    assert messages["solc"] == messages["solf"]


@pytest.mark.parametrize("name", PROGRAMS)
def test_absurd_thread_count_is_refused(name, binaries, tmp_path):
    """OMP_NUM_THREADS=100000 crashed the OpenMP runtime (SIGSEGV): more than 16 threads per core
    the process may use is refused in one line, exit status 2, in the words of `course solve`;
    the limit itself runs."""
    (tmp_path / "case.dat").write_text(GOOD)
    cores = toolchain.usable_cores()
    limit = resources.THREADS_PER_CORE_MAX * cores
    for threads in (100000, limit + 1):
        result = run_program(binaries[name], "case.dat", "v1", cwd=tmp_path,
                             env=env_with(OMP_NUM_THREADS=threads))
        assert result.returncode == 2, (result.returncode, result.stdout, result.stderr)
        assert result.stdout == ""
        with pytest.raises(ValueError) as python_side:
            resources.check_threads(threads, f"OMP_NUM_THREADS={threads}")
        assert result.stderr.splitlines() == [f"{name}: {python_side.value}"]
    if limit <= 256:                                   # (a big node: thousands of threads)
        assert solve(binaries, name, "case.dat", "v1", cwd=tmp_path,
                     threads=limit)["threads"] == limit
