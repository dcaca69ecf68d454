"""The prose of the book never hard-codes a measured figure.

The book executes every lecture on whatever machine builds it, so a number in the text that a
run measures goes stale (design §5). Numbers followed by the unit of a measured quantity (GB/s,
ms, s, %, x speedups, iterations, bytes, MB, ...) may appear in the markdown cells of the lecture
notebooks and in book/*.md only

- inside a myst-nb glue role (`{glue:text}`key``: inserted from the run),
- in a sentence with a citation (`{cite:p}`key``: a figure from a source on the References page),
- or as a definitional constant of the allow-list below (8 bytes per double, ...).

Also: every glue key that a page pastes is glued by a code cell of the same notebook, and the
intro's list of lectures agrees with the table of contents. Fast: reads files, runs nothing."""

import json
import re
from pathlib import Path

import pytest

from conftest import book_prose as pages

ROOT = Path(__file__).resolve().parent.parent

NUMBER = r"\d[\d,]*(?:\.\d+)?"
RANGE = rf"{NUMBER}(?:\s*(?:to|–|—|-)\s*{NUMBER})?"
UNITS = (r"GB/s|MB/s|GiB/s|MiB/s|GFLOP/s|Gflop/s|GFLOPS|TFLOP/s|TFLOPS|ms|µs|us|ns|s|sec|seconds?"
         r"|%|x|×|iterations?|bytes?|B|kB|KiB|MB|MiB|GB|GiB|slots|flops? per byte|bytes? per flop")
FIGURE = re.compile(rf"(?<![\w.^_{{/-])({RANGE})\s*({UNITS})(?![\w/])")

# Definitional constants: sizes of the data types and STREAM's byte counts, not measurements;
# and worked examples of a definition, allowed in the sentence that contains them.
ALLOWED = {"4 bytes", "8 bytes", "12 bytes", "16 bytes", "24 bytes", "32 bytes", "100 %"}
ALLOWED_CONTEXTS = ["1.05 means about 5% of the machine waits"]


def prose(markdown: str) -> str:
    """The text a reader sees as sentences: no code, math, link targets, comments; glue roles
    become GLUE, citation roles CITE, other roles vanish."""
    text = re.sub(r"```.*?```", " ", markdown, flags=re.S)              # code blocks
    text = re.sub(r"<!--.*?-->", " ", text, flags=re.S)
    text = re.sub(r"\{glue(?::\w+)?\}`[^`]*`", " GLUE ", text)
    text = re.sub(r"\{cite(?::\w+)?\}`[^`]*`", " CITE ", text)
    text = re.sub(r"\{[\w:-]+\}`[^`]*`", " ", text)                      # other roles
    text = re.sub(r"`[^`]*`", " CODE ", text)
    text = re.sub(r"\$\$.*?\$\$", " MATH ", text, flags=re.S)
    text = re.sub(r"\$[^$]*\$", " MATH ", text)
    text = re.sub(r"\]\([^)]*\)", "]", text)                             # link targets
    return text


def sentences(text: str) -> list[str]:
    """Paragraphs and list items, cut after . ! ? before the next capital (or end)."""
    blocks = re.split(r"\n\s*\n|\n\s*(?:[-*]|\d+\.)\s+|\n\s*\|", text)
    found = []
    for block in blocks:
        found += re.split(r"(?<=[.!?])\s+(?=[A-Z(*])", " ".join(block.split()))
    return [s for s in found if s.strip()]


# Counted quantities (issue 20): 05a taught "three `Allreduce`s per iteration" beside a run that
# printed 21 for 9 iterations. A count of reductions, exchanges, colors, synchronisations or
# barriers in digits, or in words as a rate ("two reductions per iteration"), comes from the run
# (glue) or a source (cite), like a measurement.
COUNT_WORDS = r"(?:one|two|three|four|five|six|seven|eight|nine|ten|eleven|twelve)"
COUNTED_NOUN = (r"(?:(?:MPI_)?[Aa]llreduces?|reductions?|(?:halo\s+)?exchanges?|colou?rs|"
                r"synchroni[sz]ations?|barriers|all-to-alls?|messages)")
