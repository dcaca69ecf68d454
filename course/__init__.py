"""The shared toolkit of the course: meshes, finite elements, sparse matrices, solvers, compiled
kernels (C and Fortran through ctypes), benchmarks, and helpers for notebooks and exercises.

One folder per concern (the README's Layout), top to bottom:

    classroom/   the learner copy and the JupyterHub classroom (on grading)
    grading/     how the exercises are checked (above what they check)
    bench/       the benchmark suites, one module per suite (beside grading: neither imports the
                 other)
    parallel/    partitions, each rank's own part, local data, halo exchange, reductions, the
                 parallel preconditioners, the distributed problems, FFT
    cluster/     job scripts for Slurm and PJM, the systems and their queues, a local Slurm
    problems     complete problems end to end, as `python -m course solve` runs them
    timing       best-of-N, STREAM once per build, the SpMV timing, the machine of a result
    fem/         the discretisation: meshes, elements, assembly, finite volumes, VTK
    solvers/     Krylov variants, Jacobi, the OpenMP ladder, IC(0), orderings, the Numba team

and the frame they stand on: the command line on top (cli); below everything the threads and
memory a run may take (resources), the storage formats (sparse), the book's display (show), the
compiled kernels' bindings (native), the machine (toolchain) and per-user caches (cache).
tests/test_layers.py keeps every import pointing down this list, with no circles.
"""

__version__ = "0.1.0"
