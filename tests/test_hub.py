"""The JupyterHub classroom (`python -m course hub`), the whole round trip, as separate Unix users.

`course hub setup` installs a classroom into a temporary prefix, offline from the wheelhouse of
`make setup-test`, for a temporary instructor and three learners who share this machine's /tmp;
`course hub start` runs it. The instructor generates and releases 01_fem1d with nbgrader's
commands, as their own user. One learner works in a real browser (Debian's Chromium driven by
Playwright): logs in on the hub's PAM login page, fetches the exercise in the Assignments tab,
types answers into the notebook (one of them wrong), runs it, validates and submits, and later
fetches the feedback there. Two learners use nbgrader's commands: one submits the solution, one
the untouched release. The instructor collects, autogrades, generates and releases the feedback;
each learner's score in the gradebook must be that of their own answer.

Skipped where this machine cannot do it (not root, no Chromium, no useradd, no npm); everything
it made (users, homes, prefix, exchange, processes, their files in /tmp) is removed afterwards."""

from __future__ import annotations

import html
import os
import pwd
import re
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

import nbformat
import pytest

ROOT = Path(__file__).resolve().parent.parent
WHEELHOUSE = ROOT / "build" / "wheelhouse"
ARTIFACTS = ROOT / "test-artifacts"
KEY = "01_fem1d"
NOTEBOOK = f"{KEY}_exercise.ipynb"
POINTS = {"test_element": 2, "test_assemble": 3, "test_crs_matvec": 3}
# the browser learner's answers: the solution's cells, typed in, with one mistake (k = cond * h)
TYPED = ("element", "assemble", "crs_matvec_c")
MISTAKE = ("element", "return cond / h * np.array", "return cond * h * np.array")
EXPECTED = {"typed": {**POINTS, "test_element": 0},                 # one wrong task
            "solution": POINTS,
            "untouched": dict.fromkeys(POINTS, 0)}
COMMAND_TIMEOUT = 600           # seconds for one command (setup compiles mpi4py on a fresh cache)
BROWSER_TIMEOUT = 180_000       # milliseconds for a page to do something (a server starting)

pytestmark = pytest.mark.slow


def _missing() -> str | None:
    """Why this machine cannot run the classroom, or None."""
    if sys.platform != "linux" or os.geteuid() != 0:
        return "the classroom test needs root on Linux (it creates Unix users)"
    for command in ("useradd", "userdel", "chpasswd", "runuser", "npm", "node", "chromium"):
        if shutil.which(command) is None:
            return f"{command} is missing (make setup-test installs what the tests need)"
    if not Path("/usr/bin/python3").exists():
        return "/usr/bin/python3 is missing: the users' venv is made from the system's Python"
    return None


# --- users, processes, clean-up ------------------------------------------------------------------

@dataclass
class Classroom:
    base: Path                      # everything the test makes on disk lives under here
    instructor: str
    learners: dict                  # role (typed, solution, untouched) -> user name
    passwords: dict = field(repr=False)
    port: int = 0
    log: list = field(default_factory=list, repr=False)

    @property
    def prefix(self) -> Path:
        return self.base / "prefix"

    @property
    def exchange(self) -> Path:
        return self.base / "exchange"

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def users(self) -> list[str]:
        return [self.instructor, *self.learners.values()]

    def home(self, user: str) -> Path:
        return Path(pwd.getpwnam(user).pw_dir)

    @property
    def course_root(self) -> Path:
        return self.home(self.instructor) / "pfem"

    def nbgrader(self, user: str, *args: str, cwd: Path | None = None, check: bool = True):
        """nbgrader of the hub's venv, run as `user` (in the course directory for the
        instructor, in their home for a learner)."""
        cwd = cwd or (self.course_root if user == self.instructor else self.home(user))
        return self.as_user(user, [self.prefix / "venv" / "bin" / "nbgrader", *args], cwd=cwd,
                            check=check)

    def as_user(self, user: str, cmd: list, cwd: Path | None = None, check: bool = True):
        env = {"PATH": f"{self.prefix / 'venv' / 'bin'}:/usr/local/bin:/usr/bin:/bin",
               "LANG": "C.UTF-8"}
        result = subprocess.run([shutil.which("runuser"), "-u", user, "--", *map(str, cmd)],
                                cwd=cwd, env=env,
                                capture_output=True, text=True, timeout=COMMAND_TIMEOUT)
        self.log.append(f"$ ({user}) {' '.join(map(str, cmd))}\n{result.stdout}{result.stderr}")
        if check and result.returncode != 0:
            raise AssertionError(f"as {user}: {' '.join(map(str, cmd))} exited "
                                 f"{result.returncode}\n{result.stdout}\n{result.stderr}")
        return result


