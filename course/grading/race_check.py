"""Two checks of a learner's OpenMP kernel that right results cannot fool (lecture 03_openmp).

A kernel with a data race often gives the right numbers: a shared accumulator that the compiler
keeps in a register, a parallel region in which every thread computes every row (all write the same
values), a reset of a shared scalar done by every thread. A kernel made serial with
`num_threads(1)` or `if(0)` gives them too. So next to the result checks of course.grading.exercise:

* data_races(): LLVM's ThreadSanitizer with the Archer OpenMP tool. The learner's file is compiled
  with -fsanitize=thread -g (C with clang, Fortran with gfortran), linked into a small driver
  program with LLVM's OpenMP runtime libomp (it implements gfortran's GOMP_* entry points, and
  Archer tells TSan about its barriers, reductions, `single` and locks, which it does not know by
  itself: with GCC's libgomp TSan reports races that are not there). The driver reads the
  kernel's arguments from a file, calls the kernel once with OMP_NUM_THREADS threads and exits;
  TSan's reports are parsed into Race(kind, file, line, ...): the lines of the learner's file.
  TSan finds a race from the order of the accesses (happens-before), not from a wrong result or a
  lucky interleaving: two unordered writes are reported in every run.

* work_sharing(): an OMPT tool (the OpenMP tools interface of libomp) built into the driver counts,
  per parallel region, the threads that actually ran it (num_threads(1) and if(0) give 1) and, per
  thread, the worksharing loops it took part in and the iterations it got. A region without a
  worksharing loop (every thread runs the whole loop) shows no loop. C is compiled with clang, whose
  `omp for` calls the runtime (OMPT sees the loop, and the driver sees each thread's iterations);
  gfortran computes the rows of a thread of a schedule(static) loop inline, from
  omp_get_num_threads() and omp_get_thread_num(): the driver counts each thread's calls of
  omp_get_num_threads() as its loops (the file is compiled at -O0 for this run, where gfortran
  calls it once per loop; iterations: unknown). The tool also counts the outermost regions of the
  call, all of them (gfortran's GOMP_parallel goes through libomp: counted alike): a kernel whose
  task is ONE parallel region (the CG of 03, the colored substitution of 04) but that opens one
  per loop is right and race-free, and only this count tells (check_work_sharing(regions=1)).

    races = data_races("ell_matvec.c", "c", "ell_matvec", [n, d, item, amat, x, y])
    assert not races, race_message(races, "ell_matvec.c")
    check_work_sharing("ell_matvec.c", "c", "ell_matvec", [n, d, item, amat, x, y])

Arguments are given as to course.grading.exercise.run_isolated: Python ints become C ints, floats C
doubles, NumPy arrays (integer -> int32, floating -> float64) pointers to copies of their data.
Builds are cached by content hash. Needs clang, libomp (with Archer) and clang's TSan runtime, and
gfortran for Fortran: Debian `apt-get install clang libomp-dev libclang-rt-14-dev gfortran`.
Without them the functions raise RaceCheckUnavailable, which names what to install.
"""

from __future__ import annotations

import functools
import glob
import hashlib
import os
import re
import shutil
import subprocess
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from .. import cache
from .exercise import learner_source

DEBIAN_PACKAGES = "clang libomp-dev libclang-rt-dev llvm"   # as scripts/setup.sh --test
_DRIVER_NAME = "course_race_driver.c"
TSAN_EXIT = 66

# Hints for race_message: what to do about a race, in the words of the lecture.
HINT_GENERAL = ("if each thread needs its own copy, make it private (C: declare it inside the "
                "parallel loop; Fortran: list it in private(...)); if it is a sum over the loop, "
                "use a reduction; if all threads need one value, let one thread write it in "
                "`omp single`, whose barrier at the end makes it visible to the others")
HINT_PRIVATE = ("make it private to each thread (C: declare it inside the loop; Fortran: list it "
                "in private(...)), or a reduction")
HINT_SINGLE = ("let one thread write it in `omp single` (its barrier at the end makes the value "
               "visible to all threads before they read it), or make it a reduction variable")


class RaceCheckUnavailable(RuntimeError):
    """The tools of these checks are missing (the message says which, and what to install)."""


# --- the tools: clang, libomp + Archer, the TSan runtime, gfortran ------------------------------

@dataclass(frozen=True)
class Tools:
    clang: str
    libdir: str            # LLVM's lib folder: libomp.so, libarcher.so
    archer: str
    symbolizer: str | None
    version: str           # clang --version, first line (part of the cache key)


def _install_hint(what: str) -> str:
    return (f"{what}: the race and work-sharing checks need clang, LLVM's OpenMP runtime with "
            f"Archer and clang's ThreadSanitizer runtime (Debian: apt-get install {DEBIAN_PACKAGES}"
            "; gfortran too for Fortran)")


@functools.cache
def tools() -> Tools:
    """Find clang, libomp, Archer and the TSan runtime and prove they work together (a tiny
    OpenMP program under TSan + Archer, once per machine and clang version); raises
    RaceCheckUnavailable naming what is missing."""
    clang = shutil.which("clang") or next(
        (c for c in sorted(glob.glob("/usr/bin/clang-[0-9]*"), reverse=True)
         if re.fullmatch(r".*/clang-\d+", c)), None)
    if clang is None:
        raise RaceCheckUnavailable(_install_hint("clang is not installed"))
    version = subprocess.run([clang, "--version"], capture_output=True, text=True,
                             timeout=30).stdout.splitlines()[0]
    resource = subprocess.run([clang, "-print-resource-dir"], capture_output=True, text=True,
                              timeout=30).stdout.strip()
    candidates = [Path(resource).parent.parent] if resource else []     # .../llvm-N/lib
    candidates += [Path(p) for p in sorted(glob.glob("/usr/lib/llvm-*/lib"), reverse=True)]
    libdir = next((p for p in candidates if (p / "libomp.so").exists()), None)
    if libdir is None:
        raise RaceCheckUnavailable(_install_hint("LLVM's OpenMP runtime libomp is not installed"))
    archer = libdir / "libarcher.so"
    if not archer.exists():
        found = sorted(glob.glob("/usr/lib/llvm-*/lib/libarcher.so"))
        if not found:
            raise RaceCheckUnavailable(_install_hint("Archer (libarcher.so) is not installed"))
        archer = Path(found[-1])
    symbolizer = next((s for s in [str(libdir.parent / "bin" / "llvm-symbolizer"),
                                   shutil.which("llvm-symbolizer")] if s and Path(s).exists()),
                      None)
    found = Tools(clang, str(libdir), str(archer), symbolizer, version)
    _probe(found)
    return found


