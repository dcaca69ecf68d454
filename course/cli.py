"""`python -m course <verb>`: doctor, build, solve, bench."""

from __future__ import annotations

import argparse
import json
import os
import sys

from .langs import LANGS


def _doctor(args) -> int:
    from . import toolchain

    info = toolchain.report()
    if args.json:
        print(json.dumps(info, indent=2))
    else:
        width = max(len(k) for k in info)
        for key, value in info.items():
            if key != "problems":
                print(f"{key:<{width}}  {value if value is not None else 'MISSING'}")
        for problem in info["problems"]:
            print(f"problem: {problem}")
        if info["problems"]:
            print(f"to fix: {toolchain.APT_HINT}")
        else:
            print("all good")
    return 1 if info["problems"] else 0


def _build(args) -> int:
    from . import native

    variant = "sanitize" if args.sanitize else "release"
    out = native.build(variant, werror=not args.no_werror, verbose=args.verbose, clean=args.clean)
    print(f"built {variant} kernels and programs in {out}")
    return 0


def _solve(args) -> int:
    from . import problems

    if args.threads is not None:
        if args.threads < 1:
            raise ValueError(f"--threads must be positive, got {args.threads}")
        os.environ["OMP_NUM_THREADS"] = str(args.threads)   # read when the library loads
    if args.problem == "fem1d":
        if args.n < 1:
            raise ValueError(f"--n must be a positive number of elements, got {args.n}")
        result = problems.fem1d(args.n, args.lang, length=args.length, cond=args.cond,
                                qvol=args.qvol, qflux=args.qflux, tol=args.tol)
    if args.json:
        print(json.dumps(result))
    else:
        for key, value in result.items():
            print(f"{key:>18}: {value}")
    return 0 if result["converged"] else 1


def _bench(args) -> int:
    from . import bench

    kwargs = {"repeat": args.repeat}
    if args.sizes:
        kwargs["sizes"] = args.sizes
    if args.langs:
        kwargs["langs"] = args.langs
    results = bench.run_suite(args.suite, args.json, args.plot, **kwargs)
    print(bench.summary_table(results))
    if args.json:
        print(f"wrote {args.json}")
    if args.plot:
        print(f"wrote {args.plot}")
    return 0


def _positive(kind):
    def parse(text):
        value = kind(text)
        if value <= 0:
            raise argparse.ArgumentTypeError(f"must be positive, got {text}")
        return value
    return parse


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m course",
                                description="Parallel FEM course: toolchain, kernels, problems.")
    sub = p.add_subparsers(dest="verb", required=True)

    d = sub.add_parser("doctor", help="check Python, compilers, OpenMP, MPI, cores, NUMA")
    d.add_argument("--json", action="store_true", help="print one JSON object")
    d.set_defaults(run=_doctor)

    b = sub.add_parser("build", help="compile src_c/ and src_fortran/ with CMake")
    b.add_argument("--sanitize", action="store_true", help="AddressSanitizer + UBSan build")
    b.add_argument("--no-werror", action="store_true", help="do not treat warnings as errors")
    b.add_argument("--clean", action="store_true", help="remove the build folder first")
    b.add_argument("--verbose", action="store_true", help="show the compiler output")
    b.set_defaults(run=_build)

    s = sub.add_parser("solve", help="run one problem and summarise it")
    s.add_argument("problem", choices=["fem1d"])
    s.add_argument("--n", type=int, default=100, help="number of elements (default 100)")
    s.add_argument("--lang", choices=LANGS, default="c")
    s.add_argument("--length", type=_positive(float), default=1.0)
    s.add_argument("--cond", type=_positive(float), default=1.0, help="conductivity")
    s.add_argument("--qvol", type=float, default=1.0, help="volumetric heat source")
    s.add_argument("--qflux", type=float, default=0.0, help="heat flux at x = length")
    s.add_argument("--tol", type=_positive(float), default=1e-12)
    s.add_argument("--threads", type=int, help="OpenMP threads for c/fortran")
    s.add_argument("--json", action="store_true", help="print one JSON object")
    s.set_defaults(run=_solve)

    e = sub.add_parser("bench", help="benchmark suite (timings, not tests)")
    e.add_argument("suite", choices=["fem1d"])
    e.add_argument("--json", metavar="FILE", help="write the results as JSON")
    e.add_argument("--plot", metavar="FILE", help="write a plot (PNG, SVG, PDF)")
    e.add_argument("--sizes", type=_positive(int), nargs="+", help="problem sizes")
    e.add_argument("--langs", choices=LANGS, nargs="+", help="languages (default: all)")
    e.add_argument("--repeat", type=_positive(int), default=5, help="best of N (default 5)")
    e.set_defaults(run=_bench)
    return p


def main(argv=None) -> int:
    args = parser().parse_args(argv)
    try:
        return args.run(args)
    except (ValueError, TypeError, FileNotFoundError, RuntimeError) as err:
        lines = str(err).splitlines() or [repr(err)]
        print(f"course {args.verb}: error: {lines[0]}", file=sys.stderr)
        if lines[1:]:                       # e.g. the compiler output of a failed build
            print("\n".join(lines[1:]), file=sys.stderr)
        return 2
