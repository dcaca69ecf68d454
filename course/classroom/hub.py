"""`python -m course hub setup|start|stop|status|download`: a JupyterHub classroom on one machine.

One Debian/Ubuntu machine, run as root: an instructor and N learners, each a Unix user who logs in
to JupyterHub with their system password (PAM) and gets a JupyterLab server of their own, running
as themselves; nbgrader's exchange moves exercises out and submissions back. The same recipe
serves a workshop host: once set up (from a wheelhouse for an offline room), nothing downloads.

What `setup` makes (PREFIX is /opt/pfem-hub unless --prefix says otherwise):

    PREFIX/venv       the users' Python environment, made from a Python every user can run (not a
                      pyenv under /root, whose home only root can enter): JupyterHub, JupyterLab,
                      nbgrader and the course at the lock's versions, mpi4py compiled against
                      the system MPI; readable by all, writable by root only
    PREFIX/course     a learner copy of the course (`python -m course dist learner`: no solutions,
                      no hidden tests), installed into the venv, its kernels compiled
    PREFIX/node       the proxy, configurable-http-proxy, from npm
    PREFIX/etc        jupyterhub_config.py and, per role, the Jupyter config folder that the hub
                      puts first on the role's JUPYTER_CONFIG_PATH (roles/learner, roles/instructor)
    PREFIX/state      root only: the hub's database, cookie secret, pid files and log
    EXCHANGE          nbgrader's exchange (/srv/nbgrader/exchange), mode 1777
    ~INSTRUCTOR/pfem  the instructor's course directory: nbgrader_config.py, solutions/, the
                      gradebook with every learner; ~/.jupyter/nbgrader_config.py points there

The nbgrader settings of everybody (exchange, course id, the course's cell timeout, which Validate
uses too) are in the venv's etc/jupyter/nbgrader_config.py.
"""

from __future__ import annotations

import hashlib
import json
import os
import pwd
import re
import shutil
import signal
import stat
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
COURSE_ID = "pfem"
DEFAULT_PREFIX = "/opt/pfem-hub"
DEFAULT_EXCHANGE = "/srv/nbgrader/exchange"
DEFAULT_PORT = 8000
# the proxy of JupyterHub; 4.6 runs on Node.js >= 10 (Debian 12 has 18; the 5.x line needs 20)
PROXY_PACKAGE = "configurable-http-proxy@4.6.3"
NPM_CACHE = "npm-cache"            # the proxy's packages in a wheelhouse (`hub download`)
SYSTEM_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
USER_NAME = re.compile(r"[a-z_][a-z0-9_-]{0,31}")
# nbgrader's JupyterLab plugins and server extensions that only the instructor gets; learners keep
# the assignment list (fetch, submit, feedback) and Validate
INSTRUCTOR_PLUGINS = ("@jupyter/nbgrader:formgrader", "@jupyter/nbgrader:create-assignment",
                      "@jupyter/nbgrader:course-list")
INSTRUCTOR_SERVER_EXTENSIONS = ("nbgrader.server_extensions.formgrader",
                                "nbgrader.server_extensions.course_list")
# JupyterLab's news and update check asks the web: off for everybody (a room may be offline)
OFFLINE_PLUGINS = ("@jupyterlab/apputils-extension:announcements",)
MARKER = "# written by python -m course hub setup"
SERVER_EXE = "jupyterhub-singleuser"


@dataclass(frozen=True)
class Layout:
    """Where everything of one classroom lives, under its prefix."""
    prefix: Path

    @property
    def venv(self) -> Path:
        return self.prefix / "venv"

    @property
    def python(self) -> Path:
        return self.venv / "bin" / "python"

    @property
    def course(self) -> Path:
        return self.prefix / "course"

    @property
    def proxy(self) -> Path:
        return self.prefix / "node" / "node_modules" / ".bin" / "configurable-http-proxy"

    @property
    def config(self) -> Path:
        return self.prefix / "etc" / "jupyterhub_config.py"

    def role(self, name: str) -> Path:
        return self.prefix / "etc" / "roles" / name

    @property
    def nbgrader_config(self) -> Path:
        return self.venv / "etc" / "jupyter" / "nbgrader_config.py"

    @property
    def state(self) -> Path:
        return self.prefix / "state"

    @property
    def pid_file(self) -> Path:
        return self.state / "jupyterhub.pid"

    @property
    def url_file(self) -> Path:
        return self.state / "url"

    @property
    def log(self) -> Path:
        return self.state / "jupyterhub.log"