_PROBE = r"""
#include <stdio.h>
#include <stdlib.h>
int main(int argc, char **argv)
{
    static double y[64];
    double s = 0.0, shared = 0.0;
    int racy = argc > 1 && atoi(argv[1]);
#pragma omp parallel for reduction(+ : s)
    for (int i = 0; i < 64; i++) {
        y[i] = i;
        s += y[i];
    }
#pragma omp parallel
    {
#pragma omp single
        y[0] = s;
        if (racy)
            shared = y[1];                                              /* PROBE RACE */
    }
    printf("%g %g\n", y[0], shared);
    return 0;
}
"""


def _probe(t: Tools) -> None:
    """Prove that the tools work here, once per machine and clang version: a race-free OpenMP
    program under TSan + Archer must run with Archer started and no report, and the same program
    with a race must be reported at the racy line of its file."""
    digest = hashlib.sha1((t.version + t.archer + str(t.symbolizer) + _PROBE).encode()
                          ).hexdigest()[:16]
    marker = cache.private_dir("race-builds") / f"probe-{digest}.ok"
    if marker.exists():
        return
    with tempfile.TemporaryDirectory() as tmp:
        src, exe = Path(tmp) / "probe.c", Path(tmp) / "probe"
        src.write_text(_PROBE)
        built = subprocess.run([t.clang, "-fsanitize=thread", "-fopenmp", "-g", "-O1", str(src),
                                "-o", str(exe), f"-Wl,-rpath,{t.libdir}"],
                               capture_output=True, text=True, timeout=120)
        if built.returncode != 0:
            missing = "clang cannot link a -fsanitize=thread -fopenmp program"
            if "tsan" in built.stderr:
                missing = "clang's ThreadSanitizer runtime (libclang_rt.tsan) is not installed"
            elif "omp" in built.stderr:
                missing = "LLVM's OpenMP runtime libomp cannot be linked"
            raise RaceCheckUnavailable(_install_hint(missing) + f"\n{built.stderr.strip()}")
        ran = _run_tsan([str(exe), "0"], _tsan_env(t, 2), timeout=60)
        if "Archer detected OpenMP application with TSan" not in ran.stdout + ran.stderr:
            raise RaceCheckUnavailable(_install_hint(f"Archer ({t.archer}) does not start") +
                                       f"\n{ran.stdout}{ran.stderr}")
        if ran.returncode != 0 or "ThreadSanitizer" in ran.stderr:
            raise RaceCheckUnavailable(_install_hint(
                "TSan with Archer reports races in a race-free program (a mismatch of clang, "
                "libomp and Archer?)") + f"\n{ran.stderr[-3000:]}")
        ran = _run_tsan([str(exe), "1"], _tsan_env(t, 2), timeout=60)
        line = next(k + 1 for k, text in enumerate(src.read_text().splitlines())
                    if "PROBE RACE" in text)
        if [r.line for r in parse_tsan(ran.stderr, src)] != [line]:
            raise RaceCheckUnavailable(_install_hint(
                "TSan with Archer does not report a data race at its line (is llvm-symbolizer "
                "installed? Debian: the package llvm)") + f"\n{ran.stderr[-3000:]}")
    marker.write_text(t.version + "\n")


def _run_tsan(command: list[str], env: dict, timeout: float, cwd=None):
    """Run a TSan program; if TSan cannot map its shadow memory (a kernel with more address
    randomisation than LLVM 14 knows), again without address randomisation (setarch -R)."""
    result = subprocess.run(command, capture_output=True, text=True, timeout=timeout, env=env,
                            cwd=cwd)
    if "unexpected memory mapping" in result.stderr and shutil.which("setarch"):
        result = subprocess.run(["setarch", os.uname().machine, "-R", *command],
                                capture_output=True, text=True, timeout=timeout, env=env, cwd=cwd)
    return result


def _gfortran() -> str:
    gfortran = shutil.which("gfortran")
    if gfortran is None:
        raise RaceCheckUnavailable("gfortran is not installed (Debian: apt-get install gfortran)")
    return gfortran


def _tsan_env(t: Tools, threads: int) -> dict:
    options = [f"exitcode={TSAN_EXIT}", "halt_on_error=0", "report_signal_unsafe=0",
               "ignore_noninstrumented_modules=1", "history_size=4", "log_path=stderr"]
    if t.symbolizer:
        options.append(f"external_symbolizer_path={t.symbolizer}")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OMP_", "KMP_", "GOMP_"))}
    env.update({"OMP_NUM_THREADS": str(int(threads)), "OMP_TOOL": "enabled",
                "OMP_TOOL_LIBRARIES": t.archer, "OMP_WAIT_POLICY": "passive",
                "ARCHER_OPTIONS": "verbose=1", "TSAN_OPTIONS": " ".join(options)})
    return env


# --- the driver program: reads the arguments, calls the kernel once -------------------------------

