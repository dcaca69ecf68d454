import os
import sys

# The course's threads are its kernels' (OpenMP for C and Fortran, Numba's). NumPy's OpenBLAS
# would start a pool of its own, as large as OMP_NUM_THREADS, whose threads spin between its calls
# on the cores of the OpenMP team: one rank of `solve --parallel --threads 2 --lang c` took 44
# times as long per iteration. Set before anything imports NumPy; a value set by the user stays.
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

from .cli import main  # noqa: E402

sys.exit(main())
