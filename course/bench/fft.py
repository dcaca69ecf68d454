"""`python -m course bench alltoall` (07_cluster): what MPI_Alltoall and the pencil FFT cost on
this machine, for a few rank counts.

For every rank count the benchmark starts `mpiexec -n P python -m course.parallel.fft_rank bench`
(rank 0 reports JSON) and, where it is built, `mpiexec -n P pencil_fft_c N` for every n, and
gathers

- MPI_Alltoall per message size: seconds per call and the throughput np m / t of seed 003 (np
  ranks, m bytes per message, latency included), against the seed's plateau of 0.05 GB/s;
- the pencil FFT of n^3 complex values on the squarest p1 x p2 grid, split into FFT, transposes
  (pack + unpack) and all-to-alls, in Python (mpi4py + numpy.fft) and in C (FFTW).

Rank counts above the usable cores are oversubscribed: they run, and are flagged (their timings
say little). Everything here is one machine: the "network" is shared memory. Benchmarks, never
tests.
"""

from __future__ import annotations

import json
import re
import sys

from tqdm.auto import tqdm

from .. import native, toolchain
from .distributed import mpiexec_flat
from ..parallel.fft import SEED003

#: bytes per all-to-all message: 16 B .. 1 MiB, x4 apart
MESSAGE_BYTES = tuple(16 * 4**k for k in range(9))
_C_TIMES = re.compile(r"best of \d+: total (\S+) s, fft (\S+) s, transpose (\S+) s, "
                      r"alltoall (\S+) s")
_C_ERROR = re.compile(r"max error (\S+)")


def run_python(ranks: int, message_bytes, sizes, repeat: int, timeout: float = 600) -> dict:
    """course.parallel.fft_rank's measurements on `ranks` processes."""
    done = mpiexec_flat("alltoall", ranks, [
        sys.executable, "-m", "course.parallel.fft_rank", "bench",
        "--message-bytes", *map(str, message_bytes), "--sizes", *map(str, sizes),
        "--repeat", str(repeat)], timeout)
    return json.loads(done.stdout.strip().splitlines()[-1])


def c_program():
    """The C program's path, or None where it is not built (no FFTW: CMake skipped it)."""
    path = native.build_dir("release") / "bin" / "pencil_fft_c"
    return path if path.exists() else None


def run_c(ranks: int, n: int, repeat: int, timeout: float = 300) -> dict:
    """pencil_fft_c N on `ranks` processes: its phases (the best of `repeat`) and its error."""
    done = mpiexec_flat("alltoall", ranks, [str(c_program()), str(n), str(repeat)], timeout)
    times, error = _C_TIMES.search(done.stdout), _C_ERROR.search(done.stdout)
    if times is None or error is None:
        raise RuntimeError(f"bench alltoall: unexpected output of pencil_fft_c:\n{done.stdout}")
    total, fft_s, transpose, alltoall = (float(v) for v in times.groups())
    return {"n": n, "total_s": total, "fft_s": fft_s, "transpose_s": transpose,
            "alltoall_s": alltoall, "max_error": float(error.group(1))}


def bench_alltoall(sizes=(16, 32), ranks=(1, 2, 4), repeat: int = 5,
                   message_bytes=MESSAGE_BYTES, progress: bool = True) -> dict:
    """For every rank count: MPI_Alltoall over `message_bytes` (bytes per message), and the
    pencil FFT of every n in `sizes` (the n^3 field; an n the grid does not divide is skipped),
    in Python and, where built, in C."""
    if any(p < 1 for p in ranks):
        raise ValueError(f"--ranks must be positive, got {list(ranks)}")
    if any(n < 1 for n in sizes) or any(b < 8 for b in message_bytes):
        raise ValueError(f"sizes must be positive and messages at least 8 bytes, got sizes "
                         f"{list(sizes)}, message bytes {list(message_bytes)}")
    cores = toolchain.usable_cores()
    runs = []
    for p in tqdm(list(ranks), desc="bench alltoall", unit="rank count", disable=not progress):
        run = run_python(p, message_bytes, sizes, repeat)
        run["oversubscribed"] = p > cores
        run["fft_c"] = ([run_c(p, f["n"], repeat) for f in run["fft"]] if c_program() else [])
        runs.append(run)
    from ..timing import topology

    return {"suite": "alltoall", "sizes": list(sizes), "message_bytes": list(message_bytes),
            "repeat": repeat, "cores": cores, "topology": topology(),
            "mpi": toolchain.mpi4py_library()[1], "c_built": c_program() is not None,
            "seed_plateau_gbs": SEED003["tp_gbs"], "seed_com2_gbs": SEED003["tp_com2_gbs"],
            "runs": runs,
            "warning": (f"rank counts above {cores} are oversubscribed on this machine: their "
                        f"timings are not comparable" if max(ranks) > cores else None)}


