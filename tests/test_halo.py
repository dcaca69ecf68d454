"""Lecture 05_halo in Python: partitions (blocks, METIS, any map), GeoFEM-style local data and its
files, the parallel assembly of overlapping elements (exactly the serial rows), and, under mpiexec
with 1 to 4 ranks, the four halo exchanges, the message-size exchanges and the distributed solve."""

from __future__ import annotations

import ctypes
import shutil

import numpy as np
import pytest

from conftest import PYTHON, ROOT, lang_params, run
from course.fem import assembly
from course.fem.mesh import box_mesh
from course.parallel import partition as part
from course.parallel.fem3d import assemble_local, internal_rows, model_system
from course.parallel.local import all_local_data, local_data, local_path, read_local, write_local

MPI_TIMEOUT = 180


def random_owner(mesh, ranks, seed=3):
    """A scattered node -> rank map (every rank owns something): the local data must not assume
    blocks."""
    rng = np.random.default_rng(seed)
    owner = rng.integers(0, ranks, mesh.n_node)
    owner[:ranks] = np.arange(ranks)
    return owner.astype(np.int32)


MESH = box_mesh(7, 5, 6)                       # sizes not divisible by the part counts
PARTITIONS = {
    "blocks-3x1x1": lambda: part.block_partition(MESH, 3, 1, 1),
    "blocks-2x2x1": lambda: part.block_partition(MESH, 2, 2, 1),
    "blocks-1x2x2": lambda: part.block_partition(MESH, 1, 2, 2),
    "metis-4": lambda: part.metis_partition(MESH, 4),
    "metis-3": lambda: part.metis_partition(MESH, 3),
    "random-3": lambda: random_owner(MESH, 3),
}


@pytest.fixture(scope="module", params=list(PARTITIONS))
def partitioned(request):
    owner = PARTITIONS[request.param]()
    return owner, all_local_data(MESH, owner)


# --- partitions ----------------------------------------------------------------------------------

def test_block_starts_cut_uneven_ranges():
    assert part.block_starts(8, 3).tolist() == [0, 2, 5, 8]
    assert part.block_starts(6, 6).tolist() == list(range(7))


def test_block_partition_owner_by_formula():
    owner = part.block_partition(MESH, 3, 2, 1)
    i, j, k = MESH.node_ijk()
    px = np.select([i < 2, i < 5], [0, 1], 2)          # 8 nodes along x: 2, 3, 3
    py = (j >= 3).astype(int)                          # 6 nodes along y: 3, 3
    assert np.array_equal(owner, px + 3 * py)
    assert np.bincount(owner).tolist() == [42, 63, 63, 42, 63, 63]


@pytest.mark.parametrize("dims, message", [((9, 1, 1), "PX = 9 parts but only 8 nodes"),
                                           ((1, 0, 1), "PY must be a positive integer"),
                                           ((1, 1, 8), "PZ = 8 parts but only 7 nodes")])
def test_block_partition_refuses(dims, message):
    with pytest.raises(ValueError, match=message):
        part.block_partition(MESH, *dims)


def test_make_partition_checks_the_rank_count():
    with pytest.raises(ValueError, match="make 4 parts, but there are 3 ranks"):
        part.make_partition(MESH, "blocks", 3, (2, 2, 1))
    with pytest.raises(ValueError, match="partition must be one of"):
        part.make_partition(MESH, "scotch", 2)


@pytest.mark.parametrize("ranks, dims", [(1, (1, 1, 1)), (2, (2, 1, 1)), (4, (2, 2, 1)),
                                         (8, (2, 2, 2))])
def test_default_blocks_are_cube_like(ranks, dims):
    assert part.default_blocks(box_mesh(8, 8, 8), ranks) == dims


def test_default_blocks_respect_thin_axes():
    assert part.default_blocks(box_mesh(20, 1, 1), 4) == (4, 1, 1)
    with pytest.raises(ValueError, match="more parts"):
        part.default_blocks(box_mesh(1, 1, 1), 16)


def test_metis_is_balanced_deterministic_and_cuts_little():
    mesh = box_mesh(8, 8, 8)
    owner = part.metis_partition(mesh, 4)
    assert np.array_equal(owner, part.metis_partition(mesh, 4))
    q = part.quality(mesh, owner)
    assert q.load_imbalance < 1.1, q
    blocks = part.quality(mesh, part.block_partition(mesh, 2, 2, 1))
    assert q.edge_cut < 1.5 * blocks.edge_cut, (q.edge_cut, blocks.edge_cut)
    assert np.array_equal(part.metis_partition(mesh, 1), np.zeros(mesh.n_node))