def hub(*args: str, check: bool = True) -> subprocess.CompletedProcess:
    """`python -m course hub ARGS` from the repository, as root."""
    result = subprocess.run([sys.executable, "-m", "course", "hub", *args], cwd=ROOT,
                            capture_output=True, text=True, timeout=COMMAND_TIMEOUT)
    if check and result.returncode != 0:
        raise AssertionError(f"course hub {' '.join(args)} exited {result.returncode}\n"
                             f"{result.stdout}\n{result.stderr}")
    return result


def free_port() -> int:
    """A port whose next two are free too (the hub's API and the proxy's)."""
    for _ in range(50):
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        if port < 65000 and all(_free(port + k) for k in (1, 2)):
            return port
    raise RuntimeError("no three free ports in a row")


def _free(port: int) -> bool:
    with socket.socket() as s:
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def _uids(names) -> dict[int, str]:
    uids = {}
    for name in names:
        try:
            uids[pwd.getpwnam(name).pw_uid] = name
        except KeyError:
            pass
    return uids


def _kill_processes_of(uids) -> None:
    """Every process of the test's users (kernels, compilers, mpiexec), by pid."""
    for _ in range(3):
        pids = [int(p.name) for p in Path("/proc").iterdir()
                if p.name.isdigit() and _owner(p) in uids]
        if not pids:
            return
        for pid in pids:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        time.sleep(0.5)


def _owner(path: Path) -> int | None:
    try:
        return path.stat().st_uid
    except OSError:
        return None


def _remove_files_of(uids) -> None:
    """What the users left in the shared temporary folders (build caches, MPI segments)."""
    for folder in (Path("/tmp"), Path("/var/tmp"), Path("/dev/shm")):
        for entry in folder.iterdir() if folder.is_dir() else ():
            if _owner(entry) in uids:
                if entry.is_dir() and not entry.is_symlink():
                    shutil.rmtree(entry, ignore_errors=True)
                else:
                    entry.unlink(missing_ok=True)


def clean_up(room: Classroom) -> None:
    hub("stop", "--prefix", str(room.prefix), check=False)
    uids = _uids(room.users)
    _kill_processes_of(uids)
    _remove_files_of(uids)
    for name in uids.values():
        subprocess.run(["userdel", "--remove", name], capture_output=True)
    shutil.rmtree(room.base, ignore_errors=True)


@pytest.fixture(scope="module")
def classroom():
    """`course hub setup` and `start` for a new instructor (made here with useradd, as a host
    would) and three learners (made by setup, passwords from its learners file)."""
    reason = _missing()
    if reason:
        pytest.skip(reason)
    if not (WHEELHOUSE / "npm-cache").is_dir():
        pytest.fail(f"{WHEELHOUSE} with npm-cache/ is missing: make setup-test makes it "
                    "(nothing may download during the tests)")
    tag = secrets.token_hex(3)
    base = Path(tempfile.mkdtemp(prefix="pfem-hub-test-", dir="/tmp"))
    base.chmod(0o755)                          # the users must reach their homes inside it
    room = Classroom(base=base, instructor=f"pfh{tag}i",
                     learners={role: f"pfh{tag}{role[0]}" for role in EXPECTED}, passwords={})
    room.passwords = {user: secrets.token_urlsafe(12) for user in room.users}
    try:
        (base / "home").mkdir(mode=0o755)
        subprocess.run(["useradd", "--create-home", "--base-dir", str(base / "home"),
                        room.instructor], check=True, capture_output=True)
        subprocess.run(["chpasswd"], input=f"{room.instructor}:"
                       f"{room.passwords[room.instructor]}\n", text=True, check=True)
        learners_file = base / "learners.txt"
        learners_file.write_text("# the workshop's learners\n" + "".join(
            f"{user}:{room.passwords[user]}\n" for user in room.learners.values()))
        learners_file.chmod(0o600)
        hub("setup", "--prefix", str(room.prefix), "--instructor", room.instructor,
            "--learners-file", str(learners_file), "--create-users",
            "--home-base", str(base / "home"), "--exchange", str(room.exchange),
            "--wheelhouse", str(WHEELHOUSE))
        room.port = free_port()
        hub("start", "--prefix", str(room.prefix), "--port", str(room.port))
        yield room
    finally:
        clean_up(room)


