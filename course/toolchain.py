"""What the course runs on: Python, compilers, OpenMP, MPI, cores and NUMA nodes (`course doctor`)."""

from __future__ import annotations

import os
import platform
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

_OPENMP_TESTS = {
    "c": ("cc", "t.c", "#include <omp.h>\n#include <stdio.h>\n"
          "int main(void){int n=0;\n#pragma omp parallel reduction(+:n)\nn+=1;\n"
          "printf(\"%d\\n\", n); return 0;}\n"),
    "fortran": ("gfortran", "t.f90", "program t\nuse omp_lib\nimplicit none\ninteger :: n\nn = 0\n"
                "!$omp parallel reduction(+:n)\nn = n + 1\n!$omp end parallel\nprint *, n\n"
                "end program t\n"),
}

APT_HINT = ("on Debian/Ubuntu: apt-get install gcc gfortran cmake make libopenmpi-dev openmpi-bin; "
            "with conda: conda env create -f environment.yml")


def _first_line(cmd: list[str]) -> str | None:
    if shutil.which(cmd[0]) is None:
        return None
    try:
        out = subprocess.run(cmd, capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired):
        return None
    text = (out.stdout or out.stderr).strip()
    return text.splitlines()[0] if text else None


def openmp_threads(lang: str) -> int | None:
    """Compile and run a tiny OpenMP program with 2 threads; the thread count it saw, or None."""
    compiler, name, source = _OPENMP_TESTS[lang]
    if shutil.which(compiler) is None:
        return None
    with tempfile.TemporaryDirectory() as tmp:
        src = Path(tmp) / name
        src.write_text(source)
        exe = Path(tmp) / "t"
        build = subprocess.run([compiler, "-fopenmp", str(src), "-o", str(exe)],
                               capture_output=True, text=True)
        if build.returncode != 0:
            return None
        run = subprocess.run([str(exe)], capture_output=True, text=True,
                             env={**os.environ, "OMP_NUM_THREADS": "2"}, timeout=30)
        try:
            return int(run.stdout.split()[0])
        except (IndexError, ValueError):
            return None


def mpi_family(text: str | None) -> str | None:
    """'Open MPI', 'MPICH', 'Intel MPI' or None, from a version banner."""
    if not text:
        return None
    for family, pattern in (("Open MPI", r"open ?(mpi|rte)|open-rte|orterun|prte"),
                            ("Intel MPI", r"intel"), ("MPICH", r"mpich|hydra")):
        if re.search(pattern, text, re.IGNORECASE):
            return family
    return None


def mpi4py_library() -> tuple[str | None, str | None]:
    """(mpi4py version, the MPI library version string it was built against), in a subprocess so
    that a broken MPI cannot take this process down."""
    code = ("import mpi4py; from mpi4py import MPI; "
            "print(mpi4py.__version__); "
            "print(MPI.Get_library_version().replace(chr(0), '').strip().splitlines()[0])")
    lines = _python_lines(code)
    return (lines[0], lines[1]) if lines and len(lines) == 2 else (None, None)


def _python_lines(code: str) -> list[str] | None:
    """The lines `python -c code` prints, in a subprocess with the MPI environment (a broken MPI
    or PETSc cannot take this process down); None if it fails or takes over a minute."""
    try:
        out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                             timeout=60, env={**os.environ, **mpi_env()})
    except subprocess.TimeoutExpired:
        return None
    return out.stdout.strip().splitlines() if out.returncode == 0 else None


def petsc_versions() -> tuple[str | None, str | None, str | None]:
    """(PETSc, petsc4py, hypre) as petsc4py finds them (lecture 09_petsc), in a subprocess like
    mpi4py_library; None where petsc4py does not import. hypre: the version its HYPRE_config.h
    states (beside PETSc's headers, conda's, or Debian's), "in PETSc" when PETSc has hypre and the
    header is not found, "not in PETSc" when PETSc was built without it."""
    code = ("import petsc4py; petsc4py.init([]); from petsc4py import PETSc; "
            "print('.'.join(map(str, PETSc.Sys.getVersion()))); print(petsc4py.__version__); "
            "print(int(PETSc.Sys.hasExternalPackage('hypre'))); "
            "c = petsc4py.get_config(); print(c['PETSC_DIR']); print(c.get('PETSC_ARCH') or '')")
    lines = _python_lines(code)
    if not lines or len(lines) < 4:
        return None, None, None
    petsc, petsc4py, has_hypre, petsc_dir = lines[:4]
    arch = lines[4] if len(lines) > 4 else ""
    if has_hypre != "1":
        return petsc, petsc4py, "not in PETSc"
    places = [Path(petsc_dir) / "include", Path(petsc_dir) / arch / "include",
              Path(os.environ.get("CONDA_PREFIX") or "/nonexistent") / "include",
              Path("/usr/include/hypre")]
    for header in (place / "HYPRE_config.h" for place in places):
        if header.is_file():
            found = re.search(r'HYPRE_RELEASE_VERSION\s+"([^"]+)"', header.read_text(errors="replace"))
            if found:
                return petsc, petsc4py, found.group(1)
    return petsc, petsc4py, "in PETSc"