# --- small helpers -------------------------------------------------------------------------------

def _say(message: str) -> None:
    print(f"hub: {message}", flush=True)


def _run(cmd: list, what: str, **kwargs) -> subprocess.CompletedProcess:
    """Run cmd; on failure a RuntimeError that says `what` failed, with the end of its output."""
    result = subprocess.run([str(c) for c in cmd], capture_output=True, text=True, **kwargs)
    if result.returncode != 0:
        tail = "\n".join((result.stdout + result.stderr).strip().splitlines()[-15:])
        raise RuntimeError(f"{what} failed (exit {result.returncode})\n{tail}")
    return result


def _user_env(layout: Layout, **extra) -> dict:
    """A small, clean environment for the commands run in the venv (no PYTHONPATH, no pyenv)."""
    return {"PATH": f"{layout.venv / 'bin'}:{SYSTEM_PATH}",
            "LANG": os.environ.get("LANG", "C.UTF-8"), **extra}


def as_user(layout: Layout, user: str, cmd: list, what: str, cwd=None, input=None):
    """Run cmd as the Unix user (runuser sets HOME, USER and LOGNAME), in the venv's PATH."""
    return _run(["runuser", "-u", user, "--", *cmd], what, cwd=cwd, input=input,
                env=_user_env(layout))


def _others_can_enter(path: Path) -> Path | None:
    """The first folder on the way to `path` that other users cannot enter, or None."""
    for folder in [*reversed(path.parents), path]:
        if folder.exists() and not folder.stat().st_mode & stat.S_IXOTH:
            return folder
    return None


def _write(path: Path, text: str, mode: int = 0o644) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    path.chmod(mode)


def _chown_tree(path: Path, user: pwd.struct_passwd) -> None:
    os.chown(path, user.pw_uid, user.pw_gid)
    for item in path.rglob("*"):
        os.chown(item, user.pw_uid, user.pw_gid, follow_symlinks=False)


# --- the participants ----------------------------------------------------------------------------

@dataclass(frozen=True)
class Participants:
    instructor: str
    learners: tuple[str, ...]
    passwords: dict          # learner -> password, from the learners file (for new users)

    @property
    def everybody(self) -> tuple[str, ...]:
        return (self.instructor, *self.learners)


def _check_name(name: str, where: str) -> str:
    if not USER_NAME.fullmatch(name):
        raise ValueError(f"{where}: {name!r} is not a valid user name (lower-case letters, digits, "
                         f"_ and -, starting with a letter or _)")
    return name


def read_learners_file(path: str) -> list[tuple[str, str | None]]:
    """Lines `name` or `name:password` (chpasswd's format); # comments and blank lines skipped."""
    try:
        lines = Path(path).read_text().splitlines()
    except OSError as err:
        raise ValueError(f"--learners-file {path}: {err.strerror}") from err
    entries = []
    for number, line in enumerate(lines, 1):
        line = line.split("#", 1)[0].strip()
        if line:
            name, _, password = line.partition(":")
            entries.append((_check_name(name.strip(), f"{path}, line {number}"), password or None))
    return entries


def participants(args) -> Participants:
    if not args.instructor:
        raise ValueError("give the instructor: --instructor NAME")
    instructor = _check_name(args.instructor, "--instructor")
    entries = [(_check_name(n.strip(), "--learners"), None)
               for n in (args.learners or "").split(",") if n.strip()]
    if args.learners_file:
        entries += read_learners_file(args.learners_file)
    names = [name for name, _ in entries]
    if not names:
        raise ValueError("give the learners: --learners a,b,c or --learners-file FILE")
    repeated = sorted({n for n in names if names.count(n) > 1})
    if repeated:
        raise ValueError(f"learners named twice: {', '.join(repeated)}")
    if instructor in names:
        raise ValueError(f"{instructor} is the instructor and cannot be a learner too")
    return Participants(instructor, tuple(names), {n: p for n, p in entries if p})


def _existing_user(name: str) -> pwd.struct_passwd | None:
    try:
        return pwd.getpwnam(name)
    except KeyError:
        return None