_DRIVER = r"""
/* Written by course/grading/race_check.py: read the kernel's arguments from argv[1], call it
 * once. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

@DECLARATION@;

static FILE *in;

static void take(void *to, size_t bytes)
{
    if (bytes && fread(to, 1, bytes, in) != bytes) {
        fprintf(stderr, "course_race_driver: the argument file is too short\n");
        exit(3);
    }
}

static void *array(size_t item, int position)
{
    int64_t count;
    take(&count, sizeof count);
    void *p = malloc((count > 0 ? (size_t)count : 1) * item);
    if (p == NULL)
        exit(4);
    take(p, (size_t)count * item);
    fprintf(stderr, "course_race_driver: argument %d at %p, %lld bytes\n", position, p,
            (long long)count * (long long)item);
    return p;
}

#ifdef COURSE_WORK_TOOL
void course_work_report(const char *path);
#endif

int main(int argc, char **argv)
{
    if (argc < 2 || (in = fopen(argv[1], "rb")) == NULL) {
        fprintf(stderr, "course_race_driver: cannot read the arguments\n");
        return 2;
    }
@READ@
    fclose(in);
    fflush(stderr);
    @CALL@;
#ifdef COURSE_WORK_TOOL
    course_work_report(argc > 2 ? argv[2] : "work.txt");
#endif
    return 0;
}
"""

# The OMPT tool of work_sharing(), compiled into the driver (libomp finds ompt_start_tool in the
# executable, exported with -rdynamic). Per parallel region: the nesting level, the requested and
# the actual number of threads; per thread of it: worksharing loops begun, iterations received
# (-1: not known), the loops' total trip counts.
_WORK_TOOL = r"""
#define _GNU_SOURCE
#include <dlfcn.h>
#include <omp-tools.h>
#include <stdint.h>
#include <stdio.h>

#define MAX_REGIONS 4096
#define MAX_THREADS 64

static int n_regions, overflow, n_outermost;
static unsigned requested[MAX_REGIONS], team[MAX_REGIONS], level[MAX_REGIONS];
static int loops[MAX_REGIONS][MAX_THREADS], unknown[MAX_REGIONS][MAX_THREADS];
static long long iters[MAX_REGIONS][MAX_THREADS], trips[MAX_REGIONS];
static __thread int my_region = -1, my_index = -1;

/* task_data->value of an implicit task: 1 + region * MAX_THREADS + index (0: initial task) */
static void parallel_begin(ompt_data_t *encountering, const ompt_frame_t *frame,
                           ompt_data_t *parallel, unsigned req, int flags, const void *ra)
{
    int r = __atomic_fetch_add(&n_regions, 1, __ATOMIC_RELAXED);
    parallel->value = (uint64_t)r;
    /* outermost: met by the initial task (value 0), not by a thread of a region; counted past
     * the end of the tables too */
    if (!encountering || !encountering->value)
        __atomic_fetch_add(&n_outermost, 1, __ATOMIC_RELAXED);
    if (r >= MAX_REGIONS) {
        overflow = 1;
        return;
    }
    requested[r] = req;
    level[r] = 1;
    if (encountering && encountering->value) {
        int outer = (int)((encountering->value - 1) / MAX_THREADS);
        level[r] = outer < MAX_REGIONS ? level[outer] + 1 : 2;
    }
}

static void implicit_task(ompt_scope_endpoint_t endpoint, ompt_data_t *parallel,
                          ompt_data_t *task, unsigned actual, unsigned index, int flags)
{
    if (flags & ompt_task_initial) {
        task->value = 0;
        return;
    }
    if (endpoint == ompt_scope_begin) {
        int r = (int)parallel->value;
        task->value = 1 + (uint64_t)r * MAX_THREADS + index;
        my_region = r;
        my_index = (int)index;
        if (r < MAX_REGIONS)
            team[r] = actual;
    } else {
        my_region = -1;
        my_index = -1;
    }
}

static int current(int *r, int *i)
{
    *r = my_region;
    *i = my_index;
    return *r >= 0 && *r < MAX_REGIONS && *i >= 0 && *i < MAX_THREADS;
}

static void work(ompt_work_t type, ompt_scope_endpoint_t endpoint, ompt_data_t *parallel,
                 ompt_data_t *task, uint64_t count, const void *ra)
{
    int r, i;
    if (type != ompt_work_loop || endpoint != ompt_scope_begin || !current(&r, &i))
        return;
    loops[r][i]++;
    unknown[r][i]++;            /* until the runtime tells this thread its iterations */
    if ((long long)count > trips[r])
        trips[r] = (long long)count;
}

static int initialize(ompt_function_lookup_t lookup, int device, ompt_data_t *data)
{
    ompt_set_callback_t set = (ompt_set_callback_t)lookup("ompt_set_callback");
    set(ompt_callback_parallel_begin, (ompt_callback_t)parallel_begin);
    set(ompt_callback_implicit_task, (ompt_callback_t)implicit_task);
    set(ompt_callback_work, (ompt_callback_t)work);
    return 1;
}

static void finalize(ompt_data_t *data) {}

ompt_start_tool_result_t *ompt_start_tool(unsigned version, const char *runtime)
{
    static ompt_start_tool_result_t result = {initialize, finalize, {0}};
    return &result;
}

/* clang's `omp for` with a static schedule: the runtime gives this thread its first chunk
 * [*lower, *upper] and the stride to its next chunk; count the iterations it gets. */
static long long chunks(long long lo, long long hi, long long stride, long long incr,
                        long long last)
{
    if (incr < 0)
        return chunks(-lo, -hi, -stride, -incr, -last);
    if (lo > hi || incr <= 0)
        return 0;
    long long n = 0, span = hi - lo;
    for (long long l = lo; l <= last; l += stride) {
        long long h = l + span < last ? l + span : last;
        n += (h - l) / incr + 1;
        if (stride <= 0)
            break;
    }
    return n;
}

static void got(long long n)
{
    int r, i;
    if (!current(&r, &i))
        return;
    iters[r][i] += n;
    if (unknown[r][i] > 0)
        unknown[r][i]--;
}

#define STATIC_INIT(NAME, T, S)                                                                   \
    void NAME(void *loc, int32_t gtid, int32_t sched, int32_t *last, T *lower, T *upper,          \
              S *stride, S incr, S chunk)                                                          \
    {                                                                                              \
        static void (*real)(void *, int32_t, int32_t, int32_t *, T *, T *, S *, S, S);            \
        if (!real)                                                                                 \
            *(void **)&real = dlsym(RTLD_NEXT, #NAME);                                            \
        long long end = (long long)*upper;                                                         \
        real(loc, gtid, sched, last, lower, upper, stride, incr, chunk);                          \
        got(chunks((long long)*lower, (long long)*upper, (long long)*stride, (long long)incr,    \
                   end));                                                                          \
    }
STATIC_INIT(__kmpc_for_static_init_4, int32_t, int32_t)
STATIC_INIT(__kmpc_for_static_init_4u, uint32_t, int32_t)
STATIC_INIT(__kmpc_for_static_init_8, int64_t, int64_t)
STATIC_INIT(__kmpc_for_static_init_8u, uint64_t, int64_t)

#ifdef COURSE_GFORTRAN_STATIC
/* gfortran's schedule(static) loops: each thread asks omp_get_num_threads() (then
 * omp_get_thread_num()) and computes its rows inline; count the first call as a loop. */
int omp_get_num_threads(void)
{
    static int (*real)(void);
    if (!real)
        *(void **)&real = dlsym(RTLD_NEXT, "omp_get_num_threads");
    int r, i;
    if (current(&r, &i)) {
        loops[r][i]++;
        unknown[r][i]++;
    }
    return real();
}
#endif

void course_work_report(const char *path)
{
    FILE *out = fopen(path, "w");
    if (out == NULL)
        return;
    int n = n_regions < MAX_REGIONS ? n_regions : MAX_REGIONS;
    fprintf(out, "regions %d overflow %d outermost %d\n", n_regions, overflow, n_outermost);
    for (int r = 0; r < n; r++) {
        unsigned t = team[r] < MAX_THREADS ? team[r] : MAX_THREADS;
        fprintf(out, "region %d level %u requested %u team %u trips %lld\n", r, level[r],
                requested[r], team[r], trips[r]);
        for (unsigned i = 0; i < t; i++)
            fprintf(out, "thread %d %u loops %d iterations %lld unknown %d\n", r, i, loops[r][i],
                    iters[r][i], unknown[r][i]);
    }
    fclose(out);
}
"""