def mpi_env() -> dict[str, str]:
    """Environment that lets Open MPI run as root and oversubscribe a small machine."""
    env = {"OMPI_MCA_rmaps_base_oversubscribe": "1", "PRTE_MCA_rmaps_default_mapping_policy":
           ":oversubscribe", "OMPI_MCA_btl_vader_single_copy_mechanism": "none",
           # a rank waiting for a message gives its core to the others (oversubscribed runs)
           "OMPI_MCA_mpi_yield_when_idle": "1",
           # distributed-graph communicators: Open MPI 4.1's treematch component can hang
           "OMPI_MCA_topo": "^treematch"}
    # (not odls_base_sigkill_timeout=0: killing the other ranks at once when one fails saves a
    # second, but loses what they had printed and not yet forwarded, e.g. rank 0's error line)
    if hasattr(os, "geteuid") and os.geteuid() == 0:
        env.update(OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1")
    return env


def _version(text: str | None) -> str | None:
    match = re.search(r"\d+\.\d+(\.\d+)?", text or "")
    return match.group(0) if match else None


def usable_cores() -> int:
    """The CPUs this process may run on: its affinity mask (what taskset, numactl, a cgroup cpuset
    or a batch job grants; what OpenMP starts its threads on), not every CPU of the machine that
    os.cpu_count() counts. Hardware threads (SMT) count as CPUs, as they do for OpenMP.

    Inside a Slurm job, SLURM_CPUS_PER_TASK (set when the job asks for --cpus-per-task) caps it: a
    cluster without Slurm's task/affinity plugin or cgroup cpusets leaves the mask at the whole
    node while the job was granted only those CPUs, and more threads would run on CPUs other jobs
    own. PJM (Fujitsu's scheduler, Odyssey) exports no per-process CPU count that Fujitsu
    documents publicly; its jobs there get whole nodes, whose mask is right."""
    try:
        cores = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):          # not Linux
        cores = os.cpu_count() or 1
    granted = os.environ.get("SLURM_CPUS_PER_TASK", "").strip()
    if granted.isdigit() and int(granted) > 0:
        cores = min(cores, int(granted))
    return cores


_BINDING = ("OMP_NUM_THREADS", "OMP_PLACES", "OMP_PROC_BIND", "SLURM_CPU_BIND",
            "SLURM_CPUS_PER_TASK")


def job_context() -> dict:
    """Where this process runs, for the record of a measurement: `scheduler` ("slurm" when
    SLURM_JOB_ID is set, "pjm" when PJM_JOBID is, else None), `node` (SLURMD_NODENAME, else the
    host name), and those present of `job_id`, `binding` (OMP_NUM_THREADS, OMP_PLACES,
    OMP_PROC_BIND, SLURM_CPU_BIND, SLURM_CPUS_PER_TASK as set) and `modules` (the environment
    modules loaded: LOADEDMODULES, split on ':')."""
    env = os.environ
    job_id = env.get("SLURM_JOB_ID") or env.get("PJM_JOBID") or None
    scheduler = "slurm" if env.get("SLURM_JOB_ID") else "pjm" if env.get("PJM_JOBID") else None
    context = {"scheduler": scheduler, "node": env.get("SLURMD_NODENAME") or platform.node()}
    if job_id:
        context["job_id"] = job_id
    binding = {name: env[name] for name in _BINDING if env.get(name)}
    if binding:
        context["binding"] = binding
    modules = [m for m in env.get("LOADEDMODULES", "").split(":") if m]
    if modules:
        context["modules"] = modules
    return context


def job_summary(context: dict) -> str | None:
    """One line for `doctor` and the book's table, or None outside a batch job."""
    if not context.get("scheduler"):
        return None
    parts = [f"{context['scheduler']} job {context.get('job_id', '?')} on {context['node']}"]
    if context.get("binding"):
        parts.append(" ".join(f"{k}={v}" for k, v in context["binding"].items()))
    if context.get("modules"):
        parts.append("modules " + " ".join(context["modules"]))
    return "; ".join(parts)


def numa_nodes() -> int:
    nodes = list(Path("/sys/devices/system/node").glob("node[0-9]*"))
    return max(len(nodes), 1)


