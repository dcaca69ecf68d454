"""`python -m course <verb>`: doctor, build, solve, bench."""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
import warnings
from pathlib import Path

from .langs import LANGS

FACES = ("xmin", "xmax", "ymin", "ymax", "zmin", "zmax")   # course.fem.mesh.FACES (not imported)


def _doctor(args) -> int:
    from . import toolchain
    from .solvers import team

    if args.grading:
        return _doctor_grading(args)
    # the Numba threads as the ICCG uses them: do they run at once, as one team?
    info = {**toolchain.report(), "numba_threads": team.describe()}
    if args.json:
        print(json.dumps(info, indent=2))
    else:
        width = max(len(k) for k in info)
        for key, value in info.items():
            if key == "job":                      # one line, and only inside a batch job
                value = toolchain.job_summary(value)
                if value is None:
                    continue
            if key != "problems":
                print(f"{key:<{width}}  {value if value is not None else 'MISSING'}")
        for problem in info["problems"]:
            print(f"problem: {problem}")
        if info["problems"]:
            print(f"to fix: {toolchain.APT_HINT}")
        else:
            print("all good")
    return 1 if info["problems"] else 0


def _doctor_grading(args) -> int:
    """Whether this machine grades each exercise fully (exit 1 when one cannot be graded)."""
    from . import grading

    found = grading.readiness()
    cannot = any(verdict == "no" for verdict, _ in found.values())
    if args.json:
        print(json.dumps({key: {"grades": verdict, "reason": reason}
                          for key, (verdict, reason) in found.items()}, indent=2))
    else:
        for key, (verdict, reason) in found.items():
            print(f"{key:<11} grades {verdict}" + (f": {reason}" if reason else ""))
        if cannot:
            print("to grade every exercise: make grader (root on Debian/Ubuntu), or install what "
                  "is named above")
    return 1 if cannot else 0


def _build(args) -> int:
    from . import native

    variant = "sanitize" if args.sanitize else "release"
    out = native.build(variant, werror=not args.no_werror, verbose=args.verbose, clean=args.clean,
                       toolchain=args.toolchain)
    print(f"built {variant} kernels and programs in {out}")
    return 0


def _solve(args) -> int:
    from . import problems, resources

    if args.threads is not None:
        if args.threads < 1:
            raise ValueError(f"--threads must be positive, got {args.threads}")
        resources.check_threads(args.threads, f"--threads {args.threads}")
        os.environ["OMP_NUM_THREADS"] = str(args.threads)   # read when the library loads
    elif os.environ.get("OMP_NUM_THREADS", "").strip().isdigit():
        threads = int(os.environ["OMP_NUM_THREADS"])
        resources.check_threads(threads, f"OMP_NUM_THREADS={threads}")
    if args.problem == "fem1d":
        if args.n < 1:
            raise ValueError(f"--n must be a positive number of elements, got {args.n}")
        result = problems.fem1d(args.n, args.lang, length=args.length, cond=args.cond,
                                qvol=args.qvol, qflux=args.qflux, tol=args.tol)
    elif args.problem == "fem3d":
        result = _solve_fem3d(args, problems)
    elif args.problem == "poisson":
        result = _solve_poisson(args, problems)
    if getattr(args, "precond", None) == "diagonal":
        result = {**result, "precond": "diagonal"}   # as --precond ic0 reports its own
    if getattr(args, "parallel", False) and mpi_rank() != 0:
        pass                                    # rank 0 prints the one summary
    elif args.json:
        print(json.dumps(result))
    else:
        for key, value in result.items():
            print(f"{key:>18}: {value}")
    return 0 if result["converged"] else 1


def _solve_fem3d(args, problems) -> dict:
    for name in ("nx", "ny", "nz"):
        if getattr(args, name) < 1:
            raise ValueError(f"--{name} must be a positive number of elements, "
                             f"got {getattr(args, name)}")
    if _iccg_requested(args):                   # 04_iccg: --precond ic0 --ordering --colors
        return _solve_iccg(args, problems)
    if args.vtk is not None:
        check_output(args.vtk, "--vtk", _vtk_format)
    if args.manufactured:
        given = [f"--{name.replace('_', '-')}" for name in ("qvol", "qflux", "fixed_face",
                                                             "source")
                 if getattr(args, name) is not None]
        if given:
            raise ValueError(f"{', '.join(given)} cannot be used with --manufactured (its source "
                             f"and boundary conditions are fixed)")
    distributed = _distributed_args(args)
    if distributed is not None:
        return _solve_fem3d_parallel(args, distributed)
    options = {name: getattr(args, name) for name in ("qvol", "qflux", "fixed_face", "source")
               if getattr(args, name) is not None}
    result = problems.fem3d(args.nx, args.ny, args.nz, args.lang, manufactured=args.manufactured,
                            dx=args.dx, dy=args.dy, dz=args.dz, cond=args.cond, tol=args.tol,
                            keep_solution=args.vtk is not None, **options)
    if args.vtk is not None:
        _write_vtk(args.vtk, result.pop("mesh"), result.pop("T"))
        result["vtk"] = args.vtk
    return result


