"""Lecture 05_halo, compiled side: the MPI programs fem3d_mpi_c and fem3d_mpi_f read GeoFEM-style
local data files (line 7 of the input `local PREFIX`: rank r reads PREFIX.r), written by
course.parallel.local.write_local (the files of `python -m course partition`) for any node -> rank
map: METIS, blocks, a random map, and a valid file whose local numbering is not the writer's.

Against the serial fem3d_c on the same input (iterations +-1, max T to 1e-10, the partition line
equal to course.parallel.partition.quality of the map, the lines on the solver: pcg, blocking,
diagonal),
against the same program with line 7 `PX PY PZ` (blocks as files: the very same summary), the
.pvtu output from files, and bad files:
exit status 2, exactly one line from the program (from the lowest rank whose file is bad), never a
hang, never a crash, never an unbounded allocation (a memory limit is set where a count is huge).

Every mpiexec call has a timeout (the helpers of test_halo_programs)."""

from __future__ import annotations

import re
from dataclasses import replace
from functools import cache
from pathlib import Path

import numpy as np
import pytest

from conftest import limit_memory, run_course, run_program
from course import native
from course.fem.mesh import BoxMesh, box_mesh
from course.parallel.local import LocalData, all_local_data, local_path, read_local, write_local
from course.parallel.partition import block_partition, metis_partition, quality
from test_fem3d_programs import parse_summary, read_vtk
from test_halo_programs import (CORNERS, LABELS, PROGRAMS, SUMMARY_LINES, assert_default_solver,
                                assert_one_error, assert_serial_answer, mpi_input, mpiexec,
                                read_piece, read_pvtu, untimed)

pytestmark = [pytest.mark.timeout(600), pytest.mark.compiled]

SIZE = (0.2, 0.1, 0.35)        # mpi_input's DX DY DZ: the files must say the same

PARTITION_LINE = re.compile(
    r"ranks (\d+) \(([^)]*)\), internal nodes per rank min (\d+) max (\d+), neighbours max (\d+), "
    r"external nodes total (\d+), bytes per exchange (\d+)")


def nel_of(nel: str) -> tuple[int, int, int]:
    return tuple(int(v) for v in nel.split())


@cache
def mesh_of(nel: str) -> BoxMesh:
    return box_mesh(*nel_of(nel), *SIZE)


def random_map(mesh: BoxMesh, ranks: int, seed: int) -> np.ndarray:
    """Every node to a random rank, every rank owning at least one node."""
    rng = np.random.default_rng(seed)
    owner = rng.integers(0, ranks, mesh.n_node).astype(np.int32)
    owner[rng.choice(mesh.n_node, ranks, replace=False)] = np.arange(ranks)
    return owner


def make_map(nel: str, kind: str, ranks: int) -> np.ndarray:
    mesh = mesh_of(nel)
    if kind == "metis":
        return metis_partition(mesh, ranks)
    if kind == "random":
        return random_map(mesh, ranks, seed=ranks)
    return block_partition(mesh, *(int(v) for v in kind.split("x")))


def write_files(prefix: Path, nel: str, owner) -> list[LocalData]:
    """PREFIX.0 .. PREFIX.P-1 of the map, as `python -m course partition` writes them."""
    mesh = mesh_of(nel)
    locals_ = all_local_data(mesh, owner)
    for local in locals_:
        write_local(local_path(prefix, local.rank), mesh, local)
    return locals_


def local_input(nel: str, prefix: str, face: str = "xmin", **kwargs) -> str:
    serial, _ = mpi_input(nel, "1 1 1", face=face, **kwargs)
    return serial + f"local {prefix}   local data files PREFIX.RANK\n"


def expected_partition(nel: str, owner) -> list[int]:
    """The numbers of the partition line, from course.parallel's quality of the map."""
    q = quality(mesh_of(nel), owner)
    return [q.ranks, int(q.owned.min()), int(q.owned.max()), int(q.neighbours.max()),
            int(q.halo.sum()), 8 * int(q.halo.sum())]