def ensure_users(people: Participants, create: bool, home_base: str | None) -> None:
    """Create the missing users (with --create-users), set the new learners' passwords from the
    learners file, and make every participant's home private (Debian makes homes 0755)."""
    missing = [name for name in people.everybody if _existing_user(name) is None]
    if missing and not create:
        raise ValueError(f"no such Unix user: {', '.join(missing)} (--create-users creates them)")
    for name in missing:
        base = ["--base-dir", home_base] if home_base else []
        _run(["useradd", "--create-home", "--shell", "/bin/bash", *base, name], f"useradd {name}")
        _say(f"created the user {name}")
    new_passwords = "".join(f"{name}:{people.passwords[name]}\n" for name in missing
                            if name in people.passwords)
    if new_passwords:
        _run(["chpasswd"], "chpasswd", input=new_passwords)
    for name in people.everybody:
        home = Path(pwd.getpwnam(name).pw_dir)
        if not home.is_dir():
            raise ValueError(f"{name}'s home {home} does not exist")
        home.chmod(0o700)


# --- the machine ---------------------------------------------------------------------------------

# run by the user nobody with the users' Python: venv works, recent enough, headers for mpi4py
PYTHON_CHECK = ("import os, sys, sysconfig, venv, ensurepip; print(sys.version_info >= (3, 10)); "
                "print(os.path.exists(os.path.join(sysconfig.get_paths()['include'], 'Python.h')))")


def check_machine(python: str) -> str:
    """Root on Linux, the commands setup needs, and a Python every user can run; its path."""
    if sys.platform != "linux" or os.geteuid() != 0:
        raise RuntimeError("hub setup needs root on Linux (it creates users, folders and services)")
    needed = ("runuser", "useradd", "chpasswd", "node", "npm", "mpicc", "cc", "gfortran", "cmake")
    missing = [c for c in needed if shutil.which(c) is None]
    if missing:
        raise RuntimeError(f"missing commands: {' '.join(missing)} (Debian: apt-get install passwd "
                           "util-linux nodejs npm libopenmpi-dev gcc gfortran cmake)")
    found = shutil.which(python)
    if found is None:
        raise ValueError(f"--python {python}: no such command")
    check = subprocess.run(["runuser", "-u", "nobody", "--", found, "-c", PYTHON_CHECK],
                           capture_output=True, text=True, cwd="/")
    if check.returncode != 0:
        blocked = _others_can_enter(Path(found)) or _others_can_enter(Path(found).resolve())
        if blocked:
            raise ValueError(f"--python {found}: other users cannot run it ({blocked} is closed "
                             "to them); give one they can, e.g. /usr/bin/python3")
        last = (check.stderr.strip().splitlines() or ["no message"])[-1]
        raise ValueError(f"--python {found}: it fails for other users with venv: {last} "
                         "(Debian: apt-get install python3-venv)")
    recent, headers = check.stdout.split()
    if recent != "True":
        raise ValueError(f"--python {found}: the course needs Python 3.10 or newer")
    if headers != "True":
        raise ValueError(f"--python {found}: its C headers (Python.h) are missing, which mpi4py "
                         "is compiled against (Debian: apt-get install python3-dev)")
    return found


def check_prefix(prefix: Path) -> None:
    if not prefix.is_absolute():
        raise ValueError(f"--prefix {prefix}: give an absolute path")
    blocked = _others_can_enter(prefix.parent)
    if blocked:
        raise ValueError(f"--prefix {prefix}: other users cannot enter {blocked}")
    if prefix.exists():
        info = prefix.stat()
        if info.st_uid != 0 or info.st_mode & (stat.S_IWGRP | stat.S_IWOTH):
            raise ValueError(f"--prefix {prefix}: exists and is not root's alone (owner uid "
                             f"{info.st_uid}, mode {stat.filemode(info.st_mode)})")


# --- the software --------------------------------------------------------------------------------

def _pip_env(layout: Layout, wheelhouse: Path | None) -> dict:
    env = {k: v for k, v in os.environ.items()
           if k not in ("PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV", "PIP_FIND_LINKS")}
    env.update(PATH=f"{layout.venv / 'bin'}:{SYSTEM_PATH}", MPICC=shutil.which("mpicc"),
               PIP_NO_BINARY="mpi4py")                 # compiled against the system's MPI
    if wheelhouse:
        env.update(PIP_NO_INDEX="1", PIP_FIND_LINKS=str(wheelhouse))
    return env