def _distributed_args(args) -> dict | None:
    """The options of --parallel as keyword arguments of fem3d_parallel / poisson_parallel (None
    without --parallel); ValueError for an option given without --parallel or a bad mix."""
    dims = [getattr(args, name) for name in ("px", "py", "pz")]
    if not args.parallel:
        given = [f"--{name.replace('_', '-')}" for name in ("partition", "exchange", "px", "py",
                                                             "pz", "cg", "residual_replacement",
                                                             "engine")
                 if getattr(args, name) is not None] + (["--iallreduce"] if args.iallreduce
                                                        else [])
        if given:
            raise ValueError(f"{', '.join(given)} {'needs' if len(given) == 1 else 'need'} "
                             f"--parallel")
        return None
    if any(d is not None for d in dims) and None in dims:
        raise ValueError("--px, --py and --pz go together")
    if dims[0] is not None and args.partition == "metis":
        raise ValueError("--px --py --pz are for --partition blocks, not metis")
    if args.engine == "petsc":
        _check_petsc_engine(args)
    if args.threads is None:                    # flat MPI: one thread per rank (OpenMP threads
        os.environ["OMP_NUM_THREADS"] = "1"     # of several ranks on one core spin and crawl)
    return {"partition": args.partition or "blocks",
            "dims": None if dims[0] is None else tuple(dims),
            "exchange": args.exchange or "p2p", "algorithm": args.cg or "pcg",
            "iallreduce": args.iallreduce, "replace_every": args.residual_replacement or 0,
            "precond": args.precond or "diagonal", "sweeps": args.asdd_sweeps,
            "ordering_name": args.ordering or "natural", "colors": args.colors,
            "threads": args.threads, "engine": args.engine or "course"}


def _check_petsc_engine(args) -> None:
    """ValueError for an option of the course's solver that PETSc's twin (course.parallel.petsc)
    has no mapping for."""
    unmapped = [option for option, given in (
        ("--iallreduce", args.iallreduce),
        ("--residual-replacement", args.residual_replacement is not None),
        ("--ordering", args.ordering not in (None, "natural")), ("--colors", args.colors),
        ("--threads", args.threads not in (None, 1))) if given]
    if unmapped:
        raise ValueError(f"--engine petsc has no twin for {', '.join(unmapped)}: PETSc's gropp and "
                         f"pipelined reduce without blocking by themselves, and its IC(0) "
                         f"keeps each rank's order on one thread")


def _solve_fem3d_parallel(args, distributed: dict) -> dict:
    """`mpiexec -n P python -m course solve fem3d --parallel ...`: every rank runs this; the
    caller prints from rank 0 only."""
    from .parallel.fem3d import fem3d_parallel

    options = {name: getattr(args, name) for name in ("qvol", "qflux", "fixed_face", "source")
               if getattr(args, name) is not None}
    result = fem3d_parallel(args.nx, args.ny, args.nz, lang=args.lang, dx=args.dx, dy=args.dy,
                            dz=args.dz, cond=args.cond, tol=args.tol,
                            keep_solution=args.vtk is not None, manufactured=args.manufactured,
                            **distributed, **options)
    if args.vtk is not None:
        mesh, t = result.pop("mesh"), result.pop("T")
        if mpi_rank() == 0:
            _write_vtk(args.vtk, mesh, t)
        result["vtk"] = args.vtk
    return result


