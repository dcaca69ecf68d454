"""course.grading.race_check: ThreadSanitizer + Archer finds the data races that right results hide, and the
OMPT work-sharing check sees through num_threads(1), if(0) and a region without a worksharing loop.

The kernels are the course's own (ell_matvec of src_*/03_openmp/spmv.*, pcg_v3 of pcg.*, cut out of
their files) and variants of them with one defect each. Every variant is built once (module-scope
fixtures; the builds are cached by content hash) and run with 2 threads."""

from __future__ import annotations

import re

import numpy as np
import pytest

from course.grading import exercise, race_check
from course.native import ROOT

LANGS = ("c", "fortran")
SUFFIX = {"c": ".c", "fortran": ".f90"}


@pytest.fixture(scope="module")
def tools():
    try:
        return race_check.tools()
    except race_check.RaceCheckUnavailable as err:
        pytest.skip(str(err))


def need_fortran():
    try:
        race_check._gfortran()
    except race_check.RaceCheckUnavailable as err:
        pytest.skip(str(err))


# --- the course's kernels, cut out of their files -------------------------------------------------

def region(path, name: str, lang: str) -> str:
    """The text between the markers [name] of a course source file."""
    text = (ROOT / path).read_text()
    if lang == "c":
        start = text.index(f"/* [{name}]")
        return text[start:text.index(f"/* [{name}] */", start + 1)]
    start = text.index(f"! [{name}]\n")
    return text[start:text.index(f"! [{name}]\n", start + 1)]


def kernel_file(path, name: str, lang: str) -> str:
    """A source file of its own with the kernel `name` of the course file `path`."""
    body = region(path, name, lang)
    if lang == "c":
        return "#include <math.h>\n#include <stddef.h>\n#include <stdlib.h>\n\n" + body
    return ("module race_check_kernel\n    use, intrinsic :: iso_c_binding, only: c_int, c_double\n"
            "    implicit none\ncontains\n\n" + body + "end module race_check_kernel\n")


def changed(text: str, *replacements) -> str:
    """`text` with each (old, new) replaced exactly once."""
    for old, new in replacements:
        assert text.count(old) == 1, f"{old!r} occurs {text.count(old)} times"
        text = text.replace(old, new)
    return text


def line_of(text: str, fragment: str) -> int:
    (number,) = [k + 1 for k, line in enumerate(text.splitlines()) if fragment in line]
    return number


ELL_SOURCE = {"c": "src_c/03_openmp/spmv.c", "fortran": "src_fortran/03_openmp/spmv.f90"}
CG_SOURCE = {"c": "src_c/03_openmp/pcg.c", "fortran": "src_fortran/03_openmp/pcg.f90"}
PAR_C = "#pragma omp parallel for schedule(static)"
PAR_F = "!$omp parallel do schedule(static) private(m, s)"

# the defects: (old, new) replacements in the course's ell_matvec, and the line TSan must name
ELL_VARIANTS = {
    "c": {
        "ok": [],
        # the accumulator declared before the loop: shared by all threads
        "shared": [("{\n" + PAR_C, "{\n    double s;\n" + PAR_C),
                   ("        double s = d[i] * x[i];", "        s = d[i] * x[i];")],
        "nofor": [(PAR_C, "#pragma omp parallel")],
        "num_threads": [(PAR_C, PAR_C + " num_threads(1)")],
        "if0": [(PAR_C, PAR_C + " if(0)")],
    },
    "fortran": {
        "ok": [],
        "shared": [(PAR_F, "!$omp parallel do schedule(static) private(m)")],
        "nofor": [(PAR_F, "!$omp parallel private(m, s)"),
                  ("!$omp end parallel do", "!$omp end parallel")],
        "num_threads": [(PAR_F, PAR_F + " num_threads(1)")],
        "if0": [(PAR_F, PAR_F + " if(.false.)")],
    },
}
SHARED_LINE = {"c": "s = d[i] * x[i];", "fortran": "s = d(i) * x(i)"}

