"""Lecture 03_iccg, the standalone program iccg_c: every NCOLORtot convention on the 04_openmp
INPUT.DAT (the colors and iterations of the Python side, the same checksum for 1 and 2 threads),
and one clear line on stderr with exit status 2 on bad input files and command lines."""

from __future__ import annotations

import re

import pytest

from conftest import run_program
from course import iccg, native

pytestmark = pytest.mark.timeout(120)
GOOD = "10 9 8   NX NY NZ\n1.0 0.5 2.0   DX DY DZ\n1e-10   EPSICCG\n"


@pytest.fixture(scope="module")
def exe():
    return native.binary("iccg_c")


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
    python = iccg.poisson(10, 9, 8, name, k, lang="c", tol=1e-10, dx=1.0, dy=0.5, dz=2.0)
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
    assert result.stderr.strip() == "iccg_c: absent.dat: cannot open input file: No such file " \
                                    "or directory"