COUNT_IN_DIGITS = re.compile(rf"(?<![\w.^_{{/-])({NUMBER})\s+(?:[\w-]+\s+)?"
                             rf"(?:{COUNTED_NOUN}|CODE\s*(?:s\b|calls?))(?![\w/])")
COUNT_AS_RATE = re.compile(rf"\b({COUNT_WORDS})\s+(?:[\w-]+\s+)?(?:{COUNTED_NOUN}|CODE\s*s?)\s*"
                           r"(?:\([^)]*\)\s*)?(?:per|an?|every|each)\s+(?:CG\s+)?"
                           r"(?:iteration|step|solve)")
# definitions and specifications, not claims about a run: the grading rules of an exercise, the
# coloring a plain greedy gives on a bipartite grid
ALLOWED_COUNT_CONTEXTS = ["with one reduction per iteration (the check counts them)",
                          "CODE : one reduction per iteration",
                          "right answer, two halo exchanges per iteration, no points",
                          "a plain greedy: 2 colors on a grid whatever"]


def counted_figures(markdown: str) -> list[str]:
    """Every count of communication or synchronisation that neither glues nor cites it."""
    hits = []
    for sentence in sentences(prose(markdown)):
        if "CITE" in sentence or any(c in sentence for c in ALLOWED_COUNT_CONTEXTS):
            continue
        for pattern in (COUNT_IN_DIGITS, COUNT_AS_RATE):
            hits += [f"{match.group(0)!r} in: {sentence[:160]}"
                     for match in pattern.finditer(sentence)]
    return hits


def measured_figures(markdown: str) -> list[str]:
    """Every number-with-unit of a sentence that neither glues nor cites it."""
    hits = []
    for sentence in sentences(prose(markdown)):
        if "CITE" in sentence:
            continue
        for match in FIGURE.finditer(sentence):
            figure = f"{match.group(1)} {match.group(2)}"
            if figure not in ALLOWED and not any(c in sentence for c in ALLOWED_CONTEXTS):
                hits.append(f"{figure!r} in: {sentence[:160]}")
    return hits




# -- the checker on sentences the book once printed (issue 10), and on their fixed forms -------

OLD_SENTENCES = [
    "The ELL array is 72 slots long for 48 real entries: on this tiny box, a third is padding.",
    "One SpMV moves about 12 bytes per stored entry plus 28 to 32 bytes per row.",
    "The SpMV almost only reads (it writes $y$ once against about 20 bytes read per row).",
    "`N = 96` (an 85 MB matrix) is meant to be beyond the caches of a laptop.",
    "all three products sit at the same arithmetic intensity, about 0.14 flop per byte.",
    "STREAM at 2 threads is 28.2 GB/s, and CG speeds up 1.87x.",
    "CG: 118 iterations on 24 layers.",
    "the seed course measured its v3 5% faster than v2 in Fortran.",
]
FIXED_SENTENCES = [
    "The ELL array has {glue:text}`small_ell_slots` slots for {glue:text}`small_real_entries` "
    "real entries: {glue:text}`small_ell_padding:.0%` of it is padding.",
    "One SpMV moves about 12 bytes per stored entry plus {glue:text}`row_bytes_min` to "
    "{glue:text}`row_bytes_max` bytes per row.",
    "the seed course measured its v3 5% faster than v2 in Fortran {cite:p}`nakajima2022openmp`.",
    "The triad counts 24 bytes per element, and $2 / 12 = 0.17$ flop per byte.",
    "A $2 \\times 2$ rule, `BENCH_SIZE = 32`, the 2x2x2 Gauss points, lecture `03_openmp`.",
]


OLD_COUNTS = [
    "Count the collective calls too: one halo exchange per iteration (plus one for the initial "
    "residual), three `Allreduce`s per iteration (the two dot products of CG and the norm).",
    "timed alone: one halo exchange and three `Allreduce` per iteration, the rest is the SpMV.",
    "RCM needs 94 colors at $32^3$, which makes 194 synchronisations.",
]
FIXED_COUNTS = [
    "Count the collective calls too; this run made {glue:text}`count_text`",
    "timed alone: per iteration {glue:text}`cg_calls`, the rest is the local SpMV.",
    "the pipelined CG has one fused reduction {cite:p}`ghysels2014pipecg` per iteration.",
    "Each color is a parallel loop, with one barrier per color and sweep.",
]


