"""The glossary (book/glossary.md): every term names the lecture that uses it, every {term}
reference resolves, the terms stay in alphabetical order, and the terms lectures 05-09 use are
there (review c). Fast: reads the markdown; tests/test_book.py checks that the built index lists
the terms."""

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
GLOSSARY = ROOT / "book" / "glossary.md"
LECTURES = {"_".join(p.stem.split("_")[:2]) for p in (ROOT / "notebooks").glob("*.ipynb")}


def entries(text: str) -> dict[str, str]:
    """{term: definition} of the glossary directive of `text`, in the order written."""
    body = re.search(r"```\{glossary\}\n(.*?)\n```", text, re.S)
    assert body, "no {glossary} directive"
    found: dict[str, str] = {}
    term = None
    for line in body.group(1).splitlines():
        if line.strip() and not line[0].isspace():
            term = line.strip()
            assert term not in found, f"{term!r} is defined twice"
            found[term] = ""
        elif term is not None:
            found[term] += line.strip() + " "
    return found


def references(definition: str) -> list[str]:
    """The terms that {term}`...` roles in `definition` point to."""
    return [m.group(2) or m.group(1).strip()
            for m in re.finditer(r"\{term\}`([^`<]*)(?:<([^>`]+)>)?`", definition)]


def lectures_named(definition: str) -> set[str]:
    return set(re.findall(r"`(\d\d_[a-z0-9]+)`", definition))


@pytest.fixture(scope="module")
def glossary() -> dict[str, str]:
    return entries(GLOSSARY.read_text())


def test_the_parser_finds_terms_references_and_lectures():
    text = ("```{glossary}\nA term\n  Says {term}`B` and {term}`the b <B>` (`05_halo`).\n\n"
            "B\n  Nothing (`08_hybrid`, `09_petsc`).\n```\n")
    found = entries(text)
    assert list(found) == ["A term", "B"]
    assert references(found["A term"]) == ["B", "B"]
    assert lectures_named(found["B"]) == {"08_hybrid", "09_petsc"}


def test_every_term_names_a_lecture_that_exists(glossary):
    for term, definition in glossary.items():
        named = lectures_named(definition)
        assert named, f"{term!r} names no lecture"
        assert named <= LECTURES, f"{term!r} names {sorted(named - LECTURES)}: no such lecture"


def test_every_term_reference_is_a_term(glossary):
    for term, definition in glossary.items():
        for target in references(definition):
            assert target in glossary, f"{term!r} refers to {target!r}, which is not a term"


def test_the_terms_are_in_alphabetical_order(glossary):
    keys = [term.lstrip("-").casefold() for term in glossary]
    misplaced = [term for term, key, want in zip(glossary, keys, sorted(keys)) if key != want]
    assert not misplaced, f"not in alphabetical order from {misplaced[0]!r} on"


@pytest.mark.parametrize("term", [
    "Algebraic multigrid", "Block Jacobi", "ASDD", "Flat MPI", "Edge cut",
    "Preconditioned and unpreconditioned norm", "KSP and PC", "-log_view", "Krylov method",
    "Preconditioner", "Weak scaling", "Eager and rendezvous protocols", "Deadlock",
    "Persistent request", "Neighbourhood collective", "Progress"])
def test_the_terms_lectures_05_to_09_use_are_defined(glossary, term):
    assert term in glossary, f"the glossary lacks {term!r}"


def test_additive_schwarz_is_the_overlapping_method_and_asdd_is_not(glossary):
    """Review c: the course's sweeps are non-overlapping Richardson steps on block Jacobi (GeoFEM's
    ASDD); additive Schwarz in the literature and in PETSc means overlapping subdomains."""
    assert "overlap" in glossary["Additive Schwarz"]
    assert "Richardson" in glossary["ASDD"] and "Block Jacobi" in references(glossary["ASDD"])
    assert not any("sweep" in term.casefold() and "schwarz" in term.casefold()
                   for term in glossary), "no 'additive Schwarz sweep' term"