# pcg_v3 with `pq = 0` moved out of its `single`: every thread resets the shared pq (the same value,
# and a barrier follows before the reduction into pq: the results stay right, but it is a race)
CG_VARIANTS = {
    "c": {
        "ok": [],
        "reset": [("            {\n                beta = iter == 0 ? 0.0 : rho / rho_old;\n"
                   "                pq = 0.0;\n            }\n",
                   "            beta = iter == 0 ? 0.0 : rho / rho_old;\n"
                   "            pq = 0.0;      /* every thread */\n")],
    },
    "fortran": {
        "ok": [],
        "reset": [("        pq = 0.0_c_double\n        !$omp end single\n",
                   "        !$omp end single\n        pq = 0.0_c_double      ! every thread\n")],
    },
}
RESET_LINE = {"c": "pq = 0.0;      /* every thread */",
              "fortran": "pq = 0.0_c_double      ! every thread"}

# pcg_v3 back to one parallel region per loop (v2's way): no outer region, `parallel for` on every
# loop, the `single`s orphaned (run by the one thread outside the regions). Race-free, right, and
# every region shares its loop: only the count of the regions tells it from v3. (Every occurrence
# is replaced.)
PER_LOOP = {
    "c": [("#pragma omp parallel\n    {", "    {"),
          ("#pragma omp for", "#pragma omp parallel for")],
    "fortran": [("    !$omp parallel private(i, m, s)\n", ""), ("    !$omp end parallel\n", ""),
                ("!$omp do ", "!$omp parallel do private(m, s) "),
                ("!$omp end do", "!$omp end parallel do")],
}


@pytest.fixture(scope="module")
def ell_files(tmp_path_factory):
    folder = tmp_path_factory.mktemp("race_ell")
    files = {}
    for lang in LANGS:
        base = kernel_file(ELL_SOURCE[lang], "ell_matvec", lang)
        for variant, edits in ELL_VARIANTS[lang].items():
            path = folder / f"ell_matvec_{variant}{SUFFIX[lang]}"
            path.write_text(changed(base, *edits))
            files[lang, variant] = path
    return files


@pytest.fixture(scope="module")
def cg_files(tmp_path_factory):
    folder = tmp_path_factory.mktemp("race_cg")
    files = {}
    for lang in LANGS:
        base = kernel_file(CG_SOURCE[lang], "pcg_v3", lang)
        for variant, edits in CG_VARIANTS[lang].items():
            path = folder / f"pcg_v3_{variant}{SUFFIX[lang]}"
            path.write_text(changed(base, *edits))
            files[lang, variant] = path
        per_loop = base
        for old, new in PER_LOOP[lang]:
            assert old in per_loop, old
            per_loop = per_loop.replace(old, new)
        files[lang, "per_loop"] = folder / f"cg_per_loop{SUFFIX[lang]}"   # the exercise's name
        files[lang, "per_loop"].write_text(per_loop.replace("pcg_v3", "cg_single_region"))
    return files


def ell_races(path, lang, **kw):
    return race_check.data_races(path, lang, "ell_matvec", race_check.ell_matvec_args(lang),
                                 names=race_check.ELL_NAMES, **kw)


def ell_work(path, lang):
    return race_check.work_sharing(path, lang, "ell_matvec", race_check.ell_matvec_args(lang))


def cg_races(path, lang):
    return race_check.data_races(path, lang, "pcg_v3", race_check.cg_args(lang),
                                 returns_int=True, names=race_check.CG_NAMES)


# --- the ELL product ------------------------------------------------------------------------------

@pytest.mark.parametrize("lang", LANGS)
def test_correct_ell_matvec_has_no_race_and_shares_its_rows(lang, tools, ell_files):
    if lang == "fortran":
        need_fortran()
    path = ell_files[lang, "ok"]
    assert ell_races(path, lang) == []
    report = race_check.check_work_sharing(path, lang, "ell_matvec",
                                           race_check.ell_matvec_args(lang))
    assert report.team_sizes == [2]
    assert report.loops_per_thread == [[1, 1]]
    if lang == "c":                   # clang's static schedule: 60 rows, 30 per thread
        assert report.iterations_per_thread == [[30, 30]]
        assert report.trip_counts == [60]
    race_check.check_ell_matvec_openmp(path, lang)


