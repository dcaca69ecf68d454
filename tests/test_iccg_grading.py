"""The checks of the exercise of lecture 04_iccg (course.grading.iccg), without nbgrader: a coloring
is graded by its properties (a second, different greedy coloring passes; each typical wrong one
fails with the message that says why), the course's orderings are out of reach while the learner's
coloring runs, and the compiled substitution of the solution passes in C and Fortran while the
racy and serial variants fail the race detector or the work count even where their values are
right, and so does a substitution that opens a parallel region per color and sweep instead of one.
The multicoloring and the count written in C or Fortran go through the same checks as the Python
ones (compiled_multicolor, compiled_incompatible_nodes): the solution's pass, typical wrong ones,
the release's stubs and crashing or endless ones fail with a message in the learner's language.
tests/test_nbgrader.py proves the same through the gradebook."""

from __future__ import annotations

import re

import numpy as np
import pytest

from conftest import written_file
from course import native
from course.solvers import ordering
from course.grading import exercise, iccg as grading, race_check

GRAPHS = [(grading.grid_graph(8, 6), 4), (grading.grid_graph(10, 8, 6), 16),
          (grading.random_graph(300, 4.0, 1), 2), (grading.random_graph(300, 4.0, 2), 7),
          (grading.random_graph(40, 0.0, 3), 3), (grading.random_graph(5, 1.0, 4), 8),
          (grading.fem_graph(4, 4, 3), 10), (grading.fem_graph(5, 4, 4), 40)]


_MULTICOLOR = exercise.reference(ordering._multicolor)     # a copy the checks do not block


def course_coloring(ptr, adj, k):
    """The course's coloring, computed with a private copy: the typical wrong answers below
    start from it while the check has the course's own functions blocked."""
    color = np.empty(len(ptr) - 1, dtype=np.int32)
    _MULTICOLOR(ptr, adj, k, color)
    return color


@pytest.mark.parametrize("graph, k", GRAPHS, ids=[f"{g.n}-{k}" for g, k in GRAPHS])
def test_two_different_greedy_colorings_pass(graph, k):
    mine = grading.multicolor_first_fit_reversed(graph.ptr, graph.adj, k)
    theirs = grading.course_multicolor(graph, k)
    assert grading.coloring_problem(graph, k, mine) is None
    assert grading.coloring_problem(graph, k, theirs) is None
    n_color = int(theirs.max()) + 1
    assert n_color <= k + graph.max_degree
    assert ordering.is_valid_coloring(graph.ptr, graph.adj,
                                      np.argsort(mine, kind="stable").astype(np.int32),
                                      np.concatenate([[0], np.cumsum(np.bincount(mine))]))
    if graph.n > 10 and graph.max_degree > 0:
        assert not np.array_equal(mine, theirs), "the second coloring should differ"


def test_check_multicolor_accepts_both():
    """Both pass as a learner's answer would (copies: the originals are blocked meanwhile)."""
    grading.check_multicolor(exercise.reference(grading.multicolor_first_fit_reversed), GRAPHS)
    grading.check_multicolor(course_coloring, GRAPHS)


def _plain_greedy(ptr, adj, k):            # no cap: the target ignored
    n = len(ptr) - 1
    color = np.full(n, -1)
    for v in range(n):
        taken = set(color[adj[ptr[v]:ptr[v + 1]]])
        color[v] = next(c for c in range(n) if c not in taken)
    return color


