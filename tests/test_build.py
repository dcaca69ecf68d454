"""The CMake build: `python -m course build` works with warnings as errors, and the flag really is in
effect (a throwaway copy of the sources with an unused variable fails with -Werror and builds
without it), for C and for Fortran. The C side also builds with Clang and LLVM's OpenMP (-Werror
on), and its solc agrees with GCC's; toolchain files (cmake/a64fx-fujitsu.cmake) build in a folder
of their own, and CC / FC reach CMake."""

from __future__ import annotations

import inspect
import os
import re
import shutil
import sys
import tempfile
from pathlib import Path

import pytest

from conftest import ROOT, env_with, run, run_course, run_program
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


# ---------------------------------------------------------------------------------------------
# another compiler: the C side built with Clang (and LLVM's OpenMP), warnings as errors
# ---------------------------------------------------------------------------------------------

CLANG_PACKAGES = "clang libomp-dev"          # Debian/Ubuntu: the compiler and LLVM's OpenMP


def _compiler_id(build, lang):
    """The compiler id CMake found for `lang` in a configured build folder."""
    (found,) = build.glob(f"CMakeFiles/*/CMake{lang}Compiler.cmake")
    match = re.search(rf'set\(CMAKE_{lang}_COMPILER_ID "([^"]*)"\)', found.read_text())
    return match[1]


@pytest.fixture(scope="module")
def clang_build(tmp_path_factory):
    """The course configured with clang for C (gfortran stays), COURSE_WERROR=ON, and only the
    C kernel library and solc built; returns the build folder."""
    if shutil.which("clang") is None:
        pytest.skip(f"clang is not installed (apt-get install {CLANG_PACKAGES})")
    build = tmp_path_factory.mktemp("clang") / "build"
    configure = run(["cmake", "-S", ROOT, "-B", build, "-DCMAKE_BUILD_TYPE=Release",
                     "-DCMAKE_C_COMPILER=clang", "-DCOURSE_WERROR=ON"], timeout=300)
    assert configure.returncode == 0, \
        f"configure with clang failed (LLVM's OpenMP: apt-get install {CLANG_PACKAGES}):\n" \
        + configure.stdout + configure.stderr
    built = run(["cmake", "--build", build, "--parallel", "2", "--target", "course_c", "solc"],
                timeout=300)
    assert built.returncode == 0, "clang -Werror rejects the C sources:\n" + built.stdout
    return build


def test_clang_configuration_uses_clangs_warnings_and_werror(clang_build):
    assert _compiler_id(clang_build, "C") == "Clang"
    assert _compiler_id(clang_build, "Fortran") == "GNU"
    flags = (clang_build / "src_c" / "CMakeFiles" / "course_c.dir" / "flags.make").read_text()
    (c_flags,) = re.findall(r"^C_FLAGS = (.*)$", flags, re.MULTILINE)
    for flag in ("-Wall", "-Wextra", "-Wpedantic", "-Werror", "-falign-loops=32"):
        assert flag in c_flags.split(), f"{flag} missing from clang's flags: {c_flags}"
    assert "-fopenmp=libomp" in c_flags, c_flags


def test_clang_built_solc_matches_gcc_built_solc(clang_build, tmp_path):
    from test_openmp_programs import EXAMPLE, parse_summary

    clang_solc = clang_build / "bin" / "solc"
    libs = run(["ldd", clang_solc]).stdout
    assert re.search(r"libomp\.so", libs) and "libgomp" not in libs, libs
    summaries = {}
    for name, program in (("clang", clang_solc), ("gcc", native.binary("solc"))):
        result = run_program(program, EXAMPLE, cwd=tmp_path, env=env_with(OMP_NUM_THREADS=2))
        assert result.returncode == 0 and result.stderr == "", (name, result)
        summaries[name] = parse_summary(result.stdout)
    clang, gcc = summaries["clang"], summaries["gcc"]
    assert clang["threads"] == gcc["threads"] == 2
    assert clang["status"] == "converged"
    assert clang["iterations"] == gcc["iterations"], summaries
    assert clang["checksum"] == pytest.approx(gcc["checksum"], rel=1e-10)
    assert clang["cell"] == gcc["cell"]