@pytest.mark.parametrize("check, sentence", [(measured_figures, s) for s in OLD_SENTENCES]
                         + [(counted_figures, s) for s in OLD_COUNTS])
def test_the_checkers_flag_a_hard_coded_figure(check, sentence):
    assert check(sentence), f"not flagged by {check.__name__}: {sentence}"


@pytest.mark.parametrize("check, sentence", [(measured_figures, s) for s in FIXED_SENTENCES]
                         + [(counted_figures, s) for s in FIXED_COUNTS])
def test_the_checkers_pass_glued_cited_and_definitional_figures(check, sentence):
    assert check(sentence) == []


@pytest.mark.parametrize("name", sorted(pages()))
def test_no_count_is_hard_coded(name):
    hits = counted_figures(pages()[name])
    assert not hits, (f"{name}: counts of reductions, exchanges, colors or synchronisations in the "
                      "prose that the run should insert (myst-nb glue) or a citation source:\n"
                      + "\n".join(hits))


@pytest.mark.parametrize("name", sorted(pages()))
def test_no_measured_figure_is_hard_coded(name):
    hits = measured_figures(pages()[name])
    assert not hits, (f"{name}: figures in the prose that the run should insert (myst-nb glue), "
                      "a citation should source, or that belong on the allow-list:\n"
                      + "\n".join(hits))


# -- glue keys: pasted on a page only if the notebook glues them ---------------------------------

def _glued_patterns(code: str) -> list[re.Pattern]:
    patterns = []
    for prefix, key in re.findall(r"\bglue\(\s*(f?)[\"']([^\"']+)[\"']", code):
        if prefix:                                   # f"fem1d_p_{key}": any text for {...}
            key = re.sub(r"\\\{[^}]*\\\}", ".+", re.escape(key))
            patterns.append(re.compile(key + "$"))
        else:
            patterns.append(re.compile(re.escape(key) + "$"))
    return patterns


@pytest.mark.parametrize("path", sorted((ROOT / "notebooks").glob("*.ipynb")), ids=lambda p: p.stem)
def test_every_pasted_glue_key_is_glued(path):
    cells = json.loads(path.read_text())["cells"]
    code = "\n".join("".join(c["source"]) for c in cells if c["cell_type"] == "code")
    text = "\n".join("".join(c["source"]) for c in cells if c["cell_type"] == "markdown")
    used = {m.split(":")[0] for m in re.findall(r"\{glue(?::\w+)?\}`([^`]*)`", text)}
    patterns = _glued_patterns(code)
    missing = [key for key in used if not any(p.match(key) for p in patterns)]
    assert not missing, f"{path.name} pastes glue keys no code cell glues: {sorted(missing)}"


def roles_inside_math(markdown: str) -> list[str]:
    """Every math span ($...$, $$...$$) that holds a MyST role: MathJax typesets the role's own
    text ("glue : text\\check_n^3" where "12³" belonged), without an error a build could see."""
    text = re.sub(r"```.*?```", " ", markdown, flags=re.S)
    roles = re.findall(r"\{[\w:-]+\}`[^`]*`", text)
    numbered = iter(range(len(roles)))
    text = re.sub(r"\{[\w:-]+\}`[^`]*`", lambda _: f"\x00{next(numbered)}\x00", text)
    text = re.sub(r"`[^`]*`", " ", text)                                  # inline code
    spans = re.findall(r"\$\$.*?\$\$|\$[^$]*\$", text, flags=re.S)
    return [re.sub(r"\x00(\d+)\x00", lambda m: roles[int(m.group(1))], span)
            for span in spans if "\x00" in span]