def summary_alltoall(results: dict) -> str:
    """Throughput at the smallest and largest message, and the FFT split, per rank count."""
    sizes = results["message_bytes"]
    lines = [f"{results['cores']} cores; MPI_Alltoall throughput np m / t (GB/s) at "
             f"{sizes[0]} B and {sizes[-1]} B per message; pencil FFT in ms "
             f"(fft / transpose / alltoall)",
             f"{'P':>3} {'grid':>6} {'GB/s small':>10} {'GB/s large':>10} {'n':>4} "
             f"{'Python ms':>26} {'C ms':>26}"]
    for run in results["runs"]:
        gbs = run["alltoall"]["throughput_gbs"]
        flag = "  (oversubscribed)" if run["oversubscribed"] else ""
        c_by_n = {f["n"]: f for f in run["fft_c"]}
        head = (f"{run['ranks']:>3} {run['p1']:>2} x {run['p2']:<2} {gbs[0]:>10.3f} "
                f"{gbs[-1]:>10.3f}")
        if not run["fft"]:
            lines.append(head + flag)
        for f in run["fft"]:
            py = "/".join(f"{f[k] * 1e3:.3f}" for k in ("fft_s", "transpose_s", "alltoall_s"))
            c = c_by_n.get(f["n"])
            c_text = ("/".join(f"{c[k] * 1e3:.3f}" for k in ("fft_s", "transpose_s",
                                                              "alltoall_s")) if c else "-")
            lines.append(f"{head} {f['n']:>4} {py:>26} {c_text:>26}{flag}")
            head = " " * len(head)
    lines.append(f"seed 003: about {results['seed_plateau_gbs']} GB/s from 16 Vector Engines on "
                 f"(and {results['seed_com2_gbs']} GB/s stated for com2: one of them is mistyped)")
    if results["warning"]:
        lines.append("warning: " + results["warning"])
    return "\n".join(lines)


def plot_alltoall(results: dict, path=None):
    """Left: Alltoall throughput against message size, one line per rank count, with the seed's
    0.05 GB/s plateau. Right: the pencil FFT of the largest n, split into its phases, per rank
    count, Python and C."""
    import matplotlib.pyplot as plt
    import numpy as np

    fig, (a, b) = plt.subplots(1, 2, figsize=(10.5, 4.6))
    for run in results["runs"]:
        label = f"P = {run['ranks']}" + (" (oversubscribed)" if run["oversubscribed"] else "")
        a.loglog(run["alltoall"]["bytes"], run["alltoall"]["throughput_gbs"], "o-", label=label)
    a.axhline(results["seed_plateau_gbs"], color="k", ls=":",
              label=f"seed 003, 16+ VEs: {results['seed_plateau_gbs']} GB/s")
    a.set_xlabel("bytes per message m"), a.set_ylabel("throughput np m / t (GB/s)")
    a.set_title("MPI_Alltoall on this machine")
    a.legend(fontsize=10)
    bars = []                                  # (label, fft, transpose, alltoall) in ms
    for run in results["runs"]:
        for lang, ffts in (("Py", run["fft"]), ("C", run["fft_c"])):
            if ffts:
                f = max(ffts, key=lambda f: f["n"])
                bars.append((f"{run['ranks']}{'*' if run['oversubscribed'] else ''} {lang}\n"
                             f"n={f['n']}", f["fft_s"] * 1e3, f["transpose_s"] * 1e3,
                             f["alltoall_s"] * 1e3))
    if bars:
        x = np.arange(len(bars))
        bottom = np.zeros(len(bars))
        for k, phase in enumerate(("FFT", "transposes", "all-to-alls")):
            height = np.array([bar[k + 1] for bar in bars])
            b.bar(x, height, bottom=bottom, label=phase)
            bottom += height
        b.set_xticks(x, [bar[0] for bar in bars], fontsize=10)
        b.legend(fontsize=10)
    b.set_xlabel("ranks (* oversubscribed), language"), b.set_ylabel("ms per 3-D FFT")
    b.set_title("pencil FFT, split")
    fig.tight_layout()
    if path:
        fig.savefig(path, dpi=150)
        plt.close(fig)
    return fig