# --- the browser ---------------------------------------------------------------------------------

def _chromium():
    from playwright.sync_api import sync_playwright

    playwright = sync_playwright().start()
    browser = playwright.chromium.launch(executable_path=shutil.which("chromium"),
                                         args=["--no-sandbox"])
    return playwright, browser


def login(browser, room: Classroom, user: str):
    """Log in on the hub's login page; JupyterLab, freshly laid out, once the server runs."""
    page = browser.new_context(viewport={"width": 1400, "height": 900}).new_page()
    page.set_default_timeout(BROWSER_TIMEOUT)
    page.goto(f"{room.url}/hub/login")
    page.fill("#username_input", user)
    page.fill("#password_input", room.passwords[user])
    page.click("#login_submit")
    page.wait_for_url(f"**/user/{user}/lab**")
    page.goto(f"{room.url}/user/{user}/lab?reset")
    page.locator(".jp-LauncherCard").first.wait_for()       # the fresh layout, restored
    page.locator(".lm-MenuBar-itemLabel", has_text="Nbgrader").wait_for()
    return page


def nbgrader_menu(page) -> list[str]:
    page.locator(".lm-MenuBar-itemLabel", has_text="Nbgrader").click()
    items = [t for t in page.locator(".lm-Menu-itemLabel").all_inner_texts() if t.strip()]
    page.keyboard.press("Escape")
    return items


def open_assignments(page) -> None:
    page.locator(".lm-MenuBar-itemLabel", has_text="Nbgrader").click()
    page.locator(".lm-Menu-itemLabel", has_text="Assignment List").click()
    page.locator("#released_assignments_list_loading").wait_for(state="hidden")
    page.locator("#fetched_assignments_list_loading").wait_for(state="hidden")


def typed_answers() -> dict[int, str]:
    """Cell index in the release -> what the browser learner types there: the solution's code
    without its markers, with the mistake in its cell."""
    solution = nbformat.read(ROOT / "solutions" / KEY / NOTEBOOK, as_version=4)
    release = nbformat.read(ROOT / "exercises" / KEY / NOTEBOOK, as_version=4)
    code = {c.metadata.get("nbgrader", {}).get("grade_id"): c.source for c in solution.cells}
    answers = {}
    for index, cell in enumerate(release.cells):
        grade_id = cell.metadata.get("nbgrader", {}).get("grade_id")
        if grade_id in TYPED:
            text = "\n".join(line for line in code[grade_id].splitlines()
                             if "BEGIN SOLUTION" not in line and "END SOLUTION" not in line)
            if grade_id == MISTAKE[0]:
                assert MISTAKE[1] in text
                text = text.replace(MISTAKE[1], MISTAKE[2])
            answers[index] = text
    assert len(answers) == len(TYPED)
    return answers


def open_notebook_from_the_list(page) -> None:
    """Unfold 01_fem1d in the downloaded assignments and click its notebook. The lists are drawn
    again when a fetch ends, folding everything: unfold until the notebook's link shows."""
    from playwright.sync_api import TimeoutError as PlaywrightTimeout

    link = page.locator("#fetched_assignments_list a", has_text=NOTEBOOK[:-6])
    for _ in range(20):
        page.locator("#fetched_assignments_list a.assignment-notebooks-link").click()
        try:
            link.wait_for(timeout=3000)
            break
        except PlaywrightTimeout:
            continue
    link.click()