WRONG = {
    "coupled unknowns share a color": (lambda p, a, k: np.zeros(len(p) - 1, dtype=int),
                                       "are coupled and both have color 0"),
    "no cap": (_plain_greedy, "a color holds at most ceil(n / K)"),
    "one color per unknown": (lambda p, a, k: np.arange(len(p) - 1), "colors; a greedy"),
    "1-based": (lambda p, a, k: course_coloring(p, a, k) + 1, "(colors counted from 1?)"),
    "a gap": (lambda p, a, k: np.where(course_coloring(p, a, k) > 0,
                                       course_coloring(p, a, k) + 1, 0), "no unknown has color 1"),
    "negative": (lambda p, a, k: course_coloring(p, a, k) - 1, "every unknown needs a color"),
    "too short": (lambda p, a, k: course_coloring(p, a, k)[:-1], "expected one color per unknown"),
    "not integers": (lambda p, a, k: course_coloring(p, a, k) + 0.5, "not of integer colors"),
    "the course's order()": (lambda p, a, k: ordering.order(
        ordering.CRS(p, a, np.ones(len(a))), "mc", k), "course.solvers.ordering.order"),
    "the course's _multicolor": (lambda p, a, k: ordering._multicolor(p, a, k, np.empty(len(p) - 1,
                                                                      dtype=np.int32)),
                                 "course.solvers.ordering._multicolor"),
    "the course's Numba kernel": (lambda p, a, k: ordering._KERNELS["numba"][2](
        p, a, k, np.empty(len(p) - 1, dtype=np.int32)), "course.solvers.ordering"),
    "the course's C kernel": (lambda p, a, k: native.multicolor("c", p, a, k, np.empty(
        len(p) - 1, dtype=np.int32)), "course.native.multicolor"),
    "the grading module's own coloring": (grading.multicolor_first_fit_reversed,
                                          "your code called one of the course's own"),
    "an unblocked copy": (lambda p, a, k: exercise.reference(ordering._multicolor)(
        p, a, k, np.empty(len(p) - 1, dtype=np.int32)), "course.grading.exercise.reference"),
}


@pytest.mark.parametrize("name", WRONG)
def test_a_wrong_coloring_fails_and_says_why(name):
    wrong, message = WRONG[name]
    with pytest.raises(AssertionError, match=None) as err:
        grading.check_multicolor(wrong, [(grading.grid_graph(8, 6), 4),
                                         (grading.random_graph(300, 4.0, 1), 7)])
    assert message in str(err.value), str(err.value)


def test_the_orderings_come_back_after_the_check():
    graph = grading.grid_graph(5, 4)
    with pytest.raises(exercise.ReferenceUsed):
        grading.check_multicolor(lambda p, a, k: ordering.order(
            ordering.CRS(p, a, np.ones(len(a))), "mc", k), [(graph, 3)])
    a = ordering.CRS(graph.ptr, graph.adj, np.ones(len(graph.adj)))
    for lang in ("numpy", "numba"):
        assert ordering.order(a, "mc", 3, lang=lang).colors >= 3


def test_incompatible_nodes_check():
    cases = [(grading.random_graph(200, 3.0, 5), "mc", 5), (grading.grid_graph(9, 7, 4), "mc", 6),
             (grading.fem_graph(4, 3, 3), "reversed", 12),
             (grading.random_graph(150, 1.5, 6), "reversed", 3)]

    def right(ptr, adj, color):
        return sum(1 for v in range(len(ptr) - 1)
                   if not any(color[u] < color[v] for u in adj[ptr[v]:ptr[v + 1]]))

    grading.check_incompatible_nodes(right, cases)
    for wrong in (lambda p, a, c: int(np.sum(c == 0)),                 # color 0 only
                  lambda p, a, c: right(p, a, -c),                     # a later neighbour
                  lambda p, a, c: right(p, a, c) - int(np.sum(np.diff(p) == 0)),  # no isolated
                  lambda p, a, c: ordering.incompatible_nodes(p, a, np.argsort(c)),
                  lambda p, a, c: grading.expected_incompatible(grading.Graph("", p, a), c),
                  lambda p, a, c: exercise.reference(ordering.incompatible_nodes)(
                      p, a, np.argsort(c, kind="stable"))):
        with pytest.raises(AssertionError):
            grading.check_incompatible_nodes(wrong, cases)


# --- the compiled substitution ------------------------------------------------------------------

SOLUTION = {lang: written_file("04_iccg", f"ic0_apply_{lang}") for lang in ("c", "fortran")}
FORWARD = ("        for (int c = 0; c < ncolor; c++) {            /* forward: the colors in order */"
           "\n#pragma omp for schedule(static)\n")
VARIANTS = {
    # (old, new, what the race / work check says)
    "nowait": ("#pragma omp for schedule(static)\n            for (int i = color_ptr[c]; i < "
               "color_ptr[c + 1]; i++) {\n                double s = r[i];",
               "#pragma omp for schedule(static) nowait\n            for (int i = color_ptr[c]; "
               "i < color_ptr[c + 1]; i++) {\n                double s = r[i];", "data race"),
    "colors shared out": (FORWARD, "#pragma omp for schedule(static)\n        for (int c = 0; "
                          "c < ncolor; c++) {\n", "data race"),
    "colors ignored": (FORWARD + "            for (int i = color_ptr[c]; i < color_ptr[c + 1]; "
                       "i++) {", "        {\n#pragma omp for schedule(static)\n            for "
                       "(int i = 0; i < n; i++) {", "data race"),
    "num_threads(1)": ("#pragma omp parallel\n", "#pragma omp parallel num_threads(1)\n",
                       "on 1 thread"),
}