def _distributed_options(parser, problem: str, what: str, unit: str) -> None:
    """--parallel and its options (05_halo: partition and exchange; 06_pipecg: the CG variant)."""
    from .solvers import ALGORITHMS

    group = parser.add_argument_group(f"distributed (05_halo, 06_pipecg): mpiexec -n P python -m "
                                      f"course solve {problem} --parallel ...")
    group.add_argument("--parallel", action="store_true",
                       help=f"partition {what} over the MPI ranks and solve with the distributed "
                            f"CG")
    group.add_argument("--partition", choices=("blocks", "metis"),
                       help=f"{unit} -> rank map: PX x PY x PZ blocks (default) or METIS k-way")
    for axis in "xyz":
        group.add_argument(f"--p{axis}", type=int, help=f"blocks along {axis} (with --py, --pz; "
                                                         f"default: the most cube-like blocks)")
    group.add_argument("--exchange", choices=("p2p", "persistent", "neighbor", "allgather"),
                       help="halo exchange: Isend/Irecv (default), persistent requests, "
                            "MPI_Neighbor_alltoallv, or the naive Allgatherv of the whole vector")
    group.add_argument("--cg", choices=ALGORITHMS,
                       help="CG variant: pcg (2 blocking reductions per iteration, default), "
                            "chronopoulos-gear (1 fused), gropp (2 hidden), pipelined (1 hidden)")
    group.add_argument("--iallreduce", action="store_true",
                       help="non-blocking reductions (MPI_Iallreduce ... MPI_Wait) so that gropp "
                            "and pipelined can hide them behind the preconditioner and the SpMV")
    group.add_argument("--residual-replacement", type=_positive(int), metavar="N",
                       help="every N iterations recompute the recursive residual (and the other "
                            "recurrences) from x")
    group.add_argument("--engine", choices=("course", "petsc"),
                       help="course: the course's distributed CG (default); petsc: the same "
                            "matrix solved by PETSc's twin of --cg and --precond, stopped by the "
                            "same rule (09_petsc; needs petsc4py)")


def check_output(path, option: str, check_format=None) -> None:
    """Refuse, before any work, an output file that cannot be written (its folder missing or not
    writable, the path a folder, the file read-only) or, with check_format(path), whose extension
    names no format it can be written in: one line that names the option."""
    path = Path(path)
    folder = path.resolve().parent
    if path.is_dir():
        raise ValueError(f"{option} {path}: is a folder, not a file")
    if not folder.is_dir():
        raise FileNotFoundError(f"{option}: folder {folder} does not exist")
    if not os.access(folder, os.W_OK | os.X_OK) or (path.exists() and
                                                    not os.access(path, os.W_OK)):
        raise ValueError(f"{option}: cannot write {path} (no permission, or a read-only folder)")
    if check_format is not None:
        try:
            check_format(path)
        except ValueError as err:
            raise ValueError(f"{option} {err}") from None


def _vtk_format(path) -> None:
    from .fem.vtk import file_format

    file_format(path)


def _plot_format(path) -> None:
    from matplotlib.backend_bases import FigureCanvasBase

    formats = FigureCanvasBase.get_supported_filetypes()
    suffix = path.suffix.lower()
    if suffix[1:] not in formats:
        what = f"extension {suffix!r}" if suffix else "no extension"
        raise ValueError(f"{path}: {what}; matplotlib writes "
                         f"{', '.join('.' + ext for ext in sorted(formats))}")


def _write_vtk(path, mesh, t) -> None:
    from .fem.vtk import write_vtk

    try:
        write_vtk(path, mesh, {"temperature": t})
    except OSError as err:
        raise RuntimeError(f"--vtk: cannot write {path}: {err.strerror}") from None


def launcher_rank() -> int:
    """This process's rank as the MPI launcher tells it (0 when not launched by mpiexec), known
    before MPI is initialised: so that only rank 0 prints a usage error."""
    for name in ("OMPI_COMM_WORLD_RANK", "PMI_RANK", "PMIX_RANK"):
        if os.environ.get(name, "").isdigit():
            return int(os.environ[name])
    return 0


def mpi_rank() -> int:
    from mpi4py import MPI

    return MPI.COMM_WORLD.Get_rank()


POISSON_DEFAULTS = {"nx": 32, "ny": 32, "nz": 32, "dx": 1.0, "dy": 1.0, "dz": 1.0, "tol": 1e-8}


PARALLEL_PRECONDS = ("bjacobi-ic0", "asdd-ic0")
LIBRARY_PRECONDS = ("gamg", "boomeramg")         # PETSc's (course.parallel.petsc): --engine petsc


def _iccg_requested(args) -> bool:
    """True for --precond ic0 (the serial ICCG); ValueError for --ordering or --colors without
    an IC(0) preconditioner, --asdd-sweeps without asdd-ic0, ic0 with --parallel or the localized
    ones without it."""
    precond = getattr(args, "precond", None)
    parallel = getattr(args, "parallel", False)
    given = [f"--{name}" for name in ("ordering", "colors") if getattr(args, name, None)
             is not None]
    if given and precond not in ("ic0", *PARALLEL_PRECONDS):
        raise ValueError(f"{', '.join(given)} {'needs' if len(given) == 1 else 'need'} "
                         f"--precond ic0 (or bjacobi-ic0, asdd-ic0 with --parallel)")
    if getattr(args, "asdd_sweeps", None) is not None and precond != "asdd-ic0":
        raise ValueError("--asdd-sweeps needs --precond asdd-ic0")
    if precond == "ic0" and parallel:
        raise ValueError("--precond ic0 is not for --parallel: IC(0) does not distribute; "
                         "--precond bjacobi-ic0 localizes it per rank (08_hybrid)")
    if precond in PARALLEL_PRECONDS and not parallel:
        raise ValueError(f"--precond {precond} needs --parallel (on one process: --precond ic0, "
                         f"or --parallel without mpiexec)")
    if precond in LIBRARY_PRECONDS and not (parallel and getattr(args, "engine", None) == "petsc"):
        raise ValueError(f"--precond {precond} is PETSc's algebraic multigrid, which the course "
                         f"does not build: it needs --parallel --engine petsc (09_petsc)")
    return precond == "ic0"