@pytest.mark.parametrize("lang", LANGS)
def test_shared_accumulator_is_reported_with_its_line_every_time(lang, tools, ell_files):
    if lang == "fortran":
        need_fortran()
    path = ell_files[lang, "shared"]
    line = line_of(path.read_text(), SHARED_LINE[lang])
    for _ in range(3):
        races = ell_races(path, lang)
        assert [(r.kind, r.file, r.line) for r in races] == [("data race", path.name, line)]
        assert races[0].access == races[0].other_access == "write"
    message = race_check.race_message(races, path, race_check.HINT_PRIVATE)
    assert message.startswith(f"a data race on line {line} of {path.name} "
                              f"(`{SHARED_LINE[lang]}`): two threads write the same variable")
    assert "private" in message
    with pytest.raises(AssertionError, match=f"line {line} of {re.escape(path.name)}"):
        race_check.check_ell_matvec_openmp(path, lang)


@pytest.mark.parametrize("lang", LANGS)
def test_shared_accumulator_passes_the_result_check_but_not_the_race_check(lang, tools,
                                                                             ell_files):
    """The point of the race check: at -O2 the shared accumulator lives in a register and every
    result is right, so check_ell_matvec passes; TSan does not."""
    if lang == "fortran":
        need_fortran()
    path = ell_files[lang, "shared"]
    exercise.check_ell_matvec(path, lang, seeds=(1,), sizes=(1, 9, 60), poisson=((3, 2, 2),))
    with pytest.raises(AssertionError, match="data race"):
        race_check.check_no_races(path, lang, "ell_matvec", race_check.ell_matvec_args(lang))


@pytest.mark.parametrize("lang", LANGS)
def test_parallel_region_without_worksharing_loop_is_caught_by_both_checks(lang, tools,
                                                                            ell_files):
    if lang == "fortran":
        need_fortran()
    path = ell_files[lang, "nofor"]
    races = ell_races(path, lang)
    y_line = line_of(path.read_text(), "y[i] = s;" if lang == "c" else "y(i) = s")
    assert [(r.line, r.location) for r in races] == [(y_line, "the argument y")]
    assert "does every thread compute every row" in race_check.race_message(races, path)
    report = ell_work(path, lang)
    assert report.team_sizes == [2] and report.loops_per_thread == [[0, 0]]
    loop = "#pragma omp parallel for" if lang == "c" else "!$omp parallel do"
    with pytest.raises(AssertionError, match=r"no worksharing loop .* every thread ran the whole "
                                             rf"loop.*{re.escape(loop)}"):
        race_check.check_ell_matvec_openmp(path, lang)


@pytest.mark.parametrize("variant", ["num_threads", "if0"])
@pytest.mark.parametrize("lang", LANGS)
def test_a_serial_parallel_region_is_caught_by_the_work_check(lang, variant, tools, ell_files):
    """num_threads(1) and if(0) make the code serial and race-free: only the work check sees it."""
    if lang == "fortran":
        need_fortran()
    path = ell_files[lang, variant]
    assert ell_races(path, lang) == []
    report = ell_work(path, lang)
    assert report.team_sizes == [1]
    with pytest.raises(AssertionError, match="ell_matvec ran its parallel region on 1 thread with "
                                             r"OMP_NUM_THREADS=2: remove num_threads\(...\) / "
                                             r"if\(...\)"):
        race_check.check_ell_matvec_openmp(path, lang)


# --- the CG in one parallel region ----------------------------------------------------------------

@pytest.mark.parametrize("lang", LANGS)
def test_course_pcg_v3_has_no_race_and_shares_its_loops(lang, tools, cg_files):
    if lang == "fortran":
        need_fortran()
    path = cg_files[lang, "ok"]
    assert cg_races(path, lang) == []
    report = race_check.check_work_sharing(path, lang, "pcg_v3", race_check.cg_args(lang),
                                           returns_int=True)
    assert report.team_sizes == [2] and report.regions == 1
    (loops,) = report.loops_per_thread
    assert loops[0] == loops[1] > 10            # 2 loops before the iterations, 4 per iteration
    race_check.check_cg_openmp(path, lang, kernel="pcg_v3")