def work_in_the_browser(page) -> dict:
    """Fetch 01_fem1d in the Assignments tab, open it, type the answers, run every cell, save,
    Validate (the notebook's button), Submit (the Assignments tab). What the learner saw."""
    seen = {}
    open_assignments(page)
    page.locator("#released_assignments_list button", has_text="Fetch").click()
    open_notebook_from_the_list(page)
    cells = page.locator(".jp-NotebookPanel .jp-Notebook .jp-Cell")
    answers = typed_answers()
    cells.nth(max(answers)).wait_for()
    for index, text in answers.items():
        editor = cells.nth(index).locator(".cm-content")
        editor.scroll_into_view_if_needed()
        editor.click()
        page.keyboard.press("Control+a")
        page.keyboard.insert_text(text)
    page.locator(".lm-MenuBar-itemLabel", has_text="Run").first.click()
    page.locator(".lm-Menu-itemLabel").get_by_text("Run All Cells", exact=True).click()
    page.wait_for_function("""() => {
        const prompts = [...document.querySelectorAll(
            '.jp-NotebookPanel .jp-CodeCell .jp-InputPrompt')];
        return prompts.length && /\\d/.test(prompts[0].textContent)
            && prompts.every(p => !p.textContent.includes('*'));
    }""")
    errors = page.locator(".jp-NotebookPanel .jp-OutputArea-output"
                          "[data-mime-type='application/vnd.jupyter.stderr']")
    page.wait_for_function("""() => [...document.querySelectorAll(
        ".jp-NotebookPanel .jp-OutputArea-output[data-mime-type='application/vnd.jupyter.stderr']")]
        .every(output => output.textContent.trim().length > 0)""")
    seen["errors"] = errors.all_text_contents()    # drawn or not (content-visibility)
    page.keyboard.press("Control+s")
    page.locator(".lm-TabBar-tab.jp-mod-dirty").wait_for(state="detached")
    page.locator(".jp-NotebookPanel-toolbar jp-button[title='Validate Assignment']").first.click()
    dialog = page.locator(".jp-Dialog")
    seen["validate"] = dialog.inner_text()
    dialog.locator("button.jp-mod-accept").click()
    page.locator(".lm-TabBar-tab", has_text="Assignments").click()
    page.locator("#fetched_assignments_list button", has_text="Submit").click()
    page.locator("#submitted_assignments_list .item_name", has_text=KEY).first.wait_for()
    return seen


def fetch_feedback_in_the_browser(page, room: Classroom, user: str) -> str:
    page.goto(f"{room.url}/user/{user}/lab?reset")
    page.locator(".jp-LauncherCard").first.wait_for()
    open_assignments(page)
    page.locator("#submitted_assignments_list button", has_text="Fetch Feedback").click()
    page.locator("#submitted_assignments_list a", has_text="view feedback").wait_for()
    return "fetched"


def formgrader_in_its_own_tab(browser, room: Classroom) -> dict:
    page = login(browser, room, room.instructor)
    menu = nbgrader_menu(page)
    tab = page.context.new_page()
    reply = tab.goto(f"{room.url}/user/{room.instructor}/formgrader")
    tab.locator("td", has_text=KEY).first.wait_for()
    return {"menu": menu, "status": reply.status,
            "csp": reply.headers.get("content-security-policy", ""),
            "text": tab.locator("body").inner_text()}


def _screenshots(browser) -> None:
    """What each page showed when the round trip failed, in test-artifacts/."""
    ARTIFACTS.mkdir(exist_ok=True)
    for k, context in enumerate(browser.contexts):
        for j, page in enumerate(context.pages):
            page.screenshot(path=str(ARTIFACTS / f"hub-{k}-{j}.png"))


# --- the round trip ------------------------------------------------------------------------------

def _put_solution(room: Classroom, user: str) -> None:
    """The learner's fetched notebook replaced by the solution (as if they had written it)."""
    target = room.home(user) / KEY / NOTEBOOK
    shutil.copyfile(ROOT / "solutions" / KEY / NOTEBOOK, target)
    info = pwd.getpwnam(user)
    os.chown(target, info.pw_uid, info.pw_gid)


def _feedback_text(room: Classroom, user: str) -> str:
    pages = sorted((room.home(user) / KEY / "feedback").glob(f"*/{NOTEBOOK[:-6]}.html"))
    assert len(pages) == 1, f"{user}: feedback pages {pages}"
    return html.unescape(re.sub(r"<[^>]+>", "", pages[0].read_text()))