def test_the_role_in_math_check_finds_it():
    assert roles_inside_math("On the ${glue:text}`check_n`^3$ field") == \
        ["${glue:text}`check_n`^3$"]
    assert roles_inside_math("On the {glue:text}`check_n`³ field, $n^3$ values") == []


@pytest.mark.parametrize("name", sorted(pages()))
def test_no_role_inside_math(name):
    spans = roles_inside_math(pages()[name])
    assert not spans, f"{name}: a role inside math shows as its source text: {spans}"


# -- the intro's list of lectures against the table of contents ---------------------------------

def test_intro_lists_what_the_book_contains():
    toc = (ROOT / "book" / "_toc.yml").read_text()
    rows = re.findall(r"^\| `(\d\d_\w+)` \|[^|]*\| ([^|]*) \|$",
                      (ROOT / "book" / "intro.md").read_text(), flags=re.M)
    assert rows, "no lecture table in book/intro.md"
    for key, status in rows:
        present = f"notebooks/{key}_" in toc
        if present:
            assert "coming" not in status and "part" not in status, \
                f"intro says {key} is {status.strip()!r}, but the book has it"
        else:
            assert "coming" in status, f"intro says {key} is {status.strip()!r}; not in the toc"


# -- one STREAM per build: the pages compare with the same measurement ---------------------------

def runs_taking(monkeypatch, seconds):
    """course.timing's clock replaced: the k-th timed run takes seconds[k % len(seconds)] (the
    runs take turns: copy, triad, the read-only sum, copy, ...)."""
    from course import timing

    calls = iter(range(10**6))
    monkeypatch.setattr(timing, "best_of",
                        lambda fn, repeat=5: seconds[next(calls) % len(seconds)])
    return timing


def test_stream_is_measured_once_and_reused(tmp_path, monkeypatch):
    timing = runs_taking(monkeypatch, [0.010, 0.010, 0.008,           # 10 % apart: quiet
                                       0.011, 0.011, 0.009])
    path = tmp_path / "stream.json"
    first = timing.stream_reference(1, n=2**16, repeat=2, path=path)
    again = timing.stream_reference(1, n=2**16, repeat=2, path=path)
    assert not first["cached"] and again["cached"] and first["quiet"]
    assert again["triad_gbs"] == first["triad_gbs"] == max(first["triad_runs_gbs"])
    assert len(first["triad_runs_gbs"]) == 2
    # the sum of the same run: 8 bytes per element of its best (0.008 s) run
    assert again["read_gbs"] == first["read_gbs"] == 8 * 2**16 / 0.008 / 1e9
    stale = timing.stream_reference(1, n=2**16, repeat=2, path=path, max_age=0)
    assert not stale["cached"]                      # too old: measured again
    data = json.loads(path.read_text())
    data["machine"] = "another machine"
    path.write_text(json.dumps(data))
    assert not timing.stream_reference(1, n=2**16, repeat=2, path=path)["cached"]


def test_stream_measured_beside_other_work_is_not_kept(tmp_path, monkeypatch):
    """Two test workers on two cores halved some triad runs (6.2 to 12.3 GB/s), and the book then
    reused that reference: a page showed an SpMV at 699 % of STREAM. A spread above
    STREAM_QUIET_SPREAD is used by its own page only, and the next page measures again."""
    timing = runs_taking(monkeypatch, [0.010, 0.010, 0.010,           # every other round: half
                                       0.020, 0.020, 0.020])
    path = tmp_path / "stream.json"
    noisy = timing.stream_reference(1, n=2**16, repeat=4, path=path)
    assert noisy["spread"] > timing.STREAM_QUIET_SPREAD and not noisy["quiet"]
    assert not path.exists()
    assert not timing.stream_reference(1, n=2**16, repeat=4, path=path)["cached"]


def test_the_tests_never_write_the_books_stream_reference():
    from course import native, timing

    assert native.ROOT not in timing.STREAM_CACHE.parents, timing.STREAM_CACHE