@pytest.mark.parametrize("lang", LANGS)
def test_a_cg_with_one_region_per_loop_fails_only_the_region_count(lang, tools, cg_files):
    """Back to one region per loop: right values, no race, every region shares its loop: it
    passed the checks that look inside the regions. The task is one region for the whole solve;
    the count of the outermost regions (clang's and gfortran's alike, through libomp) tells."""
    if lang == "fortran":
        need_fortran()
    path = cg_files[lang, "per_loop"]
    exercise.check_race_free_cg(path, lang, sizes=((6, 5, 4),), threads=(1, 2), repeat=2)
    assert race_check.data_races(path, lang, "cg_single_region", race_check.cg_args(lang),
                                 returns_int=True) == []
    report = race_check.check_work_sharing(path, lang, "cg_single_region",
                                           race_check.cg_args(lang), returns_int=True)
    loops = 2 + 4 * cg_iterations(lang)          # 2 loops before the iterations, 4 per iteration
    assert report.regions == len(report.team_sizes) == loops
    assert all(size == 2 for size in report.team_sizes)
    with pytest.raises(AssertionError) as err:
        race_check.check_cg_openmp(path, lang)
    message = str(err.value)
    assert message.startswith(f"cg_single_region opened {loops} parallel regions in one call "
                              "(OMP_NUM_THREADS=2), where the task asks for one."), message
    assert "What a parallel region costs" in message and "single" in message
    assert ("`#pragma omp for` instead of `#pragma omp parallel for`" if lang == "c" else
            "`!$omp do` ... `!$omp end do` instead of `!$omp parallel do`") in message


def cg_iterations(lang) -> int:
    """The iterations of the course's pcg_v3 on the problem of cg_args."""
    from course import solvers
    from course.fem import fvm

    return int(solvers.pcg_ladder(fvm.poisson(6, 5, 4, fmt="ell"), "v3", lang, tol=1e-8).iterations)


# a region per call of the outer loop (n of them), and in each a nested region per row: only the
# outermost ones count, also past the tool's table of MAX_REGIONS regions
MANY_REGIONS = {
    "c": """\
void many_regions(int n, double *y)
{
    for (int k = 0; k < n; k++) {
#pragma omp parallel for schedule(static)
        for (int i = 0; i < 4; i++) {
#pragma omp parallel num_threads(1)
            y[i] += 1.0;
        }
    }
}
""",
    "fortran": """\
subroutine many_regions(n, y) bind(C, name="many_regions")
    use, intrinsic :: iso_c_binding, only: c_int, c_double
    implicit none
    integer(c_int), value, intent(in) :: n
    real(c_double), intent(inout) :: y(4)
    integer :: i, k
    do k = 1, n
        !$omp parallel do schedule(static)
        do i = 1, 4
            !$omp parallel num_threads(1)
            y(i) = y(i) + 1.0_c_double
            !$omp end parallel
        end do
        !$omp end parallel do
    end do
end subroutine many_regions
""",
}


@pytest.mark.parametrize("lang", LANGS)
def test_the_regions_are_counted_past_the_table(lang, tools, tmp_path):
    if lang == "fortran":
        need_fortran()
    path = tmp_path / f"many_regions{SUFFIX[lang]}"
    path.write_text(MANY_REGIONS[lang])
    n = race_check.MAX_REGIONS + 100
    report = race_check.work_sharing(path, lang, "many_regions", [n, np.zeros(4)])
    assert report.regions == n
    assert report.region_count == n
    assert len(report.team_sizes) < race_check.MAX_REGIONS     # the table holds fewer
    problems = race_check.work_problems(report, lang, "many_regions", 2, regions=1)
    assert problems and problems[0].startswith(f"many_regions opened {n} parallel regions")
    assert race_check.work_problems(report, lang, "many_regions", 2) == []


