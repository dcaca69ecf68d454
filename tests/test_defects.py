"""Guards of the measured defects of issue 10 (section 6), one class of defect per section: the
code placement that made the Fortran SpMV slower than the identical C loop, the printed NUMA
commands, the core count, and names in the exercises that shadow course modules."""

from __future__ import annotations

import ast
import json
import os
import re
import shlex
import shutil
import subprocess
import sys

import pytest

from conftest import ROOT, assert_one_error, env_with, run, run_course
from course import bench, cli, native, problems, resources, toolchain

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

def code_cells(path: Path) -> list[str]:
    """The Python code cells of a notebook (a %%writefile cell holds C or Fortran: blank)."""
    return ["" if "".join(cell["source"]).lstrip().startswith("%%") else "".join(cell["source"])
            for cell in json.loads(path.read_text())["cells"] if cell["cell_type"] == "code"]


def course_imports(path: Path) -> set[str]:
    """The names a notebook binds by importing from course (modules and functions)."""
    return {alias.asname or alias.name for source in code_cells(path)
            for node in ast.walk(ast.parse("\n".join(
                "" if line.lstrip().startswith(("%", "!")) else line
                for line in source.splitlines())))
            if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("course")
            for alias in node.names}


COURSE_MODULES = {"course"}.union(*(course_imports(path)
                                    for path in (ROOT / "notebooks").glob("*.ipynb")))


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
    assert {"bench", "fvm", "native", "mesh", "assembly", "timing", "course"} <= COURSE_MODULES
    assert assigned_names("bench = fvm.poisson(8, 8, 8)\nfor mesh in []: pass") == {"bench", "mesh"}


@pytest.mark.parametrize("path", sorted((ROOT / "notebooks").glob("*.ipynb")) + exercise_notebooks(),
                         ids=lambda p: str(p.relative_to(ROOT)))
def test_notebook_does_not_overwrite_what_it_imports(path):
    """04b imported course.timing and later stored its own timings in a dict named `timing`: the
    next `timing.best_of` failed. No notebook assigns a name it imports from course."""
    imported = course_imports(path)
    for number, source in enumerate(code_cells(path)):
        overwritten = assigned_names(source) & imported
        assert not overwritten, f"code cell {number} assigns {sorted(overwritten)}, imported above"


@pytest.mark.parametrize("path", exercise_notebooks(), ids=lambda p: str(p.relative_to(ROOT)))
def test_exercise_does_not_shadow_a_course_module(path):
    """`bench = fvm.poisson(...)` in the 03_openmp exercise hid course.bench, which the lectures
    use under that name: a learner who copies a lecture cell afterwards gets an AttributeError."""
    notebook = json.loads(path.read_text())
    for number, cell in enumerate(notebook["cells"]):
        if cell["cell_type"] == "code":
            shadowing = assigned_names("".join(cell["source"])) & COURSE_MODULES
            assert not shadowing, f"cell {number} assigns {sorted(shadowing)}, a course module"


# --- the NUMA commands the lecture prints run as printed, from the repository root ---------------

def printed_commands() -> list[list[str]]:
    """The commands of bench.openmp.NUMA_COMMANDS, split as the shell would, comments left out."""
    return [shlex.split(line) for line in bench.openmp.NUMA_COMMANDS.splitlines()
            if line.strip() and not line.lstrip().startswith("#")]


def test_numa_commands_name_files_that_exist():
    native.binary("solf")                                      # built
    paths = [word for words in printed_commands() for word in words
             if "/" in word and "=" not in word]
    assert any(path.endswith("INPUT.DAT") for path in paths), paths
    missing = [path for path in paths if not (ROOT / path).exists()]
    assert not missing, f"bench.openmp.NUMA_COMMANDS names files that are not there: {missing}"


def test_numa_program_command_runs_from_the_root():
    """The solf line as printed (at 1 thread instead of 48): its input file is found."""
    (words,) = [words for words in printed_commands() if any("solf" in w for w in words)]
    env_words = [w for w in words if re.match(r"^[A-Z_]+=", w)]
    argv = words[len(env_words):]
    env = {**env_with(**dict(w.split("=", 1) for w in env_words)), "OMP_NUM_THREADS": "1"}
    result = run(argv, cwd=ROOT, env=env)
    assert result.returncode == 0, result.stderr
    assert "converged" in result.stdout


# --- core counts follow the affinity mask ---------------------------------------------------

def first_cpu_only():
    os.sched_setaffinity(0, {min(os.sched_getaffinity(0))})