# A native thread that draws from C's rand() until told to stop, as ZeroMQ's I/O threads do in a
# Jupyter kernel (a Python thread cannot: pymetis keeps the GIL while METIS runs)
RAND_DRAWER = r"""
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
static atomic_int running;
static pthread_t thread;
static void *draw(void *unused) { (void)unused; while (running) rand(); return NULL; }
void start_drawing(void) { running = 1; pthread_create(&thread, NULL, draw, NULL); }
void stop_drawing(void) { running = 0; pthread_join(thread, NULL); }
"""


def test_metis_ignores_other_threads_drawing_from_c_rand(tmp_path):
    """METIS draws from C's rand(), whose state every thread of a process shares. With another
    thread drawing all the while, the partition stays the one of a quiet process."""
    quiet = part.metis_partition(MESH, 4)
    source = tmp_path / "drawer.c"
    source.write_text(RAND_DRAWER)
    run(["cc", "-shared", "-fPIC", "-pthread", "-o", tmp_path / "drawer.so", source], check=True)
    drawer = ctypes.CDLL(str(tmp_path / "drawer.so"))
    drawer.start_drawing()
    try:
        busy = [part.metis_partition(MESH, 4) for _ in range(3)]
    finally:
        drawer.stop_drawing()
    assert all(np.array_equal(owner, quiet) for owner in busy)


def test_metis_parts_are_numbered_by_their_first_node_in_every_process():
    owner = part.metis_partition(MESH, 4)
    first = [int(np.flatnonzero(owner == p)[0]) for p in range(4)]
    assert first == sorted(first) and first[0] == 0, first
    swapped = np.array([2, 0, 3, 1], dtype=np.int32)[owner]
    assert np.array_equal(part.numbered_by_first_node(swapped), owner)
    other_process = run(
        [PYTHON, "-c", "import sys; from course.parallel.partition import metis_partition;"
         f" from course.fem.mesh import box_mesh; sys.stdout.write(metis_partition("
         f"box_mesh({MESH.nx}, {MESH.ny}, {MESH.nz}), 4).tobytes().hex())"],
        cwd=ROOT, check=True)
    assert bytes.fromhex(other_process.stdout) == owner.tobytes()


def test_node_graph_is_the_pattern_without_diagonal():
    xadj, adjncy = part.node_graph(MESH)
    row_ptr, _ = assembly.fem3d_pattern_numpy(MESH)
    assert np.array_equal(np.diff(xadj), np.diff(row_ptr) - 1)
    rows = np.repeat(np.arange(MESH.n_node), np.diff(xadj))
    assert not np.any(rows == adjncy)
    pairs = set(zip(rows.tolist(), adjncy.tolist()))
    assert all((b, a) in pairs for a, b in pairs)              # symmetric


def test_check_owner_refuses_bad_maps():
    with pytest.raises(ValueError, match="one integer rank per node"):
        part.check_owner(MESH, np.zeros(3, dtype=int))
    owner = np.zeros(MESH.n_node, dtype=int)
    owner[0] = 2
    with pytest.raises(ValueError, match="rank 1 owns no node"):
        part.check_owner(MESH, owner)


# --- local data ----------------------------------------------------------------------------------

def test_local_numbering(partitioned):
    owner, locals_ = partitioned
    for loc in locals_:
        r = loc.rank
        internal = loc.global_ids[:loc.n_internal]
        assert np.array_equal(internal, np.flatnonzero(owner == r))
        touches = np.any(owner[MESH.elements] == r, axis=1)
        assert np.array_equal(loc.element_ids, np.flatnonzero(touches))
        assert np.array_equal(loc.global_ids[loc.elements], MESH.elements[touches])
        external = loc.global_ids[loc.n_internal:]
        assert set(external) == set(np.unique(MESH.elements[touches])) - set(internal)
        keys = list(zip(owner[external], external))
        assert keys == sorted(keys), "external nodes: by owner, then by number"
        assert np.array_equal(loc.neighbours, np.unique(owner[external]))
        for m, q in enumerate(loc.neighbours):
            assert np.all(owner[loc.global_ids[loc.imports_from(m)]] == q)


def test_export_lists_match_the_neighbours_imports(partitioned):
    _, locals_ = partitioned
    for loc in locals_:
        for m, q in enumerate(loc.neighbours):
            other = locals_[q]
            assert loc.rank in other.neighbours, "neighbours must be symmetric"
            back = int(np.flatnonzero(other.neighbours == loc.rank)[0])
            sent = loc.global_ids[loc.exports_to(m)]
            received = other.global_ids[other.imports_from(back)]
            assert np.array_equal(sent, received)
            assert np.all(loc.exports_to(m) < loc.n_internal)