def _scores(room: Classroom) -> dict:
    from nbgrader.api import Gradebook

    scores = {}
    with Gradebook(f"sqlite:///{room.course_root / 'gradebook.db'}") as gb:
        for role, user in room.learners.items():
            notebook = gb.find_submission_notebook(NOTEBOOK[:-6], KEY, user)
            scores[role] = {grade.name: grade.score for grade in notebook.grades}
    return scores


@pytest.fixture(scope="module")
def round_trip(classroom):
    """release -> fetch -> validate -> submit -> collect -> autograde -> generate and release
    feedback -> fetch feedback, each step as its user; what each one saw and got."""
    room = classroom
    typed, solution, untouched = (room.learners[r] for r in ("typed", "solution", "untouched"))
    result = {"validate": {}, "feedback": {}}
    room.nbgrader(room.instructor, "generate_assignment", KEY)
    room.nbgrader(room.instructor, "release_assignment", KEY)
    playwright, browser = _chromium()
    try:
        page = login(browser, room, typed)
        result["learner_menu"] = nbgrader_menu(page)
        result["learner_formgrader"] = page.request.get(
            f"{room.url}/user/{typed}/formgrader").status
        result["browser"] = work_in_the_browser(page)
        for user in (solution, untouched):
            room.nbgrader(user, "fetch_assignment", KEY)
        _put_solution(room, solution)
        for user in (solution, untouched):
            result["validate"][user] = room.nbgrader(user, "validate", f"{KEY}/{NOTEBOOK}",
                                                     check=False).stdout
            room.nbgrader(user, "submit", KEY)
        for step in ("collect", "autograde", "generate_feedback", "release_feedback"):
            room.nbgrader(room.instructor, step, KEY)
        result["browser"]["feedback"] = fetch_feedback_in_the_browser(page, room, typed)
        for user in (solution, untouched):
            room.nbgrader(user, "fetch_feedback", KEY)
        result["formgrader"] = formgrader_in_its_own_tab(browser, room)
        result["status"] = hub("status", "--prefix", str(room.prefix), check=False)
    except Exception:
        print("\n".join(room.log[-12:]))       # the last commands, for the failure's report
        _screenshots(browser)
        log = room.prefix / "state" / "jupyterhub.log"
        if log.exists():
            print(log.read_text()[-4000:])
        raise
    finally:
        browser.close()
        playwright.stop()
    for role, user in room.learners.items():
        result["feedback"][role] = _feedback_text(room, user)
    result["scores"] = _scores(room)
    return result


# --- what it proves ------------------------------------------------------------------------------

def test_each_learner_gets_the_score_of_their_own_answer(round_trip):
    assert round_trip["scores"] == EXPECTED


def test_the_feedback_reaches_each_learner_with_their_score_and_no_hidden_test(round_trip):
    source = nbformat.read(ROOT / "solutions" / KEY / NOTEBOOK, as_version=4)
    hidden = [line.strip() for cell in source.cells
              for region in re.findall(r"BEGIN HIDDEN TESTS\n(.*?)\n[^\n]*END HIDDEN TESTS",
                                       cell.source, re.S)
              for line in region.splitlines() if len(line.strip()) > 12]
    assert hidden, "01_fem1d has hidden tests"
    for role, text in round_trip["feedback"].items():
        total = sum(EXPECTED[role].values())
        assert f"(Score: {total:.1f} / {sum(POINTS.values()):.1f})" in text, (role, text[:400])
        for line in hidden:
            assert line not in text, f"{role}'s feedback shows the hidden test line {line!r}"


def test_validate_tells_each_learner_what_fails(round_trip, classroom):
    assert "expected cond / h" in round_trip["browser"]["validate"]
    assert any("expected cond / h" in error for error in round_trip["browser"]["errors"]), \
        ("running the notebook in the browser shows the failing check",
         round_trip["browser"]["errors"])
    assert "Success!" in round_trip["validate"][classroom.learners["solution"]]
    assert "NotImplementedError" in round_trip["validate"][classroom.learners["untouched"]]


def test_learners_get_the_assignments_the_instructor_also_the_formgrader(round_trip):
    assert round_trip["learner_menu"] == ["Assignment List"]
    assert round_trip["learner_formgrader"] == 404
    assert {"Assignment List", "Formgrader", "Create assignment", "Course List"} <= \
        set(round_trip["formgrader"]["menu"])