def test_bench_results_take_the_reference(tmp_path, monkeypatch):
    from course import bench, timing

    monkeypatch.setattr(timing, "STREAM_CACHE", tmp_path / "stream.json")
    # the stored reference is returned as it is (no check that a busy machine could beat)
    monkeypatch.setattr(timing, "_beaten", lambda *args, **kwargs: False)
    results = {"suite": "fem3d", "stream": {"threads": 1, "triad_gbs": 1.0, "read_gbs": 1.5},
               "runs": [{"spmv_gbs": 2.0, "spmv_fraction_of_stream": 2.0, "spmv_seconds": 0.01,
                         "read_bytes": 9 * 10**7, "written_bytes": 10**7}]}
    bench.use_stream_reference(results, repeat=1)
    reference = timing.stream_reference(1, repeat=1)
    assert results["stream"]["triad_gbs"] == reference["triad_gbs"]
    assert results["stream"]["read_gbs"] == reference["read_gbs"]
    assert results["stream_in_run"]["triad_gbs"] == 1.0
    # the measured bound of the run's reads and writes against the reference, not the triad alone
    assert results["runs"][0]["spmv_fraction_of_stream"] == timing.fraction_of_bound(
        9 * 10**7, 10**7, 0.01, reference)


# -- the learner path: the primer for Fortran and C programmers is where they look --------------

def test_the_primer_is_on_the_learner_path():
    """The primer was filed under "For instructors" and linked from nowhere (issue 20)."""
    import yaml

    toc = yaml.safe_load((ROOT / "book" / "_toc.yml").read_text())
    start = next(part for part in toc["parts"] if part["caption"] == "Start here")
    assert {"file": "book/primer"} in start["chapters"], start
    for page in ("start.md", "intro.md"):
        assert "](primer.md)" in (ROOT / "book" / page).read_text(), page
    for notebook in sorted((ROOT / "exercises").glob("*/*.ipynb")):
        intro = "".join(json.loads(notebook.read_text())["cells"][0]["source"])
        assert "](../../book/primer.md)" in intro, notebook.name
        assert f"`exercises/{notebook.parent.name}/{notebook.name}`" in intro, notebook.name


def _figure_cells(path: Path):
    """(index, alt text) of every code cell of a lecture that shows a figure."""
    cells = json.loads(path.read_text())["cells"]
    for index, cell in enumerate(cells):
        source = "".join(cell["source"]) if isinstance(cell["source"], list) else cell["source"]
        if cell["cell_type"] == "code" and "plt.show()" in source:
            yield index, cell["metadata"].get("mystnb", {}).get("image", {}).get("alt", "")


@pytest.mark.parametrize("name", sorted(p.name for p in (ROOT / "notebooks").glob("*.ipynb")))
def test_every_figure_has_alt_text_that_describes_it(name):
    """The book's figures are read aloud by screen readers and shown when an image cannot load:
    each one says what it draws (the cell's metadata mystnb.image.alt), never a file name."""
    for index, alt in _figure_cells(ROOT / "notebooks" / name):
        assert len(alt.split()) >= 8, f"cell {index}: no alt text that describes its figure"
        assert not re.search(r"\.(svg|png)\b|_images/", alt), f"cell {index}: alt is a path"


def test_instructors_schedules_give_each_lecture_the_time_its_notebook_gives():
    """The schedules on book/instructors.md time every lecture part as its first cell does."""
    rows = re.findall(r"^\| (\d+) min \| [^|]*\(`(\d\d_\w+?_[a-z])`\) \|$",
                      (ROOT / "book" / "instructors.md").read_text(), flags=re.M)
    scheduled = {part: int(minutes) for minutes, part in rows}
    for path in sorted((ROOT / "notebooks").glob("*.ipynb")):
        part = "_".join(path.stem.split("_")[:3])                      # 01_fem1d_a
        assert part in scheduled, f"{part} has no row in the instructors' schedules"
        first = "".join(json.loads(path.read_text())["cells"][0]["source"])
        stated = re.search(r"[Aa]bout (\d+) minutes", first)
        assert stated, f"{path.name}: its first cell gives no time"
        assert scheduled[part] == int(stated.group(1)), \
            f"{part}: {scheduled[part]} min on the instructors page, {stated.group(1)} in the notebook"
