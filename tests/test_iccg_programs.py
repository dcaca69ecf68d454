"""Lecture 04_iccg, the standalone programs iccg_c and iccg_f: every NCOLORtot convention on the
03_openmp INPUT.DAT (the colors and iterations of the Python side, the same checksum for 1 and 2
threads), C and Fortran line for line the same (but the times), and one clear line on stderr with
exit status 2 on bad input files and command lines, the same in both languages."""

from __future__ import annotations

import re

import pytest

from conftest import run_program
from course import native, problems

pytestmark = pytest.mark.timeout(120)
GOOD = "10 9 8   NX NY NZ\n1.0 0.5 2.0   DX DY DZ\n1e-10   EPSICCG\n"


PROGRAMS = [pytest.param("iccg_c", id="c"), pytest.param("iccg_f", id="fortran")]
LANG = {"iccg_c": "c", "iccg_f": "fortran"}


@pytest.fixture(scope="module", params=PROGRAMS)
def exe(request):
    return native.binary(request.param)


@pytest.fixture(scope="module")
def binaries():
    return {name: native.binary(name) for name in LANG}


def parse(stdout: str) -> dict:
    m = re.search(r"ordering (\S+), NCOLORtot (-?\d+), colors (\d+), incompatible nodes (\d+), "
                  r"threads (\d+)\n  ICCG: (\d+) iterations, relative residual (\S+) "
                  r"\((converged|NOT converged)\)", stdout)
    assert m, stdout
    checksum = re.search(r"phi\(checksum\) = (\S+)", stdout)
    assert checksum, stdout
    return {"ordering": m[1], "colors": int(m[3]), "incompatible": int(m[4]),
            "threads": int(m[5]), "iterations": int(m[6]), "status": m[8],
            "checksum": float(checksum[1])}


@pytest.mark.parametrize("ncolortot, name, k", [("1", "natural", None), ("0", "cm", None),
                                                 ("-1", "rcm", None), ("3", "mc", 3),
                                                 ("-4", "cm-rcm", 4)])
def test_program_matches_python(exe, tmp_path, ncolortot, name, k):
    (tmp_path / "INPUT.DAT").write_text(GOOD)
    python = problems.poisson_iccg(10, 9, 8, name, k, lang=LANG[exe.name], tol=1e-10, dx=1.0,
                                   dy=0.5, dz=2.0)
    outs = []
    for threads in ("1", "2"):
        result = run_program(exe, "INPUT.DAT", ncolortot, cwd=tmp_path,
                             env={"OMP_NUM_THREADS": threads, "PATH": "/usr/bin:/bin"})
        assert result.returncode == 0, result.stderr
        outs.append(parse(result.stdout))
    for out in outs:
        assert out["status"] == "converged"
        assert out["colors"] == python["colors"]
        assert out["iterations"] == python["iterations"]
        assert out["incompatible"] == python["incompatible_nodes"]
        assert out["checksum"] == pytest.approx(python["checksum"], rel=1e-8)
    assert [o["threads"] for o in outs] == [1, 2]


@pytest.mark.parametrize("text, args, where", [
    ("", (), "bad.dat:1: missing line"),
    ("10 10\n1 1 1\n1e-8\n", (), "bad.dat:1: expected 3 integer"),
    ("10 10 0\n1 1 1\n1e-8\n", (), "bad.dat:1: NZ must be positive"),
    ("4 4 4\n1 x 1\n1e-8\n", (), "bad.dat:2: expected a real number"),
    ("4 4 4\n1 1 1\n", (), "bad.dat:3: missing line"),
    (GOOD, ("abc",), "NCOLORtot must be an integer"),
    (GOOD, ("1", "2"), "usage:"),
])
def test_program_bad_input(exe, tmp_path, text, args, where):
    (tmp_path / "bad.dat").write_text(text)
    result = run_program(exe, "bad.dat", *args, cwd=tmp_path)
    assert result.returncode == 2, result.stderr
    assert result.stdout == ""
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and where in lines[0], lines