def test_quality_agrees_with_the_local_data(partitioned):
    owner, locals_ = partitioned
    q = part.quality(MESH, owner)
    assert q.halo.tolist() == [loc.n_external for loc in locals_]
    assert q.neighbours.tolist() == [loc.n_neighbours for loc in locals_]
    assert q.owned.tolist() == [loc.n_internal for loc in locals_]
    assert q.load_imbalance == pytest.approx(max(q.owned) / np.mean(q.owned))


@pytest.mark.parametrize("depth", [2, 3])
def test_deep_halo_local_data(partitioned, depth):
    """Depth h: the external nodes are the nodes within h element-sharing steps, the rows of every
    node up to h - 1 steps out are complete, and exports still match imports node for node."""
    owner, _ = partitioned
    deep = [local_data(MESH, owner, r, depth) for r in range(int(owner.max()) + 1)]
    xadj, adjncy = part.node_graph(MESH)
    for loc in deep:
        level = np.full(MESH.n_node, -1)
        level[loc.global_ids] = loc.level
        assert np.all(level[owner == loc.rank] == 0)
        assert loc.level.max() <= depth
        # a node one step out of level l is at most at level l + 1, and reached if l < depth
        for node in loc.global_ids[loc.level < depth]:
            around = adjncy[xadj[node]:xadj[node + 1]]
            assert np.all(level[around] >= 0), "a neighbour of an inner node is missing"
            assert np.all(level[around] <= level[node] + 1)
        # complete rows: every element around a node of level < depth is local
        around = np.any(np.isin(MESH.elements, loc.global_ids[loc.level < depth]), axis=1)
        assert set(np.flatnonzero(around)) <= set(loc.element_ids.tolist())
    for loc in deep:
        for m, q in enumerate(loc.neighbours):
            back = int(np.flatnonzero(deep[q].neighbours == loc.rank)[0])
            assert np.array_equal(loc.global_ids[loc.exports_to(m)],
                                  deep[q].global_ids[deep[q].imports_from(back)])


def test_depth_one_is_the_usual_halo(partitioned):
    owner, locals_ = partitioned
    assert [local_data(MESH, owner, r, 1) for r in range(len(locals_))] == locals_


def test_one_rank_has_no_halo():
    (loc,) = all_local_data(MESH, np.zeros(MESH.n_node, dtype=int))
    assert loc.n_external == 0 and loc.n_neighbours == 0
    assert loc.n_internal == MESH.n_node and loc.element_ids.shape[0] == MESH.n_elem


def test_local_files_round_trip(partitioned, tmp_path):
    _, locals_ = partitioned
    for loc in locals_:
        path = local_path(tmp_path / "part", loc.rank)
        write_local(path, MESH, loc)
        mesh, back = read_local(path)
        assert mesh == MESH
        assert back == loc


@pytest.mark.parametrize("edit, message", [
    (lambda lines: lines[:1], "the file ends; expected RANK SIZE"),
    (lambda lines: ["# something else"] + lines[1:], "not a local data file"),
    (lambda lines: lines[:1] + ["5 2    RANK SIZE"] + lines[2:], "RANK 5 must be in 0 .. SIZE-1"),
    (lambda lines: lines[:2] + ["7.9 5 6 0.1 0.2 0.3"] + lines[3:], "NX NY NZ must be integers"),
    (lambda lines: lines[:4] + ["0 1 2 3 4 5 6 7 8 x"] + lines[5:], "expected numbers: global node numbers"),
    (lambda lines: lines[:4] + ["999999"] + lines[5:], "expected 10 value"),
    (lambda lines: lines[:-1], "the file ends; expected export_index"),
])
def test_read_local_refuses_bad_files(tmp_path, edit, message):
    loc = local_data(MESH, part.block_partition(MESH, 2, 1, 1), 0)
    path = tmp_path / "part.0"
    write_local(path, MESH, loc)
    path.write_text("\n".join(edit(path.read_text().splitlines())) + "\n")
    with pytest.raises(ValueError, match=message) as info:
        read_local(path)
    assert str(info.value).startswith(f"{path}:")


@pytest.mark.parametrize("change, message", [
    (lambda loc: {"import_index": loc.import_index[::-1].copy()}, "import_index must list"),
    (lambda loc: {"neighbours": loc.neighbours * 0}, "ascending and not include RANK"),
])
def test_read_local_refuses_inconsistent_tables(tmp_path, change, message):
    import dataclasses

    loc = local_data(MESH, part.block_partition(MESH, 2, 1, 1), 0)
    write_local(tmp_path / "part.0", MESH, dataclasses.replace(loc, **change(loc)))
    with pytest.raises(ValueError, match=message):
        read_local(tmp_path / "part.0")


