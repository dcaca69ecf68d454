"""Guards of the measured defects of issue 10 (section 6), one class of defect per section: the
code placement that made the Fortran SpMV slower than the identical C loop, the printed NUMA
commands, the core count, and names in the exercises that shadow course modules."""

from __future__ import annotations

import ast
import json
import re
import shlex
import shutil
import subprocess

import pytest

from conftest import ROOT, run
from course import bench, native, problems, toolchain

# --- the CRS product's inner loop lies within one 64-byte fetch line, in both languages ----------

LINE = re.compile(r"^\s*([0-9a-f]+):\s+(\S+)\s*(.*)$")
JUMP_TARGET = re.compile(r"^([0-9a-f]+) <")


def disassembly(library, function: str) -> list[tuple[int, str, str]]:
    """(address, mnemonic, operands) of every instruction of `function` in `library`."""
    text = subprocess.run(["objdump", "-d", "--no-show-raw-insn", str(library)],
                          capture_output=True, text=True, check=True).stdout
    body = text.split(f"<{function}>:\n", 1)[1].split("\n\n", 1)[0]
    return [(int(m[1], 16), m[2], m[3]) for line in body.splitlines() if (m := LINE.match(line))]


def innermost_loop(instructions) -> tuple[int, int]:
    """[first, last byte] of the shortest backward jump's loop."""
    loops = []
    for (address, mnemonic, operands), following in zip(instructions, instructions[1:]):
        target = JUMP_TARGET.match(operands)
        if mnemonic.startswith("j") and target and int(target[1], 16) < address:
            loops.append((int(target[1], 16), following[0] - 1))
    assert loops, "no loop found"
    return min(loops, key=lambda loop: loop[1] - loop[0])


@pytest.mark.skipif(shutil.which("objdump") is None, reason="needs objdump (binutils)")
@pytest.mark.parametrize("lang", native.COMPILED_LANGS)
def test_crs_matvec_inner_loop_is_within_one_64_byte_line(lang):
    """Same instructions, but Fortran's loop straddled a 64-byte line and ran 1.3x slower than C's
    (AMD EPYC, best of 15): the build aligns loops (-falign-loops=32 in CMakeLists.txt)."""
    native.load(lang)                                          # built and fresh
    library = native.build_dir("release") / "lib" / native._LIBRARY[lang]
    first, last = innermost_loop(disassembly(library, "crs_matvec._omp_fn.0"))
    assert last - first < 64, f"{lang}: the inner loop is {last - first + 1} bytes"
    assert first // 64 == last // 64, \
        f"{lang}: the inner loop {first:#x}..{last:#x} straddles a 64-byte line"


# --- exercises do not shadow the course's modules ------------------------------------------------

COURSE_MODULES = {path.stem for path in (ROOT / "course").iterdir()
                  if (path.suffix == ".py" or (path / "__init__.py").is_file())
                  and not path.stem.startswith("_")} | {"course"}


def assigned_names(source: str) -> set[str]:
    """Names a notebook cell assigns (=, for, with ... as, def, class; imports of modules are
    fine), IPython magics and shell lines left out."""
    if source.lstrip().startswith("%%"):                      # %%writefile: C or Fortran
        return set()
    lines = ["" if line.lstrip().startswith(("%", "!")) else line for line in source.splitlines()]
    names = set()
    for node in ast.walk(ast.parse("\n".join(lines))):
        if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            names.add(node.id)
        elif isinstance(node, (ast.FunctionDef, ast.ClassDef)):
            names.add(node.name)
    return names


def exercise_notebooks():
    return sorted((ROOT / "solutions").glob("*/*.ipynb")) + \
        sorted((ROOT / "exercises").glob("*/*.ipynb"))


def test_course_modules_are_known():
    assert {"bench", "fvm", "native", "mesh", "course"} <= COURSE_MODULES
    assert assigned_names("bench = fvm.poisson(8, 8, 8)\nfor mesh in []: pass") == {"bench", "mesh"}


@pytest.mark.parametrize("path", exercise_notebooks(), ids=lambda p: str(p.relative_to(ROOT)))
def test_exercise_does_not_shadow_a_course_module(path):
    """`bench = fvm.poisson(...)` in the 04_openmp exercise hid course.bench, which the lectures
    use under that name: a learner who copies a lecture cell afterwards gets an AttributeError."""
    notebook = json.loads(path.read_text())
    for number, cell in enumerate(notebook["cells"]):
        if cell["cell_type"] == "code":
            shadowing = assigned_names("".join(cell["source"])) & COURSE_MODULES
            assert not shadowing, f"cell {number} assigns {sorted(shadowing)}, a course module"
