"""The standalone programs fem1d_c and fem1d_f: right answers on good input files, one clear line on
stderr and exit status 2 on bad ones, and the same messages from C and Fortran."""

from __future__ import annotations

import re

import pytest

from conftest import limit_memory, run_program
from course import native
from course.fem import assembly

PROGRAMS = [pytest.param("fem1d_c", id="c"), pytest.param("fem1d_f", id="fortran")]

pytestmark = pytest.mark.timeout(300)


@pytest.fixture(scope="module")
def binaries():
    return {name: native.binary(name) for name in ("fem1d_c", "fem1d_f")}


def input_text(ne="100", length="1.0", cond="1.0", qvol="1.0", qflux="0.0", eps="1e-12"):
    return (f"{ne}  NE\n{length} {cond}  LENGTH COND\n{qvol} {qflux}  QVOL QFLUX\n"
            f"{eps}  EPS\n")


GOOD = input_text()


def parse_summary(stdout: str) -> dict:
    """The numbers of the summary both programs print."""
    out = {}
    m = re.search(r"(\d+) elements, (\d+) unknowns, (\d+) nonzeros", stdout)
    assert m, stdout
    out["ne"], out["unknowns"], out["nnz"] = map(int, m.groups())
    m = re.search(r"CG: (\d+) iterations, relative residual (\S+) \((converged|NOT converged)\)",
                  stdout)
    assert m, stdout
    out["iterations"], out["relres"], out["status"] = int(m[1]), float(m[2]), m[3]
    m = re.search(r"T\(LENGTH\) = (\S+)\s+exact (\S+)", stdout)
    assert m, stdout
    out["t_end"], out["t_exact"] = float(m[1]), float(m[2])
    m = re.search(r"max nodal error (\S+)", stdout)
    assert m, stdout
    out["error"] = float(m[1])
    return out


# --- good input ------------------------------------------------------------------------------------

