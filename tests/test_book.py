"""The book: builds with every lecture executed and warnings as errors, and opens offline in a real
browser (Debian's Chromium driven by Playwright) with the math rendered, every image loaded and no
console errors. Built here at small sizes (QUICK below; COURSE_BOOK_FULL=1: the full sizes).

COURSE_BOOK_HTML=DIR checks a book built elsewhere instead of building one (DIR: its `_build/html`
folder; scripts/clean-root.sh uses it on the book that `make book` wrote in a fresh Debian root)."""

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

from urllib.parse import unquote, urlparse

import pytest
import yaml

ROOT = Path(__file__).resolve().parent.parent
GIVEN_BOOK = os.environ.get("COURSE_BOOK_HTML")           # a book built elsewhere, to check only
ARTIFACTS = ROOT / "test-artifacts" / ("given-book" if GIVEN_BOOK else "")
LECTURE_PAGES = sorted(f"notebooks/{p.stem}.html" for p in (ROOT / "notebooks").glob("*.ipynb"))

# `make test` builds the book with the small sizes below: every page executes, every glued sentence
# is written and every figure drawn, in a fraction of the time. The sizes the pages teach with
# (benchmarks beyond 4 x the cache, repeated) take about 20 minutes alone on 2 cores: `make book`
# builds them, and CI checks that book with these tests (scripts/clean-root.sh, COURSE_BOOK_HTML).
# COURSE_BOOK_FULL=1 builds the full-size book here instead. Each notebook's values replace those
# of its `parameters` cell (test_quick_sizes_name_parameters_of_their_lectures checks the names).
FULL = os.environ.get("COURSE_BOOK_FULL") == "1"
QUICK = {
    "01_fem1d_b_solve_and_verify": {"REPEAT": 1},
    "02_fem3d_c_verification_and_performance": {"REPEAT": 1, "STREAM_REPEAT": 2,
                                                "SPMV_LARGE": 32},
    "03_openmp_a_first_touch": {"N": 48, "REPEAT": 1, "STREAM_REPEAT": 2},
    "03_openmp_b_storage_formats": {"N": 48, "REPEAT": 2, "STREAM_REPEAT": 2},
    "03_openmp_c_one_parallel_region": {"REPEAT": 2, "SOLVES": 5, "BENCH_REPEAT": 1,
                                        "STREAM_REPEAT": 2},
    "04_iccg_b_colored_substitution": {"TIME_N": 24, "REPEAT": 1},
    "05_halo_b_communication_costs": {"CG_N": 24, "REPEAT": 1},
    "06_pipecg_b_overlap_and_scale": {"REPEAT": 1},
    "07_cluster_a_job_scripts": {"REPEAT": 2},
    "07_cluster_b_pencil_fft": {"REPEAT": 1},
    "08_hybrid_a_localized_ic0": {"REPEAT": 2},
    "08_hybrid_b_ranks_and_threads": {"BENCH_N": 16, "REPEAT": 2},
    "09_petsc_b_log_view_and_multigrid": {"SIZES": (12, 16, 24), "BENCH": 16, "COMPILED": 16,
                                          "REPEAT": 2},
}

# The book fixture executes every lecture: at the small sizes about 10 minutes on 2 busy cores,
# full size (COURSE_BOOK_FULL=1) about 25: both more than the suite's 900 s per test.
pytestmark = [pytest.mark.slow, pytest.mark.timeout(2700)]


def _parameters_cell(notebook: dict) -> dict:
    cells = [c for c in notebook["cells"] if "parameters" in c["metadata"].get("tags", [])]
    assert len(cells) == 1, "a lecture has exactly one cell tagged `parameters`"
    return cells[0]


