"""The distributed track (lectures 05_halo, 06_pipecg, 07_cluster, 08_hybrid): partitions,
GeoFEM-style local data, halo exchange and the distributed problems, one module per concern:

    partition    node -> rank maps: blocks of the structured mesh, METIS k-way; their quality
    local        per-rank local data (internal then external nodes, import/export tables); files
    subdomain    each rank builds its own part from the partition rule (no whole mesh anywhere)
    halo         the halo exchange over MPI, four ways (p2p, persistent, neighbour collective,
                 the naive Allgather) and the exchange of message sizes (all-to-all vs neighbours)
    solve        the distributed CG of any problem: SpMV with its halo exchange, global sums, the
                 preconditioner, the threads of a rank, a set-up that fails on every rank together
    fem3d        the 3D heat-conduction problem of 02_fem3d assembled and solved on P ranks
    poisson      the finite-volume Poisson problem of 03_openmp on P ranks
    explicit     explicit heat steps: a halo exchange per step, nothing global
    reductions   the global sums of the distributed CG, blocking or with MPI_Iallreduce
    precond      the parallel preconditioners: Jacobi, IC(0) localized per rank, additive
                 Schwarz sweeps around it (08_hybrid)
    model        the performance model of 06_pipecg (reductions against the SpMV and the halo)
    fft, fft_rank  the pencil-decomposed 3-D FFT of 07_cluster, and its MPI entry point
    mpi_job      an mpiexec job in a subprocess that cannot hang its caller (deadlocks stopped)

`partition` and `local` need no MPI (a learner can draw every rank's data in one process); `halo`
and `fem3d` import mpi4py; `mpi_job` does not (a notebook's kernel never initialises MPI). The
checks of the exercises 05 and 06 live in course.grading, their benchmarks in course.bench.
"""

import mpi4py

# Only the thread that initialises MPI calls it, between the threaded loops (MPI_THREAD_FUNNELED,
# as the C and Fortran programs ask): set before any module of the package imports mpi4py.MPI.
mpi4py.rc.thread_level = "funneled"
