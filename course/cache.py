"""Per-user folders for what the course compiles at run time (a learner's kernel, the race
checker's programs, the course's own kernels where the shared build is read-only).

On a shared machine (a JupyterHub, a workshop server) every user gets folders of their own:

    private_dir("exercise-builds")   ->  ~/.cache/pfem-course/exercise-builds   (mode 0700)

in `$COURSE_CACHE_DIR`, else `$XDG_CACHE_HOME/pfem-course`, else `~/.cache/pfem-course`, else (no
usable home, as for some system users) `<temp folder>/pfem-course-<uid>`. Each folder is checked
before use: a real folder (not a link), owned by this user, that no one else can write — so a
library loaded from it can only have been written by this user. A folder that fails the check is
refused with a one-line error, never used.

This module imports nothing of the course, so that it runs before anything is installed.
"""

from __future__ import annotations

import os
import stat
import tempfile
from pathlib import Path

_NAME = "pfem-course"


class UnsafeCacheError(PermissionError):
    """A cache folder that another user owns or can write; the message says which and what to do."""


def _checked(path: Path) -> Path:
    """`path`, created with mode 0700 if missing, after checking that it is this user's own."""
    path.mkdir(mode=0o700, parents=True, exist_ok=True)
    info = os.lstat(path)
    if stat.S_ISLNK(info.st_mode) or not stat.S_ISDIR(info.st_mode):
        raise UnsafeCacheError(f"{path} is not a folder but a link or a file: the course will not "
                               "build into it (remove it, or set COURSE_CACHE_DIR)")
    if info.st_uid != os.geteuid():
        raise UnsafeCacheError(f"{path} belongs to user id {info.st_uid}, not to you "
                               f"({os.geteuid()}): the course will not load code from another "
                               "user's folder (remove it, or set COURSE_CACHE_DIR)")
    if info.st_mode & 0o077:
        os.chmod(path, 0o700)           # ours: close it to the others
    return path


def _home_cache() -> Path | None:
    """$XDG_CACHE_HOME or ~/.cache, where the user can write there; None otherwise."""
    xdg = os.environ.get("XDG_CACHE_HOME", "").strip()
    if xdg:
        base = Path(xdg)
    elif os.environ.get("HOME", "").strip():
        base = Path(os.environ["HOME"]) / ".cache"
    else:
        return None
    existing = next((p for p in (base, *base.parents) if p.exists()), None)
    return base if existing is not None and os.access(existing, os.W_OK | os.X_OK) else None


def root() -> Path:
    """This user's cache folder of the course, checked (see the module's text)."""
    explicit = os.environ.get("COURSE_CACHE_DIR", "").strip()
    if explicit:
        return _checked(Path(explicit))
    home = _home_cache()
    if home is not None:
        return _checked(home / _NAME)
    return _checked(Path(tempfile.gettempdir()) / f"{_NAME}-{os.geteuid()}")


def private_dir(name: str) -> Path:
    """The folder `name` inside this user's cache folder, created and checked."""
    if not name or "/" in name or name.startswith("."):
        raise ValueError(f"a cache folder name is one plain word, not {name!r}")
    return _checked(root() / name)