def _stamp(layout: Layout, python: str) -> Path:
    digest = hashlib.sha1(python.encode())
    for name in ("requirements-lock.txt", "pyproject.toml"):
        digest.update((layout.course / name).read_bytes())
    return layout.venv / f".installed-{digest.hexdigest()[:12]}"


def copy_course(layout: Layout) -> None:
    """A fresh learner copy of the course in PREFIX/course (no solutions, no hidden tests)."""
    from . import dist

    if layout.course.exists():
        shutil.rmtree(layout.course)
    dist.learner(layout.course, ROOT)
    for path in [layout.course, *layout.course.rglob("*")]:
        path.chmod(path.stat().st_mode | stat.S_IROTH | (stat.S_IXOTH if path.is_dir() else 0))


def install_python(layout: Layout, python: str, wheelhouse: Path | None) -> None:
    """The venv with the course (editable: its kernels' sources and build stay in PREFIX/course),
    JupyterHub, JupyterLab and nbgrader, at the versions of the course's lock."""
    if not layout.python.exists():
        _run([python, "-m", "venv", layout.venv], f"{python} -m venv")
    stamp = _stamp(layout, python)
    if stamp.exists():
        _say("the Python packages are installed (lock unchanged)")
        return
    where = f"the wheelhouse {wheelhouse}" if wheelhouse else "the package index"
    _say(f"installing the Python packages from {where} (minutes: mpi4py is compiled)")
    env = _pip_env(layout, wheelhouse)
    pip = [layout.python, "-m", "pip", "install", "-q"]
    _run([*pip, "--upgrade", "pip"], "pip install --upgrade pip", env=env)
    _run([*pip, "-c", layout.course / "requirements-lock.txt", "-e", f"{layout.course}[hub]"],
         "pip install of the course with JupyterHub", env=env)
    problem = _run([layout.python, "-c", "from course.toolchain import mpi4py_problem; "
                    "print(mpi4py_problem() or '')"], "checking mpi4py", env=_user_env(layout))
    if problem.stdout.strip():
        raise RuntimeError(f"mpi4py in {layout.venv}: {problem.stdout.strip()}")
    for old in layout.venv.glob(".installed-*"):
        old.unlink()
    stamp.touch()


def build_kernels(layout: Layout) -> None:
    _say("compiling the course's kernels")
    _run([layout.python, "-m", "course", "build"], "python -m course build", cwd=layout.course,
         env=_user_env(layout))


def install_proxy(layout: Layout, wheelhouse: Path | None) -> None:
    """configurable-http-proxy into PREFIX/node, offline from the wheelhouse's npm cache."""
    cmd = ["npm", "install", "--prefix", layout.prefix / "node", "--no-audit", "--no-fund",
           "--no-update-notifier", PROXY_PACKAGE]
    if wheelhouse:
        cache = wheelhouse / NPM_CACHE
        if not cache.is_dir():
            raise ValueError(f"{cache} is missing: python -m course hub download {wheelhouse} "
                             f"puts the proxy there (with network)")
        cmd += ["--offline", "--cache", cache]
    _run(cmd, f"npm install {PROXY_PACKAGE}")


# --- the configuration ---------------------------------------------------------------------------

def nbgrader_system_config(exchange: Path) -> str:
    from ..grading import CELL_TIMEOUT

    return (f"{MARKER}: every user's nbgrader settings of the course\n"
            "c = get_config()  # noqa: F821\n"
            f"c.Exchange.root = {str(exchange)!r}\n"
            f"c.CourseDirectory.course_id = {COURSE_ID!r}\n"
            f"# the course's cell timeout, for Validate and autograding alike\n"
            f"c.Execute.timeout = {CELL_TIMEOUT}\n"
            "# an interrupted cell may answer late: go on, rather than fail the whole notebook\n"
            "c.Execute.raise_on_iopub_timeout = False\n")


def write_roles(layout: Layout) -> None:
    """Per role, a Jupyter config folder that the hub puts first on JUPYTER_CONFIG_PATH: learners
    without the instructor's nbgrader plugins and server extensions (locked, so that JupyterLab's
    plugin manager cannot turn them on), the instructor with all of them. JupyterLab >= 4.1 would
    lock what the venv disables, with no way back for the instructor: the venv disables nothing."""
    off = dict.fromkeys(OFFLINE_PLUGINS, True)
    learner_off = {**off, **dict.fromkeys(INSTRUCTOR_PLUGINS, True)}
    _write_json(layout.role("learner") / "labconfig" / "page_config.json",
                {"disabledExtensions": learner_off, "lockedExtensions": learner_off})
    _write_json(layout.role("learner") / "jupyter_server_config.d" / "pfem-learner.json",
                {"ServerApp": {"jpserver_extensions": dict.fromkeys(INSTRUCTOR_SERVER_EXTENSIONS,
                                                                     False)}})
    _write_json(layout.role("instructor") / "labconfig" / "page_config.json",
                {"disabledExtensions": {**off, **dict.fromkeys(INSTRUCTOR_PLUGINS, False)}})