# ---------------------------------------------------------------------------------------------
# toolchain files: a folder of their own, the compilers of CC and FC, cmake/a64fx-fujitsu.cmake
# ---------------------------------------------------------------------------------------------

A64FX = ROOT / "cmake" / "a64fx-fujitsu.cmake"


@pytest.fixture
def recorded_build(monkeypatch, tmp_path):
    """native.build with the cmake calls recorded instead of run; returns the list of calls."""
    calls = []

    def fake_run(cmd, verbose):
        calls.append(cmd)
        if "--build" in cmd:
            lib = Path(cmd[cmd.index("--build") + 1]) / "lib"
            lib.mkdir(parents=True, exist_ok=True)
            for name in native._LIBRARY.values():
                (lib / name).touch()

    monkeypatch.setattr(native, "_run", fake_run)
    monkeypatch.setenv("COURSE_BUILD_DIR", str(tmp_path))
    for var in ("CC", "FC", "CMAKE_TOOLCHAIN_FILE"):
        monkeypatch.delenv(var, raising=False)
    return calls


def _configure_call(calls):
    (configure,) = [c for c in calls if "-S" in c]
    return configure


def test_toolchain_file_gets_a_build_folder_of_its_own(recorded_build, tmp_path, monkeypatch):
    monkeypatch.setenv("CC", "gcc")               # a toolchain file names its own compilers
    out = native.build("release", toolchain="cmake/a64fx-fujitsu.cmake")
    assert out == tmp_path / "release-a64fx-fujitsu"
    configure = _configure_call(recorded_build)
    assert configure[configure.index("-B") + 1] == str(out)
    assert f"-DCMAKE_TOOLCHAIN_FILE={A64FX}" in configure
    assert not any(c.startswith("-DCMAKE_C_COMPILER") for c in configure), configure
    # the machine's own build stays where it was
    assert native.build_dir("release") == tmp_path / "release"
    # CMake's own environment variable chooses the same folder, for build and load alike
    monkeypatch.setenv("CMAKE_TOOLCHAIN_FILE", str(A64FX))
    assert native.build_dir("release") == out
    with pytest.raises(FileNotFoundError, match="no-such.cmake"):
        native.build("release", toolchain="cmake/no-such.cmake")


def test_cc_and_fc_are_passed_to_cmake(recorded_build, tmp_path, monkeypatch):
    monkeypatch.setenv("CC", "fcc -Nclang")
    monkeypatch.setenv("FC", "frt")
    out = native.build("release")
    assert out == tmp_path / "release"
    configure = _configure_call(recorded_build)
    assert "-DCMAKE_C_COMPILER=fcc;-Nclang" in configure   # CMake's list form: compiler;options
    assert "-DCMAKE_Fortran_COMPILER=frt" in configure
    assert not any("TOOLCHAIN" in c for c in configure)


def _toolchain_variables(host_processor):
    script = Path(tempfile.mkdtemp()) / "show.cmake"
    names = ("CMAKE_C_COMPILER", "CMAKE_Fortran_COMPILER", "CMAKE_SYSTEM_NAME",
             "CMAKE_SYSTEM_PROCESSOR", "CMAKE_C_FLAGS_INIT", "CMAKE_C_FLAGS_RELEASE_INIT",
             "CMAKE_Fortran_FLAGS_RELEASE_INIT")
    script.write_text(f'include("{A64FX}")\n'
                      + "".join(f'message("{n}=[${{{n}}}]")\n' for n in names))
    result = run(["cmake", f"-DCMAKE_HOST_SYSTEM_PROCESSOR={host_processor}", "-P", script])
    assert result.returncode == 0, result.stderr
    return dict(re.findall(r"^(\w+)=\[(.*)\]$", result.stderr, re.MULTILINE))