# the size of the tool's per-region table (regions past it are counted, not described)
MAX_REGIONS = int(re.search(r"#define MAX_REGIONS (\d+)", _WORK_TOOL).group(1))


def _signature(args: list) -> tuple[list[str], list[np.ndarray]]:
    """Type codes (i int, d double, I int32 array, D float64 array) and the values to write."""
    codes, values = [], []
    for k, a in enumerate(args):
        if isinstance(a, (bool, np.bool_)):
            raise TypeError(f"argument {k}: a bool is not a kernel argument")
        if isinstance(a, (int, np.integer)):
            codes.append("i")
            values.append(np.asarray(a, dtype=np.int32))
        elif isinstance(a, (float, np.floating)):
            codes.append("d")
            values.append(np.asarray(a, dtype=np.float64))
        else:
            a = np.asarray(a)
            if a.dtype.kind in "iu":
                if a.size and (a.min() < -2**31 or a.max() >= 2**31):
                    raise ValueError(f"argument {k}: integers beyond the range of int32")
                codes.append("I")
                values.append(np.ascontiguousarray(a, dtype=np.int32))
            elif a.dtype.kind == "f":
                codes.append("D")
                values.append(np.ascontiguousarray(a, dtype=np.float64))
            else:
                raise TypeError(f"argument {k}: arrays of {a.dtype} are not kernel arguments")
    return codes, values


def _write_args(path: Path, codes: list[str], values: list[np.ndarray]) -> None:
    with open(path, "wb") as f:
        for code, v in zip(codes, values):
            if code in "ID":
                f.write(np.int64(v.size).tobytes())
            f.write(v.tobytes())


_CTYPE = {"i": "int", "d": "double", "I": "int *", "D": "double *"}


def _driver_source(kernel: str, codes: list[str], returns_int: bool) -> str:
    if not re.fullmatch(r"[A-Za-z_]\w*", kernel):
        raise ValueError(f"not a function name: {kernel!r}")
    params = ", ".join(_CTYPE[c] for c in codes) or "void"
    declaration = f"{'int' if returns_int else 'void'} {kernel}({params})"
    read = []
    for k, c in enumerate(codes):
        if c in "id":
            read.append(f"    {_CTYPE[c]} a{k};\n    take(&a{k}, sizeof a{k});")
        else:
            item = "int" if c == "I" else "double"
            read.append(f"    {_CTYPE[c]}a{k} = array(sizeof({item}), {k});")
    call = f"{kernel}({', '.join(f'a{k}' for k in range(len(codes)))})"
    if returns_int:
        call = f"(void){call}"
    return (_DRIVER.replace("@DECLARATION@", declaration).replace("@READ@", "\n".join(read))
            .replace("@CALL@", call))