@pytest.mark.parametrize("lang", LANGS)
def test_every_thread_resetting_a_shared_scalar_is_reported(lang, tools, cg_files):
    if lang == "fortran":
        need_fortran()
    path = cg_files[lang, "reset"]
    line = line_of(path.read_text(), RESET_LINE[lang])
    for _ in range(2):
        races = cg_races(path, lang)
        assert races and all(line in r.lines() for r in races), races
        assert any(r.line == r.other_line == line and r.access == "write" for r in races)
    with pytest.raises(AssertionError, match=f"a data race on line {line} of "):
        race_check.check_cg_openmp(path, lang, kernel="pcg_v3")


# --- the parts without compilers ------------------------------------------------------------------

TSAN_REPORT = """\
course_race_driver: argument 5 at 0x7b5000000100, 480 bytes
==================
WARNING: ThreadSanitizer: data race (pid=123)
  Write of size 8 at 0x7b5000000108 by thread T1:
    #0 .omp_outlined._debug__ /work/ell_matvec.c:9:14 (driver+0xd02fd)
    #1 __kmp_invoke_microtask <null> (libomp.so.5+0xd55a2)
    #2 main /tmp/x/course_race_driver.c:50:5 (driver+0xd03fa)

  Previous write of size 8 at 0x7b5000000108 by main thread:
    #0 .omp_outlined._debug__ /work/ell_matvec.c:9:14 (driver+0xd02fd)
    #1 main /tmp/x/course_race_driver.c:50:5 (driver+0xd03fa)

  Location is heap block of size 480 at 0x7b5000000100 allocated by main thread:
    #0 malloc <null> (driver+0x4b1c0)
    #1 array /tmp/x/course_race_driver.c:30:15 (driver+0xd0123)

SUMMARY: ThreadSanitizer: data race /work/ell_matvec.c:9:14 in .omp_outlined._debug__
==================
==================
WARNING: ThreadSanitizer: data race (pid=123)
  Read of size 8 at 0x7ffe0 by thread T1:
    #0 .omp_outlined._debug__ /work/ell_matvec.c:12:3 (driver+0xd02fd)
  Previous write of size 8 at 0x7ffe0 by main thread:
    #0 .omp_outlined._debug__ /work/ell_matvec.c:7:3 (driver+0xd02fd)
  Location is stack of main thread.
==================
==================
WARNING: ThreadSanitizer: data race (pid=123)
  Write of size 8 at 0x7ffe8 by thread T1:
    #0 __kmp_something <null> (libomp.so.5+0x1)
  Previous write of size 8 at 0x7ffe8 by main thread:
    #0 __kmp_other <null> (libomp.so.5+0x2)
==================
ThreadSanitizer: reported 3 warnings
"""


def test_parse_tsan_keeps_the_learners_lines_and_names_the_array():
    races = race_check.parse_tsan(TSAN_REPORT, "/work/ell_matvec.c", names=race_check.ELL_NAMES,
                                  kernel="ell_matvec")
    assert races == [
        race_check.Race("data race", "ell_matvec.c", 7, "write", 12, "read",
                        "a variable of ell_matvec shared by the threads"),
        race_check.Race("data race", "ell_matvec.c", 9, "write", 9, "write", "the argument y"),
    ]
    message = race_check.race_message(races, "/nonexistent/ell_matvec.c")
    assert message.startswith("a data race on lines 7 and 12 of ell_matvec.c: one thread writes "
                              "a variable (a variable of ell_matvec shared by the threads) that "
                              "another thread reads")
    assert "a data race on line 9 of ell_matvec.c: two threads write the same entries of the " \
           "argument y" in message
    assert race_check.parse_tsan(TSAN_REPORT, "/work/other.c") == []


