"""Lecture 05_halo, compiled side: the MPI programs fem3d_mpi_c and fem3d_mpi_f under mpiexec with 1
to 4 ranks (more ranks than cores: oversubscribed) and even and uneven blocks, against the serial
fem3d_c on the same input (iterations +-1, the same unknowns and nonzeros, max T to 1e-10, the
partition line, and the four lines on the solver: cg_variant_mpi of 06_pipecg, pcg with blocking
reductions when the command line names no variant, the diagonal preconditioner of 08_hybrid when
the input has no line 8 with one halo exchange per iteration, the MPI thread level), their .pvtu
output (every element in exactly one piece, the serial temperatures at every point of every
piece), Nakajima's heat source (line 3's word nakajima) on 2 ranks against fem3d_c, and their
errors (exit status 2, exactly one line on stderr from the program, never a hang or a crash).

Every mpiexec call has a timeout (and MPIEXEC_TIMEOUT, so that mpiexec itself kills a deadlocked
job), so that a deadlock fails the test instead of hanging the run."""

from __future__ import annotations

import re
import shutil
import subprocess
import xml.etree.ElementTree as ET
from functools import cache
from pathlib import Path

import numpy as np
import pytest

from conftest import env_with, limit_memory, run, run_program
from course import native
from course.fem.mesh import box_mesh
from course.parallel.local import all_local_data
from course.parallel.partition import block_partition, quality
# fem3d's input files and summaries
from test_fem3d_programs import (input_text, nakajima_text, parse_nakajima_summary, parse_summary,
                                 read_vtk)

PROGRAMS = ["fem3d_mpi_c", "fem3d_mpi_f"]
LABELS = {"fem3d_mpi_c": "C", "fem3d_mpi_f": "Fortran"}
FACES = ("xmin", "xmax", "ymin", "ymax", "zmin", "zmax")
MPI_TIMEOUT = 120

pytestmark = [pytest.mark.timeout(600), pytest.mark.compiled,
              pytest.mark.skipif(shutil.which("mpiexec") is None, reason="no mpiexec")]


@cache
def program(name: str) -> Path:
    """The compiled program (built if stale); looked up per test, so that a missing twin fails
    its own tests only."""
    return native.binary(name)


def mpiexec(n: int, name: str, *args, cwd, threads: int = 1, extra_env: dict | None = None,
            **kwargs) -> subprocess.CompletedProcess:
    """`mpiexec -n N PROGRAM ARGS` with `threads` OpenMP threads per rank (default one: 2 cores
    here), and the variables of extra_env."""
    env = env_with(OMP_NUM_THREADS=threads, OMPI_MCA_mpi_yield_when_idle=1,
                   MPIEXEC_TIMEOUT=MPI_TIMEOUT - 20, **(extra_env or {}))
    return run(["mpiexec", "-n", n, program(name), *args], cwd=cwd, env=env,
               timeout=MPI_TIMEOUT, **kwargs)


def mpi_input(nel, parts, size="0.2 0.1 0.35", material="0.6 -2.0", qflux="1.5", face="xmin",
              eps="1e-10"):
    """fem3d's input file (6 lines) and the same with line 7, PX PY PZ."""
    serial = input_text(nel, size, material, qflux, face, eps)
    return serial, serial + f"{parts}   PX PY PZ\n"


def ranks_of(parts: str) -> int:
    return int(np.prod([int(p) for p in parts.split()]))


# --- the partition: course.parallel's, which the programs must reproduce -------------------------

@cache
def partitioned(nel, parts):
    """(mesh, owner[node], local data of every rank) of the PX x PY x PZ blocks in Python."""
    mesh = box_mesh(*nel)
    owner = block_partition(mesh, *parts)
    return mesh, owner, all_local_data(mesh, owner)