def _solve_iccg(args, problems, values: dict | None = None) -> dict:
    """`solve poisson|fem3d --precond ic0 ...`: values are solve poisson's sizes (or input)."""
    common = {"ordering_name": args.ordering or "natural", "colors": args.colors,
              "lang": args.lang, "threads": args.threads}
    if args.problem == "poisson":
        for name in ("version", "format"):
            if getattr(args, name) is not None:
                raise ValueError(f"--{name} is for the OpenMP ladder, not for --precond ic0")
        return problems.poisson_iccg(**common, **values)
    if args.manufactured or args.vtk is not None or any(
            getattr(args, name) is not None for name in ("dx", "dy", "dz")):
        raise ValueError("--precond ic0 solves the model problem on the unit cube: no "
                         "--manufactured, --vtk, --dx/--dy/--dz")
    options = {name: getattr(args, name) for name in ("qvol", "qflux", "fixed_face", "source")
               if getattr(args, name) is not None}
    return problems.fem3d_iccg(args.nx, args.ny, args.nz, **common, tol=args.tol, cond=args.cond,
                               **options)


def _solve_poisson(args, problems) -> dict:
    given = [name for name in POISSON_DEFAULTS if getattr(args, name) is not None]
    if args.input is not None:
        if given:
            raise ValueError(f"--input cannot be used with "
                             f"{', '.join('--' + name for name in given)} (the file sets them)")
        values = {"input_file": args.input}
    else:
        values = {name: default if getattr(args, name) is None else getattr(args, name)
                  for name, default in POISSON_DEFAULTS.items()}
        for name in ("nx", "ny", "nz"):
            if values[name] < 1:
                raise ValueError(f"--{name} must be a positive number of cells, "
                                 f"got {values[name]}")
    if _iccg_requested(args):                   # 04_iccg: --precond ic0 --ordering --colors
        return _solve_iccg(args, problems, values)
    distributed = _distributed_args(args)
    if distributed is None:
        return problems.poisson(version=args.version or "v3", fmt=args.format, lang=args.lang,
                                threads=args.threads, **values)
    given = [f"--{name}" for name in ("version", "format") if getattr(args, name) is not None]
    if given:
        raise ValueError(f"{', '.join(given)} {'is' if len(given) == 1 else 'are'} for the "
                         f"OpenMP ladder, not for --parallel (which takes --cg)")
    from .fem import fvm
    from .parallel.poisson import poisson_parallel

    if "input_file" in values:
        params = fvm.read_input(values.pop("input_file"))
        values = {name: params[name] for name in ("nx", "ny", "nz", "dx", "dy", "dz")}
        values["tol"] = params["eps"]

    return poisson_parallel(lang=args.lang, **values, **distributed)


def _partition(args) -> int:
    """Write the local data files PREFIX.0 .. PREFIX.P-1 of a partition (05_halo), once, for any
    language: the MPI programs read them with `local PREFIX` as line 7 of their input."""
    from .fem.mesh import box_mesh
    from .parallel.local import all_local_data, local_path, write_local
    from .parallel.partition import make_partition, quality

    dims = [getattr(args, name) for name in ("px", "py", "pz")]
    if any(d is not None for d in dims) and None in dims:
        raise ValueError("--px, --py and --pz go together")
    check_output(local_path(args.out, 0), "--out")
    box = box_mesh(args.nx, args.ny, args.nz, args.dx, args.dy, args.dz)
    owner = make_partition(box, args.partition, args.ranks,
                           None if dims[0] is None else tuple(dims))
    files = []
    for local in all_local_data(box, owner):
        path = local_path(args.out, local.rank)
        write_local(path, box, local)
        files.append(str(path))
    summary = {"partition": args.partition, "nx": box.nx, "ny": box.ny, "nz": box.nz,
               "dx": box.dx, "dy": box.dy, "dz": box.dz, **quality(box, owner).as_dict(),
               "files": files}
    print(json.dumps(summary) if args.json else
          "\n".join(f"{key:>16}: {value}" for key, value in summary.items()))
    return 0