def test_work_report_problems():
    report = race_check._parse_work(
        "regions 2 overflow 0 outermost 1\n"
        "region 0 level 1 requested 2 team 2 trips 60\n"
        "thread 0 0 loops 1 iterations 60 unknown 0\n"
        "thread 0 1 loops 1 iterations 0 unknown 0\n"
        "region 1 level 2 requested 1 team 1 trips 0\n"
        "thread 1 0 loops 0 iterations 0 unknown 0\n")
    assert report.team_sizes == [2]                  # the nested region is not counted
    assert report.regions == report.region_count == 1
    assert report.iterations_per_thread == [[60, 0]]
    (problem,) = race_check.work_problems(report, "c", "ell_matvec", 2)
    assert "thread 0 ran 60 iterations and thread 1 none" in problem
    assert race_check.work_problems(race_check.WorkReport([], [], []), "fortran", "k", 2) == [
        "k opens no parallel region: share the rows among the threads with `!$omp parallel do`, "
        "or `!$omp do` inside the parallel region"]
    # a report without the count of the outermost regions: its table's
    assert race_check._parse_work("region 0 level 1 requested 2 team 2 trips 4\n").region_count == 1
    three = race_check.WorkReport([2, 2, 2], [[1, 1]] * 3, [[2, 2]] * 3, [4] * 3, [2] * 3, 3)
    assert race_check.work_problems(three, "c", "k", 2) == []
    (problem,) = race_check.work_problems(three, "c", "k", 2, regions=1, region_advice="Do it.")
    assert problem.startswith("k opened 3 parallel regions in one call (OMP_NUM_THREADS=2), "
                              "where the task asks for one.") and problem.endswith(" Do it.")
    assert "3 regions pay it 3 times" in problem


def test_missing_tools_raise_an_error_that_names_the_packages(monkeypatch):
    monkeypatch.setattr(race_check.shutil, "which", lambda name: None)
    monkeypatch.setattr(race_check.glob, "glob", lambda pattern: [])
    race_check.tools.cache_clear()
    try:
        with pytest.raises(race_check.RaceCheckUnavailable,
                           match="clang is not installed.*apt-get install clang libomp-dev "
                                 "libclang-rt-dev llvm"):
            race_check.tools()
        with pytest.raises(race_check.RaceCheckUnavailable, match="gfortran"):
            race_check._gfortran()
    finally:
        race_check.tools.cache_clear()


def test_the_learners_check_cell_says_when_races_are_not_checked(monkeypatch, capsys, ell_files):
    """Validate on a machine without the detector: the visible check neither fails nor passes in
    silence; it says what is missing and that the grader checks."""
    def missing():
        raise race_check.RaceCheckUnavailable("clang is not installed: the race checks need ...")

    monkeypatch.setattr(race_check, "tools", missing)
    ran = race_check.where_available(race_check.check_ell_matvec_openmp,
                                     ell_files["c", "shared"], "c")
    said = capsys.readouterr().out
    assert ran is False
    assert said.startswith("NOT checked here for data races") and "clang is not installed" in said
    assert "The grader checks them" in said and "macOS" in said


@pytest.mark.parametrize("lang", LANGS)
def test_the_learners_check_cell_finds_the_race_where_it_can(lang, tools, ell_files, capsys):
    with pytest.raises(AssertionError, match="data race"):
        race_check.where_available(race_check.check_ell_matvec_openmp,
                                   ell_files[lang, "shared"], lang)
    assert race_check.where_available(race_check.check_ell_matvec_openmp,
                                      ell_files[lang, "ok"], lang) is True
    assert "no data race found" in capsys.readouterr().out


def test_arguments_are_written_as_the_driver_reads_them(tmp_path):
    codes, values = race_check._signature([3, np.arange(3), 1.5, np.ones(2, dtype=np.float32)])
    assert codes == ["i", "I", "d", "D"]
    race_check._write_args(tmp_path / "a.bin", codes, values)
    data = (tmp_path / "a.bin").read_bytes()
    assert len(data) == 4 + (8 + 12) + 8 + (8 + 16)
    driver = race_check._driver_source("k", codes, returns_int=True)
    assert "int k(int, int *, double, double *);" in driver
    with pytest.raises(TypeError):
        race_check._signature([np.array(["a"])])
