"""The 3D heat-conduction problem of 02_fem3d on P MPI ranks (lectures 05_halo, 08_hybrid).

Every rank builds its own part of the box (course.parallel.subdomain), assembles the overlapping
elements of its local data with the serial kernels of course.fem, keeps the rows of its internal
nodes (complete there, equal to the serial rows) and solves with the distributed CG of
course.parallel.solve.
"""

from __future__ import annotations

import time

import numpy as np
from mpi4py import MPI

from .. import native, resources
from ..fem import assembly
from ..langs import check_lang
from ..fem.mesh import OPPOSITE_FACE, BoxMesh, box_mesh, check_face
from ..sparse import CRS
from .halo import Halo
from .local import LocalData
from .precond import check_precond
from .solve import (LocalMatrix, agree, check_solve_options, gather_vector, partition_figures,
                    solve_distributed)
from .subdomain import BlockRule, check_part, fem_local_data, partition_rule, to_local


def local_pattern(local: LocalData) -> tuple[np.ndarray, np.ndarray]:
    """(row_ptr, col_idx) over all n_local local nodes: row a lists, ascending, the local nodes that
    share a local element with a. Internal rows are complete; external rows are partial (their
    other elements live on other ranks) and only serve to let the serial assembly kernel add
    every corner of an element."""
    e = local.elements.astype(np.int64)
    keys = np.unique(np.repeat(e, 8, axis=1).ravel() * local.n_local + np.tile(e, (1, 8)).ravel())
    rows = keys // local.n_local
    row_ptr = np.concatenate([[0], np.cumsum(np.bincount(rows, minlength=local.n_local))])
    return row_ptr.astype(np.int32), (keys % local.n_local).astype(np.int32)


def local_source(mesh: BoxMesh, local: LocalData, xyz: np.ndarray, q_node) -> np.ndarray:
    """The source at the local nodes: q_node a number, a function of the coordinates, or the
    nodal values of the whole mesh."""
    if callable(q_node):
        return np.ascontiguousarray(q_node(xyz), dtype=float)
    if np.ndim(q_node) == 0:
        return np.full(local.n_local, native.check_real(q_node, "q_node"))
    return np.ascontiguousarray(assembly.nodal_source(mesh, q_node)[local.global_ids])


def assemble_local(mesh: BoxMesh, local: LocalData, cond: float, q_node, lang: str = "numpy"):
    """(square CRS over the n_local nodes, rhs over the n_local nodes) of the local elements with
    the serial assembly of `lang`: internal rows complete, external rows partial. Only the rank's
    nodes and elements are used (no array of the whole mesh)."""
    check_lang(lang)
    xyz = np.ascontiguousarray(mesh.coordinates(local.global_ids))
    q = local_source(mesh, local, xyz, q_node)
    row_ptr, col_idx = local_pattern(local)
    if lang == "numpy":
        val, rhs = assembly.fem3d_assemble_numpy(local.elements, xyz, cond, q, row_ptr, col_idx)
    elif lang == "numba":
        val, rhs, bad = assembly.fem3d_assemble_numba(local.elements, xyz, cond, q, row_ptr,
                                                      col_idx)
        if bad >= 0:
            raise ValueError(f"element {local.element_ids[bad]} is inverted or degenerate")
    else:
        val, rhs = native.fem3d_assemble(lang, local.elements, xyz, cond, q, row_ptr, col_idx)
    return CRS(row_ptr, col_idx, val), rhs


def internal_rows(a: CRS, local: LocalData) -> LocalMatrix:
    end = a.row_ptr[local.n_internal]
    return LocalMatrix(a.row_ptr[:local.n_internal + 1].copy(), a.col_idx[:end].copy(),
                       a.val[:end].copy(), local.n_local)


def local_face_quads(mesh: BoxMesh, local: LocalData, face: str) -> np.ndarray:
    """The quadrilaterals of `face` with at least one internal node, in local numbers (all their
    corners are local: they are faces of local elements)."""
    quads = to_local(local, mesh.face_quads_of(face, local.element_ids))
    mine = np.any(quads < local.n_internal, axis=1)
    return np.ascontiguousarray(quads[mine], dtype=np.int32)