def _build(source: Path, lang: str, kernel: str, codes: list[str], returns_int: bool,
           mode: str) -> Path:
    """The driver executable for `mode` ('tsan' or 'work'), cached by content hash (the source's
    path too: the debug information names it)."""
    t = tools()
    fortran = _gfortran() if lang == "fortran" else None
    driver = _driver_source(kernel, codes, returns_int)
    if mode == "tsan":
        kernel_cmd = ([t.clang, "-std=c99"] if lang == "c" else [fortran, "-ffree-form"]) + \
            ["-fopenmp", "-fsanitize=thread", "-g", "-O1", "-fno-omit-frame-pointer"]
        driver_flags = ["-fsanitize=thread", "-g", "-O1"]
    else:
        # gfortran at -O0: with optimisation it calls omp_get_num_threads() once per region,
        # not once per static loop (a const function to GCC)
        kernel_cmd = ([t.clang, "-std=c99", "-O2"] if lang == "c" else
                      [fortran, "-ffree-form", "-O0"]) + ["-fopenmp", "-g"]
        driver_flags = ["-O1", "-DCOURSE_WORK_TOOL", "-rdynamic"] + \
            (["-DCOURSE_GFORTRAN_STATIC"] if lang == "fortran" else [])
        driver += _WORK_TOOL
    key = "\0".join([source.read_bytes().decode(errors="replace"), str(source), lang, mode,
                     driver, " ".join(kernel_cmd), " ".join(driver_flags), t.version,
                     t.libdir, fortran or ""])
    digest = hashlib.sha1(key.encode()).hexdigest()[:16]
    exe = cache.private_dir("race-builds") / f"{source.stem}-{mode}-{digest}"
    if exe.exists():
        return exe
    with tempfile.TemporaryDirectory() as tmp:          # Fortran writes .mod files into the cwd
        tmp = Path(tmp)
        (tmp / _DRIVER_NAME).write_text(driver)
        steps = [
            (kernel_cmd + ["-c", str(source), "-o", "kernel.o"],
             f"{source.name} does not compile"),
            ([t.clang, "-fopenmp", *driver_flags, "-c", _DRIVER_NAME, "-o", "driver.o"],
             "the driver of the race check does not compile"),
            ([t.clang, "-fopenmp", *driver_flags, "driver.o", "kernel.o", "-o", "driver",
              f"-L{t.libdir}", f"-Wl,-rpath,{t.libdir}", "-ldl", "-lm"]
             + (["-lgfortran"] if lang == "fortran" else []),
             f"{source.name} does not link with the driver (is {kernel} defined, with the "
             "signature of the task?)"),
        ]
        for command, what in steps:
            result = subprocess.run(command, capture_output=True, text=True, cwd=tmp,
                                    timeout=120)
            if result.returncode != 0:
                raise AssertionError(f"{what}:\n{result.stderr.strip()}")
        os.replace(tmp / "driver", exe)
    return exe


def _run(exe: Path, codes, values, env: dict, timeout: float, what: str, extra=()):
    with tempfile.TemporaryDirectory() as tmp:
        args_path = Path(tmp) / "args.bin"
        _write_args(args_path, codes, values)
        try:
            result = _run_tsan([str(exe), str(args_path), *[str(Path(tmp) / e) for e in extra]],
                               env, timeout, cwd=tmp)
        except subprocess.TimeoutExpired:
            raise AssertionError(f"{what} did not finish within {timeout:g} s (an endless loop? "
                                 "threads waiting for each other at different barriers?)") from None
        files = {e: (Path(tmp) / e).read_text() if (Path(tmp) / e).exists() else None
                 for e in extra}
    return result, files


# --- ThreadSanitizer reports -------------------------------------------------------------------

@dataclass(frozen=True)
class Race:
    """One report of TSan, at the learner's file: `kind` (e.g. 'data race'), the file's name and
    the line of one access (`access`: 'write' or 'read', 'atomic write', ...), the line and kind of
    the other access (None where TSan gives no stack in the learner's file), and what the memory is
    (`location`: 'the argument y', 'a variable of the kernel', 'heap', '')."""
    kind: str
    file: str
    line: int
    access: str = "write"
    other_line: int | None = None
    other_access: str | None = None
    location: str = ""

    def lines(self) -> list[int]:
        return sorted({self.line} | ({self.other_line} if self.other_line else set()))


_WARNING = re.compile(r"^WARNING: ThreadSanitizer: (.+?)(?: \(pid=\d+\))?\s*$")
_ACCESS = re.compile(r"^\s+(Previous )?((?:atomic )?(?:read|write)) of size \d+ at (0x[0-9a-f]+)",
                     re.I)
_FRAME = re.compile(r"^\s+#\d+ (\S+) (\S+?):(\d+)(?::\d+)? \(")
_HEAP = re.compile(r"Location is heap block of size \d+ at (0x[0-9a-f]+)")
_ARG = re.compile(r"course_race_driver: argument (\d+) at (0x[0-9a-f]+|\(nil\)), (\d+) bytes")