MPI_SUITES = ("halo", "pipecg", "alltoall", "petsc")   # they start mpiexec themselves


def _bench(args) -> int:
    from . import bench

    if args.json:
        check_output(args.json, "--json")
    if args.plot:
        check_output(args.plot, "--plot", _plot_format)
    kwargs = {"repeat": args.repeat}
    if args.sizes:
        kwargs["sizes"] = args.sizes
    if args.langs:
        if args.suite in MPI_SUITES:
            raise ValueError(f"--langs is not for the {args.suite} suite (it times the MPI "
                             f"calls)")
        kwargs["langs"] = args.langs
    if args.threads:
        if args.suite not in ("openmp", "iccg"):
            raise ValueError("--threads is for the openmp and iccg suites (their thread sweeps)")
        kwargs["threads"] = args.threads
    for name, suites in (("ranks", MPI_SUITES), ("cg_size", ("halo",)),
                         ("layouts", ("hybrid",))):
        if getattr(args, name):
            if args.suite not in suites:
                raise ValueError(f"--{name.replace('_', '-')} is for the "
                                 f"{' and '.join(suites)} suite{'s' * (len(suites) > 1)}")
            kwargs[name] = getattr(args, name)
    results = bench.run_suite(args.suite, args.json, args.plot, **kwargs)
    print(bench.summary_table(results))
    if args.json:
        print(f"wrote {args.json}")
    if args.plot:
        print(f"wrote {args.plot}")
    return 0


def _dist(args) -> int:
    from .classroom import dist

    return dist.main(args)


def _jobscript(args) -> int:
    from .cluster import jobscript

    words = args.program
    request = jobscript.JobRequest(
        program=words, scheduler=args.scheduler, system=args.system, nodes=args.nodes,
        ranks_per_node=args.ranks_per_node, threads=args.threads, time=args.time,
        queue=args.queue, group=args.group, name=args.name, cores_per_node=args.cores_per_node,
        launcher=args.launcher, workdir=args.workdir or str(jobscript.ROOT))
    text = jobscript.render(request)            # checked first: nothing is written on an error
    if args.output:
        Path(args.output).write_text(text)
        print(f"wrote {args.output}; submit it with: "
              f"{jobscript.COMMANDS[args.scheduler]['submit']} {args.output}")
    else:
        print(text, end="")
    return 0


def _positive(kind):
    def parse(text):
        value = kind(text)
        if value <= 0:
            raise argparse.ArgumentTypeError(f"must be positive, got {text}")
        return value
    return parse


def _finite(text):
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be a number, got {text!r}") from None
    if not math.isfinite(value):
        raise argparse.ArgumentTypeError(f"must be a finite number, got {text}")
    return value


def _layout(text):
    from .bench.hybrid import parse_layout

    try:
        return parse_layout(text)
    except ValueError as err:
        raise argparse.ArgumentTypeError(str(err)) from None


def _positive_finite(text):
    value = _finite(text)
    if value <= 0:
        raise argparse.ArgumentTypeError(f"must be positive, got {text}")
    return value


def _iccg_options(p: argparse.ArgumentParser) -> None:
    """--precond, --ordering, --colors (04_iccg; without --precond: the existing solver)."""
    p.add_argument("--precond", choices=("diagonal", "ic0", *PARALLEL_PRECONDS,
                                         *LIBRARY_PRECONDS),
                   help="diagonal: the diagonal-scaled PCG (the default); ic0: ICCG (04_iccg); "
                        "with --parallel, bjacobi-ic0: IC(0) localized per rank, asdd-ic0: "
                        "the same with ASDD sweeps (08_hybrid); with --engine "
                        "petsc also PETSc's algebraic multigrid, gamg or boomeramg (09_petsc)")
    p.add_argument("--asdd-sweeps", type=_positive(int), metavar="K",
                   help="asdd-ic0: sweeps per application, K - 1 halo exchanges (default 2)")
    p.add_argument("--ordering", choices=("natural", "cm", "rcm", "mc", "cm-rcm"),
                   help="ic0: the ordering of the unknowns; bjacobi-ic0, asdd-ic0: of each "
                        "rank's internal nodes (default natural)")
    p.add_argument("--colors", type=_positive(int),
                   help="ic0 with mc or cm-rcm: the target number of colors (may be exceeded)")


def _common_solve_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("--lang", choices=LANGS, default="c")
    p.add_argument("--threads", type=int, help="OpenMP threads for c/fortran")
    p.add_argument("--json", action="store_true", help="print one JSON object")
    p.set_defaults(run=_solve)