@pytest.mark.parametrize("name", PROGRAMS)
def test_good_input(name, binaries, tmp_path):
    (tmp_path / "case.dat").write_text(GOOD)
    result = run_program(binaries[name], "case.dat", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert result.stderr == ""
    s = parse_summary(result.stdout)
    assert (s["ne"], s["unknowns"], s["nnz"]) == (100, 101, 301)
    assert s["status"] == "converged" and s["relres"] <= 1e-12
    assert 0 < s["iterations"] <= 1010
    assert s["t_end"] == pytest.approx(0.5, abs=1e-9)
    assert s["t_exact"] == 0.5
    assert s["error"] < 1e-10


@pytest.mark.parametrize("case", [
    dict(ne="40", length="2.0", cond="3.5", qvol="1.5", qflux="0.75"),
    dict(ne="17", length="0.3", cond="0.02", qvol="-4.0", qflux="2.0"),
    dict(ne="1", length="1.0", cond="2.0", qvol="0.0", qflux="1.0"),
], ids=["flux-cond", "small-cond", "one-element"])
@pytest.mark.parametrize("name", PROGRAMS)
def test_flux_and_conductivity(name, binaries, tmp_path, case):
    (tmp_path / "case.dat").write_text(input_text(**case, eps="1e-13"))
    result = run_program(binaries[name], "case.dat", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    s = parse_summary(result.stdout)
    length = float(case["length"])
    exact = float(assembly.fem1d_exact(length, length, float(case["cond"]), float(case["qvol"]),
                                  float(case["qflux"])))
    assert s["t_exact"] == pytest.approx(exact, rel=1e-9)
    assert s["t_end"] == pytest.approx(exact, rel=1e-9)
    assert s["error"] < 1e-10 * max(1.0, abs(exact))
    assert s["ne"] == int(case["ne"]) and s["unknowns"] == int(case["ne"]) + 1


@pytest.mark.parametrize("name", PROGRAMS)
def test_default_input_file(name, binaries, tmp_path):
    (tmp_path / "input.dat").write_text(GOOD)
    result = run_program(binaries[name], cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert parse_summary(result.stdout)["t_end"] == pytest.approx(0.5, abs=1e-9)


@pytest.mark.parametrize("name", PROGRAMS)
def test_default_input_file_missing(name, binaries, tmp_path):
    result = run_program(binaries[name], cwd=tmp_path)
    assert result.returncode == 2
    assert "input.dat" in result.stderr and len(result.stderr.splitlines()) == 1


@pytest.mark.parametrize("eps", ["1.0d-12", "1.0D-12", "1d-12", "1.0E-12"])
@pytest.mark.parametrize("name", PROGRAMS)
def test_fortran_style_exponent(name, binaries, tmp_path, eps):
    (tmp_path / "case.dat").write_text(input_text(eps=eps))
    result = run_program(binaries[name], "case.dat", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    s = parse_summary(result.stdout)
    assert s["relres"] <= 1e-12 and s["error"] < 1e-10


@pytest.mark.parametrize("name", PROGRAMS)
def test_same_output_from_c_and_fortran(name, binaries, tmp_path):
    """Both print the same summary (the C twin's numbers), up to the language label."""
    (tmp_path / "case.dat").write_text(input_text(ne="33", cond="2.0", qflux="0.5"))
    outputs = {}
    for prog in ("fem1d_c", "fem1d_f"):
        result = run_program(binaries[prog], "case.dat", cwd=tmp_path)
        assert result.returncode == 0
        outputs[prog] = re.sub(r"\((C|Fortran)\)", "(LANG)", result.stdout)
    s_c, s_f = parse_summary(outputs["fem1d_c"]), parse_summary(outputs["fem1d_f"])
    assert s_c["iterations"] == s_f["iterations"]
    assert s_c["t_end"] == pytest.approx(s_f["t_end"], rel=1e-12)
    assert [line.split()[0] for line in outputs["fem1d_c"].splitlines()] == \
           [line.split()[0] for line in outputs["fem1d_f"].splitlines()]


# --- bad input -------------------------------------------------------------------------------------

# id -> (file contents or None for "no such file", expected line number or None, text in message)
BAD_INPUTS = {
    "missing-file": (None, None, "cannot open"),
    "empty-file": ("", 1, "missing line"),
    "missing-eps-line": (GOOD.split("\n", 3)[0] + "\n" + "\n".join(GOOD.split("\n")[1:3]) + "\n",
                         4, "missing line"),
    "missing-second-value": ("100\n1.0\n1.0 0.0\n1e-12\n", 2, "found 1"),
    "blank-first-line": ("\n" + GOOD, 1, "found 0"),
    "ne-abc": (input_text(ne="abc"), 1, "abc"),
    "ne-real": (input_text(ne="1.5"), 1, "1.5"),
    "ne-exponent": (input_text(ne="1e3"), 1, "1e3"),
    "ne-overflow": (input_text(ne="99999999999"), 1, "99999999999"),
    "ne-zero": (input_text(ne="0"), 1, "NE must be positive"),
    "ne-negative": (input_text(ne="-5"), 1, "NE must be positive"),
    "length-zero": (input_text(length="0"), 2, "LENGTH must be positive"),
    "length-negative": (input_text(length="-2.5"), 2, "LENGTH must be positive"),
    "length-abc": (input_text(length="abc"), 2, "abc"),
    "length-overflow": (input_text(length="1e400"), 2, "1e400"),
    "length-nan": (input_text(length="nan"), 2, "nan"),
    "cond-negative": (input_text(cond="-1"), 2, "COND must be positive"),
    "cond-zero": (input_text(cond="0.0"), 2, "COND must be positive"),
    "qvol-abc": (input_text(qvol="abc"), 3, "abc"),
    "qflux-trailing-garbage": (input_text(qflux="1.0x"), 3, "1.0x"),
    "eps-zero": (input_text(eps="0"), 4, "EPS must be positive"),
    "eps-negative": (input_text(eps="-1e-8"), 4, "EPS must be positive"),
    "eps-missing-exponent": (input_text(eps="1e"), 4, "'1e'"),
}


def _write_case(tmp_path, case_id):
    contents = BAD_INPUTS[case_id][0]
    path = tmp_path / f"{case_id}.dat"
    if contents is not None:
        path.write_text(contents)
    return path.name


def _check_one_line_error(result, file_name, line):
    assert result.returncode == 2, (result.returncode, result.stdout, result.stderr)
    lines = result.stderr.splitlines()
    assert len(lines) == 1, f"expected one line on stderr, got {lines!r}"
    message = lines[0]
    assert file_name in message, message
    if line is not None:
        assert f"{file_name}:{line}:" in message, message
    assert "Traceback" not in message and "Error termination" not in message
    return message


@pytest.mark.parametrize("case_id", list(BAD_INPUTS))
@pytest.mark.parametrize("name", PROGRAMS)
def test_bad_input(name, binaries, tmp_path, case_id):
    file_name = _write_case(tmp_path, case_id)
    _, line, text = BAD_INPUTS[case_id]
    result = run_program(binaries[name], file_name, cwd=tmp_path)
    message = _check_one_line_error(result, file_name, line)
    assert text in message, message
    assert result.stdout == "", "nothing should be computed or printed on bad input"


@pytest.mark.parametrize("name", PROGRAMS)
def test_too_many_arguments(name, binaries, tmp_path):
    (tmp_path / "a.dat").write_text(GOOD)
    result = run_program(binaries[name], "a.dat", "b.dat", cwd=tmp_path)
    assert result.returncode == 2
    lines = result.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("usage:") and "[INPUT]" in lines[0], lines
    assert result.stdout == ""


@pytest.mark.parametrize("name", PROGRAMS)
def test_directory_as_input(name, binaries, tmp_path):
    (tmp_path / "adir").mkdir()
    result = run_program(binaries[name], "adir", cwd=tmp_path)
    assert result.returncode == 2
    assert len(result.stderr.splitlines()) == 1 and "adir" in result.stderr


@pytest.mark.parametrize("name", PROGRAMS)
def test_huge_ne_does_not_crash(name, binaries, tmp_path):
    """NE at the int limit: a clean failure (out of memory or refused), never a crash or a hang."""
    (tmp_path / "big.dat").write_text(input_text(ne="2147483647"))
    result = run_program(binaries[name], "big.dat", cwd=tmp_path, preexec_fn=limit_memory(4 << 30))
    assert result.returncode in (1, 2), (result.returncode, result.stderr)
    assert len(result.stderr.splitlines()) == 1, result.stderr


def _normalise(message: str, binary) -> str:
    return message.replace(str(binary), "PROG").replace("fem1d_c", "PROG").replace(
        "fem1d_f", "PROG")


@pytest.mark.parametrize("case_id", [*BAD_INPUTS, "too-many-arguments", "directory"])
def test_c_and_fortran_messages_agree(binaries, tmp_path, case_id):
    if case_id == "too-many-arguments":
        (tmp_path / "a.dat").write_text(GOOD)
        args = ["a.dat", "b.dat"]
    elif case_id == "directory":
        (tmp_path / "adir").mkdir()
        args = ["adir"]
    else:
        args = [_write_case(tmp_path, case_id)]
    messages = {}
    for name in ("fem1d_c", "fem1d_f"):
        result = run_program(binaries[name], *args, cwd=tmp_path)
        messages[name] = (result.returncode, _normalise(result.stderr, binaries[name]))
    assert messages["fem1d_c"] == messages["fem1d_f"]
