"""Per-user build folders (course.cache): on a shared machine no user loads code another user could
have written, and nothing is built into a folder the user cannot write."""

import os
import shutil
import subprocess
import sys
import tempfile
import textwrap
import uuid
from pathlib import Path

import pytest

from course import cache, native
from course.grading import exercise

ROOT = Path(__file__).resolve().parent.parent
as_root = pytest.mark.skipif(os.geteuid() != 0, reason="needs root (another owner, other users)")


@pytest.fixture
def home(tmp_path, monkeypatch):
    """A home of its own for this test: the cache lands in HOME/.cache/pfem-course."""
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.delenv("XDG_CACHE_HOME", raising=False)
    monkeypatch.delenv("COURSE_CACHE_DIR", raising=False)
    (tmp_path / "home").mkdir()
    return tmp_path / "home"


def _mode(path: Path) -> int:
    return path.stat().st_mode & 0o777


def test_private_dir_is_the_users_own_and_closed(home):
    folder = cache.private_dir("exercise-builds")
    assert folder == home / ".cache" / "pfem-course" / "exercise-builds"
    assert _mode(folder) == 0o700 and _mode(folder.parent) == 0o700
    assert folder.stat().st_uid == os.geteuid()


def test_a_loose_folder_of_ones_own_is_closed(home):
    loose = home / ".cache" / "pfem-course"
    loose.mkdir(parents=True, mode=0o777)
    loose.chmod(0o777)
    cache.private_dir("race-builds")
    assert _mode(loose) == 0o700


def test_a_link_is_refused(home, tmp_path):
    (home / ".cache").mkdir()
    (tmp_path / "elsewhere").mkdir()
    (home / ".cache" / "pfem-course").symlink_to(tmp_path / "elsewhere")
    with pytest.raises(cache.UnsafeCacheError, match="not a folder but a link"):
        cache.private_dir("exercise-builds")


def test_names_are_plain_words(home):
    for bad in ("", "../x", ".hidden", "a/b"):
        with pytest.raises(ValueError, match="one plain word"):
            cache.private_dir(bad)


def test_without_a_usable_home_the_temp_folder_is_per_user(tmp_path, monkeypatch):
    monkeypatch.delenv("HOME")
    monkeypatch.delenv("XDG_CACHE_HOME", raising=False)
    monkeypatch.delenv("COURSE_CACHE_DIR", raising=False)
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    folder = cache.private_dir("native")
    assert folder == tmp_path / f"pfem-course-{os.geteuid()}" / "native"
    assert _mode(folder.parent) == 0o700


@as_root
def test_a_folder_of_another_owner_is_refused(home):
    theirs = home / ".cache" / "pfem-course" / "exercise-builds"
    theirs.mkdir(parents=True)
    os.chown(theirs, 65534, 65534)                       # nobody
    with pytest.raises(cache.UnsafeCacheError, match="belongs to user id 65534, not to you"):
        cache.private_dir("exercise-builds")


@as_root
def test_compile_kernel_never_loads_a_library_of_another_owner(home, tmp_path):
    """The defect of the shared $TMPDIR/course-exercise-builds: a library another user wrote was
    loaded (or could not be replaced: PermissionError, right code graded 5/8)."""
    source = tmp_path / "crs_matvec.c"
    source.write_text("void crs_matvec(void) {}\n")
    lib = exercise.compile_kernel(source, "c")
    assert lib.parent == home / ".cache" / "pfem-course" / "exercise-builds"
    os.chown(lib.parent, 65534, 65534)
    with pytest.raises(cache.UnsafeCacheError, match="not to you"):
        exercise.compile_kernel(source, "c")


def test_a_read_only_course_builds_into_the_users_folder(home, monkeypatch):
    """A course installed read-only for several users: its build while up to date, else one of
    the user's own; never a build into the read-only folder."""
    monkeypatch.delenv("COURSE_BUILD_DIR", raising=False)
    shared = native.ROOT / "build" / "native" / "release"
    monkeypatch.setattr(native, "_can_write", lambda folder: False)
    monkeypatch.setattr(native, "_is_stale_at", lambda folder: folder == shared)
    private = native.build_dir("release")
    assert private.parent == home / ".cache" / "pfem-course" / "native"
    assert private.name.endswith("-release")
    monkeypatch.setattr(native, "_is_stale_at", lambda folder: False)
    assert native.build_dir("release") == shared
    monkeypatch.setattr(native, "_can_write", lambda folder: True)
    monkeypatch.setattr(native, "_is_stale_at", lambda folder: True)
    assert native.build_dir("release") == shared


# --- two real Unix users sharing one temporary folder -------------------------------------------

_PROBE = textwrap.dedent("""
    import sys
    sys.path.insert(0, sys.argv[1])
    import pfem_cache
    try:
        print(pfem_cache.private_dir("exercise-builds"))
    except pfem_cache.UnsafeCacheError as err:
        print("refused:", err)
""")


@pytest.fixture
def two_users():
    """Two new Unix users (removed after the test), and a folder both can read."""
    if os.geteuid() != 0 or shutil.which("useradd") is None or shutil.which("runuser") is None:
        pytest.skip("needs root with useradd and runuser")
    if not Path("/usr/bin/python3").exists():
        pytest.skip("needs /usr/bin/python3, a Python every user can run")
    names = [f"pfc{uuid.uuid4().hex[:8]}" for _ in range(2)]
    shared = Path(tempfile.mkdtemp(prefix="pfem-cache-test-", dir="/tmp"))
    try:
        for name in names:
            subprocess.run(["useradd", "--create-home", "--home-dir", str(shared / name), name],
                           check=True, capture_output=True)
        shutil.copy(ROOT / "course" / "cache.py", shared / "pfem_cache.py")
        (shared / "probe.py").write_text(_PROBE)
        shared.chmod(0o755)
        tmp = shared / "tmp"              # the users' one shared /tmp: sticky and open to all
        tmp.mkdir()
        tmp.chmod(0o1777)
        yield names, shared, tmp
    finally:
        for name in names:
            subprocess.run(["userdel", name], capture_output=True)
        shutil.rmtree(shared)