def model_system(mesh: BoxMesh, local: LocalData, cond=1.0, qvol=1.0, qflux=0.0,
                 fixed_face="zmax", lang="numpy", source="constant"):
    """The local system of the model problem of 02_fem3d (problems.fem3d without --manufactured):
    T = exact on fixed_face, heat flux qflux through the opposite face, source qvol (or, with
    source="nakajima", qvol |x_c + y_c| on each element, whose T is not known: T = 0 there).
    Returns (LocalMatrix, rhs of the internal nodes, exact temperature at the internal nodes)."""
    check_face(fixed_face)
    assembly.check_source(source)
    exact, _ = assembly.fem3d_model_exact(mesh, fixed_face, cond, qvol, qflux)
    xyz = np.ascontiguousarray(mesh.coordinates(local.global_ids))
    a, rhs = assemble_local(mesh, local, cond, qvol if source == "constant" else 0.0, lang)
    if source == "nakajima":                           # the local elements' share, all of it
        rhs += assembly.element_source_load(
            local.elements, xyz, assembly.nakajima_source(local.elements, xyz, qvol), lang)
    if qflux != 0.0:
        quads = local_face_quads(mesh, local, OPPOSITE_FACE[fixed_face])
        if quads.shape[0]:
            if lang in native.COMPILED_LANGS:
                native.fem3d_face_flux(lang, quads, xyz, qflux, rhs)
            else:
                assembly.fem3d_face_flux_numpy(quads, xyz, qflux, rhs)
    return _fixed(mesh, local, a, rhs, mesh.on_face(local.global_ids, fixed_face), exact(xyz),
                  lang)


def manufactured_system(mesh: BoxMesh, local: LocalData, cond=1.0, lang="numpy"):
    """The local system of the manufactured problem of problems.fem3d (T = sin sin sin, zero on
    every face): (LocalMatrix, rhs and exact T of the internal nodes)."""
    exact, _, source = assembly.manufactured(cond, mesh.lengths)
    a, rhs = assemble_local(mesh, local, cond, source, lang)
    xyz = mesh.coordinates(local.global_ids)
    return _fixed(mesh, local, a, rhs, mesh.on_face(local.global_ids), exact(xyz), lang)


def _fixed(mesh, local, a, rhs, fixed, t_exact, lang):
    assembly.dirichlet(a, rhs, fixed, np.where(fixed, t_exact, 0.0), lang)
    n = local.n_internal
    return internal_rows(a, local), rhs[:n].copy(), t_exact[:n]


def local_errors(comm, mesh: BoxMesh, local: LocalData, halo: Halo, x: np.ndarray, exact,
                 grad_exact) -> tuple[float, float]:
    """(||T_h - T||_L2, |T_h - T|_H1) over the whole mesh: each rank sums the elements whose
    corner 0 it owns (every element once), with the external values of x from the halo."""
    t = np.zeros(local.n_local)
    t[:local.n_internal] = x
    halo.update(t)
    mine = local.elements[:, 0] < local.n_internal
    sums = np.array(assembly.fem3d_error_sums(local.elements[mine],
                                              mesh.coordinates(local.global_ids), t, exact,
                                              grad_exact))
    comm.Allreduce(MPI.IN_PLACE, [sums, MPI.DOUBLE], op=MPI.SUM)
    return float(np.sqrt(sums[0])), float(np.sqrt(sums[1]))


def own_part(comm, box: BoxMesh, partition: str, dims, bytes_per_node: float):
    """(this rank's LocalData, the partition rule): every rank evaluates the rule for its own nodes
    (course.parallel.subdomain; METIS once, on rank 0, on a bounded coarse lattice) and checks
    that its part fits in memory."""
    rule = agree(comm, lambda: partition_rule(comm, box, partition, dims))

    def build():
        nodes = check_part(rule, comm.Get_rank(), 27)
        resources.check_memory(bytes_per_node * nodes,
                               f"rank {comm.Get_rank()}'s part ({nodes} nodes)")
        return fem_local_data(box, rule, comm.Get_rank(), comm.Get_size())

    return agree(comm, build), rule