@pytest.mark.skipif(not hasattr(os, "sched_getaffinity") or len(os.sched_getaffinity(0)) < 2,
                    reason="needs Linux and at least 2 CPUs in the affinity mask")
def test_core_counts_follow_the_affinity_mask():
    """Under `taskset -c 0` (one CPU granted, more in the machine) the course counts one core:
    doctor, the default threads of the compiled kernels, the thread sweep, the topology."""
    code = ("import json, os; os.environ.pop('OMP_NUM_THREADS', None)\n"
            "from course import bench, resources, timing, toolchain\n"
            "print(json.dumps([toolchain.usable_cores(), resources.threads_for('c'), "
            "timing.topology()['cores'], bench.openmp._check_openmp_args([8], ['c'], None)[1]]))")
    env = {k: v for k, v in os.environ.items() if k != "OMP_NUM_THREADS"}
    result = run([sys.executable, "-c", code], env=env, preexec_fn=first_cpu_only,
                 timeout=120)
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout) == [1, 1, 1, [1]]
    doctor = run([sys.executable, "-m", "course", "doctor", "--json"], env=env,
                 preexec_fn=first_cpu_only, cwd=ROOT, timeout=120)
    assert json.loads(doctor.stdout)["cores"] == 1


# --- bad inputs refused up front, in one line: thread counts --------------------------------------

THREAD_CASES = {
    "poisson": ["solve", "poisson", "--nx", "4", "--ny", "4", "--nz", "4", "--threads", "100000"],
    "fem3d": ["solve", "fem3d", "--nx", "2", "--lang", "c", "--threads", "100000"],
    "fem1d": ["solve", "fem1d", "--n", "4", "--lang", "fortran", "--threads", "100000"],
}


@pytest.mark.parametrize("case", list(THREAD_CASES))
def test_absurd_threads_option_is_refused(case):
    """`--threads 100000` died with SIGSEGV in the OpenMP runtime."""
    result = run_course(*THREAD_CASES[case], timeout=120)
    assert_one_error(result, "--threads 100000", by_course=True)
    assert "per core" in result.stderr


def test_absurd_omp_num_threads_is_refused():
    result = run_course("solve", "fem3d", "--nx", "2", "--lang", "c",
                        env=env_with(OMP_NUM_THREADS=100000), timeout=120)
    assert_one_error(result, "OMP_NUM_THREADS=100000", by_course=True)


def test_absurd_thread_sweep_is_refused():
    result = run_course("bench", "openmp", "--sizes", "8", "--threads", "1", "100000",
                        timeout=120)
    assert result.returncode == 2 and result.stdout == "", result.stderr
    assert result.stderr.strip().splitlines() == [result.stderr.strip()]
    assert "100000" in result.stderr and "per core" in result.stderr


def test_thread_limit_follows_the_cores(monkeypatch):
    monkeypatch.setattr(toolchain, "usable_cores", lambda: 3)
    assert resources.check_threads(48) == 48
    with pytest.raises(ValueError, match=r"--threads 49 is more than 16 per core.* 3 core\(s\)"):
        resources.check_threads(49, "--threads 49")
    with pytest.raises(ValueError, match="threads 49"):
        resources.set_threads("c", 49)                # the Python API refuses it too


# --- memory: estimated and refused before anything is allocated -----------------------------------

def fake_machine(tmp_path, available_kb, limit=None, usage=None, version=2):
    """A /proc/meminfo and a cgroup folder, as memory_available() reads them."""
    tmp_path.mkdir()
    meminfo = tmp_path / "meminfo"
    meminfo.write_text(f"MemTotal: {2 * available_kb} kB\nMemFree: 1 kB\n"
                       f"MemAvailable: {available_kb} kB\n")
    cgroup = tmp_path / "cgroup"
    names = {2: ("memory.max", "memory.current"),
             1: ("memory/memory.limit_in_bytes", "memory/memory.usage_in_bytes")}[version]
    if limit is not None:
        for name, value in zip(names, (limit, usage)):
            (cgroup / name).parent.mkdir(parents=True, exist_ok=True)
            (cgroup / name).write_text(f"{value}\n")
    return str(meminfo), str(cgroup)