def _write(tmp_path, lang, text, name="ic0_apply"):
    path = tmp_path / (name + {"c": ".c", "fortran": ".f90"}[lang])
    path.write_text(text)
    return path


@pytest.fixture(scope="module")
def cases():
    return [grading.colored(grading.random_graph(300, 4.0, 7), "mc", 6, 1),
            grading.colored(grading.grid_graph(7, 6, 5), "reversed", 8, 2),
            grading.colored(grading.fem_graph(4, 4, 3), "mc", 10, 3)]


@pytest.mark.compiled
@pytest.mark.parametrize("lang", ["c", "fortran"])
def test_the_solution_kernel_passes(tmp_path, lang, cases):
    source = _write(tmp_path, lang, SOLUTION[lang])
    grading.check_ic0_apply(source, lang, cases)
    try:
        grading.check_ic0_apply_openmp(source, lang)
    except race_check.RaceCheckUnavailable as err:
        pytest.skip(str(err))


@pytest.mark.compiled
def test_wrong_values_are_reported_in_the_learners_base(tmp_path, cases):
    for lang, old, new in [("c", "z[i] -= s / fac_diag[i];", "z[i] -= s;"),
                           ("fortran", "z(i) = z(i) - s / fac_diag(i)", "z(i) = z(i) - s")]:
        source = _write(tmp_path, lang, SOLUTION[lang].replace(old, new))
        with pytest.raises(AssertionError) as err:
            grading.check_ic0_apply(source, lang, cases[:1], threads=(1,))
        shown = "z(" if lang == "fortran" else "z["
        assert shown in str(err.value) and "expected" in str(err.value), str(err.value)


@pytest.mark.compiled
@pytest.mark.parametrize("variant", VARIANTS)
def test_racy_and_serial_kernels_fail_the_openmp_check(tmp_path, variant):
    old, new, message = VARIANTS[variant]
    assert old in SOLUTION["c"], variant
    source = _write(tmp_path, "c", SOLUTION["c"].replace(old, new))
    try:
        with pytest.raises(AssertionError) as err:
            grading.check_ic0_apply_openmp(source, "c")
    except race_check.RaceCheckUnavailable as err:
        pytest.skip(str(err))
    assert message in str(err.value), str(err.value)


# one `parallel for` per color and sweep, no outer region: race-free, right, every region shares
# its rows; the task asks for one region (every occurrence is replaced)
REGION_PER_COLOR = {
    "c": [("#pragma omp parallel\n    {\n", "    {\n"),
          ("#pragma omp for", "#pragma omp parallel for")],
    "fortran": [("  !$omp parallel private(c, k, s)\n", ""), ("  !$omp end parallel\n", ""),
                ("!$omp do schedule(static)", "!$omp parallel do schedule(static) private(k, s)"),
                ("!$omp end do", "!$omp end parallel do")],
}


@pytest.mark.compiled
@pytest.mark.parametrize("lang", ["c", "fortran"])
def test_a_region_per_color_and_sweep_fails_the_region_count(tmp_path, lang, cases):
    text = SOLUTION[lang]
    for old, new in REGION_PER_COLOR[lang]:
        assert old in text, old
        text = text.replace(old, new)
    source = _write(tmp_path, lang, text)
    grading.check_ic0_apply(source, lang, cases)            # the values are right
    case = grading.colored(grading.random_graph(240, 4.0, 331), "mc", 5, 41)   # the check's
    try:
        race_check.check_openmp_kernel(source, lang, "ic0_apply", case.args(lang))  # no race
        with pytest.raises(AssertionError) as err:
            grading.check_ic0_apply_openmp(source, lang, threads=4)
    except race_check.RaceCheckUnavailable as missing:
        pytest.skip(str(missing))
    regions = 2 * case.ncolor                               # a region per color and sweep
    message = str(err.value)
    assert message.startswith(f"ic0_apply opened {regions} parallel regions in one call "
                              "(OMP_NUM_THREADS=4), where the task asks for one."), message
    assert "every thread runs the loops over the colors of both sweeps" in message


