"""Run under `mpiexec -n P python -m mpi4py tests/mpi/check_halo.py NX NY NZ PARTITION [PX PY PZ]`
(tests/test_halo.py): checks, on every rank, each halo exchange style, the two ways of learning the
message sizes, and the distributed solve against the serial one; an assertion on any rank aborts
the whole job (python -m mpi4py), so a failure can never leave the other ranks waiting.
Prints one line per check from rank 0."""

import os
import sys

os.environ.setdefault("OMP_NUM_THREADS", "1")     # flat MPI: one thread per rank

import numpy as np  # noqa: E402
from mpi4py import MPI  # noqa: E402

from course import problems  # noqa: E402
from course.fem.mesh import box_mesh  # noqa: E402
from course.parallel.explicit import heat_steps  # noqa: E402
from course.parallel.fem3d import fem3d_parallel  # noqa: E402
from course.parallel.halo import STYLES, Halo, message_sizes  # noqa: E402
from course.parallel.local import local_data  # noqa: E402
from course.parallel.partition import make_partition  # noqa: E402

comm = MPI.COMM_WORLD
rank, size = comm.Get_rank(), comm.Get_size()
nx, ny, nz = (int(v) for v in sys.argv[1:4])
method = sys.argv[4]
dims = tuple(int(v) for v in sys.argv[5:8]) if len(sys.argv) > 5 else None


def say(line):
    if rank == 0:
        sys.stdout.write(line + "\n")
        sys.stdout.flush()


mesh = box_mesh(nx, ny, nz)
owner = comm.bcast(make_partition(mesh, method, size, dims) if rank == 0 else None)
local = local_data(mesh, owner, rank)
n = local.n_internal

# every exchange style fills the external entries with exactly the owners' values
expected = np.sin(local.global_ids * 0.37) + local.global_ids     # a value only the owner has
for style in STYLES:
    halo = Halo(local, comm, style)
    for _ in range(3):                                             # repeated: persistent requests
        x = np.full(local.n_local, np.nan)
        x[:n] = expected[:n]
        halo.update(x)
        assert np.array_equal(x, expected), (style, rank)
    assert halo.exchanges == 3
    halo.free()
    say(f"exchange {style} ok")

# the message sizes: the P x P table and the neighbour lists agree
by_table, table_bytes = message_sizes(local, comm, "table")
by_neighbours, none = message_sizes(local, comm, "neighbours")
assert np.array_equal(by_table, by_neighbours), rank
assert table_bytes == 8 * size * size and none == 0
say("message sizes ok")

# the distributed solve equals the serial one
for lang in ("numpy", "c"):
    par = fem3d_parallel(nx, ny, nz, partition=method, dims=dims, lang=lang, qflux=0.5,
                         fixed_face="xmin", tol=1e-10, keep_solution=True)
    if rank == 0:
        ser = problems.fem3d(nx, ny, nz, lang=lang, qflux=0.5, fixed_face="xmin", tol=1e-10,
                             keep_solution=True, warm_up=False)
        diff = np.max(np.abs(par["T"] - ser["T"])) / np.max(np.abs(ser["T"]))
        assert diff <= 1e-10, (lang, diff)
        assert abs(par["iterations"] - ser["iterations"]) <= 1, (par["iterations"],
                                                                 ser["iterations"])
        assert par["converged"] and par["unknowns"] == ser["unknowns"]
        assert par["nnz"] == ser["nnz"], (par["nnz"], ser["nnz"])
        say(f"solve {lang} ok: {par['iterations']} iterations (serial {ser['iterations']}), "
            f"difference {diff:.1e}")

# deep halos: a halo h wide exchanged every h steps gives the same temperatures as one process
steps = 7
serial = heat_steps(mesh, np.zeros(mesh.n_node, dtype=np.int32), 1, steps, comm=MPI.COMM_SELF)
for depth in (1, 2, 3):
    run = heat_steps(mesh, owner, depth, steps, dt=serial["dt"], qvol=1.0)
    diff = np.max(np.abs(run["T"] - serial["T"][run["global_ids"]]))
    assert diff <= 1e-13 * np.max(np.abs(serial["T"])), (depth, diff)
    assert run["exchanges"] == -(-steps // depth), (depth, run["exchanges"])
    assert (run["rows_redundant"] == 0) == (depth == 1 or size == 1), (depth, run)
    say(f"deep halo {depth} ok: {run['exchanges']} exchanges")