def parse_tsan(stderr: str, source: str | Path, names=None, kernel: str = "the kernel"
               ) -> list[Race]:
    """The reports of TSan in `stderr` that have an access in the file `source`, as Races
    (duplicates dropped). names: the kernel's argument names, to say which array is raced on."""
    source = Path(source)
    args = {int(a, 16) if a != "(nil)" else 0: (int(k), int(size))
            for k, a, size in _ARG.findall(stderr)}
    races = []
    for block in re.split(r"^==================\s*$", stderr, flags=re.M):
        lines = block.strip("\n").splitlines()
        kind = next((m.group(1) for m in map(_WARNING.match, lines) if m), None)
        if kind is None:
            continue
        accesses = []                    # (previous?, access, address, first frame in source)
        for text in lines:
            m = _ACCESS.match(text)
            if m:
                accesses.append([bool(m.group(1)), m.group(2).lower(), int(m.group(3), 16), None])
                continue
            f = _FRAME.match(text)
            if f and accesses and accesses[-1][3] is None and _same_file(f.group(2), source):
                accesses[-1][3] = int(f.group(3))
        mine = [a for a in accesses if a[3] is not None]
        if not mine:
            continue
        location = ""
        heap = _HEAP.search(block)
        if heap:
            start = int(heap.group(1), 16)
            location = "memory on the heap"
            if start in args:
                k, _ = args[start]
                location = (f"the argument {names[k]}" if names and k < len(names)
                            else f"argument {k + 1} of {kernel}")
        elif re.search(r"Location is stack of main thread", block):
            location = f"a variable of {kernel} shared by the threads"
        elif re.search(r"Location is stack of thread", block):
            location = "a variable on a thread's stack"
        elif re.search(r"Location is global", block):
            location = "a global variable"
        first = next((a for a in mine if not a[0]), mine[0])
        other = next((a for a in mine if a is not first), None)
        if other is None:
            other = next((a for a in accesses if a is not first), None)
        race = Race(kind, source.name, first[3], first[1],
                    other[3] if other else None, other[1] if other else None, location)
        if other is not None and other[3] is not None and other[3] < first[3]:   # a stable order
            race = Race(kind, source.name, other[3], other[1], first[3], first[1], location)
        if race not in races:
            races.append(race)
    return sorted(races, key=lambda r: (r.line, r.other_line or 0, r.kind))


def _same_file(path: str, source: Path) -> bool:
    if Path(path).name != source.name:
        return False
    try:
        return Path(path).resolve() == source.resolve()
    except OSError:
        return True


def data_races(source: str | Path, lang: str, kernel: str, args: list, threads: int = 2,
               timeout: float = 20.0, returns_int: bool = False, names=None) -> list[Race]:
    """Run `kernel(*args)` of the learner's file once under ThreadSanitizer + Archer with
    OMP_NUM_THREADS=threads; return the races TSan reports in the file (empty: none seen).

    Raises AssertionError if the file does not compile, or the run crashes or takes longer than
    `timeout` seconds; RaceCheckUnavailable if the tools are missing."""
    source = learner_source(source, lang).resolve()
    codes, values = _signature(args)
    exe = _build(source, lang, kernel, codes, returns_int, "tsan")
    t = tools()
    what = f"{kernel} under the race detector with OMP_NUM_THREADS={int(threads)}"
    result, _ = _run(exe, codes, values, _tsan_env(t, threads), timeout, what)
    output = result.stdout + result.stderr
    if "Archer detected OpenMP application with TSan" not in output:
        raise RaceCheckUnavailable(_install_hint("Archer did not start") + f"\n{output[-2000:]}")
    if result.returncode not in (0, TSAN_EXIT):
        tail = "\n".join(line for line in result.stderr.splitlines()
                         if not line.startswith("course_race_driver: argument"))[-3000:]
        raise AssertionError(f"{what} crashed (exit status {result.returncode}):\n{tail}")
    races = parse_tsan(result.stderr, source, names=names, kernel=kernel)
    if not races and "WARNING: ThreadSanitizer" in result.stderr and \
            not any(_FRAME.match(line) for line in result.stderr.splitlines()):
        raise RaceCheckUnavailable(_install_hint("TSan's reports name no source lines (is "
                                                 "llvm-symbolizer installed?)"))
    return races


def _source_line(source: Path, line: int) -> str:
    try:
        text = source.read_text(errors="replace").splitlines()[line - 1].strip()
    except (OSError, IndexError):
        return ""
    return f" (`{text}`)" if text else ""


def race_message(races: list[Race], source: str | Path, hint: str = HINT_GENERAL,
                 most: int = 6) -> str:
    """A message for the learner that names the line(s) of each race (the first `most` of them)
    and what to do, e.g. "a data race on line 12 of ell_matvec.c (`s = d[i] * x[i];`): two
    threads write the same variable (a variable of ell_matvec shared by the threads) without
    synchronisation (make it private to each thread, ...)"."""
    source = Path(source)
    parts, general = [], False
    for race in races[:most]:
        if race.other_line is None or race.other_line == race.line:
            lines = f"line {race.line} of {race.file}{_source_line(source, race.line)}"
        else:
            lines = (f"lines {race.line}{_source_line(source, race.line)} and {race.other_line}"
                     f"{_source_line(source, race.other_line)} of {race.file}")
        if race.kind != "data race":
            parts.append(f"ThreadSanitizer reports a {race.kind} on {lines}")
            continue
        where = f" ({race.location})" if race.location else ""
        if race.access.endswith("write") and (race.other_access or "").endswith("write"):
            if race.location.startswith(("the argument", "argument")):
                parts.append(f"a data race on {lines}: two threads write the same entries of "
                             f"{race.location} (does every thread compute every row? share the "
                             "rows among the threads with `omp for` (C) or `omp do` (Fortran))")
                continue
            what = f"two threads write the same variable{where} without synchronisation"
        else:
            what = (f"one thread writes a variable{where} that another thread reads, and nothing "
                    "orders the two (no barrier between them)")
        parts.append(f"a data race on {lines}: {what}")
        general = True
    if not parts:
        return "no data race found"
    if len(races) > most:
        parts.append(f"and {len(races) - most} more")
    return "; ".join(parts) + (f" ({hint})" if general else "")


def check_no_races(source: str | Path, lang: str, kernel: str, args: list, threads: int = 2,
                   timeout: float = 20.0, returns_int: bool = False, names=None,
                   hint: str = HINT_GENERAL) -> None:
    """data_races(), raising AssertionError with race_message() if TSan reports any."""
    races = data_races(source, lang, kernel, args, threads=threads, timeout=timeout,
                       returns_int=returns_int, names=names)
    if races:
        raise AssertionError(f"{kernel} with OMP_NUM_THREADS={int(threads)}: "
                             + race_message(races, source, hint))


# --- work sharing (OMPT) ------------------------------------------------------------------------

