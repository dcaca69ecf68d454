"""Lecture 02_fem3d, compiled side: the standalone programs fem3d_c and fem3d_f (right answers, the
same output from C and Fortran, a readable VTK file, one clear line on stderr and exit status 2 on
bad input; with the word nakajima on line 3, Python's answer for Nakajima's heat source) and the
raw C and Fortran kernels (fem3d_element, fem3d_pattern, fem3d_assemble, fem3d_face_flux,
crs_dirichlet, stream_*) called through ctypes, against each other and against a small numpy
reference written here."""

from __future__ import annotations

import ctypes
import re
from functools import cache

import numpy as np
import pytest

from conftest import ROOT, assert_rel_close, env_with, limit_memory, run_program
from course import native, problems

PROGRAMS = [pytest.param("fem3d_c", id="c"), pytest.param("fem3d_f", id="fortran")]
FACES = ("xmin", "xmax", "ymin", "ymax", "zmin", "zmax")
EXAMPLE = ROOT / "examples" / "02_fem3d" / "input.dat"

pytestmark = pytest.mark.timeout(600)


@pytest.fixture(scope="module")
def binaries():
    return {name: native.binary(name) for name in ("fem3d_c", "fem3d_f")}


def input_text(nel="4 3 5", size="0.25 0.2 0.3", material="1.0 1.0", qflux="0.0", face="zmax",
               eps="1e-13"):
    return (f"{nel}   NX NY NZ\n{size}   DX DY DZ\n{material}   COND QVOL\n{qflux}   QFLUX\n"
            f"{face}   FIXED\n{eps}   EPS\n")


GOOD = input_text()


def parse_summary(stdout: str) -> dict:
    """The numbers of the summary both programs print."""
    out = {}
    m = re.search(r"(\d+) x (\d+) x (\d+) elements, (\d+) unknowns, (\d+) nonzeros", stdout)
    assert m, stdout
    out["nel"] = tuple(map(int, m.groups()[:3]))
    out["unknowns"], out["nnz"] = int(m[4]), int(m[5])
    m = re.search(r"T = 0 on (\w+), heat flux \S+ into (\w+)", stdout)
    assert m, stdout
    out["fixed"], out["flux_face"] = m[1], m[2]
    m = re.search(r"CG: (\d+) iterations, relative residual (\S+) \((converged|NOT converged)\)",
                  stdout)
    assert m, stdout
    out["iterations"], out["relres"], out["status"] = int(m[1]), float(m[2]), m[3]
    m = re.search(r"max T = (\S+)\s+should be (\S+)", stdout)
    assert m, stdout
    out["t_max"], out["t_max_exact"] = float(m[1]), float(m[2])
    m = re.search(r"max nodal error (\S+)", stdout)
    assert m, stdout
    out["error"] = float(m[1])
    return out


NAKAJIMA_LINE = re.compile(r"^  T = 0 on (\w+), heat flux \S+ into (\w+), source (\S+) "
                           r"\|x_c \+ y_c\| \(nakajima\), conductivity \S+$")


def parse_nakajima_summary(stdout: str) -> dict:
    """The summary with line 3's SOURCE nakajima: the problem line says so, max T has no exact
    value beside it and no error line follows (lines 1-4 of the summary)."""
    lines = stdout.splitlines()
    out = {}
    m = re.search(r"(\d+) x (\d+) x (\d+) elements, (\d+) unknowns, (\d+) nonzeros", lines[0])
    assert m, lines
    out["nel"] = tuple(map(int, m.groups()[:3]))
    out["unknowns"], out["nnz"] = int(m[4]), int(m[5])
    m = NAKAJIMA_LINE.match(lines[1])
    assert m, lines[1]
    out["fixed"], out["flux_face"], out["qvol"] = m[1], m[2], float(m[3])
    m = re.match(r"^  CG: (\d+) iterations, relative residual (\S+) \((converged|NOT converged)\)$",
                 lines[2])
    assert m, lines[2]
    out["iterations"], out["relres"], out["status"] = int(m[1]), float(m[2]), m[3]
    m = re.match(r"^  max T = (\S+)   \(no exact solution for this source\)$", lines[3])
    assert m, lines[3]
    out["t_max"] = float(m[1])
    assert "should be" not in stdout and "nodal error" not in stdout, stdout
    return out


def model_exact(s, thickness, cond, qvol, qflux):
    """T(s) of the model problem, s = distance from the flux face."""
    return qvol * (thickness**2 - s**2) / (2 * cond) + qflux * (thickness - s) / cond


# --- good input ------------------------------------------------------------------------------------