def partition_numbers(nel, parts) -> dict:
    """What the partition line must say: internal nodes per rank min and max, neighbours max,
    external nodes total, bytes per exchange."""
    mesh, owner, _ = partitioned(tuple(nel), tuple(parts))
    q = quality(mesh, owner)
    return {"min": int(q.owned.min()), "max": int(q.owned.max()),
            "neighbours": int(q.neighbours.max()), "external": int(q.halo.sum()),
            "bytes": 8 * int(q.halo.sum())}


def assert_serial_answer(stdout: str, ref: dict) -> None:
    """The summary of an MPI run gives the serial program's answer (summary `ref`)."""
    s = parse_summary(stdout)
    assert (s["nel"], s["unknowns"], s["nnz"]) == (ref["nel"], ref["unknowns"], ref["nnz"])
    assert (s["fixed"], s["flux_face"]) == (ref["fixed"], ref["flux_face"])
    assert s["status"] == "converged" and s["relres"] <= 1e-10
    assert abs(s["iterations"] - ref["iterations"]) <= 1, (s["iterations"], ref["iterations"])
    assert s["t_max"] == pytest.approx(ref["t_max"], rel=1e-10)
    assert s["t_max_exact"] == pytest.approx(ref["t_max_exact"], rel=1e-12)
    assert s["error"] <= 1e-8 * max(1.0, abs(ref["t_max_exact"]))


PARTITION_LINE = re.compile(
    r"ranks (\d+) \((\d+) x (\d+) x (\d+) blocks\), internal nodes per rank min (\d+) max (\d+), "
    r"neighbours max (\d+), external nodes total (\d+), bytes per exchange (\d+)")

# The summary: fem3d's five lines, the partition (line 6), then the five lines on the solver: the
# variant, the true residual, the preconditioner (08_hybrid), the MPI thread level, the time of the
# solve (09_petsc compares it with PETSc's)
SUMMARY_LINES = 11
VARIANT_LINE = re.compile(r"^  algorithm (\S+) \((blocking|iallreduce)\), reductions per iteration "
                          r"(-?\d+)$")
TRUE_LINE = re.compile(r"^  true relative residual (\S+) \(\|\|b - A x\|\| / \|\|b\|\|, "
                       r"recomputed\)$")
PRECOND_LINE = re.compile(r"^  preconditioner (\S+), sweeps (\d+), ordering (\S+), colors "
                          r"(\d+)\.\.(\d+), halo exchanges per iteration (-?\d+) \(counted\)$")
THREAD_LINE = re.compile(r"^  MPI thread level asked FUNNELED, provided (\S+); OpenMP threads per "
                         r"rank (\d+)$")
TIME_LINE = re.compile(r"^  solve (\d+\.\d{6}) s, (\d+\.\d{2}) us per iteration \(the slowest rank\)$")


def untimed(stdout: str) -> str:
    """The summary without its line on the time of the solve (which differs from run to run)."""
    return "".join(line for line in stdout.splitlines(keepends=True)
                   if not TIME_LINE.match(line.rstrip("\n")))


def solver_lines(lines: list[str]) -> dict:
    """The five lines on the solver (lines 7 to 11 of the summary): algorithm, reductions, the
    reductions counted per iteration, the true relative residual, the preconditioner with its
    sweeps, ordering, colors (fewest, most over the ranks) and the halo exchanges counted per
    iteration, the MPI thread level provided and the OpenMP threads per rank (rank 0's), the
    seconds of the solve and the microseconds per iteration."""
    assert len(lines) >= SUMMARY_LINES, lines
    m = VARIANT_LINE.match(lines[6])
    assert m, lines[6]
    t = TRUE_LINE.match(lines[7])
    assert t, lines[7]
    p = PRECOND_LINE.match(lines[8])
    assert p, lines[8]
    level = THREAD_LINE.match(lines[9])
    assert level, lines[9]
    timed = TIME_LINE.match(lines[10])
    assert timed, lines[10]
    return {"algorithm": m[1], "reductions": m[2], "reductions_per_iteration": int(m[3]),
            "true_relres": float(t[1]), "precond": p[1], "sweeps": int(p[2]), "ordering": p[3],
            "colors": (int(p[4]), int(p[5])), "halo_exchanges_per_iteration": int(p[6]),
            "thread_level": level[1], "threads": int(level[2]), "seconds": float(timed[1]),
            "us_per_iteration": float(timed[2])}


