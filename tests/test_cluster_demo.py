"""Lecture 07a shows the jobs it ran (course.cluster.demo) without the paths of the machine that
ran them: the checkout's cd line reads as for a checkout at $HOME/pfem, the run's folder as $TMP."""

import json
import re

from course.cluster import demo, jobscript
from course.cluster.jobscript import JobRequest


def test_a_shown_script_has_no_path_of_this_machine(tmp_path):
    request = JobRequest(program=["fem3d_mpi_c", str(tmp_path / "input.dat")], ranks_per_node=2)
    script = jobscript.render(request)
    assert str(demo.ROOT) in script                        # the script that runs cds there
    shown = demo.shown(script, tmp_path)
    assert str(demo.ROOT) not in shown and str(tmp_path) not in shown
    assert 'cd "$HOME"/pfem' in shown.splitlines()
    assert "$TMP/input.dat" in shown


def test_the_recorded_run_shows_no_machine_path():
    record = json.loads(demo.RECORD.read_text())
    scripts = [job["script"] for job in record["jobs"].values() if "script" in job]
    assert len(scripts) == 4
    for script in scripts:
        cds = [line for line in script.splitlines() if line.startswith("cd ")]
        assert cds == ['cd "$HOME"/pfem'], cds
    assert not re.search(r"(^|[\s'\"])/(work|home|root|Users)/", json.dumps(record))