def test_the_formgrader_works_in_its_own_tab_and_refuses_frames(round_trip):
    """In a tab of its own it lists the course's assignments (CourseDirectory.root and the
    course's nbgrader_config.py); inside JupyterLab it stays blank, as JupyterHub >= 4.1 wants:
    setup does not weaken the frame policy (nbgrader reverted its own attempt, PR 1947)."""
    formgrader = round_trip["formgrader"]
    assert formgrader["status"] == 200
    assert "Manage Assignments" in formgrader["text"] and "07_cluster" in formgrader["text"]
    assert "frame-ancestors 'none'" in formgrader["csp"]


def test_homes_are_private_and_the_exchange_keeps_its_folders(round_trip, classroom):
    room = classroom
    for user in room.users:
        assert room.home(user).stat().st_mode & 0o777 == 0o700, user
    other = room.as_user(room.learners["untouched"],
                         ["cat", room.home(room.learners["solution"]) / KEY / NOTEBOOK],
                         check=False)
    assert other.returncode != 0, "a learner read another learner's notebook"
    mode = room.exchange.stat().st_mode & 0o7777
    assert mode == 0o1777, f"the exchange has mode {mode:o}, not 1777"
    moved = room.as_user(room.learners["untouched"],
                         ["mv", room.exchange / "pfem", room.exchange / "taken"], check=False)
    assert moved.returncode != 0, "a learner could move the course's folder in the exchange"


def test_validate_uses_the_course_cell_timeout(classroom):
    """What the Validate button loads (nbgrader's handler: the Jupyter config path and the
    folder it runs in), as a learner: the course's 60 s, not nbgrader's 30 s."""
    room = classroom
    code = ("from jupyter_core.paths import jupyter_config_path\n"
            "from nbgrader.apps import NbGrader\n"
            "app = NbGrader()\n"
            "app.config_file_paths.append(jupyter_config_path())\n"
            "app.load_config_file()\n"
            "print(app.config.Execute.timeout)")
    out = room.as_user(room.learners["solution"], [room.prefix / "venv" / "bin" / "python",
                                                   "-c", code], cwd=room.home(room.learners[
                                                       "solution"]))
    assert out.stdout.strip() == "60"


def test_status_names_the_servers_and_stop_ends_them(round_trip, classroom):
    room = classroom
    status = round_trip["status"]
    assert status.returncode == 0 and "hub: running" in status.stdout, status.stdout
    for user in (room.learners["typed"], room.instructor):
        assert user in status.stdout, status.stdout
    hub("stop", "--prefix", str(room.prefix))
    from course.classroom.hub import Layout, prefix_processes

    assert prefix_processes(Layout(room.prefix)) == {}
    after = hub("status", "--prefix", str(room.prefix), check=False)
    assert after.returncode == 3 and "hub: stopped" in after.stdout and "servers: none" in \
        after.stdout


def test_bad_input_is_one_line():
    if _missing():
        pytest.skip(_missing())
    closed = Path(tempfile.mkdtemp(dir="/tmp"))  # mode 0700: a Python there, as pyenv's in
    (closed / "python3").symlink_to("/usr/bin/python3")        # /root, only root can run
    cases = [
        (["setup", "--instructor", "Root", "--learners", "a"], "not a valid user name"),
        (["setup", "--instructor", "ann", "--learners", "bob,bob"], "learners named twice"),
        (["setup", "--instructor", "ann"], "give the learners"),
        (["setup", "--instructor", "ann", "--learners", "bob", "--prefix", "relative"],
         "give an absolute path"),
        (["setup", "--instructor", "ann", "--learners", "bob", "--exchange", "exchange"],
         "give an absolute path"),
        (["setup", "--instructor", "ann", "--learners", "bob", "--python",
          str(closed / "python3")], f"other users cannot run it ({closed} is closed"),
        (["start", "--prefix", "/nonexistent/pfem-hub"], "run python -m course hub setup"),
        (["status", "--prefix", "/nonexistent/pfem-hub"], "no classroom in"),
    ]
    try:
        for args, message in cases:
            result = hub(*args, check=False)
            assert result.returncode == 2, (args, result.stdout, result.stderr)
            lines = result.stderr.strip().splitlines()
            assert len(lines) == 1 and message in lines[0], (args, result.stderr)
    finally:
        shutil.rmtree(closed)
