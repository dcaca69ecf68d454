"""The shared toolkit of the course: meshes, finite elements, sparse matrices, solvers, compiled
kernels (C and Fortran through ctypes), benchmarks, and helpers for notebooks and exercises.

One folder per concern (the README's Layout):

    solvers/     Krylov variants, Jacobi, the OpenMP ladder, IC(0), the Numba team
    parallel/    partitions, local data, halo exchange, reductions, the distributed problems, FFT
    cluster/     job scripts for Slurm and PJM, the systems and their queues, a local Slurm
    grading/     how the exercises are checked (above the solvers and the distributed track)
    classroom/   the learner copy and the JupyterHub classroom (above grading)

and the frame they stand on: the command line (cli), the machine (toolchain), the compiled
kernels' bindings (native), per-user caches (cache). tests/test_layers.py keeps the arrows
between the folders pointing the way this list says.
"""

__version__ = "0.1.0"