def run_files(name: str, tmp_path: Path, nel: str, owner, face: str, prefix: str = "part",
              output=()):
    """Writes the files and the input (line 7 `local PREFIX`), runs the program; returns the
    result after checking that it succeeded and printed the summary once."""
    (tmp_path / prefix).parent.mkdir(parents=True, exist_ok=True)
    write_files(tmp_path / prefix, nel, owner)
    (tmp_path / "case.dat").write_text(local_input(nel, prefix, face))
    result = mpiexec(int(owner.max()) + 1, name, "case.dat", *output, cwd=tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr
    assert not [line for line in result.stderr.splitlines() if line.startswith(name)]
    assert result.stdout.splitlines()[0].startswith(f"fem3d_mpi ({LABELS[name]}): ")
    return result


def serial_summary(fem3d_c, tmp_path: Path, nel: str, face: str, *output) -> dict:
    serial, _ = mpi_input(nel, "1 1 1", face=face)
    (tmp_path / "serial.dat").write_text(serial)
    result = run_program(fem3d_c, "serial.dat", *output, cwd=tmp_path, check=True)
    return parse_summary(result.stdout)


def partition_line(stdout: str) -> tuple[str, list[int]]:
    """(what the parenthesis says, the numbers) of the partition line (the summary's sixth, before
    the four lines on the solver)."""
    lines = stdout.splitlines()
    assert len(lines) == SUMMARY_LINES, lines
    m = PARTITION_LINE.search(lines[5])
    assert m, lines[5]
    numbers = [int(v) for v in m.groups()[:1] + m.groups()[2:]]
    return m[2], numbers


# --- any partition: the serial answer ----------------------------------------------------------

# id -> (NX NY NZ, map, ranks, FIXED, PREFIX): 7 x 5 x 6 and 6 x 7 x 5 elements, the flux face in
# every direction, prefixes in a folder and absolute (None: tmp_path / "abs" / "part")
CASES = {
    "metis-1": ("7 5 6", "metis", 1, "xmin", "part"),
    "metis-2": ("7 5 6", "metis", 2, "zmax", "part"),
    "metis-3": ("7 5 6", "metis", 3, "ymin", "files/part"),
    "metis-4": ("7 5 6", "metis", 4, "xmax", "part"),
    "metis-2-675": ("6 7 5", "metis", 2, "ymax", "part"),
    "metis-3-675": ("6 7 5", "metis", 3, "zmin", None),
    "metis-4-675": ("6 7 5", "metis", 4, "xmin", "part"),
    "random-3": ("7 5 6", "random", 3, "xmin", "part"),
    "random-4": ("6 7 5", "random", 4, "zmax", "part"),
}


@pytest.mark.parametrize("case", list(CASES))
@pytest.mark.parametrize("name", PROGRAMS)
def test_partition_files_give_the_serial_answer(name, fem3d_c, tmp_path, case):
    nel, kind, ranks, face, prefix = CASES[case]
    prefix = prefix or str(tmp_path / "abs" / "part")
    owner = make_map(nel, kind, ranks)
    ref = serial_summary(fem3d_c, tmp_path, nel, face)
    result = run_files(name, tmp_path, nel, owner, face, prefix)
    assert_serial_answer(result.stdout, ref)
    assert_default_solver(result.stdout.splitlines())
    described, numbers = partition_line(result.stdout)
    assert "blocks" not in described and Path(prefix).name in described, described
    assert numbers == expected_partition(nel, owner)


def relabelled(locals_: list[LocalData], seed: int) -> list[LocalData]:
    """The same partition with, on every rank, the internal nodes and the elements in a random
    order, and the external nodes of each owner too, that owner sending them in the new order:
    files as valid as the writer's (import_index stays N_INTERNAL .. N_LOCAL-1, as the format
    requires), with export_index and the elements in no particular order, which a program must
    read through its tables, not its habits."""
    rng = np.random.default_rng(seed)
    new, orders = [], []        # per rank: old -> new local number; per import group: slot moves
    for local in locals_:
        n, ptr = local.n_internal, local.import_ptr
        groups = [rng.permutation(hi - lo) for lo, hi in zip(ptr[:-1], ptr[1:])]
        new.append(np.concatenate([rng.permutation(n)]
                                  + [n + lo + g for lo, g in zip(ptr[:-1], groups)]))
        orders.append(groups)
    out = []
    for q, local in enumerate(locals_):
        export_index = np.empty_like(local.export_index)
        for m, r in enumerate(local.neighbours):        # q sends to r in r's new slot order
            lo, hi = local.export_ptr[m], local.export_ptr[m + 1]
            moves = orders[r][locals_[r].neighbours.tolist().index(q)]
            export_index[lo + moves] = new[q][local.export_index[lo:hi]]
        global_ids = np.empty_like(local.global_ids)
        global_ids[new[q]] = local.global_ids
        order = rng.permutation(local.element_ids.shape[0])
        out.append(replace(local, global_ids=global_ids,
                           elements=new[q][local.elements[order]].astype(np.int32),
                           element_ids=local.element_ids[order], export_index=export_index))
    return out


@pytest.mark.parametrize("name", PROGRAMS)
def test_any_valid_local_numbering(name, fem3d_c, tmp_path):
    nel, face = "7 5 6", "ymax"
    owner = make_map(nel, "metis", 3)
    ref = serial_summary(fem3d_c, tmp_path, nel, face)
    locals_ = all_local_data(mesh_of(nel), owner)
    for local, changed in zip(locals_, relabelled(locals_, seed=3)):
        assert not np.array_equal(changed.export_index, local.export_index)
        path = local_path(tmp_path / "part", local.rank)
        write_local(path, mesh_of(nel), changed)
        assert read_local(path)[1] == changed             # valid for course.parallel too
    (tmp_path / "case.dat").write_text(local_input(nel, "part", face))
    result = mpiexec(3, name, "case.dat", cwd=tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr
    assert_serial_answer(result.stdout, ref)
    assert_default_solver(result.stdout.splitlines())
    assert partition_line(result.stdout)[1] == expected_partition(nel, owner)


def test_cli_writes_what_the_tests_write(tmp_path):
    """`python -m course partition` (what a learner runs) writes the files these tests write."""
    result = run_course("partition", "--nx", "7", "--ny", "5", "--nz", "6", "--dx", "0.2",
                        "--dy", "0.1", "--dz", "0.35", "--ranks", "3", "--partition", "metis",
                        "--out", str(tmp_path / "cli"), "--json")
    assert result.returncode == 0, result.stderr
    write_files(tmp_path / "mine", "7 5 6", make_map("7 5 6", "metis", 3))
    for r in range(3):
        assert (local_path(tmp_path / "cli", r).read_text()
                == local_path(tmp_path / "mine", r).read_text())


# --- blocks as files: exactly the blocks' answer -------------------------------------------------

BLOCK_CASES = {
    "2x2x1": ("7 5 6", "2 2 1", "zmin"),
    "1x3x1": ("7 5 6", "1 3 1", "ymax"),
    "2x1x2": ("6 7 5", "2 1 2", "ymin"),
    "4x1x1": ("7 5 6", "4 1 1", "xmax"),
    "3x1x1-one-node-wide": ("2 3 4", "3 1 1", "zmax"),
}


@pytest.mark.parametrize("case", list(BLOCK_CASES))
@pytest.mark.parametrize("name", PROGRAMS)
def test_blocks_as_files_give_the_blocks_summary(name, tmp_path, case):
    nel, parts, face = BLOCK_CASES[case]
    owner = make_map(nel, parts.replace(" ", "x"), int(np.prod(nel_of(parts))))
    from_files = run_files(name, tmp_path, nel, owner, face)
    (tmp_path / "blocks.dat").write_text(mpi_input(nel, parts, face=face)[1])
    blocks = mpiexec(int(owner.max()) + 1, name, "blocks.dat", cwd=tmp_path)
    assert blocks.returncode == 0, blocks.stdout + blocks.stderr
    files_lines, block_lines = from_files.stdout.splitlines(), blocks.stdout.splitlines()
    assert files_lines[:5] == block_lines[:5]         # iterations, residual, max T, error: exact
    assert untimed(from_files.stdout).splitlines()[6:] == \
        untimed(blocks.stdout).splitlines()[6:]        # the solver: pcg, its true residual: exact
    assert_default_solver(files_lines)
    assert partition_line(from_files.stdout)[1] == partition_line(blocks.stdout)[1]
    assert "blocks" in partition_line(blocks.stdout)[0]
    assert partition_line(from_files.stdout)[1] == expected_partition(nel, owner)


# --- the .pvtu output from files ------------------------------------------------------------------

@pytest.mark.parametrize("kind", ["metis", "random"])
@pytest.mark.parametrize("name", PROGRAMS)
def test_pvtu_output_from_files(name, fem3d_c, tmp_path, kind):
    nel, ranks, face = "7 5 6", 3, "ymin"
    owner = make_map(nel, kind, ranks)
    serial_summary(fem3d_c, tmp_path, nel, face, "T.vtk")
    serial_points, _, _, serial_t = read_vtk(tmp_path / "T.vtk")
    (tmp_path / "out").mkdir()
    run_files(name, tmp_path, nel, owner, face, output=("out/result.pvtu",))
    sources = read_pvtu(tmp_path / "out" / "result.pvtu")
    assert sources == [f"result_{r}.vtu" for r in range(ranks)]

    mesh, size = mesh_of(nel), np.array(SIZE)
    locals_ = all_local_data(mesh, owner)
    seen = np.zeros(mesh.n_elem, dtype=int)                        # pieces per element
    t_scale = max(1.0, np.abs(serial_t).max())
    for r, source in enumerate(sources):
        points, connectivity, cell_rank, temperature = read_piece(tmp_path / "out" / source)
        ijk = np.rint(points / size).astype(int)
        np.testing.assert_allclose(points, ijk * size, rtol=0, atol=1e-12)
        global_node = mesh.node(ijk[:, 0], ijk[:, 1], ijk[:, 2])
        assert sorted(global_node.tolist()) == sorted(locals_[r].global_ids.tolist())
        err = np.abs(temperature - serial_t[global_node]).max()     # external nodes included
        assert err <= 1e-8 * t_scale, f"piece {r}: temperature differs by {err:.3e}"
        np.testing.assert_allclose(serial_points[global_node], points, rtol=0, atol=1e-12)
        assert np.all(cell_rank == r)
        corner_ijk = ijk[connectivity]
        np.testing.assert_array_equal(corner_ijk - corner_ijk[:, :1],
                                      np.broadcast_to(CORNERS, corner_ijk.shape))
        for i, j, k in corner_ijk[:, 0]:
            assert owner[mesh.node(i, j, k)] == r                  # the owner of corner 0
            seen[i + mesh.nx * (j + mesh.ny * k)] += 1
    assert np.all(seen == 1), f"elements in no piece: {np.sum(seen == 0)}, " \
                              f"in several: {np.sum(seen > 1)}"


# --- bad local data: one line, exit status 2, no hang ------------------------------------------

BASE_NEL = "7 5 6"
BASE_PARTS = "3x1x1"        # rank 1 in the middle: neighbours 0 and 2


def layout(local: LocalData) -> dict[str, int]:
    """The first line (1-based) of each group in the file of write_local."""
    def lines(count):
        return -(-count // 10)
    sizes = [("magic", 1), ("rank_size", 1), ("mesh", 1), ("counts", 1),
             ("global_ids", lines(local.n_local)), ("n_elements", 1),
             ("element_ids", lines(local.element_ids.shape[0])),
             ("corners", local.element_ids.shape[0]), ("n_neighbours", 1),
             ("neighbours", lines(local.n_neighbours)),
             ("import_ptr", lines(local.n_neighbours + 1)),
             ("import_index", lines(int(local.import_ptr[-1]))),
             ("export_ptr", lines(local.n_neighbours + 1)),
             ("export_index", lines(int(local.export_ptr[-1]))), ("end", 0)]
    first, out = 1, {}
    for group, count in sizes:
        out[group] = first
        first += count
    return out


class Files:
    """The base set of files (blocks 3 x 1 x 1 of 7 x 5 x 6) and ways to spoil one of them."""

    def __init__(self, folder: Path):
        self.folder = folder
        self.owner = make_map(BASE_NEL, BASE_PARTS, 3)
        self.locals = write_files(folder / "part", BASE_NEL, self.owner)

    def path(self, rank: int) -> Path:
        return local_path(self.folder / "part", rank)

    def line_of(self, rank: int, group: str, offset: int = 0) -> int:
        return layout(self.locals[rank])[group] + offset

    def lines(self, rank: int) -> list[str]:
        return self.path(rank).read_text().splitlines()

    def write(self, rank: int, lines: list[str]) -> None:
        self.path(rank).write_text("".join(line + "\n" for line in lines))

    def set_line(self, rank: int, group: str, text: str, offset: int = 0) -> int:
        """Replaces a line of a group; returns its number."""
        lines, number = self.lines(rank), self.line_of(rank, group, offset)
        lines[number - 1] = text
        self.write(rank, lines)
        return number

    def set_value(self, rank: int, group: str, position: int, value, offset: int = 0) -> int:
        """Replaces one value of a line (its comment goes); returns the line number."""
        words = self.lines(rank)[self.line_of(rank, group, offset) - 1].split()
        words[position] = str(value)
        return self.set_line(rank, group, " ".join(words), offset)

    def truncate(self, rank: int, group: str, offset: int = 0) -> int:
        """Cuts the file just before a line; returns the number of the first missing line."""
        number = self.line_of(rank, group, offset)
        self.write(rank, self.lines(rank)[:number - 1])
        return number

    def other_partition(self, rank: int, nel: str, kind: str, ranks: int) -> None:
        """The file of `rank` from another partition (a stale file)."""
        owner = make_map(nel, kind, ranks)
        mesh = mesh_of(nel)
        write_local(self.path(rank), mesh, all_local_data(mesh, owner)[rank])


def test_layout_matches_the_writer(tmp_path):
    files = Files(tmp_path)
    for rank, local in enumerate(files.locals):
        lines, where = files.lines(rank), layout(local)
        assert lines[where["magic"] - 1] == "# course local data (05_halo)"
        for group, comment in (("rank_size", "RANK SIZE"), ("counts", "N_INTERNAL N_EXTERNAL"),
                               ("n_elements", "N_ELEMENTS"), ("n_neighbours", "N_NEIGHBOURS")):
            assert lines[where[group] - 1].endswith(comment), (group, lines[where[group] - 1])
        assert len(lines) == where["end"] - 1
    assert files.locals[1].n_neighbours == 2 and files.locals[1].neighbours.tolist() == [0, 2]


def spoil_missing(f: Files):
    f.path(1).unlink()
    return 1, None, ("cannot open local data file: No such file or directory",)


def spoil_all_missing(f: Files):
    for r in range(3):
        f.path(r).unlink()
    return 0, None, ("cannot open local data file",)


def spoil_magic(f: Files):
    return 1, f.set_line(1, "magic", "# some other file"), ("not a local data file",)


def spoil_empty(f: Files):
    f.write(1, [])
    return 1, 1, ("not a local data file",)


def spoil_rank_size(f: Files):
    f.other_partition(1, BASE_NEL, "4x1x1", 4)
    return 1, 2, ("RANK SIZE = 1 4, but this is rank 1 of 3",)


def spoil_swapped_files(f: Files):
    f.path(1).write_text(f.path(2).read_text())
    return 1, 2, ("RANK SIZE = 2 3, but this is rank 1 of 3",)


def spoil_mesh(f: Files):
    line = f.set_line(2, "mesh", "8 5 6 0.2 0.1 0.35    NX NY NZ DX DY DZ")
    return 2, line, ("the mesh 8 5 6 does not match the input's NX NY NZ = 7 5 6",)


def spoil_element_size(f: Files):
    line = f.set_line(1, "mesh", "7 5 6 0.2 0.1 0.3500000001")
    return 1, line, ("DX DY DZ",)


def spoil_rank_not_a_number(f: Files):
    return 1, f.set_line(1, "rank_size", "1 three    RANK SIZE"), ("three",)


def spoil_counts_missing_one(f: Files):
    return 1, f.set_line(1, "counts", str(f.locals[1].n_internal)), ("N_INTERNAL",)


def spoil_global_node_abc(f: Files):
    return 1, f.set_value(1, "global_ids", 3, "abc"), ("abc", "global node")


def spoil_global_node_too_big(f: Files):
    return 1, f.set_value(1, "global_ids", 0, mesh_of(BASE_NEL).n_node), ("global node",)


def spoil_global_node_negative(f: Files):
    return 2, f.set_value(2, "global_ids", 9, -1, offset=2), ("global node",)


def spoil_block_line_short(f: Files):
    words = f.lines(1)[f.line_of(1, "global_ids") - 1].split()
    return 1, f.set_line(1, "global_ids", " ".join(words[:-1])), ("global node",)


def spoil_element_too_big(f: Files):
    return 1, f.set_value(1, "element_ids", 1, mesh_of(BASE_NEL).n_elem), ("global element",)


def spoil_corner_too_big(f: Files):
    return 1, f.set_value(1, "corners", 0, f.locals[1].n_local, offset=5), ("corner",)


def spoil_corner_missing(f: Files):
    words = f.lines(1)[f.line_of(1, "corners") - 1].split()
    return 1, f.set_line(1, "corners", " ".join(words[:7])), ("corner",)


def spoil_corners_swapped(f: Files):
    """Two corners of an element swapped: valid numbers, an element that is not the mesh's."""
    words = f.lines(1)[f.line_of(1, "corners", 7) - 1].split()
    words[0], words[6] = words[6], words[0]
    return 1, f.set_line(1, "corners", " ".join(words), offset=7), ("element",)


def spoil_neighbour_is_size(f: Files):
    return 1, f.set_line(1, "neighbours", "0 3"), ("neighbour", "3")


def spoil_import_ptr_start(f: Files):
    return 1, f.set_value(1, "import_ptr", 0, 1), ("import_ptr",)


def spoil_import_index_too_big(f: Files):
    return 1, f.set_value(1, "import_index", 2, f.locals[1].n_local), ("import_index",)


def spoil_import_index_order(f: Files):
    words = f.lines(1)[f.line_of(1, "import_index", 1) - 1].split()
    words[2], words[3] = words[3], words[2]
    line = f.set_line(1, "import_index", " ".join(words), offset=1)
    return 1, line, ("import_index", "in order")


def spoil_export_ptr_decreasing(f: Files):
    ptr = f.locals[1].export_ptr.tolist()
    return 1, f.set_line(1, "export_ptr", f"{ptr[0]} {ptr[2]} {ptr[1]}"), ("export_ptr",)


def spoil_export_index_too_big(f: Files):
    return 1, f.set_value(1, "export_index", 4, f.locals[1].n_internal), ("export_index",)


def spoil_ends_before_neighbours(f: Files):
    return 1, f.truncate(1, "n_neighbours"), ("N_NEIGHBOURS",)


def spoil_ends_in_a_block(f: Files):
    return 2, f.truncate(2, "n_elements", -1), ("global node",)   # the last global-node line


def spoil_ends_before_exports(f: Files):
    return 1, f.truncate(1, "export_index"), ("export_index",)


def spoil_two_ranks(f: Files):
    """Ranks 1 and 2 bad: rank 1, the lowest, reports."""
    f.set_line(2, "magic", "garbage")
    return 1, f.set_line(1, "rank_size", "0 3    RANK SIZE"), ("RANK SIZE = 0 3",)


# counts far beyond the file: they must be refused before anything is allocated for them (the
# memory limit makes an allocation of that size fail, which would give another message)
def spoil_huge_internal(f: Files):
    return 1, f.set_line(1, "counts", "2000000000 5    N_INTERNAL N_EXTERNAL"), ("N_INTERNAL",)


def spoil_huge_elements(f: Files):
    return 1, f.set_line(1, "n_elements", "1500000000    N_ELEMENTS"), ("N_ELEMENTS",)


def spoil_huge_neighbours(f: Files):
    return 1, f.set_line(1, "n_neighbours", "1000000000    N_NEIGHBOURS"), ("N_NEIGHBOURS",)


def spoil_huge_export(f: Files):
    ptr = f.locals[1].export_ptr.tolist()
    return 1, f.set_line(1, "export_ptr", f"0 {ptr[1]} 2000000000"), ("export_ptr",)


# files that are each fine but do not fit together: the exchange would hang or truncate a
# message, or put values in the wrong places; the ranks must notice (the line names a file)
def spoil_stale_file(f: Files):
    f.other_partition(2, BASE_NEL, "metis", 3)
    return None, None, ()


def spoil_one_sided_neighbour(f: Files):
    """Rank 0 lists rank 2 (with nothing to exchange), rank 2 does not list rank 0: a receive
    that nobody sends to, unless the program checks."""
    local = f.locals[0]
    assert local.neighbours.tolist() == [1]
    n_imp, n_exp = int(local.import_ptr[-1]), int(local.export_ptr[-1])
    f.set_line(0, "n_neighbours", "2    N_NEIGHBOURS")
    f.set_line(0, "neighbours", "1 2")
    f.set_line(0, "import_ptr", f"0 {n_imp} {n_imp}")
    f.set_line(0, "export_ptr", f"0 {n_exp} {n_exp}")
    return None, None, ()


def spoil_export_order(f: Files):
    """Rank 1 sends two of its nodes to rank 0 in the wrong order: the counts fit."""
    words = f.lines(1)[f.line_of(1, "export_index") - 1].split()
    words[0], words[1] = words[1], words[0]
    f.set_line(1, "export_index", " ".join(words))
    return None, None, ()


SPOILS = {name[len("spoil_"):]: value for name, value in globals().items()
          if name.startswith("spoil_")}


@pytest.mark.parametrize("case_id", list(SPOILS))
@pytest.mark.parametrize("name", PROGRAMS)
def test_bad_local_data(name, tmp_path, case_id):
    files = Files(tmp_path)
    rank, line, texts = SPOILS[case_id](files)
    (tmp_path / "case.dat").write_text(local_input(BASE_NEL, "part"))
    # no address-space limit under AddressSanitizer, which reserves terabytes for its shadow
    sanitized = native.default_variant() == "sanitize"
    result = mpiexec(3, name, "case.dat", cwd=tmp_path,
                     preexec_fn=None if sanitized else limit_memory(2 << 30))
    if rank is None:                           # some rank's file, with no line
        prefix = f"{name}: part."
    else:
        prefix = f"{name}: part.{rank}" + (f":{line}: " if line is not None else ": ")
    assert_one_error(result, name, prefix, *texts)
    assert result.stdout == "", "nothing should be computed or printed on bad local data"


@pytest.mark.parametrize("name", PROGRAMS)
def test_files_of_another_mesh(name, tmp_path):
    """The input says 8 x 5 x 6, the files 7 x 5 x 6: every rank's file is wrong, rank 0 says so."""
    Files(tmp_path)
    (tmp_path / "case.dat").write_text(local_input("8 5 6", "part"))
    result = mpiexec(3, name, "case.dat", cwd=tmp_path)
    assert_one_error(result, name, f"{name}: part.0:3: ",
                     "the mesh 7 5 6 does not match the input's NX NY NZ = 8 5 6")


@pytest.mark.parametrize("name", PROGRAMS)
def test_element_size_within_tolerance(name, tmp_path):
    """Reals are compared to 1e-12 relative: DX written differently still matches."""
    Files(tmp_path)
    serial, _ = mpi_input(BASE_NEL, "1 1 1", size="0.2000000000000003 0.1 0.35")
    (tmp_path / "case.dat").write_text(serial + "local part\n")
    result = mpiexec(3, name, "case.dat", cwd=tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr


@pytest.mark.parametrize("name", PROGRAMS)
def test_ranks_other_than_the_files(name, tmp_path):
    """Files for 3 ranks, a job of 2: rank 0 reads part.0, which says SIZE 3."""
    Files(tmp_path)
    (tmp_path / "case.dat").write_text(local_input(BASE_NEL, "part"))
    result = mpiexec(2, name, "case.dat", cwd=tmp_path)
    assert_one_error(result, name, f"{name}: part.0:2: ",
                     "RANK SIZE = 0 3, but this is rank 0 of 2")


@pytest.mark.parametrize("name", PROGRAMS)
def test_local_without_prefix(name, tmp_path):
    serial, _ = mpi_input(BASE_NEL, "1 1 1")
    (tmp_path / "case.dat").write_text(serial + "local\n")
    result = mpiexec(2, name, "case.dat", cwd=tmp_path)
    assert_one_error(result, name, f"{name}: case.dat:7: ", "PREFIX")
