"""The kernels under AddressSanitizer and UndefinedBehaviorSanitizer.

The `sanitize` variant of the build compiles src_c/ and src_fortran/ with
-fsanitize=address,undefined. The kernel tests (every test marked `compiled` in test_fem1d.py,
test_native.py, test_fem3d.py, test_openmp.py and test_race.py) run again in a subprocess whose
Python loads that variant (COURSE_NATIVE_VARIANT=sanitize) with the sanitizer runtimes preloaded. First we prove that the
sanitizer is live at all, and in the library as Python loads it.
"""

from __future__ import annotations

import re
import shutil
import subprocess

import pytest

from conftest import PYTHON, ROOT, env_with, run
from course import native

pytestmark = [pytest.mark.timeout(900),
              pytest.mark.skipif(shutil.which("cc") is None, reason="no C compiler")]

SANITIZER_REPORT = re.compile(r"AddressSanitizer|LeakSanitizer|runtime error:|"
                              r"UndefinedBehaviorSanitizer")


def runtime(name: str) -> str:
    path = subprocess.run(["cc", f"-print-file-name={name}"], capture_output=True, text=True,
                          check=True).stdout.strip()
    if "/" not in path:           # cc prints the bare name when it has no such library
        pytest.skip(f"the C compiler has no {name}")
    return path


@pytest.fixture(scope="module")
def sanitize_build():
    return native.build("sanitize")


@pytest.fixture(scope="module")
def sanitizer_env():
    return env_with(COURSE_NATIVE_VARIANT="sanitize",
                    LD_PRELOAD=f"{runtime('libasan.so')} {runtime('libubsan.so')}",
                    ASAN_OPTIONS="detect_leaks=0",            # Python leaks by design
                    UBSAN_OPTIONS="halt_on_error=1:print_stacktrace=1")


def test_asan_catches_a_heap_overflow(tmp_path):
    """The toolchain's AddressSanitizer works here: a heap overflow is reported and fatal."""
    src = tmp_path / "overflow.c"
    src.write_text("#include <stdlib.h>\n"
                   "int main(int argc, char **argv) {\n"
                   "    (void)argv;\n"
                   "    int *a = malloc(4 * sizeof *a);\n"
                   "    a[argc + 3] = 1;              /* a[4]: one past the end */\n"
                   "    int r = a[0];\n"
                   "    free(a);\n"
                   "    return r;\n"
                   "}\n")
    exe = tmp_path / "overflow"
    run(["cc", "-g", "-fsanitize=address", str(src), "-o", str(exe)], check=True, timeout=120)
    result = run([exe], timeout=60)
    assert result.returncode != 0
    assert "AddressSanitizer" in result.stderr and "heap-buffer-overflow" in result.stderr


def test_ubsan_catches_signed_overflow(tmp_path):
    src = tmp_path / "ub.c"
    src.write_text("#include <limits.h>\n#include <stdio.h>\n"
                   "int main(int argc, char **argv) {\n"
                   "    (void)argv;\n"
                   "    int big = INT_MAX - 1 + argc;\n"
                   "    printf(\"%d\\n\", big + 1);\n"
                   "    return 0;\n"
                   "}\n")
    exe = tmp_path / "ub"
    run(["cc", "-g", "-fsanitize=undefined", str(src), "-o", str(exe)], check=True, timeout=120)
    result = run([exe], timeout=60,
                 env=env_with(UBSAN_OPTIONS="halt_on_error=1:print_stacktrace=1"))
    assert result.returncode != 0
    assert "runtime error" in result.stderr and "overflow" in result.stderr


@pytest.mark.parametrize("lang", ["c", "fortran"])
def test_sanitize_libraries_are_instrumented(sanitize_build, lang):
    lib = sanitize_build / "lib" / f"libcourse_{lang}.so"
    needed = run(["readelf", "-d", lib], timeout=60).stdout if shutil.which("readelf") else ""
    symbols = run(["nm", "-D", lib], timeout=60).stdout if shutil.which("nm") else ""
    assert "libasan" in needed or "__asan" in symbols, f"{lib} is not built with ASan"
    assert "libubsan" in needed or "__ubsan" in symbols, f"{lib} is not built with UBSan"


@pytest.mark.parametrize("lang", ["c", "fortran"])
def test_sanitizer_is_live_in_the_loaded_kernels(sanitize_build, sanitizer_env, lang, tmp_path):
    """Bypass the checks: call the raw sanitized kernel with a column index one past the end of x.
    ASan must stop it with a heap-buffer-overflow report (so a clean run below means something)."""
    base = 1 if lang == "fortran" else 0
    script = tmp_path / "oob.py"
    script.write_text(f"""
import ctypes
import numpy as np
from course import native
lib = native.load({lang!r})
assert native.build_dir("sanitize") in __import__("pathlib").Path(lib._name).parents
n = 64
row_ptr = np.arange(n + 1, dtype=np.int32) + {base}
col_idx = np.arange(n, dtype=np.int32) + {base}
col_idx[-1] = n + {base}                      # one past the end of x
val = np.ones(n)
x = np.ones(n)
y = np.empty(n)
p = lambda a: a.ctypes.data_as(ctypes.c_void_p)
lib.crs_matvec(n, p(row_ptr), p(col_idx), p(val), p(x), p(y))
print("NOT DETECTED", y[-1])
""")
    result = run([PYTHON, script], cwd=ROOT, env=sanitizer_env, timeout=300)
    assert "NOT DETECTED" not in result.stdout, result.stdout + result.stderr
    assert result.returncode != 0
    assert "AddressSanitizer" in result.stderr, result.stderr[-3000:]
    assert "heap-buffer-overflow" in result.stderr, result.stderr[-3000:]


