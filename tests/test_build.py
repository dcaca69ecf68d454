"""The CMake build: `python -m course build` works with warnings as errors, and the flag really is in
effect (a throwaway copy of the sources with an unused variable fails with -Werror and builds
without it), for C and for Fortran."""

from __future__ import annotations

import inspect
import re
import shutil

import pytest

from conftest import ROOT, run, run_course
from course import native

pytestmark = pytest.mark.timeout(600)


def test_course_build_succeeds_with_werror():
    assert inspect.signature(native.build).parameters["werror"].default is True
    result = run_course("build", timeout=600)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "built release" in result.stdout
    cache = (native.build_dir("release") / "CMakeCache.txt").read_text()
    assert re.search(r"^COURSE_WERROR:BOOL=ON$", cache, re.MULTILINE), \
        "the default build must configure COURSE_WERROR=ON"
    assert re.search(r"^COURSE_SANITIZE:BOOL=OFF$", cache, re.MULTILINE)
    for path in ("lib/libcourse_c.so", "lib/libcourse_fortran.so", "bin/fem1d_c", "bin/fem1d_f"):
        assert (native.build_dir("release") / path).is_file(), path


def test_cmake_werror_option_defaults_to_on():
    text = (ROOT / "CMakeLists.txt").read_text()
    assert re.search(r'option\(COURSE_WERROR\s+"[^"]*"\s+ON\)', text)


C_WARNING = "\nstatic int course_unused_warning(void) { int unused; return 0; }\n"
F_UNUSED = "    integer(c_int) :: course_unused_variable\n"


def _copy_tree(dest):
    shutil.copy(ROOT / "CMakeLists.txt", dest / "CMakeLists.txt")
    for sub in ("src_c", "src_fortran"):
        shutil.copytree(ROOT / sub, dest / sub)


@pytest.fixture(scope="module")
def throwaway(tmp_path_factory):
    """A configured copy of the sources with one warning in a C kernel and one in a Fortran
    kernel; returns (source dir, build dir)."""
    src = tmp_path_factory.mktemp("werror_src")
    _copy_tree(src)
    kernel_c = src / "src_c" / "01_fem1d" / "fem1d.c"
    kernel_c.write_text(kernel_c.read_text() + C_WARNING)
    kernel_f = src / "src_fortran" / "01_fem1d" / "fem1d.f90"
    text = kernel_f.read_text()
    anchor = "    real(c_double) :: k\n"             # the local of fem1d_element
    assert text.count(anchor) == 1, "fem1d.f90 changed: adapt the anchor of this test"
    kernel_f.write_text(text.replace(anchor, anchor + F_UNUSED))
    build = src / "build"
    return src, build


def _configure(src, build, werror: bool):
    result = run(["cmake", "-S", src, "-B", build, "-DCMAKE_BUILD_TYPE=Release",
                  f"-DCOURSE_WERROR={'ON' if werror else 'OFF'}"], timeout=300)
    assert result.returncode == 0, result.stdout + result.stderr
    cache = (build / "CMakeCache.txt").read_text()
    assert f"COURSE_WERROR:BOOL={'ON' if werror else 'OFF'}" in cache


def _build(build, target):
    return run(["cmake", "--build", build, "--target", target], timeout=300)


@pytest.mark.parametrize("target, warning", [
    pytest.param("course_c", r"unused variable .unused.", id="c"),
    pytest.param("course_fortran", r"[Uu]nused variable .course_unused_variable.", id="fortran"),
])
def test_warning_fails_only_with_werror(throwaway, target, warning):
    src, build = throwaway
    _configure(src, build, werror=True)
    failed = _build(build, target)
    output = failed.stdout + failed.stderr
    assert failed.returncode != 0, f"{target} built despite -Werror:\n{output}"
    assert re.search(warning, output), output
    assert "error" in output.lower()

    _configure(src, build, werror=False)
    built = _build(build, target)
    output = built.stdout + built.stderr
    assert built.returncode == 0, f"{target} failed without -Werror:\n{output}"
    assert re.search(warning, output), "the warning should still be printed, only not fatal"
    lib = "libcourse_c.so" if target == "course_c" else "libcourse_fortran.so"
    assert (build / "lib" / lib).is_file()