def quick_copy(destination: Path) -> Path:
    """The course's files (those git tracks, or all but build outputs without git) copied to
    `destination`, with the QUICK values appended to each notebook's parameters cell."""
    listed = subprocess.run(["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
                            cwd=ROOT, capture_output=True, text=True)
    files = listed.stdout.split("\0") if listed.returncode == 0 else [
        str(p.relative_to(ROOT)) for p in ROOT.rglob("*") if p.is_file()
        and not {".git", ".venv", "build", "test-artifacts"} & set(p.relative_to(ROOT).parts)]
    for name in files:
        if name and (ROOT / name).is_file():
            (destination / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(ROOT / name, destination / name)
    for stem, values in QUICK.items():
        path = destination / "notebooks" / f"{stem}.ipynb"
        notebook = json.loads(path.read_text())
        cell = _parameters_cell(notebook)
        source = "".join(cell["source"])
        cell["source"] = source.rstrip("\n") + "\n# make test: small sizes (tests/test_book.py)\n" \
            + "".join(f"{name} = {value!r}\n" for name, value in values.items())
        path.write_text(json.dumps(notebook, indent=1, ensure_ascii=False) + "\n")
    return destination


@pytest.fixture(scope="module")
def book(tmp_path_factory) -> Path:
    """Build the book into a temporary folder, executing every notebook afresh (no cache); or,
    with COURSE_BOOK_HTML, the book that is already there."""
    if GIVEN_BOOK:
        html = Path(GIVEN_BOOK).resolve()
        assert (html / "index.html").is_file(), f"COURSE_BOOK_HTML={GIVEN_BOOK}: no index.html there"
        return html
    tmp = tmp_path_factory.mktemp("book")
    source = ROOT if FULL else quick_copy(tmp_path_factory.mktemp("source"))
    config = yaml.safe_load((source / "book" / "_config.yml").read_text())
    config["execute"]["execute_notebooks"] = "force"
    extensions = config["sphinx"]["local_extensions"]     # paths relative to book/_config.yml
    config["sphinx"]["local_extensions"] = {name: str(source / "book" / path)
                                            for name, path in extensions.items()}
    (tmp / "_config.yml").write_text(yaml.safe_dump(config))
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"}
    result = subprocess.run(
        [str(Path(sys.executable).parent / "jupyter-book"), "build", str(source),
         "--config", str(tmp / "_config.yml"), "--toc", str(source / "book" / "_toc.yml"),
         "--path-output", str(tmp), "--warningiserror", "--keep-going"],
        capture_output=True, text=True, env=env, timeout=2600)
    log = result.stdout + result.stderr
    assert result.returncode == 0, f"the book did not build:\n{log[-6000:]}"
    return tmp / "_build" / "html"


def test_quick_sizes_name_parameters_of_their_lectures():
    """Every QUICK value replaces a parameter its lecture has (a renamed one would otherwise
    only fail inside the book's build)."""
    for stem, values in QUICK.items():
        notebook = json.loads((ROOT / "notebooks" / f"{stem}.ipynb").read_text())
        source = "".join(_parameters_cell(notebook)["source"])
        missing = [name for name in values if not re.search(rf"^{name} = ", source, re.M)]
        assert missing == [], f"{stem}: no parameters {missing}"


def test_every_page_is_there(book):
    exercises = [f"exercises/{p.parent.name}/{p.stem}.html"
                 for p in sorted((ROOT / "exercises").glob("*/*.ipynb"))]
    assert len(exercises) == len(list((ROOT / "solutions").glob("*/*.ipynb")))
    for page in ["book/intro.html", *LECTURE_PAGES, *exercises]:
        assert (book / page).exists(), page


def test_the_glossary_fills_the_index(book):
    glossary = (book / "book" / "glossary.html").read_text()
    index = (book / "genindex.html").read_text()
    terms = re.findall(r'<dt id="term-([\w-]+)"', glossary)
    assert len(terms) >= 20, terms
    for term in ("Allreduce", "Halo exchange", "Residual replacement"):
        assert term in index, f"{term} is not in the index"


def test_intro_prints_the_toolchain(book):
    text = (book / "book" / "intro.html").read_text()
    for what in ("Fortran compiler", "MPI (mpiexec)", "Cores"):
        assert f"<td><p>{what}" in text, f"no table row {what!r}"
    assert "missing" not in text.lower().split("toolchain this book was built with")[-1], \
        "the book was built with part of the toolchain missing"


def test_references_page_and_citations(book):
    """The bibliography is a page of the book, and the lectures' citations link to it."""
    refs = (book / "book" / "references.html").read_text()
    assert "Nakajima, Kasai, and Sakaguchi" in refs and "HPCAsia 2022 Workshop" in refs
    page = (book / "notebooks" / "03_openmp_a_first_touch.html").read_text()
    assert re.search(r'href="[^"]*references\.html#[^"]+"', page), "03a cites nothing"
    for html in book.rglob("*.html"):
        assert "REFERENCES.md" not in html.read_text(), f"{html.relative_to(book)}"


def test_tables_printed_by_notebooks_are_rendered(book):
    """Markdown that a cell prints (a results table) is rendered, not shown as raw pipes."""
    for page in book.rglob("*.html"):
        raw = re.findall(r"<p>\|[^<]*\|", page.read_text())
        assert not raw, f"{page.relative_to(book)} shows a table as text: {raw[0][:80]}"


def test_no_remote_scripts_or_styles(book):
    remote = re.compile(r'<(?:script|link)[^>]+(?:src|href)="(?:https?:)?//[^"]+"')
    for page in book.rglob("*.html"):
        found = remote.findall(page.read_text())
        assert not found, f"{page.relative_to(book)} loads from the web: {found[:3]}"
        assert "unpkg.com" not in page.read_text(), f"{page.relative_to(book)} names a CDN"
    assert (book / "_static" / "mathjax" / "tex-chtml.js").exists(), "MathJax is not bundled"


PAGE_WIDTH = 1280          # px: a laptop's browser window, where the book's column is ~690 px
SMALLEST_TEXT_PX = 9.0     # px: the smallest text of a figure, as drawn on such a page


def smallest_text_px(svg: str, drawn_width: float) -> float:
    """The size in px of the smallest text of a matplotlib SVG drawn `drawn_width` px wide.
    course.show draws text as outlines: each string is a group scaled by its font size in pt
    / 100, in a drawing whose width attribute is in pt."""
    width_pt = float(re.search(r'<svg[^>]*\bwidth="([\d.]+)pt"', svg).group(1))
    sizes = [100 * float(s) for s in re.findall(r"scale\(([\d.]+) -\1\)", svg)]
    return min(sizes, default=float("inf")) * drawn_width / width_pt


def test_the_text_size_check_finds_small_labels():
    import matplotlib
    matplotlib.use("Agg")
    import io

    import matplotlib.pyplot as plt

    from course import show
    show.setup()

    def drawn(width_in, fontsize):
        fig, ax = plt.subplots(figsize=(width_in, 3))
        ax.plot([0, 1], [0, 1], label="a line")
        ax.legend(fontsize=fontsize)
        out = io.StringIO()
        fig.savefig(out, format="svg")
        plt.close(fig)
        natural = width_in * 96                       # pt -> px
        return smallest_text_px(out.getvalue(), min(natural, 690.0))

    assert drawn(6, 10) == pytest.approx(10 * 4 / 3, rel=0.02)      # fits: drawn at its size
    assert drawn(16, 8) < SMALLEST_TEXT_PX                           # the review's 4-panel case
    assert drawn(10, 10) >= SMALLEST_TEXT_PX


def _chromium() -> str:
    for name in ("chromium", "chromium-browser", "google-chrome"):
        if shutil.which(name):
            return shutil.which(name)
    pytest.fail("no Chromium found: `make test` installs Debian's chromium (apt-get install chromium)")


@pytest.mark.parametrize("page", LECTURE_PAGES + ["book/intro.html"])
def test_page_renders_offline_in_a_browser(book, page):
    from playwright.sync_api import sync_playwright

    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    errors, remote_requests = [], []
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=_chromium(), args=["--no-sandbox"])
        ctx = browser.new_context(viewport={"width": PAGE_WIDTH, "height": 900})
        # offline: anything that is not a file of the book is refused and recorded
        ctx.route(re.compile(r"^(?!file:).*"),
                  lambda route: (remote_requests.append(route.request.url), route.abort()))
        pg = ctx.new_page()
        pg.on("console", lambda m: m.type == "error" and errors.append(m.text))
        pg.on("pageerror", lambda e: errors.append(str(e)))
        pg.goto((book / page).as_uri(), wait_until="load")
        pg.wait_for_function("window.MathJax && MathJax.startup && MathJax.startup.promise")
        pg.evaluate("MathJax.startup.promise")
        math = pg.locator("mjx-container").count()
        math_errors = pg.locator("mjx-merror").count()
        images = pg.evaluate("""() => Array.from(document.images).map(
            img => ({src: img.src, ok: img.complete && img.naturalWidth > 0, alt: img.alt,
                     width: img.getBoundingClientRect().width,
                     figure: img.closest("div.cell_output") !== null}))""")
        # every code line that wraps continues under its own indentation (course.js)
        wrapped = pg.evaluate("""() => Array.from(document.querySelectorAll("span.course-line"))
            .map(line => {
                const range = document.createRange();
                range.selectNodeContents(line);
                const rects = Array.from(range.getClientRects()).filter(r => r.width > 0);
                const tops = [...new Set(rects.map(r => Math.round(r.top)))];
                if (tops.length < 2) return null;
                const lefts = rects.filter(r => Math.round(r.top) === tops[1]).map(r => r.left);
                return {text: line.textContent.slice(0, 60),
                        continues_at: Math.min(...lefts) - line.getBoundingClientRect().left,
                        indent: parseFloat(getComputedStyle(line).paddingLeft)};
            }).filter(line => line !== null)""")
        code_lines = pg.locator("span.course-line").count()
        pg.screenshot(path=str(ARTIFACTS / (page.replace("/", "_") + ".png")), full_page=True)
        browser.close()
    assert remote_requests == [], f"the page asked the web for {remote_requests}"
    assert errors == [], f"console errors: {errors}"
    assert math_errors == 0, "MathJax reported errors in formulas"
    if page.startswith("notebooks/"):
        assert math > 0, "no formula was typeset"
        assert len(images) > 0, "a lecture without a single figure?"
    if page.startswith("notebooks/"):
        assert code_lines > 0, "course.js did not run: code lines are not blocks of their own"
    flush = [w["text"] for w in wrapped if abs(w["continues_at"] - w["indent"]) > 1.0]
    assert flush == [], f"wrapped code lines that do not continue under their indent: {flush[:3]}"
    broken = [i["src"] for i in images if not i["ok"]]
    assert broken == [], f"images that did not load: {broken}"
    for image in (i for i in images if i["figure"]):
        name = image["src"].rsplit("/", 1)[-1]
        assert "_images/" not in image["alt"], f"{name}: its alt text is its file name"
        if name.endswith(".svg"):
            px = smallest_text_px(Path(unquote(urlparse(image["src"]).path)).read_text(),
                                  image["width"])
            assert px >= SMALLEST_TEXT_PX, (
                f"{name}: its smallest text is {px:.1f} px on a {PAGE_WIDTH} px wide page "
                f"(at least {SMALLEST_TEXT_PX}): a narrower figure or larger fonts")


# ---- readable pages: highlighting, figures, tabs, wrapping (issue 10, section 3) ----------------

def _exercise_pages(book):
    for source in sorted((ROOT / "exercises").glob("*/*.ipynb")):
        yield source, book / "exercises" / source.parent.name / f"{source.stem}.html"


def test_writefile_cells_are_highlighted_in_their_language(book):
    """%%writefile cells of the exercises are drawn by the C/Fortran lexer: #pragma omp is a
    preprocessor line (class cp), not a Python comment (class c1)."""
    seen = set()
    for source, page in _exercise_pages(book):
        text = page.read_text()
        for name in re.findall(r"%%writefile (\S+?\.(?:c|f90))\b", source.read_text()):
            language = "c" if name.endswith(".c") else "fortran"
            assert f'highlight-{language}-writefile' in text, f"{page.name}: {name}"
            seen.add(language)
        assert not re.search(r'<span class="c1">#\s*pragma', text), f"{page.name}: pragma as comment"
    assert seen == {"c", "fortran"}
    omp = (book / "exercises" / "03_openmp" / "03_openmp_exercise.html").read_text()
    assert re.search(r'<span class="cp">#pragma omp', omp), "03_openmp: #pragma omp not highlighted"


@pytest.mark.parametrize("page", [p for p in LECTURE_PAGES if p.split("/")[1][:3] in
                                  ("01_", "02_", "04_", "05_")])
def test_lecture_figures_are_svg_and_kernels_have_both_languages(book, page):
    text = (book / page).read_text()
    images = re.findall(r'<img[^>]+src="([^"]+)"', text)
    assert images, "no figures"
    raster = [src for src in images if not src.endswith(".svg")]
    assert not raster, f"raster figures (show.setup() not called?): {raster[:3]}"
    c = text.count('class="highlight-c notranslate"')
    fortran = text.count('class="highlight-fortran notranslate"')
    assert c == fortran, f"{c} C listings but {fortran} Fortran listings"


def test_kernels_shown_only_in_c_before_have_fortran_tabs(book):
    for page, kernels in [("02_fem3d_b_assembly_and_solve", ["fem3d_pattern", "fem3d_face_flux"]),
                          ("03_openmp_b_storage_formats", ["sell_matvec"])]:
        text = (book / "notebooks" / f"{page}.html").read_text()
        assert 'data-sync-id="fortran"' in text and "sd-tab-set" in text, page
        for kernel in kernels:      # the Fortran tab's title: `src_fortran/...f90` — `kernel`
            assert re.search(rf'src_fortran/[^<]*\.f90</span></code> — <code[^>]*><span class="pre">'
                             rf'{kernel}</span>', text), f"{page}: no Fortran {kernel}"
    diff_page = (book / "notebooks" / "03_openmp_b_storage_formats.html").read_text()
    assert diff_page.count('class="highlight-diff notranslate"') == 2, "the v1 -> v2 diff: C and Fortran"


def test_long_output_lines_wrap(book):
    css = book / "_static" / "course.css"
    assert css.exists() and "pre-wrap" in css.read_text()
    for page in LECTURE_PAGES:
        assert "_static/course.css" in (book / page).read_text(), page