def test_kernel_tests_pass_under_sanitizers(sanitize_build, sanitizer_env):
    kernel_tests = ["tests/test_fem1d.py", "tests/test_native.py", "tests/test_fem3d.py",
                    "tests/test_fem3d_programs.py", "tests/test_openmp.py", "tests/test_race.py",
                    "tests/test_halo.py", "tests/test_halo_programs.py",
                    "tests/test_halo_local_files.py", "tests/test_pipecg_programs.py",
                    "tests/test_hybrid_programs.py",
                    "tests/test_iccg.py::test_compiled_kernels_refuse_wrong_arrays"]
    # The MPI programs' bad-input tests start an mpiexec job each (about 150 of them, half of this
    # rerun's time): under the sanitizers run only the C program's local-data files (its largest
    # parser). The input reader they share with fem3d_c/fem3d_f runs here through
    # test_fem3d_programs, every case.
    # The hybrid programs' file runs its own code paths only: one rank against the serial ICCG,
    # the sweeps on 2 and 4 ranks and 2 threads per rank, not its comparisons with Python and
    # with each other (the same program runs, and Python under the preloaded runtimes is slow).
    skip = ("not bad_input and not bad_word and not bad_lines"
            " and not (bad_local_data and fem3d_mpi_f)"
            " and not python_agrees and not agrees_with_the_python_path"
            " and not every_variant_takes and not twice_the_same_bits"
            " and not c_and_fortran_agree")
    cmd = [PYTHON, "-m", "pytest", *kernel_tests, "-m", "compiled", "-k", skip, "-q", "-p",
           "no:cacheprovider", "-o", "addopts=", "--timeout=600"]
    result = run(cmd, cwd=ROOT, env=sanitizer_env, timeout=800)
    output = result.stdout + result.stderr
    assert result.returncode == 0, output[-6000:]
    assert not SANITIZER_REPORT.search(output), output[-6000:]
    m = re.search(r"(\d+) passed", output)
    assert m, output[-3000:]
    passed = int(m[1])
    assert passed >= 200, f"only {passed} tests ran under the sanitizers"
    assert not re.search(r"\d+ (failed|error)", output)
    deselected = re.search(r"(\d+) deselected", output)
    assert deselected and int(deselected[1]) > 0, "the numpy/numba tests should be deselected"


GOOD_INPUT = "100  NE\n1.0 1.0  LENGTH COND\n1.0 0.0  QVOL QFLUX\n1e-12  EPS\n"


@pytest.mark.parametrize("name", ["fem1d_c", "fem1d_f"])
def test_sanitized_programs_run_clean(sanitize_build, name, tmp_path):
    exe = native.binary(name, "sanitize")
    assert sanitize_build in exe.parents
    (tmp_path / "input.dat").write_text(GOOD_INPUT)
    # the programs link the sanitizers themselves: no preload; leak checking stays on
    env = env_with(UBSAN_OPTIONS="halt_on_error=1:print_stacktrace=1",
                   ASAN_OPTIONS="halt_on_error=1")
    env.pop("LD_PRELOAD", None)
    result = run([exe, "input.dat"], cwd=tmp_path, env=env, timeout=120)
    assert result.returncode == 0, result.stderr
    assert not SANITIZER_REPORT.search(result.stdout + result.stderr), result.stderr
    assert "T(LENGTH) = 0.5" in result.stdout


@pytest.mark.parametrize("name", ["fem1d_c", "fem1d_f"])
def test_sanitized_programs_bad_input_clean(sanitize_build, name, tmp_path):
    """The error paths of the input reader too: exit 2, one line, no sanitizer report."""
    exe = native.binary(name, "sanitize")
    env = env_with(UBSAN_OPTIONS="halt_on_error=1:print_stacktrace=1")
    env.pop("LD_PRELOAD", None)
    for text in ("", "abc\n", "10\n1.0\n", "10\n1 1\n1 0\n0\n", "10\n1 1\n1 0\n" + "9" * 2000):
        (tmp_path / "bad.dat").write_text(text)
        result = run([exe, "bad.dat"], cwd=tmp_path, env=env, timeout=120)
        assert result.returncode == 2, (text, result.stderr)
        assert len(result.stderr.splitlines()) == 1, (text, result.stderr)
        assert not SANITIZER_REPORT.search(result.stderr)