def assert_default_solver(lines: list[str], eps: float = 1e-10) -> None:
    """No variant word: pcg with blocking reductions, 2 counted per iteration, and a true
    residual that did not drift from the recursive one; no line 8 in the input: the diagonal
    preconditioner (natural, one color, the one halo exchange of A p per iteration); at least
    MPI_THREAD_FUNNELED."""
    s = solver_lines(lines)
    assert (s["algorithm"], s["reductions"], s["reductions_per_iteration"]) == \
        ("pcg", "blocking", 2), lines[6]
    assert s["true_relres"] <= 10 * eps, lines[7]
    assert lines[8] == "  preconditioner diagonal, sweeps 1, ordering natural, colors 1..1, halo " \
                       "exchanges per iteration 1 (counted)", lines[8]
    assert s["thread_level"] in ("FUNNELED", "SERIALIZED", "MULTIPLE"), lines[9]
    assert s["threads"] == 1, lines[9]                   # mpiexec() sets OMP_NUM_THREADS=1
    assert s["seconds"] >= 0 and s["us_per_iteration"] >= 0, lines[10]


# --- the same answers as the serial program -------------------------------------------------------

# id -> (NX NY NZ, PX PY PZ, FIXED): uneven parts (7 x 5 x 6 elements: 8 x 6 x 7 nodes), the
# flux face across several parts or in one of them, and parts one node wide
CASES = {
    "1x1x1": ("7 5 6", "1 1 1", "xmin"),
    "2x1x1": ("7 5 6", "2 1 1", "zmax"),
    "3x1x1": ("7 5 6", "3 1 1", "xmin"),
    "1x3x1": ("7 5 6", "1 3 1", "ymax"),
    "1x1x3": ("7 5 6", "1 1 3", "xmax"),
    "1x2x2": ("7 5 6", "1 2 2", "xmin"),
    "2x2x1": ("7 5 6", "2 2 1", "zmin"),
    "2x1x2": ("7 5 6", "2 1 2", "ymin"),
    "4x1x1": ("7 5 6", "4 1 1", "xmax"),
    "3x1x1-one-node-wide": ("2 3 4", "3 1 1", "zmax"),
    "1x2x2-thin": ("4 1 1", "1 2 2", "xmin"),
}


