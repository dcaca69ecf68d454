"""The shared toolkit of the course: meshes, finite elements, sparse matrices, solvers, compiled
kernels (C and Fortran through ctypes), benchmarks, and helpers for notebooks and exercises."""

__version__ = "0.1.0"