class _Parser(argparse.ArgumentParser):
    """Under mpiexec every rank parses the same command line: only rank 0 reports its errors."""

    def error(self, message):
        if launcher_rank() != 0:
            self.exit(2)
        super().error(message)


def parser() -> argparse.ArgumentParser:
    p = _Parser(prog="python -m course",
                                description="Parallel FEM course: toolchain, kernels, problems.")
    sub = p.add_subparsers(dest="verb", required=True)

    d = sub.add_parser("doctor", help="check Python, compilers, OpenMP, MPI, cores, NUMA")
    d.add_argument("--json", action="store_true", help="print one JSON object")
    d.add_argument("--grading", action="store_true",
                   help="whether this machine grades each exercise fully (race detector, MPI, "
                        "local Slurm)")
    d.set_defaults(run=_doctor)

    b = sub.add_parser("build", help="compile src_c/ and src_fortran/ with CMake")
    b.add_argument("--sanitize", action="store_true", help="AddressSanitizer + UBSan build")
    b.add_argument("--no-werror", action="store_true", help="do not treat warnings as errors")
    b.add_argument("--clean", action="store_true", help="remove the build folder first")
    b.add_argument("--verbose", action="store_true", help="show the compiler output")
    b.add_argument("--toolchain", metavar="FILE",
                   help="CMake toolchain file (e.g. cmake/a64fx-fujitsu.cmake), built into "
                        "build/native/<variant>-<file name>; default: $CMAKE_TOOLCHAIN_FILE")
    b.set_defaults(run=_build)

    s = sub.add_parser("solve", help="run one problem and summarise it")
    problem = s.add_subparsers(dest="problem", required=True, metavar="problem")

    s1 = problem.add_parser("fem1d", help="1D heat conduction, linear elements (01_fem1d)")
    s1.add_argument("--n", type=int, default=100, help="number of elements (default 100)")
    s1.add_argument("--length", type=_positive(float), default=1.0)
    s1.add_argument("--cond", type=_positive(float), default=1.0, help="conductivity")
    s1.add_argument("--qvol", type=float, default=1.0, help="volumetric heat source")
    s1.add_argument("--qflux", type=float, default=0.0, help="heat flux at x = length")
    s1.add_argument("--tol", type=_positive(float), default=1e-12)
    _common_solve_options(s1)

    s3 = problem.add_parser("fem3d", help="3D heat conduction, tri-linear hexahedra (02_fem3d)")
    s3.add_argument("--nx", type=int, default=8, help="elements along x (default 8)")
    s3.add_argument("--ny", type=int, default=8, help="elements along y (default 8)")
    s3.add_argument("--nz", type=int, default=8, help="elements along z (default 8)")
    for axis in "xyz":
        s3.add_argument(f"--d{axis}", type=_positive_finite,
                        help=f"element size along {axis} (default: the unit cube, 1/n{axis})")
    s3.add_argument("--manufactured", action="store_true",
                    help="T = sin(pi x) sin(pi y) sin(pi z), T = 0 on every face; reports the L2 "
                         "and H1 errors")
    s3.add_argument("--cond", type=_positive_finite, default=1.0, help="conductivity")
    s3.add_argument("--qvol", type=_finite, help="volumetric heat source (default 1)")
    s3.add_argument("--source", choices=("constant", "nakajima"),
                    help="the heat source: constant QVOL (default), or nakajima: QVOL |x_c + "
                         "y_c| on each element, (x_c, y_c) its centroid, the heat generation of "
                         "Nakajima's FEM course code (no exact solution: t_max is reported)")
    s3.add_argument("--qflux", type=_finite,
                    help="heat flux into the body through the face opposite the fixed one "
                         "(default 0)")
    s3.add_argument("--fixed-face", choices=FACES, help="face with T = 0 (default zmax)")
    s3.add_argument("--tol", type=_positive_finite, default=1e-8,
                    help="CG tolerance, relative residual (default 1e-8)")
    s3.add_argument("--vtk", metavar="FILE",
                    help="write the mesh and temperature: FILE.vtu (VTK XML, binary) or FILE.vtk "
                         "(legacy VTK, text)")
    _iccg_options(s3)
    _distributed_options(s3, "fem3d", "the mesh", "node")
    _common_solve_options(s3)

    sp = problem.add_parser("poisson", help="3D Poisson, finite volumes, the OpenMP PCG ladder "
                                            "v0 .. v3 (03_openmp)")
    for axis in "xyz":
        sp.add_argument(f"--n{axis}", type=int, help=f"cells along {axis} (default 32)")
    for axis in "xyz":
        sp.add_argument(f"--d{axis}", type=_positive_finite,
                        help=f"cell size along {axis} (default 1)")
    sp.add_argument("--input", metavar="INPUT.DAT",
                    help="read NX NY NZ / DX DY DZ / EPSICCG from the programs' input file")
    sp.add_argument("--version", choices=("v0", "v1", "v2", "v3"),
                    help="step of the ladder: v0 CRS, v1 + first touch, v2 ELL, v3 one parallel "
                         "region per iteration (default v3; numba: v0 .. v2)")
    sp.add_argument("--format", choices=("crs", "ell", "sell"),
                    help="format of the SpMV timed alone (default: the version's, crs or ell)")
    sp.add_argument("--tol", type=_positive_finite,
                    help="CG tolerance, relative residual (default 1e-8)")
    sp.add_argument("--lang", choices=("c", "fortran", "numba"), default="c",
                    help="the ladder's language; with --parallel, c, fortran and numba all "
                         "take the Numba product")
    sp.add_argument("--threads", type=int, help="OpenMP (c, fortran) or Numba threads")
    sp.add_argument("--json", action="store_true", help="print one JSON object")
    _iccg_options(sp)
    _distributed_options(sp, "poisson", "the cells", "cell")
    sp.set_defaults(run=_solve)

    pa = sub.add_parser("partition", help="write the local data files of a partition (05_halo)",
                        description="Write PREFIX.0 .. PREFIX.<ranks-1>, the local data of every "
                                    "rank, for the MPI programs (line 7 of their input: local "
                                    "PREFIX). The box must be the program input's: give the "
                                    "same NX NY NZ and DX DY DZ (default 1/NX ...).")
    for axis in "xyz":
        pa.add_argument(f"--n{axis}", type=_positive(int), default=8,
                        help=f"elements along {axis} (default 8)")
    for axis in "xyz":
        pa.add_argument(f"--d{axis}", type=_positive_finite,
                        help=f"element size along {axis} (default: the unit cube, 1/n{axis})")
    pa.add_argument("--ranks", type=_positive(int), required=True, help="number of parts")
    pa.add_argument("--partition", choices=("blocks", "metis"), default="metis",
                    help="METIS k-way (default) or PX x PY x PZ blocks")
    for axis in "xyz":
        pa.add_argument(f"--p{axis}", type=_positive(int), help=f"blocks along {axis}")
    pa.add_argument("--out", required=True, metavar="PREFIX",
                    help="write PREFIX.0 .. PREFIX.<ranks-1>")
    pa.add_argument("--json", action="store_true", help="print one JSON object")
    pa.set_defaults(run=_partition)

    e = sub.add_parser("bench", help="benchmark suite (timings, not tests)")
    e.add_argument("suite", choices=["fem1d", "fem3d", "openmp", "iccg", "halo", "pipecg",
                                     "alltoall", "hybrid", "petsc"],
                   help="fem1d: assembly and CG per language; fem3d: assembly, PCG per iteration "
                        "and the SpMV against STREAM, on n^3 cubes; openmp: the PCG ladder and "
                        "the SpMV formats over a thread sweep, on n^3 cells (default 128); halo: "
                        "ping-pong, Allreduce, halo exchanges, distributed PCG and deep halos "
                        "over 1 .. P MPI ranks (starts mpiexec itself), on an n^3 mesh "
                        "(default 24); pipecg: the four CG variants, blocking and with "
                        "MPI_Iallreduce, split into SpMV, halo, reductions and the rest, over "
                        "1 .. P ranks, on an n^3 mesh (default 32); alltoall: MPI_Alltoall "
                        "throughput against message size and the pencil FFT of 07_cluster "
                        "(Python and C), over 1, 2, 4 ranks, for n^3 fields (default 16 32); "
                        "iccg: ICCG per ordering (natural, RCM, MC and CM-RCM over a sweep of "
                        "colors) and thread count, iterations, synchronisations, the fraction of "
                        "the measured bandwidth bound, on n^3 cells (default 32, in cache); hybrid: every ranks x "
                        "threads layout of the cores with every parallel preconditioner, timed "
                        "in the compiled programs fem3d_mpi_c/_f (median and range of the "
                        "repeats), on n^3 elements (default: beyond the cache); petsc: the course's distributed CG "
                        "against PETSc's on the same matrix and ranks, every parallel "
                        "preconditioner, on n^3 Poisson cells (default: beyond the cache)")
    e.add_argument("--json", metavar="FILE", help="write the results as JSON")
    e.add_argument("--plot", metavar="FILE", help="write a plot (PNG, SVG, PDF)")
    e.add_argument("--sizes", type=_positive(int), nargs="+",
                   help="problem sizes (fem1d: elements; fem3d: n of the n^3 mesh; openmp, "
                        "halo: one n)")
    e.add_argument("--threads", type=_positive(int), nargs="+",
                   help="openmp: the thread counts of the sweep (default 1 .. cores)")
    e.add_argument("--ranks", type=_positive(int), nargs="+",
                   help="halo, pipecg, alltoall, petsc: the MPI rank counts (default 1 .. "
                        "max(cores, 4); petsc: 1 and min(cores, 4); more than the cores are "
                        "flagged as oversubscribed)")
    e.add_argument("--cg-size", type=_positive(int),
                   help="halo: n of the n^3 mesh of the distributed CG (default max(n, 72), so "
                        "that its matrix does not fit in the caches)")
    e.add_argument("--layouts", type=_layout, nargs="+", metavar="RxT",
                   help="hybrid: the ranks x threads layouts (default: every R x T = the cores)")
    e.add_argument("--langs", choices=LANGS, nargs="+", help="languages (default: all)")
    e.add_argument("--repeat", type=_positive(int), default=5, help="best of N (default 5)")
    e.set_defaults(run=_bench)

    j = sub.add_parser("jobscript", help="write a Slurm or PJM job script, checked against the "
                                         "system's queues (07_cluster)",
                       description="Print (or write with --output) a job script for PROG, after "
                                   "checking the request against the system's rules: queues, "
                                   "node ranges, elapse limits, cores per node. The course's "
                                   "programs (solc, fem3d_mpi_c, ...) and the commands of .venv "
                                   "(python, papermill) are found in the checkout.")
    j.add_argument("--scheduler", choices=("slurm", "pjm"), default="slurm")
    j.add_argument("--system", choices=("generic", "odyssey", "obcx"), default="generic",
                   help="generic (any cluster), odyssey (Wisteria/BDEC-01 Odyssey, PJM) or obcx "
                        "(Oakbridge-CX, PJM): their queues and node sizes are checked")
    j.add_argument("--program", nargs=argparse.REMAINDER, required=True, metavar="PROG",
                   help="the program and its arguments: last, everything after it is the "
                        "program's command line")
    j.add_argument("--nodes", type=int, default=1)
    j.add_argument("--ranks-per-node", type=int, default=1, help="MPI ranks per node")
    j.add_argument("--threads", type=int, default=1, help="OpenMP threads per rank")
    j.add_argument("--time", default="00:10:00", help="elapse limit HH:MM:SS (default 00:10:00)")
    j.add_argument("--queue", help="queue (Slurm partition, PJM resource group)")
    j.add_argument("--group", help="who pays: PJM -g group, Slurm --account")
    j.add_argument("--name", help="job name (default: the program's)")
    j.add_argument("--cores-per-node", type=int,
                   help="generic systems: cores of a node, to check ranks x threads against")
    j.add_argument("--launcher", choices=("mpiexec", "srun"), default="mpiexec",
                   help="Slurm MPI launch (default mpiexec, Open MPI's options)")
    j.add_argument("--workdir", help="the course checkout on the cluster (default: this one)")
    j.add_argument("--output", "-o", metavar="FILE", help="write the script to FILE")
    j.set_defaults(run=_jobscript)

    di = sub.add_parser("dist", help="write a copy of the course for learners (no solutions)",
                        description="learner DIR: write in DIR (new or empty) what a learner needs "
                                    "to run the lectures and do the exercises: no solutions/, "
                                    "hidden tests, tests/ or .git")
    di.add_argument("kind", choices=["learner"], help="the kind of copy")
    di.add_argument("dir", metavar="DIR", help="a new or empty folder")
    di.set_defaults(run=_dist)

    from .classroom import hub                  # (standard library only: light)
    hub.add_parser(sub)
    return p


def main(argv=None) -> int:
    args = parser().parse_args(argv)
    parallel = getattr(args, "parallel", False)
    warnings.formatwarning = lambda message, *_: f"course {args.verb}: warning: {message}\n"
    try:
        return args.run(args)
    except (ValueError, TypeError, FileNotFoundError, RuntimeError) as err:
        if parallel and mpi_rank() != 0:
            return 2                            # every rank stops; rank 0 says why
        lines = str(err).splitlines() or [repr(err)]
        print(f"course {args.verb}: error: {lines[0]}", file=sys.stderr)
        if lines[1:]:                       # e.g. the compiler output of a failed build
            print("\n".join(lines[1:]), file=sys.stderr)
        return 2
    except Exception:
        if not parallel:
            raise
        import traceback

        from mpi4py import MPI

        traceback.print_exc()                   # a bug, on this rank only: the others would
        sys.stderr.flush()                      # wait for it forever, so end the whole job
        MPI.COMM_WORLD.Abort(1)