# --- tasks 1 and 3 in C and Fortran: the same checks, through a child process ---------------------

ANSWER = {(task, lang): written_file("04_iccg", f"{task}_{lang}")
          for task in ("multicolor", "incompatible_nodes") for lang in ("c", "fortran")}
COLORED = [(grading.grid_graph(8, 6), 4), (grading.random_graph(300, 4.0, 1), 7),
           (grading.fem_graph(4, 4, 3), 10), (grading.random_graph(40, 0.0, 3), 3)]
COUNTED = [(grading.random_graph(200, 3.0, 5), "mc", 5),
           (grading.fem_graph(4, 3, 3), "reversed", 12),
           (grading.random_graph(150, 1.5, 6), "reversed", 3)]
# the solution region as the release has it (course.grading.ClearSolutionsByCellLanguage)
STUB = {"c": (re.compile(r"/\* ### BEGIN SOLUTION \*/.*/\* ### END SOLUTION \*/", re.S),
              "/* YOUR CODE HERE */"),
        "fortran": (re.compile(r"! ### BEGIN SOLUTION.*! ### END SOLUTION", re.S),
                    "! YOUR CODE HERE")}


def _answer(tmp_path, task, lang, *edits, stub=False):
    """The solution's C or Fortran answer to `task` (or the release's stub), each (old, new) of
    `edits` made (old must be there), written where the notebook's %%writefile cell writes it."""
    text = ANSWER[task, lang]
    if stub:
        pattern, replacement = STUB[lang]
        text, found = pattern.subn(replacement, text)
        assert found == 1, text
    for old, new in edits:
        assert old in text, old
        text = text.replace(old, new)
    return _write(tmp_path, lang, text, name=task)


@pytest.mark.compiled
@pytest.mark.parametrize("lang", ["c", "fortran"])
def test_compiled_answers_pass(tmp_path, monkeypatch, lang):
    """The solution's C and Fortran multicolor and incompatible_nodes pass the checks of the
    Python answers, found as the notebook's test cells find them (multicolor.c, ... in the
    working directory)."""
    _answer(tmp_path, "multicolor", lang)
    _answer(tmp_path, "incompatible_nodes", lang)
    monkeypatch.chdir(tmp_path)
    grading.check_multicolor(grading.learners_multicolor(lang, None), COLORED, lang)
    counted = grading.learners_incompatible_nodes(lang, None)
    grading.check_incompatible_nodes(counted, COUNTED)
    graph = grading.grid_graph(4, 3)
    assert counted(graph.ptr, graph.adj, np.array([0, 1, 0, 1, 1, 0, 1, 0, 0, 1, 0, 1])) == 6


C_BLOCKING = ("            for (int k = ptr[v]; k < ptr[v + 1]; k++)\n"
              "                blocked[adj[k]] = c;\n", "")
WRONG_COMPILED_MULTICOLOR = {
    # (language, edits of the solution, what the message says)
    "C: neighbours not blocked": ("c", [C_BLOCKING], "the unknowns 0 and 1 are coupled and both "
                                  "have color 0"),
    "Fortran: neighbours not blocked": ("fortran", [("      do k = ptr(v), ptr(v + 1) - 1\n"
                                                     "        blocked(adj(k)) = c\n"
                                                     "      end do\n", "")],
                                        "the unknowns 1 and 2 (1-based) are coupled and both have "
                                        "color 1"),
    "Fortran: colors from 0": ("fortran", [("  color = 0\n  blocked = 0\n",
                                            "  color = -1\n  blocked = -1\n"),
                                           ("  c = 0\n", "  c = -1\n"),
                                           ("color(v) > 0", "color(v) >= 0")],
                               "color(1) is 0: every unknown needs a color 1, 2, 3, ... "
                               "(Fortran's colors count from 1)"),
    "C: colors from 1": ("c", [("            color[v] = c;", "            color[v] = c + 1;")],
                         "no unknown has color 0 (colors counted from 1?)"),
    "C: no cap": ("c", [(" && taken < target", "")], "a color holds at most ceil(n / K)"),
    "C: the stub": ("c", "stub", "color[0] was never written"),
    "Fortran: the stub": ("fortran", "stub", "color(1) was never written"),
    "C: segfault": ("c", [("    free(blocked);\n", "    free(blocked);\n"
                           "    *(volatile int *)0 = 1;\n")], "multicolor crashed with SIGSEGV"),
}