def _write_json(path: Path, data: dict) -> None:
    _write(path, json.dumps(data, indent=1) + "\n")


def hub_config(layout: Layout, people: Participants) -> str:
    return f'''{MARKER}: the JupyterHub of the course {COURSE_ID}.
# setup writes this file anew; `python -m course hub start` runs the hub with it.
c = get_config()  # noqa: F821

INSTRUCTOR = {people.instructor!r}
LEARNERS = {list(people.learners)!r}
ROLES = {{"instructor": {str(layout.role("instructor"))!r},
         "learner": {str(layout.role("learner"))!r}}}

# logins with the system's passwords (PAM); only the course's users
c.JupyterHub.authenticator_class = "pam"
c.PAMAuthenticator.open_sessions = False
c.Authenticator.allowed_users = {{INSTRUCTOR, *LEARNERS}}
c.Authenticator.admin_users = {{INSTRUCTOR}}

# each user's JupyterLab runs as that Unix user, from the shared venv, in their home
c.JupyterHub.spawner_class = "localprocess"
c.Spawner.cmd = [{str(layout.venv / "bin" / SERVER_EXE)!r}]
c.Spawner.default_url = "/lab"
c.Spawner.notebook_dir = "~"
c.Spawner.start_timeout = 180
c.Spawner.http_timeout = 180
c.Spawner.environment = {{
    "PATH": {f"{layout.venv / 'bin'}:{SYSTEM_PATH}"!r},
    # the role's config folder first: which nbgrader parts each one gets
    "JUPYTER_CONFIG_PATH": lambda spawner: ROLES["instructor" if spawner.user.name == INSTRUCTOR
                                                 else "learner"],
}}

c.JupyterHub.db_url = {"sqlite:///" + str(layout.state / "jupyterhub.sqlite")!r}
c.JupyterHub.cookie_secret_file = {str(layout.state / "jupyterhub_cookie_secret")!r}
c.ConfigurableHTTPProxy.command = [{str(layout.proxy)!r}]
c.ConfigurableHTTPProxy.pid_file = {str(layout.state / "proxy.pid")!r}
'''


def write_configs(layout: Layout, people: Participants, exchange: Path) -> None:
    _write(layout.nbgrader_config, nbgrader_system_config(exchange))
    write_roles(layout)
    _write(layout.config, hub_config(layout, people))
    layout.state.mkdir(mode=0o700, exist_ok=True)
    layout.state.chmod(0o700)


def check_exchange(exchange: Path) -> None:
    if not exchange.is_absolute():
        raise ValueError(f"--exchange {exchange}: give an absolute path")
    blocked = _others_can_enter(exchange.parent)
    if blocked:
        raise ValueError(f"--exchange {exchange}: other users cannot enter {blocked}")


def make_exchange(exchange: Path) -> None:
    """nbgrader's exchange: everybody writes, nobody removes what others put there (1777)."""
    exchange.mkdir(parents=True, exist_ok=True)
    os.chown(exchange, 0, 0)
    exchange.chmod(0o1777)


# run as the instructor (root writes nothing into a folder that a user controls)
WRITE_USER_CONFIG = """import pathlib, sys
path = pathlib.Path.home() / ".jupyter" / "nbgrader_config.py"
if path.exists() and sys.argv[1] not in path.read_text():
    sys.exit(f"{path} exists and was not written by hub setup: add "
             f"c.CourseDirectory.root = {sys.argv[2]!r} to it, or remove it")
path.parent.mkdir(exist_ok=True)
path.write_text(sys.stdin.read())
"""