def test_read_local_missing_file(tmp_path):
    with pytest.raises(FileNotFoundError, match="cannot read local data"):
        read_local(tmp_path / "nothing.0")


# --- parallel assembly ---------------------------------------------------------------------------

@pytest.mark.parametrize("lang", lang_params(("numpy", "numba", "c", "fortran")))
def test_parallel_assembly_gives_the_serial_rows(partitioned, lang):
    owner, locals_ = partitioned
    a, rhs = assembly.fem3d_assemble(MESH, 1.5, 2.0, lang)
    serial = a.to_scipy()
    for loc in locals_:
        b, local_rhs = assemble_local(MESH, loc, 1.5, 2.0, lang)
        rows = internal_rows(b, loc)
        n = loc.n_internal
        mine = scipy_rows(rows, loc, MESH.n_node)
        expected = serial[loc.global_ids[:n]]
        assert (mine != expected).nnz == 0, f"rank {loc.rank}: rows differ"
        if lang == "numpy":
            # NumPy's einsum hands the load vectors of a chunk of elements to BLAS, whose kernel
            # (OPENBLAS_CORETYPE) may round a chunk of another size differently in the last bit
            np.testing.assert_allclose(local_rhs[:n], rhs[loc.global_ids[:n]], rtol=4e-16, atol=0)
        else:
            assert np.array_equal(local_rhs[:n], rhs[loc.global_ids[:n]])


def scipy_rows(rows, loc, n_node):
    import scipy.sparse

    cols = loc.global_ids[rows.col_idx]
    return scipy.sparse.csr_matrix((rows.val, cols, rows.row_ptr), shape=(rows.n_rows, n_node))


def test_model_system_matches_the_serial_boundary_conditions(partitioned):
    owner, locals_ = partitioned
    model = dict(cond=1.0, qvol=1.0, qflux=0.5, fixed_face="ymax")
    a, rhs = assembly.fem3d_assemble(MESH, 1.0, 1.0, "numpy")
    assembly.fem3d_face_flux(MESH, "ymin", 0.5, rhs, "numpy")
    mask = np.zeros(MESH.n_node, dtype=bool)
    mask[MESH.face_nodes("ymax")] = True
    assembly.dirichlet(a, rhs, mask, 0.0, "numpy")
    serial = a.to_scipy()
    for loc in locals_:
        rows, b, _ = model_system(MESH, loc, lang="numpy", **model)
        ids = loc.global_ids[:loc.n_internal]
        assert abs(scipy_rows(rows, loc, MESH.n_node) - serial[ids]).max() <= 1e-15
        np.testing.assert_allclose(b, rhs[ids], rtol=1e-14, atol=1e-15)


# --- under mpiexec -------------------------------------------------------------------------------

needs_mpi = pytest.mark.skipif(shutil.which("mpiexec") is None, reason="no mpiexec")


def mpiexec(n, *args, timeout=MPI_TIMEOUT):
    return run(["mpiexec", "-n", n, *args], timeout=timeout, cwd=ROOT)


@needs_mpi
@pytest.mark.compiled
@pytest.mark.timeout(600)
@pytest.mark.parametrize("ranks, mesh, method, dims", [
    (1, (4, 3, 5), "blocks", ()),
    (2, (7, 5, 6), "blocks", (2, 1, 1)),
    (3, (7, 5, 6), "blocks", (1, 3, 1)),
    (4, (7, 5, 6), "blocks", (2, 1, 2)),
    (2, (6, 6, 6), "metis", ()),
    (3, (7, 5, 6), "metis", ()),
    (4, (7, 5, 6), "metis", ()),
], ids=lambda v: "x".join(map(str, v)) if isinstance(v, tuple) else str(v))
def test_exchanges_and_solve_under_mpiexec(ranks, mesh, method, dims):
    result = mpiexec(ranks, PYTHON, "-m", "mpi4py", ROOT / "tests" / "mpi" / "check_halo.py",
                     *mesh, method, *dims)
    assert result.returncode == 0, result.stdout + result.stderr
    lines = result.stdout.splitlines()
    assert [line for line in lines if line.startswith("exchange")] == \
        ["exchange p2p ok", "exchange persistent ok", "exchange neighbor ok",
         "exchange allgather ok"], lines
    assert "message sizes ok" in lines
    assert [line.split(":")[0] for line in lines if line.startswith("deep halo")] == \
        ["deep halo 1 ok", "deep halo 2 ok", "deep halo 3 ok"], lines
    assert sum(line.startswith("solve ") and " ok: " in line for line in lines) == 2, lines
