"""`make lab`: JupyterLab on the course, listening on 127.0.0.1 only and refusing requests without
its token. The real Makefile target runs (its set-up step finds everything in place)."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import time
import urllib.error
import urllib.request

import pytest

from conftest import ROOT

pytestmark = pytest.mark.timeout(300)

URL = re.compile(r"(http://[^/\s]+:\d+)/lab\?token=(\w+)")


def status(url: str) -> int:
    """The HTTP status of a GET; retried while the server is not yet accepting connections (it
    prints its URL a moment before it listens)."""
    for _ in range(60):
        try:
            with urllib.request.urlopen(url, timeout=10) as response:
                return response.status
        except urllib.error.HTTPError as err:
            return err.code
        except urllib.error.URLError:
            time.sleep(0.5)
    raise AssertionError(f"nothing answers at {url}")


@pytest.fixture()
def lab():
    """`make lab` in its own process group; yields (base URL, token); stops it afterwards."""
    env = {**os.environ, "BROWSER": "true"}                 # `true URL`: open no browser here
    proc = subprocess.Popen(["make", "-s", "lab"], cwd=ROOT, env=env, text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            start_new_session=True)
    log, found, deadline = [], None, time.monotonic() + 240
    try:
        while found is None and time.monotonic() < deadline and proc.poll() is None:
            line = proc.stdout.readline()
            log.append(line)
            found = URL.search(line)
        assert found, "JupyterLab printed no URL with a token:\n" + "".join(log[-40:])
        yield found[1], found[2]
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGTERM)
            try:
                proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)


def test_make_lab_is_local_and_needs_the_token(lab):
    base, token = lab
    assert base.startswith("http://127.0.0.1:"), base
    assert status(f"{base}/api/contents/notebooks") == 403          # no token: refused
    assert status(f"{base}/api/contents/notebooks?token={token}") == 200
    with urllib.request.urlopen(f"{base}/api/contents/notebooks?token={token}") as response:
        listing = response.read().decode()
    assert "01_fem1d_a_weak_form_and_assembly.ipynb" in listing   # the course is its root