def course_directory(layout: Layout, people: Participants, name: str) -> Path:
    """The instructor's nbgrader course directory in their home, with the repository's source
    notebooks (kept as they are when it exists), CourseDirectory.root pointing there, and every
    learner in the gradebook."""
    user = pwd.getpwnam(people.instructor)
    home = Path(user.pw_dir)
    root = home / name
    if not root.exists() and not root.is_symlink():
        root.mkdir()
        shutil.copy2(ROOT / "nbgrader_config.py", root)
        shutil.copytree(ROOT / "solutions", root / "solutions",
                        ignore=shutil.ignore_patterns("*.c", "*.f90", ".ipynb_checkpoints"))
        _chown_tree(root, user)
        _say(f"the course directory {root}: solutions/ and nbgrader_config.py")
    as_user(layout, people.instructor, [layout.python, "-c", WRITE_USER_CONFIG, MARKER, root],
            "writing ~/.jupyter/nbgrader_config.py",
            input=f"{MARKER}\nc = get_config()  # noqa: F821\n"
                  f"c.CourseDirectory.root = {str(root)!r}\n")
    for learner in people.learners:
        as_user(layout, people.instructor, [layout.venv / "bin" / "nbgrader", "db", "student",
                                            "add", learner], f"nbgrader db student add {learner}",
                cwd=root)
    return root


# --- setup ---------------------------------------------------------------------------------------

def _wheelhouse(option: str | None) -> Path | None:
    value = option or os.environ.get("COURSE_WHEELHOUSE") or None
    if value is None:
        return None
    if not Path(value).is_dir():
        raise ValueError(f"wheelhouse {value} is not a folder (make it with: make wheelhouse, then "
                         f"python -m course hub download {value})")
    return Path(value).resolve()


def setup(args) -> int:
    layout = Layout(Path(args.prefix))
    people = participants(args)
    if not (ROOT / "solutions").is_dir():
        raise ValueError(f"{ROOT} has no solutions/: run hub setup from the instructors' "
                         "repository, not a learner copy")
    wheelhouse = _wheelhouse(args.wheelhouse)
    exchange = Path(args.exchange)
    check_exchange(exchange)
    if not USER_NAME.fullmatch(args.course_dir):
        raise ValueError(f"--course-dir {args.course_dir}: give a folder name (letters, digits, "
                         "_ and -), made in the instructor's home")
    if args.home_base and not Path(args.home_base).is_dir():
        raise ValueError(f"--home-base {args.home_base}: no such folder")
    python = check_machine(args.python)
    check_prefix(layout.prefix)
    if hub_pid(layout):
        raise RuntimeError(f"the hub of {layout.prefix} runs: python -m course hub stop first")
    ensure_users(people, args.create_users, args.home_base)
    layout.prefix.mkdir(parents=True, exist_ok=True)
    layout.prefix.chmod(0o755)
    copy_course(layout)
    install_python(layout, python, wheelhouse)
    build_kernels(layout)
    install_proxy(layout, wheelhouse)
    make_exchange(exchange)
    write_configs(layout, people, exchange)
    root = course_directory(layout, people, args.course_dir)
    _say(f"ready: {people.instructor} (instructor, course directory {root}) and "
         f"{len(people.learners)} learners; start it with: python -m course hub start"
         + (f" --prefix {layout.prefix}" if str(layout.prefix) != DEFAULT_PREFIX else ""))
    _say(f"the Formgrader works in a browser tab of its own: <hub>/user/{people.instructor}/"
         "formgrader (inside JupyterLab it stays blank: JupyterHub forbids frames)")
    return 0


# --- start, stop, status -------------------------------------------------------------------------

def _cmdline(pid: int) -> list[str]:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().decode(errors="replace").split("\0")
    except OSError:
        return []


def hub_pid(layout: Layout) -> int | None:
    """The pid of this prefix's running hub, or None (a stale pid file is not a hub)."""
    try:
        pid = int(layout.pid_file.read_text())
    except (OSError, ValueError):
        return None
    return pid if str(layout.config) in _cmdline(pid) else None


def prefix_processes(layout: Layout) -> dict[int, list[str]]:
    """Every process that runs a program of the prefix (single-user servers, kernels, the
    proxy), pid -> command line."""
    inside = str(layout.prefix) + "/"
    found = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit() and int(entry.name) != os.getpid():
            cmd = _cmdline(int(entry.name))
            if any(arg.startswith(inside) for arg in cmd[:2]):
                found[int(entry.name)] = cmd
    return found