@dataclass
class WorkReport:
    """What the OpenMP runtime saw in one call, per outermost parallel region (in order): the
    threads that ran it (team_sizes), per thread the worksharing loops it began
    (loops_per_thread) and the iterations it got (iterations_per_thread; None for a region where
    they are not known: gfortran's static schedules, dynamic ones), and the largest trip count of
    the region's loops as the runtime saw them (trip_counts; 0 if none seen). These lists stop
    at the tool's table of MAX_REGIONS regions; `regions` counts every outermost region the call
    opened (None where the report does not say: then len(team_sizes))."""
    team_sizes: list[int]
    loops_per_thread: list[list[int]]
    iterations_per_thread: list[list[int] | None]
    trip_counts: list[int] = field(default_factory=list)
    requested: list[int] = field(default_factory=list)
    regions: int | None = None

    @property
    def region_count(self) -> int:
        """The outermost parallel regions of the call, all of them."""
        return len(self.team_sizes) if self.regions is None else self.regions


def _parse_work(text: str) -> WorkReport:
    report = WorkReport([], [], [], [], [])
    regions, unknown = {}, {}
    for line in text.splitlines():
        m = re.match(r"regions \d+ overflow \d+ outermost (\d+)", line)
        if m:
            report.regions = int(m.group(1))
            continue
        m = re.match(r"region (\d+) level (\d+) requested (\d+) team (\d+) trips (-?\d+)", line)
        if m:
            r, level, req, team, trips = map(int, m.groups())
            if level == 1:
                regions[r] = len(report.team_sizes)
                report.team_sizes.append(team)
                report.requested.append(req)
                report.trip_counts.append(trips)
                report.loops_per_thread.append([])
                report.iterations_per_thread.append([])
                unknown[r] = False
            continue
        m = re.match(r"thread (\d+) (\d+) loops (\d+) iterations (-?\d+) unknown (\d+)", line)
        if m:
            r, _, loops, iters, unk = map(int, m.groups())
            if r in regions:
                report.loops_per_thread[regions[r]].append(loops)
                report.iterations_per_thread[regions[r]].append(iters)
                unknown[r] = unknown[r] or unk > 0
    for r, k in regions.items():
        if unknown[r]:
            report.iterations_per_thread[k] = None
    return report


def work_sharing(source: str | Path, lang: str, kernel: str, args: list, threads: int = 2,
                 timeout: float = 20.0, returns_int: bool = False) -> WorkReport:
    """Run `kernel(*args)` once with OMP_NUM_THREADS=threads under the OMPT tool; return what
    the runtime saw (WorkReport)."""
    source = learner_source(source, lang).resolve()
    codes, values = _signature(args)
    exe = _build(source, lang, kernel, codes, returns_int, "work")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OMP_", "KMP_", "GOMP_"))}
    env.update({"OMP_NUM_THREADS": str(int(threads)), "OMP_TOOL": "enabled",
                "OMP_WAIT_POLICY": "passive"})
    what = f"{kernel} with OMP_NUM_THREADS={int(threads)}"
    result, files = _run(exe, codes, values, env, timeout, what, extra=("work.txt",))
    if result.returncode != 0:
        raise AssertionError(f"{what} crashed (exit status {result.returncode}):\n"
                             f"{result.stderr[-3000:]}")
    if files["work.txt"] is None:
        raise AssertionError(f"{what}: the work-sharing tool wrote no report")
    return _parse_work(files["work.txt"])


def region_problem(count: int, lang: str, kernel: str, threads: int, advice: str = "") -> str:
    """The message for a kernel that opened `count` (> 1) outermost parallel regions in one call
    where its task asks for one; `advice`: a sentence on what runs inside that one region."""
    if lang == "c":
        how = ("`#pragma omp parallel` followed by a block `{ ... }`", "`#pragma omp for`",
               "`#pragma omp parallel for`")
    else:
        how = ("`!$omp parallel` ... `!$omp end parallel`", "`!$omp do` ... `!$omp end do`",
               "`!$omp parallel do`")
    return (f"{kernel} opened {count} parallel regions in one call (OMP_NUM_THREADS={threads}), "
            f"where the task asks for one. Every parallel region is a fork and a join: the "
            f"threads are woken up at its start, and all of them wait for the last one at its end. "
            f"That cost does not shrink with the loop (lecture 03_openmp, part 3: \"What a "
            f"parallel region costs\"), and {count} regions pay it {count} times. Open one region, "
            f"{how[0]}, around all of the kernel's loops, and share each loop inside it with "
            f"{how[1]} instead of {how[2]} (the implied barrier at the end of each worksharing "
            f"loop keeps the steps in order)." + (f" {advice}" if advice else ""))


def work_problems(report: WorkReport, lang: str, kernel: str, threads: int,
                  regions: int | None = None, region_advice: str = "") -> list[str]:
    """What is wrong with the sharing of the work in `report` (empty: nothing). regions: the
    number of outermost parallel regions the task asks for in one call (None: any number);
    region_advice: what to do inside that one region (see region_problem)."""
    loop = ("`#pragma omp parallel for`, or `#pragma omp for` inside the parallel region"
            if lang == "c" else "`!$omp parallel do`, or `!$omp do` inside the parallel region")
    if not report.team_sizes:
        return [f"{kernel} opens no parallel region: share the rows among the threads with {loop}"]
    problems = []
    if regions is not None and report.region_count != regions:
        problems.append(region_problem(report.region_count, lang, kernel, threads, region_advice))
    for k, size in enumerate(report.team_sizes):
        region = "its parallel region" if len(report.team_sizes) == 1 else \
            f"its parallel region number {k + 1}"
        if size < threads:
            problems.append(
                f"{kernel} ran {region} on {size} thread{'s' if size != 1 else ''} with "
                f"OMP_NUM_THREADS={threads}: remove num_threads(...) / if(...) from the "
                "directive, and let OMP_NUM_THREADS choose the threads")
            continue
        loops = report.loops_per_thread[k]
        if not any(loops):
            problems.append(
                f"no worksharing loop in {region} of {kernel}: every thread ran the whole loop, "
                f"the rows were not shared among the threads — use {loop}")
            continue
        iters = report.iterations_per_thread[k]
        trips = report.trip_counts[k]
        if iters is not None and trips >= size and sum(iters) > 0:
            idle = [i for i, n in enumerate(iters) if n == 0]
            if idle:
                busy = max(range(len(iters)), key=lambda i: iters[i])
                problems.append(
                    f"in {region} of {kernel}, thread {busy} ran {iters[busy]} iterations and "
                    f"thread{'s' if len(idle) > 1 else ''} {', '.join(map(str, idle))} none: the "
                    "rows were not shared (a chunk size as large as the loop?)")
    return problems