@pytest.mark.compiled
@pytest.mark.parametrize("name", WRONG_COMPILED_MULTICOLOR)
def test_a_wrong_compiled_multicolor_fails_and_says_why(tmp_path, name):
    lang, edits, message = WRONG_COMPILED_MULTICOLOR[name]
    source = (_answer(tmp_path, "multicolor", lang, stub=True) if edits == "stub" else
              _answer(tmp_path, "multicolor", lang, *edits))
    multicolor = grading.compiled_multicolor(source, lang)
    with pytest.raises(AssertionError) as err:
        grading.check_multicolor(multicolor, COLORED, lang)
    assert message in str(err.value), str(err.value)


@pytest.mark.compiled
def test_an_endless_compiled_multicolor_is_stopped(tmp_path):
    source = _answer(tmp_path, "multicolor", "c", ("for (int left = n, c = 0; left > 0; c++)",
                                                   "for (int left = n, c = 0; left > -1; c++)"))
    with pytest.raises(AssertionError, match="did not finish within 1 s"):
        grading.check_multicolor(grading.compiled_multicolor(source, "c", timeout=1.0), COLORED,
                                 "c")


WRONG_COMPILED_COUNT = {
    # (language, edits of the solution): each returns a wrong count on the checks' colorings
    "C: each node counted twice": ("c", [("count += earlier == 0;",
                                          "count += 2 * (earlier == 0);")]),
    "C: a later color for an earlier one": ("c", [("color[adj[k]] < color[i]",
                                                   "color[adj[k]] > color[i]")]),
    "C: the stub (returns 0)": ("c", "stub"),
    "Fortran: the stub (returns 0)": ("fortran", "stub"),
    "Fortran: couplings counted, not nodes": ("fortran", [
        ("      if (color(adj(k)) < color(i)) earlier = earlier + 1",
         "      if (color(adj(k)) >= color(i)) nodes = nodes + 1"),
        ("    if (earlier == 0) nodes = nodes + 1\n", "")]),
    "Fortran: a row's last neighbour plus one": ("fortran", [("do k = ptr(i), ptr(i + 1) - 1",
                                                              "do k = ptr(i), ptr(i + 1)")]),
}


@pytest.mark.compiled
@pytest.mark.parametrize("name", WRONG_COMPILED_COUNT)
def test_a_wrong_compiled_count_fails(tmp_path, name):
    lang, edits = WRONG_COMPILED_COUNT[name]
    source = (_answer(tmp_path, "incompatible_nodes", lang, stub=True) if edits == "stub" else
              _answer(tmp_path, "incompatible_nodes", lang, *edits))
    counted = grading.compiled_incompatible_nodes(source, lang)
    with pytest.raises(AssertionError, match=r"incompatible_nodes of .* returned -?\d+, expected"):
        grading.check_incompatible_nodes(counted, COUNTED)


@pytest.mark.compiled
def test_a_crashing_compiled_count_is_an_assertion(tmp_path):
    source = _answer(tmp_path, "incompatible_nodes", "c",
                     ("    return count;", "    *(volatile int *)0 = count;\n    return count;"))
    with pytest.raises(AssertionError, match="incompatible_nodes crashed with SIGSEGV"):
        grading.check_incompatible_nodes(grading.compiled_incompatible_nodes(source, "c"),
                                         COUNTED)


def test_a_task_language_that_is_none_of_the_three_is_refused():
    with pytest.raises(ValueError, match='TASK1_LANGUAGE must be "python", "c" or "fortran", '
                                         "not 'C'"):
        grading.learners_multicolor("C", None)
    with pytest.raises(ValueError, match="TASK3_LANGUAGE"):
        grading.learners_incompatible_nodes("f90", None)
    assert grading.learners_multicolor("python", course_coloring) is course_coloring


@pytest.mark.compiled
def test_a_compiled_answer_that_does_not_compile_says_so(tmp_path):
    source = _answer(tmp_path, "multicolor", "fortran",
                     ("      color(v) = c\n", "      color(v) = c +\n"))
    with pytest.raises(AssertionError, match="multicolor.f90 does not compile"):
        grading.compiled_multicolor(source, "fortran")