def test_a64fx_toolchain_cross_compiles_off_the_a64fx_and_compiles_natively_on_it():
    login = _toolchain_variables("x86_64")
    assert login["CMAKE_C_COMPILER"] == "fccpx;-Nclang"
    assert login["CMAKE_Fortran_COMPILER"] == "frtpx"
    assert (login["CMAKE_SYSTEM_NAME"], login["CMAKE_SYSTEM_PROCESSOR"]) == ("Linux", "aarch64")
    assert "-msve-vector-bits=512" in login["CMAKE_C_FLAGS_INIT"]
    assert "-Kfast" in login["CMAKE_C_FLAGS_RELEASE_INIT"]
    assert "-Kfast" in login["CMAKE_Fortran_FLAGS_RELEASE_INIT"]
    node = _toolchain_variables("aarch64")
    assert node["CMAKE_C_COMPILER"] == "fcc;-Nclang"
    assert node["CMAKE_Fortran_COMPILER"] == "frt"
    assert node["CMAKE_SYSTEM_NAME"] == ""                 # native: not a cross build


FAKE_FCCPX = """#!/bin/sh
# stand-in for Fujitsu's fccpx: insists on -Nclang, drops Fujitsu's own options, runs clang
nclang=0
for a; do
  shift
  case $a in
    -Nclang) nclang=1 ;;
    -K*|-msve-vector-bits=*) ;;
    *) set -- "$@" "$a" ;;
  esac
done
[ $nclang = 1 ] || { echo "fccpx: called without -Nclang" >&2; exit 1; }
exec clang "$@"
"""
FAKE_FRTPX = """#!/bin/sh
# stand-in for Fujitsu's frtpx: drops Fujitsu's own options, runs gfortran
for a; do
  shift
  case $a in -K*) ;; *) set -- "$@" "$a" ;; esac
done
exec gfortran "$@"
"""


def test_a64fx_toolchain_builds_through_course_build(tmp_path):
    """native.build(toolchain=cmake/a64fx-fujitsu.cmake) (`python -m course build --toolchain
    ...`) end to end, with stand-ins
    for the cross compilers (clang and gfortran behind the names fccpx and frtpx): a cross build
    in its own folder, -Nclang on every C compile and link, -Kfast in the release flags."""
    if shutil.which("clang") is None:
        pytest.skip(f"clang is not installed (apt-get install {CLANG_PACKAGES})")
    bin_dir = tmp_path / "fj"
    bin_dir.mkdir()
    for name, text in (("fccpx", FAKE_FCCPX), ("frtpx", FAKE_FRTPX)):
        (bin_dir / name).write_text(text)
        (bin_dir / name).chmod(0o755)
    env = env_with(PATH=f"{bin_dir}:{os.environ['PATH']}", COURSE_BUILD_DIR=str(tmp_path))
    env.pop("CMAKE_TOOLCHAIN_FILE", None)
    code = ("from course import native; "
            "print(native.build('release', toolchain='cmake/a64fx-fujitsu.cmake'))")
    result = run([sys.executable, "-c", code], cwd=ROOT, env=env, timeout=600)
    assert result.returncode == 0, result.stdout + result.stderr
    out = tmp_path / "release-a64fx-fujitsu"
    assert str(out) in result.stdout
    assert not (tmp_path / "release").exists()
    system = next(out.glob("CMakeFiles/*/CMakeSystem.cmake")).read_text()
    assert 'set(CMAKE_CROSSCOMPILING "TRUE")' in system
    assert 'set(CMAKE_SYSTEM_PROCESSOR "aarch64")' in system
    compiler = next(out.glob("CMakeFiles/*/CMakeCCompiler.cmake")).read_text()
    assert 'set(CMAKE_C_COMPILER_ARG1 "-Nclang")' in compiler
    flags = (out / "src_c" / "CMakeFiles" / "course_c.dir" / "flags.make").read_text()
    assert "-Kfast" in flags and "-msve-vector-bits=512" in flags
    for path in ("lib/libcourse_c.so", "lib/libcourse_fortran.so", "bin/solc", "bin/solf"):
        assert (out / path).is_file(), path