def check_work_sharing(source: str | Path, lang: str, kernel: str, args: list,
                       threads: int = 2, timeout: float = 20.0, returns_int: bool = False,
                       regions: int | None = None, region_advice: str = "",
                       most: int = 3) -> WorkReport:
    """work_sharing(), raising AssertionError with a message for the learner if the kernel does
    not share its work among `threads` threads, or (regions) opens another number of outermost
    parallel regions per call (the first `most` problems are named); returns the report."""
    report = work_sharing(source, lang, kernel, args, threads=threads, timeout=timeout,
                          returns_int=returns_int)
    problems = work_problems(report, lang, kernel, int(threads), regions, region_advice)
    if problems:
        more = [f"and {len(problems) - most} more"] if len(problems) > most else []
        raise AssertionError("; ".join(problems[:most] + more))
    return report


# --- the checks of exercise 03_openmp, ready to call ----------------------------------------------

ELL_NAMES = ("n", "d", "item_ell", "amat_ell", "x", "y")
CG_NAMES = ("n", "d", "item_ell", "amat_ell", "b", "x", "eps", "max_iter", "relres")


def ell_matvec_args(lang: str, n: int = 60, seed: int = 1) -> list:
    """Arguments of ell_matvec (course.h) for a random ELL matrix of n rows (Fortran: 1-based)."""
    from .exercise import random_ell

    d, item, amat, x = random_ell(n, seed)
    return [int(d.size), d, item + (lang == "fortran"), amat, x, np.zeros(d.size)]


def cg_args(lang: str, size=(6, 5, 4), eps: float = 1e-8) -> list:
    """Arguments of cg_single_region / pcg_v3 (course.h) for the Poisson problem on `size` cells
    (Fortran: 1-based columns)."""
    from ..fem import fvm

    problem = fvm.poisson(*size, fmt="ell")
    n = problem.n
    return [n, problem.d, problem.off.item + (lang == "fortran"), problem.off.val, problem.b,
            np.zeros(n), float(eps), 10 * n, np.zeros(1)]


def where_available(check, *args, **kwargs) -> bool:
    """A race and work-sharing check for a learner's own check cell (what Validate runs):
    `check(*args, **kwargs)` where this machine has the race detector, so that a race fails the
    cell here as it would at grading. Where it has not (macOS's Apple clang, a laptop without
    LLVM's OpenMP), says so and how to get one instead of failing; the grader runs the check in any
    case. Returns whether the check ran."""
    try:
        tools()
    except RaceCheckUnavailable as err:
        print(f"NOT checked here for data races and work sharing: {str(err).splitlines()[0]}. "
              "The grader checks them. On macOS, Apple's clang has neither ThreadSanitizer for "
              "OpenMP nor Archer: run this cell on Linux (a VM, WSL, or the course's JupyterHub).")
        return False
    check(*args, **kwargs)
    print("no data race found, and the threads share the work")
    return True


def check_openmp_kernel(source: str | Path, lang: str, kernel: str, args: list, names=None,
                        returns_int: bool = False, threads: int = 2, hint: str = HINT_GENERAL,
                        timeout: float = 20.0, regions: int | None = None,
                        region_advice: str = "") -> None:
    """Both checks: the work is shared among `threads` threads (check_work_sharing; with
    `regions`, in that many outermost parallel regions per call), and TSan sees no data race
    (check_no_races). Raises AssertionError with a message for the learner."""
    check_work_sharing(source, lang, kernel, args, threads=threads, timeout=timeout,
                       returns_int=returns_int, regions=regions, region_advice=region_advice)
    check_no_races(source, lang, kernel, args, threads=threads, timeout=timeout,
                   returns_int=returns_int, names=names, hint=hint)


def check_ell_matvec_openmp(source: str | Path, lang: str, threads: int = 2,
                            timeout: float = 20.0) -> None:
    """The learner's ell_matvec shares its rows among the threads and has no data race."""
    check_openmp_kernel(source, lang, "ell_matvec", ell_matvec_args(lang), names=ELL_NAMES,
                        threads=threads, hint=HINT_PRIVATE, timeout=timeout)


def check_cg_openmp(source: str | Path, lang: str, kernel: str = "cg_single_region",
                    threads: int = 2, timeout: float = 20.0) -> None:
    """The learner's CG opens one parallel region per call (the subject of the task: one fork
    and one join for the whole solve), runs it on `threads` threads, shares its loops, and has no
    data race."""
    single = "`#pragma omp single`" if lang == "c" else "`!$omp single` ... `!$omp end single`"
    check_openmp_kernel(source, lang, kernel, cg_args(lang), names=CG_NAMES, returns_int=True,
                        threads=threads, hint=HINT_GENERAL, timeout=timeout, regions=1,
                        region_advice="Every thread runs the whole solve in that region, the "
                        f"iteration loop included, and the statements between the loops go into "
                        f"{single}.")