def test_program_missing_file(exe, tmp_path):
    result = run_program(exe, "absent.dat", cwd=tmp_path)
    assert result.returncode == 2
    assert result.stderr.strip() == f"{exe.name}: absent.dat: cannot open input file: No such " \
                                    "file or directory"


def without_times(stdout: str) -> list[str]:
    """The lines of the output but the times, with the language's name taken out."""
    return [line.replace("(C)", "(LANG)").replace("(Fortran)", "(LANG)")
            for line in stdout.splitlines() if not line.lstrip().startswith("time:")]


@pytest.mark.parametrize("ncolortot", ["1", "0", "-1", "2", "7", "-2", "-5", "40"])
@pytest.mark.parametrize("threads", ["1", "2"])
def test_c_and_fortran_print_the_same(binaries, tmp_path, ncolortot, threads):
    """Every line (iterations, relative residual, colors, incompatible nodes, phi) but the times."""
    (tmp_path / "INPUT.DAT").write_text(GOOD)
    outputs = {}
    for name, path in binaries.items():
        result = run_program(path, "INPUT.DAT", ncolortot, cwd=tmp_path,
                             env={"OMP_NUM_THREADS": threads, "PATH": "/usr/bin:/bin"})
        assert result.returncode == 0, result.stderr
        outputs[name] = without_times(result.stdout)
    assert len(outputs["iccg_c"]) == 5, outputs["iccg_c"]
    assert outputs["iccg_c"][:3] == outputs["iccg_f"][:3]       # header, ordering, ICCG line
    c, f = parse("\n".join(outputs["iccg_c"])), parse("\n".join(outputs["iccg_f"]))
    assert c["checksum"] == pytest.approx(f["checksum"], rel=1e-12)


@pytest.mark.parametrize("text, args", [
    ("", ()), ("10 10\n1 1 1\n1e-8\n", ()), ("10 -1 3\n1 1 1\n1e-8\n", ()),
    ("4 4 4\n1 0 1\n1e-8\n", ()), ("4 4 4\n1 1 1\n-1\n", ()),
    ("2000 2000 2000\n1 1 1\n1e-8\n", ()), (GOOD, ("3x",)), (GOOD, ("",)),
    (GOOD, ("-2147483648",)), (GOOD, ("99999999999",)),
])
def test_c_and_fortran_messages_agree(binaries, tmp_path, text, args):
    (tmp_path / "bad.dat").write_text(text)
    messages = {}
    for name, path in binaries.items():
        result = run_program(path, "bad.dat", *args, cwd=tmp_path)
        assert result.returncode == 2, result.stderr
        messages[name] = result.stderr.replace(name, "PROG")
    assert messages["iccg_c"] == messages["iccg_f"]


def test_too_many_threads(exe, tmp_path):
    (tmp_path / "INPUT.DAT").write_text(GOOD)
    result = run_program(exe, cwd=tmp_path, env={"OMP_NUM_THREADS": "100000",
                                                 "PATH": "/usr/bin:/bin"})
    assert result.returncode == 2 and result.stdout == ""
    assert result.stderr.startswith(f"{exe.name}: OMP_NUM_THREADS=100000 is more than 16 per core")


def test_not_converged_exits_1(exe, tmp_path):
    """A tolerance far below what double precision reaches: 10 N iterations and exit status 1
    (unless the residual hits exactly 0, then it has converged and the status is 0)."""
    (tmp_path / "INPUT.DAT").write_text("6 5 4\n1 1 1\n1e-300\n")
    result = run_program(exe, "INPUT.DAT", "-2", cwd=tmp_path)
    out = parse(result.stdout)
    if out["status"] == "NOT converged":
        assert (result.returncode, out["iterations"]) == (1, 10 * 6 * 5 * 4)
    else:
        assert result.returncode == 0