@pytest.mark.parametrize("case", list(CASES))
@pytest.mark.parametrize("name", PROGRAMS)
def test_matches_the_serial_program(name, fem3d_c, tmp_path, case):
    nel, parts, face = CASES[case]
    serial_text, mpi_text = mpi_input(nel, parts, face=face)
    (tmp_path / "serial.dat").write_text(serial_text)
    (tmp_path / "case.dat").write_text(mpi_text)
    serial = run_program(fem3d_c, "serial.dat", cwd=tmp_path, check=True)
    result = mpiexec(ranks_of(parts), name, "case.dat", cwd=tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr
    assert not [line for line in result.stderr.splitlines() if line.startswith(name)]

    lines = result.stdout.splitlines()                 # rank 0 alone prints: 10 lines, once
    assert len(lines) == SUMMARY_LINES, lines
    assert lines[0].startswith(f"fem3d_mpi ({LABELS[name]}): "), lines[0]
    assert_serial_answer(result.stdout, parse_summary(serial.stdout))
    assert_default_solver(lines)

    m = PARTITION_LINE.search(lines[5])
    assert m, lines[5]
    nels, part_counts = [int(v) for v in nel.split()], [int(v) for v in parts.split()]
    expected = partition_numbers(nels, part_counts)
    assert [int(v) for v in m.groups()[:4]] == [ranks_of(parts), *part_counts]
    assert dict(zip(("min", "max", "neighbours", "external", "bytes"),
                    map(int, m.groups()[4:]))) == expected


@pytest.mark.parametrize("name", PROGRAMS)
def test_nakajima_source_on_two_ranks_is_the_serial_answer(name, fem3d_c, tmp_path):
    """Line 3's SOURCE nakajima: every rank adds the load of QVOL |x_c + y_c| on its local
    elements; the serial fem3d_c's answer (max T to 1e-10, iterations within 1), max T alone in
    the summary (one line fewer: no error line)."""
    (tmp_path / "serial.dat").write_text(nakajima_text())
    (tmp_path / "case.dat").write_text(nakajima_text() + "2 1 1   PX PY PZ\n")
    serial = parse_nakajima_summary(run_program(fem3d_c, "serial.dat", cwd=tmp_path,
                                                check=True).stdout)
    result = mpiexec(2, name, "case.dat", cwd=tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr
    s = parse_nakajima_summary(result.stdout)
    assert (s["nel"], s["unknowns"], s["nnz"]) == (serial["nel"], serial["unknowns"],
                                                   serial["nnz"])
    assert s["status"] == "converged" and s["relres"] <= 1e-10
    assert abs(s["iterations"] - serial["iterations"]) <= 1, (s["iterations"],
                                                              serial["iterations"])
    assert s["t_max"] == pytest.approx(serial["t_max"], rel=1e-10)
    lines = result.stdout.splitlines()
    assert len(lines) == SUMMARY_LINES - 1, lines
    assert PARTITION_LINE.search(lines[4]), lines[4]


@pytest.mark.parametrize("name", PROGRAMS)
def test_example_on_four_ranks(name, fem3d_c, tmp_path):
    """The course's example input (8 x 8 x 8), cut 2 x 2 x 1: the numbers of the specification."""
    example = (native.ROOT / "examples" / "02_fem3d" / "input.dat").read_text()
    (tmp_path / "serial.dat").write_text(example)
    (tmp_path / "case.dat").write_text(example.rstrip("\n") + "\n2 2 1   PX PY PZ\n")
    serial = parse_summary(run_program(fem3d_c, "serial.dat", cwd=tmp_path, check=True).stdout)
    result = mpiexec(4, name, "case.dat", cwd=tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr
    s = parse_summary(result.stdout)
    assert (s["unknowns"], s["nnz"]) == (729, 15625) == (serial["unknowns"], serial["nnz"])
    assert abs(s["iterations"] - serial["iterations"]) <= 1
    assert s["t_max"] == pytest.approx(0.32, rel=1e-7)
    assert "ranks 4 (2 x 2 x 1 blocks), internal nodes per rank min 144 max 225, neighbours " \
           "max 3, external nodes total 360, bytes per exchange 2880" in result.stdout
    lines = result.stdout.splitlines()
    assert len(lines) == SUMMARY_LINES, lines
    assert_default_solver(lines, eps=float(example.splitlines()[5].split()[0]))


# --- the .pvtu file and its pieces ----------------------------------------------------------------

CORNERS = np.array([[0, 0, 0], [1, 0, 0], [1, 1, 0], [0, 1, 0],
                    [0, 0, 1], [1, 0, 1], [1, 1, 1], [0, 1, 1]])     # fem3d's (and VTK's) order


def data_array(parent, name=None):
    """The values of the one DataArray under `parent` (with Name=name if given), as floats."""
    arrays = [a for a in parent.iter("DataArray") if name is None or a.get("Name") == name]
    assert len(arrays) == 1, f"{len(arrays)} DataArray(s) named {name!r}"
    assert arrays[0].get("format", "ascii") == "ascii"
    return np.array((arrays[0].text or "").split(), dtype=float)


def read_piece(path: Path):
    """(points (n, 3), connectivity (m, 8), rank per cell (m,), temperature (n,)) of a .vtu file,
    checked for the structure of an UnstructuredGrid of hexahedra."""
    root = ET.parse(path).getroot()
    assert root.tag == "VTKFile" and root.get("type") == "UnstructuredGrid"
    pieces = root.findall("UnstructuredGrid/Piece")
    assert len(pieces) == 1
    piece = pieces[0]
    n_points, n_cells = int(piece.get("NumberOfPoints")), int(piece.get("NumberOfCells"))
    points_el = piece.find("Points")
    assert points_el is not None
    points = data_array(points_el).reshape(-1, 3)
    cells = piece.find("Cells")
    connectivity = data_array(cells, "connectivity").astype(int).reshape(-1, 8)
    offsets = data_array(cells, "offsets").astype(int)
    types = data_array(cells, "types").astype(int)
    rank = data_array(piece.find("CellData"), "rank").astype(int)
    temperature = data_array(piece.find("PointData"), "temperature")
    assert points.shape == (n_points, 3) and temperature.shape == (n_points,)
    assert connectivity.shape == (n_cells, 8) and rank.shape == (n_cells,)
    np.testing.assert_array_equal(offsets, 8 * np.arange(1, n_cells + 1))
    assert np.all(types == 12)                                   # VTK_HEXAHEDRON
    assert connectivity.min(initial=0) >= 0 and connectivity.max(initial=0) < n_points
    return points, connectivity, rank, temperature


def read_pvtu(path: Path) -> list[str]:
    """The piece file names of a .pvtu file, after checking what it declares."""
    root = ET.parse(path).getroot()
    assert root.tag == "VTKFile" and root.get("type") == "PUnstructuredGrid"
    grid = root.find("PUnstructuredGrid")
    assert grid is not None
    names = {(parent, a.get("Name")) for parent in ("PPointData", "PCellData")
             for a in grid.findall(f"{parent}/PDataArray")}
    assert names == {("PPointData", "temperature"), ("PCellData", "rank")}, names
    points = grid.findall("PPoints/PDataArray")
    assert len(points) == 1 and points[0].get("NumberOfComponents") == "3"
    assert points[0].get("type") == "Float64"
    return [piece.get("Source") for piece in grid.findall("Piece")]


@pytest.mark.parametrize("case", ["1x1x1", "3x1x1", "1x2x2", "2x2x1", "4x1x1", "2x1x2",
                                  "3x1x1-one-node-wide"])
@pytest.mark.parametrize("name", PROGRAMS)
def test_pvtu_output(name, fem3d_c, tmp_path, case):
    nel, parts, face = CASES[case]
    serial_text, mpi_text = mpi_input(nel, parts, face=face)
    (tmp_path / "serial.dat").write_text(serial_text)
    (tmp_path / "case.dat").write_text(mpi_text)
    run_program(fem3d_c, "serial.dat", "T.vtk", cwd=tmp_path, check=True)
    serial_points, _, _, serial_t = read_vtk(tmp_path / "T.vtk")
    (tmp_path / "out").mkdir()
    ranks = ranks_of(parts)
    result = mpiexec(ranks, name, "case.dat", "out/result.pvtu", cwd=tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr

    sources = read_pvtu(tmp_path / "out" / "result.pvtu")
    assert sources == [f"result_{r}.vtu" for r in range(ranks)]     # relative to the .pvtu
    nels, part_counts = [int(v) for v in nel.split()], [int(v) for v in parts.split()]
    size = np.array([0.2, 0.1, 0.35])
    nodes_per_axis = np.array(nels) + 1
    seen = np.zeros(int(np.prod(nels)), dtype=int)                  # pieces per element
    t_scale = max(1.0, np.abs(serial_t).max())
    mesh, owner, locals_ = partitioned(tuple(nels), tuple(part_counts))
    for r, source in enumerate(sources):
        points, connectivity, cell_rank, temperature = read_piece(tmp_path / "out" / source)
        ijk = np.rint(points / size).astype(int)                     # grid indices of the points
        np.testing.assert_allclose(points, ijk * size, rtol=0, atol=1e-12)
        global_node = ijk[:, 0] + nodes_per_axis[0] * (ijk[:, 1] + nodes_per_axis[1] * ijk[:, 2])
        # the points: every local node of course.parallel's local data, once
        assert sorted(global_node.tolist()) == sorted(locals_[r].global_ids.tolist())
        # the temperature at every point, external ones included, is the serial one
        np.testing.assert_allclose(serial_points[global_node], points, rtol=0, atol=1e-12)
        err = np.abs(temperature - serial_t[global_node]).max()
        assert err <= 1e-8 * t_scale, f"piece {r}: temperature differs by {err:.3e}"
        # the cells: hexahedra of the mesh, owned by this rank (the owner of corner 0)
        assert np.all(cell_rank == r)
        corner_ijk = ijk[connectivity]                               # (cells, 8, 3)
        np.testing.assert_array_equal(corner_ijk - corner_ijk[:, :1], np.broadcast_to(
            CORNERS, corner_ijk.shape))
        for i, j, k in corner_ijk[:, 0]:
            assert owner[mesh.node(i, j, k)] == r
            seen[i + nels[0] * (j + nels[1] * k)] += 1
    assert np.all(seen == 1), f"elements in no piece: {np.sum(seen == 0)}, " \
                              f"in several: {np.sum(seen > 1)}"


# --- errors: exit status 2, one line from the program, no hang -----------------------------------

def assert_one_error(result, name: str, prefix: str, *texts: str) -> str:
    """Exit status 2 (mpiexec passes the ranks' status on), no crash; exactly one line on stderr
    from the program (mpiexec may add its own notice about the non-zero status), starting with
    `prefix` and containing every text. Returns that line."""
    stderr = result.stderr
    assert result.returncode == 2, (result.returncode, result.stdout, stderr)
    for crash in ("Traceback", "Segmentation", "exited on signal", "MPI_ABORT"):
        assert crash not in stderr, stderr
    lines = [line for line in stderr.splitlines() if line.startswith(f"{name}:")]
    assert len(lines) == 1, f"expected one line from {name}, got {stderr!r}"
    assert lines[0].startswith(prefix), lines[0]
    for text in texts:
        assert text in lines[0], lines[0]
    return lines[0]


GOOD_SERIAL, _ = mpi_input("4 3 5", "1 1 1")

# id -> (file contents or None for "no such file", ranks, line number or None, texts in message);
# a line with a missing value has no comment (its words would be read as the value)
BAD_INPUTS = {
    "ranks-fewer-than-parts": (mpi_input("4 3 5", "2 2 1")[1], 3, 7, ("PX", "4", "3")),
    "ranks-more-than-parts": (mpi_input("4 3 5", "2 1 1")[1], 3, 7, ("PX", "2", "3")),
    "px-more-than-nodes": (mpi_input("2 3 3", "4 1 1")[1], 4, 7, ("PX", "4", "3")),
    "py-more-than-nodes": (mpi_input("3 1 3", "1 3 1")[1], 3, 7, ("PY", "3", "2")),
    "pz-more-than-nodes": (mpi_input("3 3 1", "1 1 3")[1], 3, 7, ("PZ", "3", "2")),
    "px-zero": (mpi_input("4 3 5", "0 2 1")[1], 2, 7, ("PX must be positive",)),
    "pz-negative": (mpi_input("4 3 5", "2 1 -1")[1], 2, 7, ("PZ must be positive",)),
    "parts-abc": (mpi_input("4 3 5", "2 abc 1")[1], 2, 7, ("'abc'",)),
    "parts-missing-one": (GOOD_SERIAL + "2 1\n", 2, 7, ("expected 3 integer(s)",)),
    "parts-line-missing": (GOOD_SERIAL, 2, 7, ("missing line",)),
    "nx-zero": (mpi_input("0 3 5", "2 1 1")[1], 2, 1, ("NX must be positive",)),
    "dy-negative": (mpi_input("4 3 5", "2 2 1", size="0.1 -0.2 0.3")[1], 4, 2,
                    ("DY must be positive",)),
    "face-unknown": (mpi_input("4 3 5", "1 2 1", face="top")[1], 2, 5, ("expected one of",)),
    "eps-zero": (mpi_input("4 3 5", "1 1 3", eps="0")[1], 3, 6, ("EPS must be positive",)),
    "source-unknown": (mpi_input("4 3 5", "2 1 1", material="0.6 -2.0 nakajma")[1], 2, 3,
                       ("unknown heat source 'nakajma': expected constant or nakajima",)),
    "missing-file": (None, 4, None, ("cannot open input file",)),
}


@pytest.mark.parametrize("case_id", list(BAD_INPUTS))
@pytest.mark.parametrize("name", PROGRAMS)
def test_bad_input(name, tmp_path, case_id):
    contents, ranks, line, texts = BAD_INPUTS[case_id]
    path = tmp_path / f"{case_id}.dat"
    if contents is not None:
        path.write_text(contents)
    result = mpiexec(ranks, name, path.name, cwd=tmp_path)
    where = f"{line}: " if line is not None else " "
    assert_one_error(result, name, f"{name}: {path.name}:{where}", *texts)
    assert result.stdout == "", "nothing should be computed or printed on bad input"


@pytest.mark.parametrize("name", PROGRAMS)
def test_output_folder_missing(name, tmp_path):
    (tmp_path / "case.dat").write_text(mpi_input("4 3 5", "2 1 2")[1])
    result = mpiexec(4, name, "case.dat", "no_such_dir/out.pvtu", cwd=tmp_path)
    assert_one_error(result, name, f"{name}: ", "no_such_dir")


@pytest.mark.parametrize("name", PROGRAMS)
def test_one_piece_cannot_be_written(name, tmp_path):
    """Only rank 2 fails (its piece's name is taken by a folder): the ranks agree on the status,
    one line, every rank exits 2, no hang."""
    (tmp_path / "case.dat").write_text(mpi_input("4 3 5", "1 3 1")[1])
    (tmp_path / "out_2.vtu").mkdir()
    result = mpiexec(3, name, "case.dat", "out.pvtu", cwd=tmp_path)
    assert_one_error(result, name, f"{name}: ")


@pytest.mark.skipif(native.default_variant() == "sanitize",
                    reason="AddressSanitizer reserves terabytes of address space for its shadow "
                           "memory: an address-space limit cannot apply to a sanitized program")
@pytest.mark.parametrize("ranks", [1, 2])
@pytest.mark.parametrize("name", PROGRAMS)
def test_too_big_for_memory_fails_cleanly(name, tmp_path, ranks):
    """A mesh that fits 32-bit indices but not the memory limit (inherited by every rank): the
    ranks agree, exit status 1 and one line, as fem3d's."""
    (tmp_path / "big.dat").write_text(mpi_input("400 400 400", f"{ranks} 1 1")[1])
    result = mpiexec(ranks, name, "big.dat", cwd=tmp_path, preexec_fn=limit_memory(2 << 30))
    assert result.returncode == 1, (result.returncode, result.stderr)
    assert "Segmentation" not in result.stderr and "MPI_ABORT" not in result.stderr
    lines = [line for line in result.stderr.splitlines() if line.startswith(f"{name}:")]
    assert len(lines) == 1 and "out of memory" in lines[0], result.stderr


@pytest.mark.parametrize("name", PROGRAMS)
def test_usage(name, tmp_path):
    result = mpiexec(2, name, cwd=tmp_path)
    assert result.returncode == 2 and result.stdout == ""
    assert "Segmentation" not in result.stderr and "MPI_ABORT" not in result.stderr
    usage = [line for line in result.stderr.splitlines() if line.startswith("usage:")]
    assert len(usage) == 1 and "INPUT [OUTPUT.pvtu]" in usage[0], result.stderr