def sockets() -> int | None:
    try:
        text = subprocess.run(["lscpu"], capture_output=True, text=True, timeout=10).stdout
    except (OSError, subprocess.TimeoutExpired):
        return None
    match = re.search(r"^Socket\(s\):\s*(\d+)", text, re.MULTILINE)
    return int(match.group(1)) if match else None


def mpi4py_problem(mpiexec: str | None = None, version: str | None = None,
                   library: str | None = None) -> str | None:
    """Why mpi4py does not fit the mpiexec on the PATH (another MPI family or version), or None.
    Without arguments, finds out itself. `scripts/setup.sh` rebuilds mpi4py when this says so."""
    if mpiexec is None and version is None:
        mpiexec = _first_line(["mpiexec", "--version"])
        version, library = mpi4py_library()
    if version is None:
        return "mpi4py cannot be imported or cannot initialise MPI"
    if mpiexec and (mpi_family(library) != mpi_family(mpiexec)
                    or _version(library) not in (None, _version(mpiexec))):
        return (f"mpi4py was built against {library!r} but mpiexec is {mpiexec!r}: rebuild it "
                "with `MPICC=mpicc pip install --force-reinstall --no-binary mpi4py mpi4py`")
    return None


def report() -> dict:
    """Everything `doctor` checks, as a dictionary; `problems` lists what is missing."""
    import numba
    import numpy

    mpiexec = _first_line(["mpiexec", "--version"])
    mpi4py_version, mpi4py_lib = mpi4py_library()
    petsc, petsc4py, hypre = petsc_versions()
    info = {
        "python": f"{platform.python_implementation()} {platform.python_version()}",
        "numpy": numpy.__version__,
        "numba": numba.__version__,
        "c_compiler": _first_line(["cc", "--version"]),
        "fortran_compiler": _first_line(["gfortran", "--version"]),
        "cmake": _first_line(["cmake", "--version"]),
        "openmp_c_threads": openmp_threads("c"),
        "openmp_fortran_threads": openmp_threads("fortran"),
        "numba_threads": f"{numba.get_num_threads()} threads",   # doctor adds its team check
        "mpiexec": mpiexec,
        "mpi_family": mpi_family(mpiexec),
        "mpi4py": mpi4py_version,
        "mpi4py_library": mpi4py_lib,
        "petsc": petsc,                     # optional: lecture 09_petsc only
        "petsc4py": petsc4py,
        "hypre": hypre,
        "cores": usable_cores(),
        "sockets": sockets(),
        "numa_nodes": numa_nodes(),
        "platform": platform.platform(),
        "job": job_context(),
    }
    problems = []
    for key, what in (("c_compiler", "a C compiler (cc)"), ("fortran_compiler", "gfortran"),
                      ("cmake", "cmake"), ("mpiexec", "an MPI library with mpiexec")):
        if info[key] is None:
            problems.append(f"missing {what}")
    for lang, compiler in (("c", "c_compiler"), ("fortran", "fortran_compiler")):
        if info[compiler] and info[f"openmp_{lang}_threads"] != 2:
            problems.append(f"OpenMP does not work with the {lang} compiler (-fopenmp)")
    mpi_problem = mpi4py_problem(mpiexec, mpi4py_version, mpi4py_lib)
    if mpi_problem:
        problems.append(mpi_problem)
    info["problems"] = problems
    return info


def markdown_table(info: dict) -> str:
    rows = [("Python", info["python"]), ("NumPy / Numba", f"{info['numpy']} / {info['numba']}"),
            ("C compiler", info["c_compiler"]), ("Fortran compiler", info["fortran_compiler"]),
            ("OpenMP (threads seen with OMP_NUM_THREADS=2, C / Fortran)",
             f"{info['openmp_c_threads']} / {info['openmp_fortran_threads']}"),
            ("Numba threads", info["numba_threads"]),
            ("MPI (mpiexec)", info["mpiexec"]), ("mpi4py, built against",
                                                 f"{info['mpi4py']}, {info['mpi4py_library']}"),
            ("PETSc / petsc4py / hypre (lecture 09)",
             f"{info['petsc']} / {info['petsc4py']} / {info['hypre']}" if info.get("petsc")
             else None),
            ("Cores / sockets / NUMA nodes",
             f"{info['cores']} / {info['sockets']} / {info['numa_nodes']}"),
            ("Platform", info["platform"])]
    job = job_summary(info.get("job") or {})
    if job:                                          # only inside a batch job
        rows.append(("Batch job", job))
    lines = ["| component | version |", "|---|---|"]
    lines += [f"| {name} | {value if value is not None else 'missing'} |" for name, value in rows]
    return "\n".join(lines)
