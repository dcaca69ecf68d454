"""The bibliography: every `{cite}` key of the lectures and book pages is in book/references.bib,
every entry of it is cited somewhere, the book is configured to build it, and nothing points to
files outside the repository. Fast: reads files, builds nothing (the book build itself fails on
an unknown key, because Sphinx warns and the book builds with warnings as errors)."""

import re
from pathlib import Path

import pytest
import yaml

from conftest import book_prose as pages

ROOT = Path(__file__).resolve().parent.parent
BIB = ROOT / "book" / "references.bib"
CITE = re.compile(r"\{cite(?::[a-z]+)?\}`([^`]*)`")


def cited_keys(text: str) -> set[str]:
    """The keys of every {cite}, {cite:p}, {cite:t}, ... role in a MyST text."""
    return {key.strip() for keys in CITE.findall(text) for key in keys.split(",") if key.strip()}


def bib_keys(text: str) -> list[str]:
    return re.findall(r"^@\w+\{\s*([^,\s]+)\s*,", text, flags=re.M)




def unknown_keys(text: str, known: set[str]) -> set[str]:
    return cited_keys(text) - known


def test_the_checker_finds_a_made_up_key():
    known = set(bib_keys(BIB.read_text()))
    text = "As measured {cite:p}`nakajima2022openmp,madeup2099` and {cite}`hpcg`."
    assert unknown_keys(text, known) == {"madeup2099"}
    assert cited_keys("{cite:t}`a, b` {cite}`c`") == {"a", "b", "c"}


def test_bib_parses_and_keys_are_unique():
    from pybtex.database import parse_file        # sphinxcontrib-bibtex reads it with pybtex

    keys = bib_keys(BIB.read_text())
    assert len(keys) == len(set(keys)), "a key appears twice in references.bib"
    assert set(parse_file(str(BIB)).entries) == set(keys)


@pytest.mark.parametrize("name", sorted(pages()))
def test_every_cited_key_is_in_the_bibliography(name):
    missing = unknown_keys(pages()[name], set(bib_keys(BIB.read_text())))
    assert not missing, f"{name} cites keys that book/references.bib lacks: {sorted(missing)}"


def test_every_bib_entry_is_cited():
    cited = set().union(*(cited_keys(text) for text in pages().values()))
    uncited = set(bib_keys(BIB.read_text())) - cited
    assert not uncited, (f"entries of references.bib that no page cites (cite them, for instance "
                         f"on book/references.md): {sorted(uncited)}")


def test_the_book_builds_the_bibliography():
    config = yaml.safe_load((ROOT / "book" / "_config.yml").read_text())
    assert config.get("bibtex_bibfiles") == ["book/references.bib"]
    toc = (ROOT / "book" / "_toc.yml").read_text()
    assert re.search(r"file:\s*book/references\s*$", toc, flags=re.M), "references page not in toc"
    assert re.search(r"^```\{bibliography\}", (ROOT / "book" / "references.md").read_text(),
                     flags=re.M)
    import sphinxcontrib.bibtex  # noqa: F401   the extension Jupyter Book enables for it


def test_nothing_points_outside_the_repository():
    """The lectures once cited a REFERENCES.md that is not in the repository."""
    files = [*(ROOT / "notebooks").glob("*.ipynb"), *(ROOT / "book").glob("*.md"),
             *(ROOT / "course").rglob("*.py")]
    for path in files:
        for name in ("REFERENCES.md", "SEED-NOTES.md", "/work/shared"):
            assert name not in path.read_text(), f"{path.relative_to(ROOT)} points to {name}"