@pytest.mark.parametrize("name", PROGRAMS)
def test_example_input(name, binaries, tmp_path):
    result = run_program(binaries[name], EXAMPLE, cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert result.stderr == ""
    s = parse_summary(result.stdout)
    assert s["nel"] == (8, 8, 8) and s["unknowns"] == 9**3 and s["nnz"] == 25**3
    assert (s["fixed"], s["flux_face"]) == ("zmax", "zmin")
    assert s["status"] == "converged" and s["relres"] <= 1e-8
    assert s["t_max_exact"] == pytest.approx(0.32, rel=1e-9)      # Z^2 / 2 with Z = 0.8
    assert s["t_max"] == pytest.approx(0.32, rel=1e-7)
    assert s["error"] < 1e-8


# (NX NY NZ, DX DY DZ, COND QVOL, QFLUX, FIXED)
MODEL_CASES = {
    "xmin": ("3 5 4", "0.2 0.1 0.35", "0.6 -2.0", "1.5", "xmin"),
    "xmax": ("6 2 3", "0.1 0.5 0.5", "2.0 3.0", "0.0", "xmax"),
    "ymin": ("2 7 3", "1.0 0.05 0.2", "1.0 0.0", "4.0", "ymin"),
    "ymax": ("4 4 4", "0.25 0.25 0.25", "0.3 1.0", "-0.5", "ymax"),
    "zmin": ("3 2 9", "0.3 0.2 0.1", "5.0 10.0", "2.0", "zmin"),
    "zmax": ("5 6 7", "0.2 0.3 0.15", "1.5 2.5", "0.75", "zmax"),
}


@pytest.mark.parametrize("case", list(MODEL_CASES))
@pytest.mark.parametrize("name", PROGRAMS)
def test_model_problem_is_nodally_exact(name, binaries, tmp_path, case):
    """The exact solution depends on s only; the 3D system then reduces to the 1D one of linear
    elements (the stiffness of a function constant in x and y is a tensor product with zero row
    sums in x and y), which is nodally exact. So the nodal error is round-off plus what CG leaves
    (relative residual <= 1e-13); measured: below 2e-14."""
    nel, size, material, qflux, face = MODEL_CASES[case]
    (tmp_path / "case.dat").write_text(input_text(nel, size, material, qflux, face, eps="1e-13"))
    result = run_program(binaries[name], "case.dat", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    s = parse_summary(result.stdout)
    nels, sizes = [int(v) for v in nel.split()], [float(v) for v in size.split()]
    cond, qvol = (float(v) for v in material.split())
    axis = FACES.index(face) // 2
    thickness = nels[axis] * sizes[axis]
    s_nodes = np.arange(nels[axis] + 1) * sizes[axis]
    t_exact_max = model_exact(s_nodes, thickness, cond, qvol, float(qflux)).max()
    assert s["unknowns"] == np.prod([n + 1 for n in nels])
    assert s["nnz"] == np.prod([3 * n + 1 for n in nels])
    assert (s["fixed"], s["flux_face"]) == (face, FACES[FACES.index(face) ^ 1])
    assert s["status"] == "converged" and s["relres"] <= 1e-13
    assert s["t_max_exact"] == pytest.approx(t_exact_max, rel=1e-9, abs=1e-12)
    assert s["t_max"] == pytest.approx(t_exact_max, rel=1e-9, abs=1e-12)
    assert s["error"] <= 1e-12 * max(1.0, abs(t_exact_max))


def _same_text(stdout: str) -> str:
    return re.sub(r"\((C|Fortran)\)", "(LANG)", stdout)


# line 3's SOURCE nakajima: QVOL |x_c + y_c| on each element (NX NY NZ, DX DY DZ, COND QVOL, QFLUX,
# FIXED), a mesh that is not a cube and a flux too
NAKAJIMA = ("4 3 5", "0.25 0.2 0.3", "1.3 2.0", "0.5", "xmax")


def nakajima_text(eps="1e-10"):
    nel, size, material, qflux, face = NAKAJIMA
    return input_text(nel, size, f"{material} nakajima", qflux, face, eps)


@cache
def python_nakajima(eps: float = 1e-10) -> dict:
    """`python -m course solve fem3d --source nakajima` on the mesh of NAKAJIMA (its function,
    course.problems.fem3d, called here: the same code without the start-up of a process)."""
    nel, size, material, qflux, face = NAKAJIMA
    (nx, ny, nz), (dx, dy, dz) = map(int, nel.split()), map(float, size.split())
    cond, qvol = map(float, material.split())
    return problems.fem3d(nx, ny, nz, "numpy", dx=dx, dy=dy, dz=dz, cond=cond, qvol=qvol,
                          qflux=float(qflux), fixed_face=face, tol=eps, warm_up=False,
                          source="nakajima")


@pytest.mark.parametrize("name", PROGRAMS)
def test_nakajima_source_gives_pythons_answer(name, binaries, tmp_path):
    """COND QVOL nakajima: Python's T max (to 1e-8 relative; the program prints 10 digits) and
    iterations (within 1), max T alone (no exact solution, no error); the word constant is the
    default, character for character."""
    (tmp_path / "nakajima.dat").write_text(nakajima_text())
    result = run_program(binaries[name], "nakajima.dat", cwd=tmp_path)
    assert result.returncode == 0 and result.stderr == "", result.stderr
    s = parse_nakajima_summary(result.stdout)
    ref = python_nakajima()
    assert s["unknowns"] == ref["unknowns"] and s["nnz"] == ref["nnz"]
    assert (s["fixed"], s["flux_face"], s["qvol"]) == ("xmax", "xmin", 2.0)
    assert s["status"] == "converged" and s["relres"] <= 1e-10
    assert abs(s["iterations"] - ref["iterations"]) <= 1, (s["iterations"], ref["iterations"])
    assert s["t_max"] == pytest.approx(ref["t_max"], rel=1e-8)
    assert len(result.stdout.splitlines()) == 4, result.stdout
    (tmp_path / "constant.dat").write_text(input_text(material="1.0 1.0 constant"))
    (tmp_path / "plain.dat").write_text(GOOD)
    outputs = [run_program(binaries[name], f"{case}.dat", cwd=tmp_path, check=True).stdout
               for case in ("constant", "plain")]
    assert outputs[0] == outputs[1]


@pytest.mark.parametrize("case", ["example", *MODEL_CASES, "nakajima"])
def test_c_and_fortran_print_the_same(binaries, tmp_path, case):
    """With one thread (OpenMP reductions add their partial sums in a run-dependent order) both
    programs do the same floating-point operations in the same order: the summaries are identical
    up to the language label, and so are the VTK files, byte for byte."""
    if case == "example":
        text = EXAMPLE.read_text()
    elif case == "nakajima":
        text = nakajima_text()
    else:
        text = input_text(*MODEL_CASES[case], eps="1e-10")
    (tmp_path / "case.dat").write_text(text)
    outputs, files = {}, {}
    for name in ("fem3d_c", "fem3d_f"):
        result = run_program(binaries[name], "case.dat", f"{name}.vtk", cwd=tmp_path,
                             env=env_with(OMP_NUM_THREADS=1))
        assert result.returncode == 0, result.stderr
        outputs[name] = _same_text(result.stdout).replace(f"{name}.vtk", "OUT.vtk")
        files[name] = (tmp_path / f"{name}.vtk").read_bytes()
    assert outputs["fem3d_c"] == outputs["fem3d_f"]
    assert files["fem3d_c"] == files["fem3d_f"]


def test_c_and_fortran_agree_with_threads(binaries, tmp_path):
    """With the default number of threads the numbers agree to round-off."""
    (tmp_path / "case.dat").write_text(input_text("10 12 9", "0.1 0.1 0.1", "1.0 1.0", "1.0",
                                                  "xmax", eps="1e-12"))
    s = {name: parse_summary(run_program(binaries[name], "case.dat", cwd=tmp_path,
                                         check=True).stdout)
         for name in ("fem3d_c", "fem3d_f")}
    assert s["fem3d_c"]["t_max"] == pytest.approx(s["fem3d_f"]["t_max"], rel=1e-10)
    assert abs(s["fem3d_c"]["iterations"] - s["fem3d_f"]["iterations"]) <= 1
    assert max(s["fem3d_c"]["error"], s["fem3d_f"]["error"]) < 1e-10


# --- the VTK file ----------------------------------------------------------------------------------

def read_vtk(path):
    """A legacy ASCII UNSTRUCTURED_GRID file, parsed strictly: (points, cells, types, data)."""
    lines = path.read_text().splitlines()
    assert lines[0].startswith("# vtk DataFile Version"), lines[0]
    assert lines[2] == "ASCII" and lines[3] == "DATASET UNSTRUCTURED_GRID", lines[:4]
    pos = 4

    def header(keyword, n_numbers):
        nonlocal pos
        words = lines[pos].split()
        assert words[0] == keyword and len(words) == n_numbers + 1 + (keyword == "POINTS"), words
        pos += 1
        return [int(w) for w in words[1:n_numbers + 1]]

    def block(count, dtype):
        nonlocal pos
        rows = [np.array(line.split(), dtype=dtype) for line in lines[pos:pos + count]]
        assert len(rows) == count
        pos += count
        return rows

    (n_points,) = header("POINTS", 1)
    assert lines[pos - 1].split()[2] == "double"
    points = np.array(block(n_points, float))
    n_cells, size = header("CELLS", 2)
    cells = block(n_cells, int)
    assert sum(len(c) for c in cells) == size
    (n_types,) = header("CELL_TYPES", 1)
    types = np.concatenate(block(n_types, int))
    (n_data,) = header("POINT_DATA", 1)
    assert lines[pos] == "SCALARS temperature double 1" and lines[pos + 1] == "LOOKUP_TABLE default"
    pos += 2
    data = np.concatenate(block(n_data, float))
    assert pos == len(lines), "nothing may follow the point data"
    return points, cells, types, data


@pytest.mark.parametrize("name", PROGRAMS)
def test_vtk_file(name, binaries, tmp_path):
    nel, size, material, qflux, face = MODEL_CASES["xmin"]
    (tmp_path / "case.dat").write_text(input_text(nel, size, material, qflux, face))
    result = run_program(binaries[name], "case.dat", "out.vtk", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert "wrote out.vtk" in result.stdout
    points, cells, types, temperature = read_vtk(tmp_path / "out.vtk")
    nx, ny, nz = 3, 5, 4
    n_node, n_elem = (nx + 1) * (ny + 1) * (nz + 1), nx * ny * nz
    assert points.shape == (n_node, 3) and len(cells) == n_elem
    assert types.shape == (n_elem,) and np.all(types == 12)            # VTK_HEXAHEDRON
    assert temperature.shape == (n_node,)
    # node n = i + (NX+1) (j + (NY+1) k) at (i DX, j DY, k DZ)
    k, j, i = np.meshgrid(np.arange(nz + 1), np.arange(ny + 1), np.arange(nx + 1), indexing="ij")
    expected = np.stack([i.ravel() * 0.2, j.ravel() * 0.1, k.ravel() * 0.35], axis=1)
    np.testing.assert_allclose(points, expected, rtol=1e-14, atol=1e-14)
    # every cell: 8 corners, numbered from 0, in VTK's hexahedron order (edges 0-1 along x,
    # 0-3 along y, 0-4 along z; 4-7 above 0-3)
    corners = np.array(cells)
    assert np.all(corners[:, 0] == 8)
    corners = corners[:, 1:]
    assert corners.min() == 0 and corners.max() == n_node - 1
    assert len(np.unique(corners[:, 0])) == n_elem
    x = points[corners]                                                 # (n_elem, 8, 3)
    np.testing.assert_allclose(x[:, 1] - x[:, 0], [[0.2, 0, 0]] * n_elem, atol=1e-14)
    np.testing.assert_allclose(x[:, 3] - x[:, 0], [[0, 0.1, 0]] * n_elem, atol=1e-14)
    np.testing.assert_allclose(x[:, 4:] - x[:, :4], [[[0, 0, 0.35]] * 4] * n_elem, atol=1e-14)
    # the temperature is the solution: fixed on xmin, flux into xmax
    t_exact = model_exact(0.6 - points[:, 0], 0.6, 0.6, -2.0, 1.5)
    np.testing.assert_allclose(temperature, t_exact, rtol=0, atol=1e-12)


@pytest.mark.parametrize("name", PROGRAMS)
def test_vtk_file_cannot_be_written(name, binaries, tmp_path):
    (tmp_path / "case.dat").write_text(GOOD)
    result = run_program(binaries[name], "case.dat", "no_such_dir/out.vtk", cwd=tmp_path)
    assert result.returncode == 2
    lines = result.stderr.splitlines()
    assert len(lines) == 1, lines
    assert lines[0].startswith("fem3d: no_such_dir/out.vtk: cannot write"), lines


# --- bad input -------------------------------------------------------------------------------------

# id -> (file contents or None for "no such file", expected line number or None, text in message)
GOOD_LINES = GOOD.splitlines(keepends=True)


def with_line(number, text):
    """GOOD with line `number` (from 1) replaced by `text` (no comment: a missing value must not
    be taken from the comment's words)."""
    return "".join(text + "\n" if i == number - 1 else line for i, line in enumerate(GOOD_LINES))


BAD_INPUTS = {
    "missing-file": (None, None, "cannot open input file"),
    "empty-file": ("", 1, "missing line"),
    "missing-eps-line": ("".join(GOOD_LINES[:5]), 6, "missing line, expected EPS"),
    "missing-face-line": ("".join(GOOD_LINES[:4]), 5, "missing line, expected FIXED"),
    "missing-nz": (with_line(1, "4 3"), 1, "expected 3 integer(s)"),
    "missing-dz": (with_line(2, "0.1 0.1"), 2, "expected 3 real number(s)"),
    "missing-qvol": (with_line(3, "1.0"), 3, "found 1"),
    "blank-qflux-line": (with_line(4, ""), 4, "found 0"),
    "nx-abc": (input_text(nel="abc 3 5"), 1, "'abc'"),
    "ny-real": (input_text(nel="4 1.5 5"), 1, "'1.5'"),
    "nx-zero": (input_text(nel="0 3 5"), 1, "NX must be positive"),
    "ny-negative": (input_text(nel="4 -3 5"), 1, "NY must be positive"),
    "nz-zero": (input_text(nel="4 3 0"), 1, "NZ must be positive"),
    "mesh-too-large": (input_text(nel="2147483647 2147483647 2147483647"), 1, "mesh too large"),
    "dx-negative": (input_text(size="-0.1 0.2 0.3"), 2, "DX must be positive"),
    "dy-zero": (input_text(size="0.1 0 0.3"), 2, "DY must be positive"),
    "dz-negative": (input_text(size="0.1 0.2 -1e-3"), 2, "DZ must be positive"),
    "dx-abc": (input_text(size="x 0.2 0.3"), 2, "'x'"),
    "dx-inf": (input_text(size="inf 0.2 0.3"), 2, "'inf'"),
    "dz-nan": (input_text(size="0.1 0.2 nan"), 2, "'nan'"),
    "dy-overflow": (input_text(size="0.1 1e400 0.3"), 2, "'1e400'"),
    "cond-zero": (input_text(material="0 1.0"), 3, "COND must be positive"),
    "cond-negative": (input_text(material="-2.0 1.0"), 3, "COND must be positive"),
    "cond-nan": (input_text(material="NaN 1.0"), 3, "'NaN'"),
    "qvol-inf": (input_text(material="1.0 -inf"), 3, "'-inf'"),
    "source-unknown": (input_text(material="1.0 1.0 nakajma"), 3,
                       "unknown heat source 'nakajma': expected constant or nakajima"),
    "qflux-abc": (input_text(qflux="abc"), 4, "'abc'"),
    "qflux-inf": (input_text(qflux="Infinity"), 4, "'Infinity'"),
    "face-unknown": (input_text(face="top"), 5,
                     "expected one of xmin, xmax, ymin, ymax, zmin, zmax"),
    "face-upper-case": (input_text(face="ZMAX"), 5, "got 'ZMAX'"),
    "face-number": (input_text(face="6"), 5, "got '6'"),
    "face-blank": (with_line(5, "  "), 5, "expected a word (FIXED"),
    "eps-zero": (input_text(eps="0"), 6, "EPS must be positive"),
    "eps-negative": (input_text(eps="-1e-8"), 6, "EPS must be positive"),
    "eps-nan": (input_text(eps="nan"), 6, "'nan'"),
}


def _write_case(tmp_path, case_id):
    contents = BAD_INPUTS[case_id][0]
    path = tmp_path / f"{case_id}.dat"
    if contents is not None:
        path.write_text(contents)
    return path.name


@pytest.mark.parametrize("case_id", list(BAD_INPUTS))
@pytest.mark.parametrize("name", PROGRAMS)
def test_bad_input(name, binaries, tmp_path, case_id):
    file_name = _write_case(tmp_path, case_id)
    _, line, text = BAD_INPUTS[case_id]
    result = run_program(binaries[name], file_name, cwd=tmp_path)
    assert result.returncode == 2, (result.returncode, result.stdout, result.stderr)
    lines = result.stderr.splitlines()
    assert len(lines) == 1, f"expected one line on stderr, got {lines!r}"
    prefix = f"fem3d: {file_name}:" + (f"{line}: " if line is not None else " ")
    assert lines[0].startswith(prefix), lines[0]
    assert text in lines[0], lines[0]
    assert result.stdout == "", "nothing should be computed or printed on bad input"


@pytest.mark.parametrize("case_id", list(BAD_INPUTS))
def test_c_and_fortran_messages_agree(binaries, tmp_path, case_id):
    file_name = _write_case(tmp_path, case_id)
    messages = {name: (result.returncode, result.stderr)
                for name in ("fem3d_c", "fem3d_f")
                for result in [run_program(binaries[name], file_name, cwd=tmp_path)]}
    assert messages["fem3d_c"] == messages["fem3d_f"]


@pytest.mark.parametrize("args", [[], ["a.dat", "b.vtk", "c"]], ids=["none", "three"])
@pytest.mark.parametrize("name", PROGRAMS)
def test_usage(name, binaries, tmp_path, args):
    (tmp_path / "a.dat").write_text(GOOD)
    result = run_program(binaries[name], *args, cwd=tmp_path)
    assert result.returncode == 2 and result.stdout == ""
    lines = result.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("usage:") and "INPUT [OUTPUT.vtk]" in lines[0]


@pytest.mark.parametrize("name", PROGRAMS)
def test_too_big_for_memory_fails_cleanly(name, binaries, tmp_path):
    """A mesh that fits 32-bit indices but not the memory limit: exit 1 with one line."""
    (tmp_path / "big.dat").write_text(input_text(nel="400 400 400"))
    result = run_program(binaries[name], "big.dat", cwd=tmp_path, preexec_fn=limit_memory(2 << 30))
    assert result.returncode == 1, (result.returncode, result.stderr)
    lines = result.stderr.splitlines()
    assert len(lines) == 1 and "out of memory" in lines[0], lines


# --- the kernels through ctypes --------------------------------------------------------------------
# Raw calls with prototypes made here (not the checked wrappers of course.native), so that this file
# tests exactly the compiled code. Fortran wants 1-based node and CRS indices.

_INT_P = ctypes.POINTER(ctypes.c_int)
_DBL_P = ctypes.POINTER(ctypes.c_double)
_I, _D = ctypes.c_int, ctypes.c_double
PROTOTYPES = {
    "fem3d_element": (ctypes.c_int, [_DBL_P, _D, _DBL_P, _DBL_P, _DBL_P]),
    "fem3d_pattern": (None, [_I, _I, _I, _INT_P, _INT_P]),
    "fem3d_assemble": (ctypes.c_int, [_I, _INT_P, _DBL_P, _D, _DBL_P, _INT_P, _INT_P, _DBL_P,
                                      _DBL_P]),
    "fem3d_face_flux": (None, [_I, _INT_P, _DBL_P, _D, _DBL_P]),
    "crs_dirichlet": (None, [_I, _INT_P, _DBL_P, _INT_P, _INT_P, _DBL_P, _DBL_P]),
    "stream_init": (None, [_I, _DBL_P, _DBL_P, _DBL_P]),
    "stream_copy": (None, [_I, _DBL_P, _DBL_P]),
    "stream_triad": (None, [_I, _D, _DBL_P, _DBL_P, _DBL_P]),
}
LANGS = [pytest.param(lang, id=lang, marks=pytest.mark.compiled) for lang in ("c", "fortran")]


def kernel(lang, name):
    """The kernel `name` of the library of `lang`, as a fresh ctypes function with its own
    prototype (the library's shared function objects are left as course.native declares them)."""
    restype, argtypes = PROTOTYPES[name]
    return ctypes.CFUNCTYPE(restype, *argtypes)((name, native.load(lang)))


def ptr(a: np.ndarray):
    assert a.flags.c_contiguous
    return a.ctypes.data_as(_INT_P if a.dtype == np.int32 else _DBL_P)


def base(lang, a):
    """An index array as the kernel of `lang` wants it."""
    return np.ascontiguousarray(a + 1 if lang == "fortran" else a, dtype=np.int32)


# numpy reference, written independently of the kernels: Gauss points zeta outermost, xi innermost
CORNERS = np.array([[-1, -1, -1], [1, -1, -1], [1, 1, -1], [-1, 1, -1],
                    [-1, -1, 1], [1, -1, 1], [1, 1, 1], [-1, 1, 1]], dtype=float)
G = 1 / np.sqrt(3)
GAUSS = np.array([[x, y, z] for z in (-G, G) for y in (-G, G) for x in (-G, G)])


def ref_element(xyz8, cond, q8):
    ke, fe = np.zeros((8, 8)), np.zeros(8)
    for point in GAUSS:
        factors = 1 + CORNERS * point                          # (8, 3): 1 + xi_k xi_a,k
        n = factors.prod(axis=1) / 8
        dn = np.empty((8, 3))
        for k in range(3):
            others = np.delete(factors, k, axis=1).prod(axis=1)
            dn[:, k] = CORNERS[:, k] * others / 8
        jac = xyz8.T @ dn                                       # dx_i / dxi_k
        det = np.linalg.det(jac)
        if det <= 0:
            return None
        grad = dn @ np.linalg.inv(jac)                          # (8, 3) physical gradients
        ke += cond * grad @ grad.T * det
        fe += n * (n @ q8) * det
    return ke, fe


def ref_face_flux(quad_xyz, qflux):
    """Load (4) of a flux qflux through one bilinear quad (4x3 corners, cyclic order)."""
    st = np.array([[-1, -1], [1, -1], [1, 1], [-1, 1]], dtype=float)
    out = np.zeros(4)
    for t in (-G, G):
        for s in (-G, G):
            n = (1 + s * st[:, 0]) * (1 + t * st[:, 1]) / 4
            dxds = (st[:, 0] * (1 + t * st[:, 1]) / 4) @ quad_xyz
            dxdt = (st[:, 1] * (1 + s * st[:, 0]) / 4) @ quad_xyz
            out += n * qflux * np.linalg.norm(np.cross(dxds, dxdt))
    return out


def distorted_hex(seed=3):
    rng = np.random.default_rng(seed)
    xyz8 = (CORNERS + 1) / 2 * [1.0, 0.7, 1.3] + rng.uniform(-0.15, 0.15, (8, 3))
    xyz8[:, 0] += 0.3 * xyz8[:, 2]                              # and sheared
    return np.ascontiguousarray(xyz8)


def call_element(lang, xyz8, cond, q8):
    ke, fe = np.full(64, np.nan), np.full(8, np.nan)
    status = kernel(lang, "fem3d_element")(ptr(xyz8), cond, ptr(q8), ptr(ke), ptr(fe))
    return status, ke.reshape(8, 8), fe


def test_element_c_fortran_and_reference_agree():
    xyz8, q8 = distorted_hex(), np.linspace(-1.0, 2.5, 8)
    ref_ke, ref_fe = ref_element(xyz8, 1.7, q8)
    results = {lang: call_element(lang, xyz8, 1.7, q8) for lang in ("c", "fortran")}
    for lang, (status, ke, fe) in results.items():
        assert status == 0, lang
        assert_rel_close(ke, ref_ke, what=f"{lang} ke")
        assert_rel_close(fe, ref_fe, what=f"{lang} fe")
    assert_rel_close(results["fortran"][1], results["c"][1], what="ke, Fortran vs C")
    assert_rel_close(results["fortran"][2], results["c"][2], what="fe, Fortran vs C")
    ke = results["c"][1]
    np.testing.assert_allclose(ke, ke.T, rtol=0, atol=1e-14)
    np.testing.assert_allclose(ke.sum(axis=1), 0, atol=1e-13)  # constants have no gradient
    assert np.all(np.linalg.eigvalsh(ke)[1:] > 1e-8)            # only the constants in the kernel


@pytest.mark.parametrize("lang", LANGS)
def test_box_element_by_hand(lang):
    """An h x h x h cube with cond = 1, q = 1: ke_aa = h/3, fe_a = h^3/8 (exact for 2x2x2 Gauss)."""
    h = 0.5
    xyz8 = np.ascontiguousarray((CORNERS + 1) / 2 * h)
    status, ke, fe = call_element(lang, xyz8, 1.0, np.ones(8))
    assert status == 0
    np.testing.assert_allclose(np.diag(ke), h / 3, rtol=1e-14)
    np.testing.assert_allclose(ke[0, 6], -h / 12, rtol=1e-14)   # opposite corners
    np.testing.assert_allclose(fe, h**3 / 8, rtol=1e-14)


@pytest.mark.parametrize("lang", LANGS)
@pytest.mark.parametrize("how", ["mirrored", "flat", "twisted"])
def test_inverted_element_returns_minus_one(lang, how):
    xyz8 = distorted_hex()
    if how == "mirrored":              # top and bottom faces swapped: det J < 0 everywhere
        xyz8 = xyz8[[4, 5, 6, 7, 0, 1, 2, 3]]
    elif how == "flat":                # all corners in one plane: det J = 0
        xyz8[:, 2] = 0.0
    else:                              # one corner pulled through the opposite face
        xyz8[6] = xyz8[0] - [0.2, 0.2, 0.2]
    xyz8 = np.ascontiguousarray(xyz8)
    assert ref_element(xyz8, 1.0, np.ones(8)) is None
    status, _, _ = call_element(lang, xyz8, 1.0, np.ones(8))
    assert status == -1


# --- a small mesh --------------------------------------------------------------------------------

NX, NY, NZ = 3, 2, 4


def small_mesh(seed=11):
    """Nodes of an NX x NY x NZ box, the interior ones moved at random (elements stay valid),
    and its elements (n_elem, 8), 0-based."""
    rng = np.random.default_rng(seed)
    k, j, i = np.meshgrid(np.arange(NZ + 1), np.arange(NY + 1), np.arange(NX + 1), indexing="ij")
    ijk = np.stack([i.ravel(), j.ravel(), k.ravel()], axis=1)
    xyz = ijk * [0.3, 0.5, 0.2]
    interior = np.all((ijk > 0) & (ijk < [NX, NY, NZ]), axis=1)
    xyz[interior] += rng.uniform(-0.25, 0.25, (interior.sum(), 3)) * [0.3, 0.5, 0.2]
    node = lambda i, j, k: i + (NX + 1) * (j + (NY + 1) * k)        # noqa: E731
    elements = np.array([[node(i + a, j + b, k + c) for a, b, c in
                          [(0, 0, 0), (1, 0, 0), (1, 1, 0), (0, 1, 0),
                           (0, 0, 1), (1, 0, 1), (1, 1, 1), (0, 1, 1)]]
                         for k in range(NZ) for j in range(NY) for i in range(NX)], dtype=np.int32)
    return np.ascontiguousarray(xyz), elements


def call_pattern(lang, nx, ny, nz):
    n_node, nnz = (nx + 1) * (ny + 1) * (nz + 1), (3 * nx + 1) * (3 * ny + 1) * (3 * nz + 1)
    row_ptr, col_idx = np.full(n_node + 1, -7, np.int32), np.full(nnz, -7, np.int32)
    kernel(lang, "fem3d_pattern")(nx, ny, nz, ptr(row_ptr), ptr(col_idx))
    offset = 1 if lang == "fortran" else 0
    return row_ptr - offset, col_idx - offset


def call_assemble(lang, elements, xyz, cond, q, row_ptr, col_idx):
    val, rhs = np.zeros(len(col_idx)), np.zeros(len(xyz))
    status = kernel(lang, "fem3d_assemble")(
        len(elements), ptr(base(lang, elements)), ptr(xyz), cond, ptr(q),
        ptr(base(lang, row_ptr)), ptr(base(lang, col_idx)), ptr(val), ptr(rhs))
    return status, val, rhs


def dense(row_ptr, col_idx, val):
    n = len(row_ptr) - 1
    a = np.zeros((n, n))
    rows = np.repeat(np.arange(n), np.diff(row_ptr))
    np.add.at(a, (rows, col_idx), val)
    return a


def test_pattern_c_and_fortran():
    patterns = {lang: call_pattern(lang, NX, NY, NZ) for lang in ("c", "fortran")}
    np.testing.assert_array_equal(patterns["c"][0], patterns["fortran"][0])
    np.testing.assert_array_equal(patterns["c"][1], patterns["fortran"][1])
    row_ptr, col_idx = patterns["c"]
    assert row_ptr[0] == 0 and row_ptr[-1] == len(col_idx)
    # row n holds exactly the nodes that share an element with n, sorted
    _, elements = small_mesh()
    n_node = len(row_ptr) - 1
    couples = np.zeros((n_node, n_node), bool)
    for nodes in elements:
        couples[np.ix_(nodes, nodes)] = True
    for n in range(n_node):
        row = col_idx[row_ptr[n]:row_ptr[n + 1]]
        np.testing.assert_array_equal(row, np.flatnonzero(couples[n]))


@pytest.mark.parametrize("nel", [(1, 1, 1), (5, 1, 2), (2, 6, 3)])
def test_pattern_counts(nel):
    for lang in ("c", "fortran"):
        row_ptr, col_idx = call_pattern(lang, *nel)
        lengths = np.diff(row_ptr)
        assert len(col_idx) == row_ptr[-1] == np.prod([3 * n + 1 for n in nel])
        assert lengths.min() == 8                                  # the corners
        assert lengths.max() == np.prod([min(3, n + 1) for n in nel])
        for n in range(len(lengths)):                              # sorted, no repeats
            assert np.all(np.diff(col_idx[row_ptr[n]:row_ptr[n + 1]]) > 0)


def test_assemble_c_fortran_and_reference_agree():
    xyz, elements = small_mesh()
    q = np.linspace(0.5, 2.0, len(xyz))
    row_ptr, col_idx = call_pattern("c", NX, NY, NZ)
    results = {lang: call_assemble(lang, elements, xyz, 0.8, q, row_ptr, col_idx)
               for lang in ("c", "fortran")}
    a_ref, rhs_ref = np.zeros((len(xyz),) * 2), np.zeros(len(xyz))
    for nodes in elements:
        ke, fe = ref_element(xyz[nodes], 0.8, q[nodes])
        a_ref[np.ix_(nodes, nodes)] += ke
        rhs_ref[nodes] += fe
    for lang, (status, val, rhs) in results.items():
        assert status == 0, lang
        assert_rel_close(dense(row_ptr, col_idx, val), a_ref, what=f"{lang} matrix")
        assert_rel_close(rhs, rhs_ref, what=f"{lang} rhs")
    assert_rel_close(results["fortran"][1], results["c"][1], what="val, Fortran vs C")
    assert_rel_close(results["fortran"][2], results["c"][2], what="rhs, Fortran vs C")
    # with q = 1 the total load is sum_g det J, the volume: exact, since det J of a tri-linear map
    # is at most quadratic in each reference coordinate, and the elements fill the box
    for lang in ("c", "fortran"):
        _, _, rhs = call_assemble(lang, elements, xyz, 0.8, np.ones(len(xyz)), row_ptr, col_idx)
        assert rhs.sum() == pytest.approx(NX * 0.3 * NY * 0.5 * NZ * 0.2, rel=1e-13)


@pytest.mark.parametrize("lang", LANGS)
def test_assemble_adds_to_what_is_there(lang):
    xyz, elements = small_mesh()
    q = np.ones(len(xyz))
    row_ptr, col_idx = call_pattern("c", NX, NY, NZ)
    _, val, rhs = call_assemble(lang, elements, xyz, 1.0, q, row_ptr, col_idx)
    val2, rhs2 = val.copy(), rhs.copy()
    status = kernel(lang, "fem3d_assemble")(
        len(elements), ptr(base(lang, elements)), ptr(xyz), 1.0, ptr(q),
        ptr(base(lang, row_ptr)), ptr(base(lang, col_idx)), ptr(val2), ptr(rhs2))
    assert status == 0
    assert_rel_close(val2, 2 * val)
    assert_rel_close(rhs2, 2 * rhs)


@pytest.mark.parametrize("bad", [0, 5, 23])
@pytest.mark.parametrize("lang", LANGS)
def test_assemble_reports_the_first_inverted_element(lang, bad):
    xyz, elements = small_mesh()
    elements = elements.copy()
    elements[bad] = elements[bad][[4, 5, 6, 7, 0, 1, 2, 3]]        # upside down
    if bad != 23:
        elements[23] = elements[23][[4, 5, 6, 7, 0, 1, 2, 3]]      # a later one too
    row_ptr, col_idx = call_pattern("c", NX, NY, NZ)
    status, _, _ = call_assemble(lang, elements, xyz, 1.0, np.ones(len(xyz)), row_ptr, col_idx)
    assert status == -(bad + 1)


def box_face_quads(face):
    """(n, 4) quads of a face of the small mesh, cyclic order."""
    axis, side = FACES.index(face) // 2, FACES.index(face) % 2
    nel = [NX, NY, NZ]
    u, v = (axis + 1) % 3, (axis + 2) % 3
    node = lambda ijk: ijk[0] + (NX + 1) * (ijk[1] + (NY + 1) * ijk[2])   # noqa: E731
    quads = []
    for iv in range(nel[v]):
        for iu in range(nel[u]):
            quad = []
            for du, dv in ((0, 0), (1, 0), (1, 1), (0, 1)):
                ijk = [0, 0, 0]
                ijk[axis], ijk[u], ijk[v] = side * nel[axis], iu + du, iv + dv
                quad.append(node(ijk))
            quads.append(quad)
    return np.array(quads, dtype=np.int32)


def call_face_flux(lang, quads, xyz, qflux, rhs=None):
    rhs = np.zeros(len(xyz)) if rhs is None else rhs.copy()
    kernel(lang, "fem3d_face_flux")(len(quads), ptr(base(lang, quads)), ptr(xyz), qflux, ptr(rhs))
    return rhs


@pytest.mark.parametrize("face", FACES)
def test_face_flux_total_is_flux_times_area(face):
    xyz, _ = small_mesh()                   # boundary nodes are not moved: the faces are planes
    quads = box_face_quads(face)
    sizes = np.array([NX * 0.3, NY * 0.5, NZ * 0.2])
    area = np.prod(np.delete(sizes, FACES.index(face) // 2))
    for lang in ("c", "fortran"):
        rhs = call_face_flux(lang, quads, xyz, 2.5)
        assert rhs.sum() == pytest.approx(2.5 * area, rel=1e-13)
        on_face = np.unique(quads)
        assert np.all(rhs[np.setdiff1d(np.arange(len(xyz)), on_face)] == 0)


def test_face_flux_on_warped_quads():
    """Non-planar quads (the corners of distorted hexahedra): C, Fortran and the reference agree,
    and the flux adds to what rhs holds."""
    xyz8 = distorted_hex(5)
    xyz = np.ascontiguousarray(np.vstack([xyz8, xyz8 + [0.0, 0.0, 2.0]]))
    quads = np.array([[0, 1, 2, 3], [4, 5, 6, 7], [0, 1, 5, 4], [9, 10, 14, 13], [3, 2, 6, 7]],
                     dtype=np.int32)
    start = np.linspace(-1, 1, len(xyz))
    expected = start.copy()
    for quad in quads:
        expected[quad] += ref_face_flux(xyz[quad], -0.7)
    results = {lang: call_face_flux(lang, quads, xyz, -0.7, start) for lang in ("c", "fortran")}
    for lang, rhs in results.items():
        assert_rel_close(rhs, expected, what=f"{lang} rhs")
    assert_rel_close(results["fortran"], results["c"], what="rhs, Fortran vs C")


def call_dirichlet(lang, fixed, g, row_ptr, col_idx, val, rhs):
    val, rhs = val.copy(), rhs.copy()
    kernel(lang, "crs_dirichlet")(len(rhs), ptr(np.ascontiguousarray(fixed, np.int32)), ptr(g),
                                  ptr(base(lang, row_ptr)), ptr(base(lang, col_idx)), ptr(val),
                                  ptr(rhs))
    return val, rhs


def test_dirichlet_c_fortran_and_reference_agree():
    xyz, elements = small_mesh()
    row_ptr, col_idx = call_pattern("c", NX, NY, NZ)
    _, val, rhs = call_assemble("c", elements, xyz, 1.3, np.linspace(1, 2, len(xyz)),
                                row_ptr, col_idx)
    rng = np.random.default_rng(5)
    fixed = (rng.uniform(size=len(xyz)) < 0.3).astype(np.int32)
    fixed[fixed == 1] = rng.choice([1, 7, -1], size=fixed.sum())  # any nonzero flag counts
    g = rng.uniform(-1, 1, len(xyz))
    results = {lang: call_dirichlet(lang, fixed, g, row_ptr, col_idx, val, rhs)
               for lang in ("c", "fortran")}
    a = dense(row_ptr, col_idx, val)
    is_fixed, free = fixed != 0, fixed == 0
    a_ref = a.copy()
    a_ref[is_fixed, :] = 0
    a_ref[:, is_fixed] = 0
    a_ref[is_fixed, is_fixed] = 1
    rhs_ref = rhs - a[:, is_fixed] @ g[is_fixed]
    rhs_ref[is_fixed] = g[is_fixed]
    for lang, (val_d, rhs_d) in results.items():
        np.testing.assert_array_equal(dense(row_ptr, col_idx, val_d), a_ref, err_msg=lang)
        assert_rel_close(rhs_d, rhs_ref, what=f"{lang} rhs")
    assert_rel_close(results["fortran"][1], results["c"][1], what="rhs, Fortran vs C")
    # the solution of the modified system is the constrained solution of the original one
    t = np.linalg.solve(dense(row_ptr, col_idx, results["c"][0]), results["c"][1])
    np.testing.assert_allclose(t[is_fixed], g[is_fixed], rtol=1e-12)
    np.testing.assert_allclose((a @ t - rhs)[free], 0, atol=1e-11)


@pytest.mark.parametrize("lang", LANGS)
def test_stream_kernels(lang):
    n = 1001
    a, b, c = np.full(n, np.nan), np.full(n, np.nan), np.full(n, np.nan)
    kernel(lang, "stream_init")(n, ptr(a), ptr(b), ptr(c))
    assert np.all(a == 1.0) and np.all(b == 2.0) and np.all(c == 0.5)
    b[:] = np.arange(n)
    kernel(lang, "stream_copy")(n, ptr(b), ptr(a))
    np.testing.assert_array_equal(a, b)
    kernel(lang, "stream_triad")(n, 3.0, ptr(b), ptr(c), ptr(a))
    np.testing.assert_array_equal(a, b + 3.0 * 0.5)