def _as_user(name: str, shared: Path, tmp: Path, home: bool) -> str:
    env = ["env", "-i", f"TMPDIR={tmp}", "PATH=/usr/bin:/bin"] + \
        ([f"HOME={shared / name}"] if home else [])
    done = subprocess.run(["runuser", "-u", name, "--", *env, "/usr/bin/python3",
                           str(shared / "probe.py"), str(shared)],
                          capture_output=True, text=True, timeout=60, cwd=shared)
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


def test_two_users_each_get_their_own_folder(two_users):
    (first, second), shared, tmp = two_users
    for home in (True, False):
        folders = [_as_user(name, shared, tmp, home) for name in (first, second)]
        assert folders[0] != folders[1], folders
        for name, folder in zip((first, second), folders):
            info = Path(folder).stat()
            assert (info.st_uid, info.st_mode & 0o777) == \
                (int(subprocess.check_output(["id", "-u", name])), 0o700), folder


def test_a_folder_planted_by_another_user_is_refused(two_users):
    """Without a home, the temporary folder's name is predictable: a second learner can create it
    first for the first learner; the first learner must refuse it, not load from it."""
    (first, second), shared, tmp = two_users
    victim_uid = int(subprocess.check_output(["id", "-u", first]))
    planted = tmp / f"pfem-course-{victim_uid}"
    subprocess.run(["runuser", "-u", second, "--", "mkdir", "-m", "0777", str(planted)],
                   check=True)
    said = _as_user(first, shared, tmp, home=False)
    assert said.startswith("refused:") and "not to you" in said, said
    assert _as_user(first, shared, tmp, home=True).startswith(str(shared / first)), \
        "with a home, the planted folder is not even looked at"


def test_cache_module_stands_alone():
    """The probe above runs course/cache.py as a module of its own: it must import nothing of the
    course (it runs under Debian's Python, without NumPy)."""
    done = subprocess.run([sys.executable, "-I", "-c", "import runpy; runpy.run_path(%r)"
                           % str(ROOT / "course" / "cache.py")], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr


# --- the course's own kernels, installed read-only for several users ------------------------------

_NATIVE_PROBE = textwrap.dedent("""
    import os, sys
    from course import native
    shared = native.ROOT / "build" / "native" / "release"
    folder = native.build_dir("release")
    if folder == shared:
        native.load("c").crs_matvec          # the shared library loads for this user
    print(folder)
""")


@pytest.fixture(scope="module")
def shared_course(tmp_path_factory):
    """The course as a hub installs it: a copy owned by root, read-only to the users, with its
    kernels built; a venv of Debian's Python (NumPy and Numba from the wheelhouse of make test)."""
    wheelhouse = ROOT / "build" / "wheelhouse"
    if os.geteuid() != 0 or shutil.which("runuser") is None or not wheelhouse.is_dir():
        pytest.skip("needs root, runuser and build/wheelhouse (make setup-test makes it)")
    if not (ROOT / "build" / "native" / "release" / "lib" / "libcourse_c.so").exists():
        native.build("release")
    top = Path(tempfile.mkdtemp(prefix="pfem-shared-", dir="/tmp"))
    top.chmod(0o755)
    files = subprocess.run(["git", "ls-files", "course", "src_c", "src_fortran", "CMakeLists.txt"],
                           cwd=ROOT, capture_output=True, text=True, check=True).stdout.split()
    for rel in files:                         # copy2: the sources keep their times
        (top / "course" / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(ROOT / rel, top / "course" / rel)
    shutil.copytree(ROOT / "build" / "native" / "release" / "lib",
                    top / "course" / "build" / "native" / "release" / "lib")
    subprocess.run(["/usr/bin/python3", "-m", "venv", str(top / "venv")], check=True)
    subprocess.run([str(top / "venv" / "bin" / "python"), "-m", "pip", "install", "-q",
                    "--no-index", "--find-links", str(wheelhouse), "numpy", "numba"],
                   check=True, timeout=600)
    subprocess.run(["chmod", "-R", "go-w,a+rX", str(top)], check=True)
    yield top
    shutil.rmtree(top)


def _native_as(user: str, top: Path, home: Path) -> str:
    env = ["env", "-i", f"HOME={home}", "PATH=/usr/bin:/bin", f"PYTHONPATH={top / 'course'}"]
    done = subprocess.run(["runuser", "-u", user, "--", *env, str(top / "venv" / "bin" / "python"),
                           "-c", _NATIVE_PROBE], capture_output=True, text=True, timeout=120,
                          cwd=home)
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


def test_users_load_the_shared_build_and_never_build_into_it(two_users, shared_course):
    (first, second), shared, tmp = two_users
    build = shared_course / "course" / "build" / "native" / "release"
    for name in (first, second):                 # up to date: every user loads root's build
        assert _native_as(name, shared_course, shared / name) == str(build)
    source = shared_course / "course" / "src_c" / "CMakeLists.txt"
    os.utime(source)                             # the sources change, the build does not
    folders = [_native_as(name, shared_course, shared / name) for name in (first, second)]
    for name, folder in zip((first, second), folders):
        assert folder.startswith(str(shared / name / ".cache" / "pfem-course" / "native")), folder
    assert folders[0] != folders[1]
    assert sorted(p.name for p in build.iterdir()) == ["lib"], "nothing was built into it"
