"""Benchmarks, not tests: `python -m course bench SUITE`, one module per suite, each measuring
ratios in one run (C against Fortran against Numba against SciPy; achieved bandwidth against the
memory-bandwidth bound that STREAM measures, timing.fraction_of_bound) with best-of-N timings from
course.timing:

    fem          fem1d and fem3d: assembly, CG and SpMV per language (01_fem1d, 02_fem3d)
    openmp       the OpenMP PCG ladder and the storage formats over a thread sweep (03_openmp)
    iccg         ICCG for every ordering and color count (04_iccg)
    distributed  halo and pipecg: the exchange, reductions and CG variants on 1..P ranks
                 (05_halo, 06_pipecg), each rank count one `mpiexec ... -m course.bench.rank`
    rank         what those ranks measure, run under mpiexec
    fft          alltoall: MPI_Alltoall and the pencil FFT on 1..P ranks (07_cluster)
    hybrid       the same cores as ranks x threads, with every parallel preconditioner
                 (08_hybrid), each layout one `mpiexec ... -m course solve --parallel`
    petsc        the course's distributed CG against PETSc's on the same matrix (09_petsc), each
                 run one `mpiexec ... -m course solve --parallel --engine course|petsc`

A suite builds on the problems, solvers and distributed track beneath it; nothing beneath imports
a suite.
"""

from __future__ import annotations

import json
from pathlib import Path

from .. import timing
from . import distributed, fem, fft, hybrid, iccg, openmp, petsc

SUITES = {"fem1d": (fem.bench_fem1d, fem.plot_fem1d), "fem3d": (fem.bench_fem3d, fem.plot_fem3d),
          "openmp": (openmp.bench_openmp, openmp.plot_openmp),
          "iccg": (iccg.bench_iccg, iccg.plot_iccg),
          "halo": (distributed.bench_halo, distributed.plot_halo),
          "pipecg": (distributed.bench_pipecg, distributed.plot_pipecg),
          "alltoall": (fft.bench_alltoall, fft.plot_alltoall),
          "hybrid": (hybrid.bench_hybrid, hybrid.plot_hybrid),
          "petsc": (petsc.bench_petsc, petsc.plot_petsc)}


def use_stream_reference(results: dict, repeat: int = 10) -> dict:
    """Compare the SpMV of a bench_fem3d or bench_openmp `results` with timing.stream_reference() of
    the same thread counts instead of the STREAM measured inside that run (kept as stream_in_run):
    every page of a build then sets its measurements against the same bound. The fractions are
    timing.fraction_of_bound of each run's reads and writes. Returns results."""
    if results["suite"] == "fem3d":
        results["stream_in_run"] = results["stream"]
        results["stream"] = timing.stream_reference(results["stream"]["threads"], repeat=repeat)
        for run in results["runs"]:
            run["spmv_fraction_of_stream"] = timing.fraction_of_bound(
                run["read_bytes"], run["written_bytes"], run["spmv_seconds"], results["stream"])
    elif results["suite"] == "openmp":
        results["stream_in_run"] = results["stream"]
        results["stream"] = [timing.stream_reference(s["threads"], repeat=repeat)
                             for s in results["stream_in_run"]]
        reference = {s["threads"]: s for s in results["stream"]}
        for run in results["spmv"]:
            run["fraction_of_stream"] = timing.fraction_of_bound(
                run["read_bytes"], run["written_bytes"], run["spmv_seconds"],
                reference[run["threads"]])
    else:
        raise ValueError(f"no STREAM to replace in a {results['suite']!r} result")
    return results


def run_suite(name: str, json_path: str | None, plot_path: str | None, **kwargs) -> dict:
    bench, plot = SUITES[name]
    results = bench(**kwargs)
    # every result says where it was measured: versions, cores, and inside a batch job the
    # scheduler, job id, node, binding and modules (toolchain.job_context)
    results.setdefault("machine", timing.machine())
    if json_path:
        Path(json_path).write_text(json.dumps(results, indent=2))
    if plot_path:
        plot(results, plot_path)
    return results


def summary_table(results: dict) -> str:
    """The table `python -m course bench SUITE` prints, from the suite's own summary."""
    summaries = {"fem1d": fem.summary_fem1d, "fem3d": fem.summary_fem3d,
                 "openmp": openmp.summary_openmp, "iccg": iccg.summary_iccg,
                 "halo": distributed.summary_halo, "pipecg": distributed.summary_pipecg,
                 "alltoall": fft.summary_alltoall, "hybrid": hybrid.summary_hybrid,
                 "petsc": petsc.summary_petsc}
    return summaries[results["suite"]](results)