def fem3d_parallel(nx=8, ny=8, nz=8, partition="blocks", dims=None, exchange="p2p",
                   lang="numpy", dx=None, dy=None, dz=None, cond=1.0, qvol=1.0, qflux=0.0,
                   fixed_face="zmax", tol=1e-8, comm=MPI.COMM_WORLD,
                   keep_solution=False, algorithm="pcg", iallreduce=False,
                   replace_every=0, precond="diagonal", sweeps=None, ordering_name="natural",
                   colors=None, threads=None, manufactured=False, source="constant",
                   engine="course") -> dict:
    """Solve the model problem of problems.fem3d (or, with manufactured, its manufactured problem)
    on the ranks of `comm`, each rank building its own part (course.parallel.subdomain: no rank
    holds the whole mesh); returns the same summary on every rank (the common fields of `course
    solve` plus the partition and halo figures, the peak memory of every rank; with
    keep_solution, "T" the global solution on rank 0 and "mesh"). precond, sweeps, ordering_name,
    colors: the preconditioner (course.parallel.precond); threads: per rank (None: 1); source:
    the heat source of problems.fem3d (constant, or nakajima: no exact T, t_max reported);
    engine: the course's distributed CG, or "petsc" for PETSc's twin (solve_distributed)."""
    from ..problems import FEM3D_BYTES_PER_NODE

    t0 = time.perf_counter()

    def setup():
        tol_ = check_solve_options(lang, exchange, algorithm, tol)
        if engine != "petsc":             # (petsc.options checks PETSc's choices)
            check_precond(precond, sweeps, ordering_name, colors)
        check_face(fixed_face)
        assembly.check_source(source)
        if manufactured and source != "constant":
            raise ValueError("the manufactured problem has its own source")
        return box_mesh(nx, ny, nz, dx, dy, dz, distributed=True), tol_

    box, tol = agree(comm, setup)
    local, rule = own_part(comm, box, partition, dims, FEM3D_BYTES_PER_NODE)
    if manufactured:
        exact, grad_exact, _ = assembly.manufactured(cond, box.lengths)
        system = agree(comm, lambda: manufactured_system(box, local, cond, lang))
    else:
        system = agree(comm, lambda: model_system(box, local, cond, qvol, qflux, fixed_face,
                                                  lang, source))
    matrix, b, t_exact = system
    result, out = solve_distributed(comm, local, matrix, b, lang, exchange, tol, algorithm,
                                    iallreduce, replace_every, t0, precond, sweeps, ordering_name,
                                    colors, threads, engine)
    largest = np.array([np.max(np.abs(result.x - t_exact), initial=0.0),
                        np.max(result.x, initial=-np.inf)])
    comm.Allreduce(MPI.IN_PLACE, [largest, MPI.DOUBLE], op=MPI.MAX)
    known = source == "constant"                       # an exact solution to compare with
    out = {"problem": "fem3d", "unknowns": box.n_node, **out,
           "error_max": float(largest[0]) if known else None, "t_max": float(largest[1]),
           "source": source,
           "partition": partition,
           "blocks": list(rule.dims) if isinstance(rule, BlockRule) else None,
           **partition_figures(comm, local, matrix), "manufactured": bool(manufactured),
           "nx": box.nx, "ny": box.ny, "nz": box.nz, "dx": box.dx, "dy": box.dy, "dz": box.dz,
           "cond": cond, "tol": tol}
    if manufactured:
        halo = Halo(local, comm, exchange)
        out["error_l2"], out["error_h1"] = local_errors(comm, box, local, halo, result.x, exact,
                                                        grad_exact)
        halo.free()
    else:
        out.update({"qvol": qvol, "qflux": qflux, "fixed_face": fixed_face})
    if keep_solution:
        out["mesh"], out["T"] = box, gather_vector(comm, local, result.x, box.n_node)
    return out