def _wait_gone(pids, seconds: float) -> set:
    left = set(pids)
    deadline = time.monotonic() + seconds
    while left and time.monotonic() < deadline:
        left = {pid for pid in left if Path(f"/proc/{pid}").exists()
                and _state(pid) != "Z"}
        time.sleep(0.2)
    return left


def _state(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return "?"


def _signal(pids, sig) -> None:
    for pid in pids:
        try:
            os.kill(pid, sig)
        except ProcessLookupError:
            pass


def _hub_ready(url: str) -> bool:
    try:
        with urllib.request.urlopen(url.rstrip("/") + "/hub/api", timeout=5) as reply:
            return reply.status == 200
    except (urllib.error.URLError, OSError):
        return False


def _check_port(port: int) -> int:
    if not 1 <= port <= 65533:
        raise ValueError(f"--port {port}: give a port from 1 to 65533 (the hub also uses the "
                         "next two)")
    return port


def start(args) -> int:
    layout = Layout(Path(args.prefix))
    if os.geteuid() != 0:
        raise RuntimeError("hub start needs root (PAM logins, servers started as each user)")
    if not layout.config.exists():
        raise ValueError(f"{layout.config} is missing: run python -m course hub setup first")
    port = _check_port(args.port)
    pid = hub_pid(layout)
    if pid:
        _say(f"already running (pid {pid}) at {layout.url_file.read_text().strip()}")
        return 0
    local = "127.0.0.1" if args.ip in ("0.0.0.0", "") else args.ip
    url = f"http://{local}:{port}/"
    if _hub_ready(url):
        raise RuntimeError(f"something else answers at {url}: choose another --port")
    # the hub's own API and the proxy's API on the next two ports, on this machine only
    cmd = [layout.venv / "bin" / "jupyterhub", "-f", layout.config, f"--ip={args.ip}",
           f"--port={port}", f"--JupyterHub.hub_port={port + 1}",
           f"--ConfigurableHTTPProxy.api_url=http://127.0.0.1:{port + 2}"]
    with open(layout.log, "a") as log:
        process = subprocess.Popen([str(c) for c in cmd], cwd=layout.state, stdout=log,
                                   stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                   env=_user_env(layout, HOME="/root"), start_new_session=True)
    layout.pid_file.write_text(f"{process.pid}\n")
    layout.url_file.write_text(f"http://{args.ip}:{port}/\n")
    deadline = time.monotonic() + args.wait
    while not _hub_ready(url):
        if process.poll() is not None or time.monotonic() > deadline:
            if process.poll() is None:
                _stop_hub(layout, process.pid)
            last = layout.log.read_text().strip().splitlines()[-1:] or ["(empty)"]
            raise RuntimeError(f"the hub did not start (log {layout.log}): {last[0]}")
        time.sleep(0.5)
    _say(f"running (pid {process.pid}) at http://{args.ip}:{port}/ ; log {layout.log}")
    return 0


def _stop_left_over(layout: Layout) -> int:
    """Stop what still runs a program of the prefix (TERM, then KILL); the number of those."""
    left = prefix_processes(layout)
    _signal(left, signal.SIGTERM)
    _signal(_wait_gone(left, 15), signal.SIGKILL)
    return len(left)


def _stop_hub(layout: Layout, pid: int) -> int:
    """SIGTERM: the hub stops the users' servers and the proxy; what is left of the prefix's
    programs after that is stopped too. The number of those."""
    _signal([pid], signal.SIGTERM)
    if _wait_gone([pid], 60):
        _signal([pid], signal.SIGKILL)
    return _stop_left_over(layout)


def stop(args) -> int:
    layout = Layout(Path(args.prefix))
    if os.geteuid() != 0:
        raise RuntimeError("hub stop needs root")
    pid = hub_pid(layout)
    # without a hub: servers left over by a hub that was killed
    left = _stop_left_over(layout) if pid is None else _stop_hub(layout, pid)
    layout.pid_file.unlink(missing_ok=True)
    if pid is None and not left:
        _say("not running")
    else:
        _say("stopped" + (f" ({left} left-over processes of {layout.prefix} too)" if left else ""))
    return 0


def servers(layout: Layout) -> dict[str, int]:
    """The users' running JupyterLab servers of this prefix: user -> pid."""
    running = {}
    for pid, cmd in prefix_processes(layout).items():
        if any(arg.endswith("/" + SERVER_EXE) for arg in cmd[:2]):
            running[pwd.getpwuid(Path(f"/proc/{pid}").stat().st_uid).pw_name] = pid
    return running


def status(args) -> int:
    layout = Layout(Path(args.prefix))
    if not layout.config.exists():
        raise ValueError(f"no classroom in {layout.prefix} (python -m course hub setup makes one)")
    pid = hub_pid(layout)
    if pid is None:
        print(f"hub: stopped ({layout.prefix})")
    else:
        print(f"hub: running (pid {pid}) at {layout.url_file.read_text().strip()}")
    running = servers(layout)
    print("servers: " + (", ".join(f"{user} (pid {p})" for user, p in sorted(running.items()))
                         or "none"))
    return 0 if pid else 3


# --- download ------------------------------------------------------------------------------------

def download(args) -> int:
    """The proxy's npm packages into WHEELHOUSE/npm-cache, for an offline `hub setup`; the Python
    packages come from `make wheelhouse`."""
    target = Path(args.wheelhouse).resolve()
    if shutil.which("npm") is None:
        raise RuntimeError("npm is missing (Debian: apt-get install npm)")
    target.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as scratch:
        _run(["npm", "install", "--prefix", scratch, "--cache", target / NPM_CACHE, "--no-audit",
              "--no-fund", "--no-update-notifier", PROXY_PACKAGE], f"npm install {PROXY_PACKAGE}")
    _say(f"{PROXY_PACKAGE} in {target / NPM_CACHE}")
    return 0


# --- the command line ----------------------------------------------------------------------------

def add_parser(sub) -> None:
    """`hub` and its verbs, under the `python -m course` parser."""
    hub = sub.add_parser("hub", help="a JupyterHub classroom on this machine (root, "
                                     "Debian/Ubuntu)",
                         description="Set up, start and stop a JupyterHub for an instructor and "
                                     "learners (Unix users, PAM logins) with nbgrader's exchange.")
    verbs = hub.add_subparsers(dest="hub_verb", required=True, metavar="verb")

    def verb(name, run, help):
        p = verbs.add_parser(name, help=help)
        p.add_argument("--prefix", default=DEFAULT_PREFIX,
                       help=f"where the classroom lives (default {DEFAULT_PREFIX})")
        p.set_defaults(run=run)
        return p

    s = verb("setup", setup, "install the hub and its users' environment, configure nbgrader")
    s.add_argument("--instructor", required=True, metavar="NAME", help="the instructor's user")
    s.add_argument("--learners", metavar="A,B,C", help="the learners' users")
    s.add_argument("--learners-file", metavar="FILE",
                   help="one learner per line: NAME or NAME:PASSWORD (the password is set for "
                        "users that --create-users creates)")
    s.add_argument("--create-users", action="store_true", help="create the missing Unix users")
    s.add_argument("--home-base", metavar="DIR",
                   help="with --create-users: their homes in DIR (default: useradd's, /home)")
    s.add_argument("--python", default="/usr/bin/python3",
                   help="the Python of the users' venv; every user must be able to run it "
                        "(default /usr/bin/python3)")
    s.add_argument("--wheelhouse", metavar="DIR",
                   help="install offline from DIR (default $COURSE_WHEELHOUSE; made by make "
                        "wheelhouse and python -m course hub download DIR)")
    s.add_argument("--exchange", default=DEFAULT_EXCHANGE,
                   help=f"nbgrader's exchange (default {DEFAULT_EXCHANGE})")
    s.add_argument("--course-dir", default=COURSE_ID, metavar="NAME",
                   help=f"the instructor's course directory, in their home (default {COURSE_ID})")

    st = verb("start", start, "start the hub in the background")
    st.add_argument("--ip", default="127.0.0.1",
                    help="address to listen on (default 127.0.0.1; 0.0.0.0 for a room)")
    st.add_argument("--port", type=int, default=DEFAULT_PORT,
                    help=f"port (default {DEFAULT_PORT}; the hub uses the next two on 127.0.0.1)")
    st.add_argument("--wait", type=float, default=120, metavar="SECONDS",
                    help="how long to wait for the hub to answer (default 120)")
    verb("stop", stop, "stop the hub and the users' servers")
    verb("status", status, "say whether the hub runs, and whose servers")

    d = verbs.add_parser("download", help="put the proxy's npm packages into a wheelhouse "
                                          "(with network; for an offline setup)")
    d.add_argument("wheelhouse", metavar="DIR")
    d.set_defaults(run=download)