def test_memory_available_reads_meminfo_and_the_cgroup(tmp_path):
    gb = 10**9
    meminfo, cgroup = fake_machine(tmp_path / "a", 8 * 2**20)
    assert resources.memory_available(meminfo, cgroup) == (8 * 2**30, f"MemAvailable in {meminfo}")
    meminfo, cgroup = fake_machine(tmp_path / "b", 8 * 2**20, limit=4 * gb, usage=gb)
    available, source = resources.memory_available(meminfo, cgroup)
    assert available == 3 * gb and "cgroup limit 4.0 GB" in source
    meminfo, cgroup = fake_machine(tmp_path / "c", 8 * 2**20, limit=2 * gb, usage=0, version=1)
    assert resources.memory_available(meminfo, cgroup)[0] == 2 * gb
    meminfo, cgroup = fake_machine(tmp_path / "d", 8 * 2**20, limit="max", usage=gb)
    assert resources.memory_available(meminfo, cgroup)[0] == 8 * 2**30      # no limit
    meminfo, cgroup = fake_machine(tmp_path / "e", 8 * 2**20, limit=2**63 - 4096, usage=gb,
                                   version=1)
    assert resources.memory_available(meminfo, cgroup)[0] == 8 * 2**30      # v1: no limit
    assert resources.memory_available(tmp_path / "none", tmp_path / "none") == (None, "unknown")


MEMORY_CASES = {
    "fem3d": (["solve", "fem3d", "--nx", "100", "--ny", "100", "--nz", "100", "--lang", "numpy"],
              "fem3d on 100 x 100 x 100 elements"),
    "poisson": (["solve", "poisson", "--nx", "200", "--ny", "200", "--nz", "200", "--lang", "c"],
                "poisson on 200 x 200 x 200 cells"),
    "fem1d": (["solve", "fem1d", "--n", "100000000", "--lang", "numpy"],
              "fem1d on 100000000 elements"),
}


@pytest.mark.parametrize("case", list(MEMORY_CASES))
def test_too_little_memory_is_one_line_before_allocating(case, monkeypatch, capsys):
    """With 0.5 GB available (a small cgroup) these need more: one line with the estimate against
    what is available, exit status 2, nothing allocated (the solve would take seconds)."""
    monkeypatch.setattr(resources, "memory_available", lambda: (5 * 10**8, "a test's limit"))
    args, what = MEMORY_CASES[case]
    assert cli.main(args) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    (line,) = captured.err.strip().splitlines()
    assert line.startswith(f"course solve: error: {what}")
    assert re.search(r"needs about \d+\.\d GB of memory, but only 0\.5 GB are available "
                     r"\(a test's limit\)", line), line


def test_fem3d_400_cubed_is_refused_where_it_does_not_fit():
    needed = problems.FEM3D_BYTES_PER_NODE * 401**3
    available, _ = resources.memory_available()
    if available is None or available >= needed:
        pytest.skip(f"this machine has {available} bytes available, the estimate is {needed}")
    result = run_course("solve", "fem3d", "--nx", "400", "--ny", "400", "--nz", "400",
                        "--lang", "numpy", timeout=120)
    assert_one_error(result, "fem3d on 400 x 400 x 400 elements", by_course=True)
    assert "GB are available" in result.stderr


# --- output paths checked before the work ----------------------------------------------------------

def one_error_line(result, verb: str, name: str) -> str:
    assert result.returncode == 2, (result.returncode, result.stderr)
    assert result.stdout == "" and "Traceback" not in result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"course {verb}: error: {name}"), lines
    return lines[0]


# a benchmark of minutes: an error that came only after it would time out
SLOW_BENCH = ["bench", "fem3d", "--sizes", "120", "--langs", "numpy", "--repeat", "15"]


@pytest.mark.parametrize("option,path", [("--json", "/nonexistent/dir/x.json"),
                                         ("--plot", "/nonexistent/dir/x.png"),
                                         ("--plot", "x.nosuchformat"),
                                         ("--json", ".")])
def test_bench_output_is_checked_before_the_benchmark(option, path, tmp_path):
    result = run_course(*SLOW_BENCH, option, path, cwd=tmp_path, timeout=60)
    one_error_line(result, "bench", option)
    assert list(tmp_path.iterdir()) == []


def test_partition_output_is_checked_before_partitioning(tmp_path):
    result = run_course("partition", "--ranks", "2", "--out", str(tmp_path / "no" / "part"),
                        timeout=60)
    assert "does not exist" in one_error_line(result, "partition", "--out")


def test_read_only_output_folder_is_refused(tmp_path, monkeypatch, capsys):
    """(Root may write anywhere, so the refusal of os.access is simulated.)"""
    monkeypatch.setattr(os, "access", lambda path, mode: False)
    assert cli.main([*SLOW_BENCH, "--json", str(tmp_path / "x.json")]) == 2
    (line,) = capsys.readouterr().err.strip().splitlines()
    assert line.startswith("course bench: error: --json: cannot write") and "x.json" in line
