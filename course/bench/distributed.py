"""`python -m course bench halo` (05_halo) and `bench pipecg` (06_pipecg): what communication
costs on this machine, for 1 .. P ranks.

For every rank count the benchmark starts `mpiexec -n P python -m course.bench.rank`
(course.bench.rank measures, rank 0 reports) and gathers:

- ping-pong one-way times from 8 B to 8 MiB, and Hockney's t = alpha + beta x fitted to them;
- MPI_Allreduce of 1 double, of 3 doubles, and three 1-double calls (seed 002's CGPOP question);
- the halo exchange four ways, against the ping-pong times of its own messages;
- the exchange of message sizes: the P x P table (OpenFOAM's PstreamBuffers, seed 000) against
  sizes known from the neighbour lists;
- the distributed PCG per iteration, split into halo, Allreduce and the rest, against the memory
  bandwidth bound (timing.least_seconds of an iteration's reads and writes on the busiest rank,
  against the STREAM triad and read-only sum of P processes at once, measured in the same run);
- explicit steps with halos 1, 2, 3 wide (seed 001).

Rank counts above the cores are oversubscribed: their timings say little; they are run (the
metadata counts do not depend on timing) and flagged. Benchmarks, never tests.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

from tqdm.auto import tqdm

from .. import timing, toolchain

# seed 000 (OpenFOAM on K, weak scaling): average Send/Recv message size per rank count, bytes
SEED_OPENFOAM_BYTES = {1536: 3.6e6, 3072: 1.4e7, 6144: 5.7e7}


def mpiexec_flat(suite: str, ranks: int, args: list[str], timeout: float):
    """`mpiexec -n ranks ARGS` with one thread per rank, for benchmark `suite`; its completed
    process, or RuntimeError (a timeout, or a failure with the end of its stderr)."""
    cmd = ["mpiexec", "-n", str(ranks), *args]
    env = {**os.environ, **toolchain.mpi_env(), "OMP_NUM_THREADS": "1"}
    try:
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=env)
    except subprocess.TimeoutExpired:
        raise RuntimeError(f"bench {suite}: {ranks} ranks did not finish in {timeout:.0f} s") \
            from None
    if done.returncode != 0:
        tail = "\n".join(done.stderr.strip().splitlines()[-10:])
        raise RuntimeError(f"bench {suite}: {ranks} ranks failed (exit {done.returncode})\n"
                           f"{tail}")
    return done


def run_ranks(ranks: int, n: int, cg_n: int, partition: str, repeat: int, iterations: int,
              steps: int, timeout: float = 900, suite: str = "halo") -> dict:
    """The measurements of course.bench.rank on `ranks` MPI processes."""
    done = mpiexec_flat(suite, ranks, [
        sys.executable, "-m", "course.bench.rank", "--suite", suite, "--n", str(n),
        "--cg-n", str(cg_n), "--partition", partition, "--repeat", str(repeat),
        "--iterations", str(iterations), "--steps", str(steps)], timeout)
    return json.loads(done.stdout.strip().splitlines()[-1])


def add_ratios(run: dict) -> None:
    """The ratios the lecture reads, measured within the run of one rank count."""
    cg = run["cg"]
    # each rank's share of what the P processes streamed together
    per_rank = {key: run["stream"][key] / run["ranks"] for key in ("triad_gbs", "read_gbs")}
    bound = timing.least_seconds(cg["read_bytes_per_iteration_max_rank"],
                                 cg["written_bytes_per_iteration_max_rank"], per_rank)
    run["ratios"] = {
        "cg_bandwidth_bound_s": bound,
        "cg_fraction_of_bound": bound / cg["seconds_per_iteration"],
        "halo_vs_pingpong": (run["halo"]["p2p"]["seconds"] / run["halo_pingpong_model_s"]
                             if run.get("halo_pingpong_model_s") else None),
        "c_halo_vs_pingpong": (run["halo"]["c"]["seconds"] / run["halo_pingpong_model_s"]
                               if run.get("halo_pingpong_model_s") and "c" in run["halo"]
                               else None),
        "allgather_vs_p2p": run["halo"]["allgather"]["seconds"] / run["halo"]["p2p"]["seconds"],
        "three_single_vs_one_triple": (run["allreduce"]["three_single_calls_s"]
                                       / run["allreduce"]["three_doubles_s"]),
    }
    if run["model"]:
        latency = run["model"]["latency_s"]
        for deep in run["deep_halo"]:     # seed 001: N (1 - 1/h) latencies saved over N steps
            deep["model_saving_s"] = deep["steps"] * (1 - 1 / deep["depth"]) * latency


# the CG runs on at least 72^3 elements: an iteration moves ~190 MB on one rank, beyond 4 x a
# 32 MiB last-level cache (the summary says when it is not beyond this machine's)
CG_MIN_SIZE = 72


def bench_halo(sizes=(24,), ranks=None, repeat: int = 5, partition: str = "metis",
               iterations: int = 30, steps: int = 24, cg_size: int | None = None,
               progress: bool = True) -> dict:
    """The measurements for every rank count (default 1 .. max(cores, 4)): the exchanges and deep
    halos on the n^3 mesh, the CG on cg_size^3 (default max(n, CG_MIN_SIZE): its matrix must not
    fit in the caches, or the memory-bandwidth bound does not apply)."""
    (n,) = sizes if len(sizes) == 1 else (None,)
    if n is None:
        raise ValueError("bench halo takes one size (the n of the n^3 mesh)")
    cores = toolchain.usable_cores()
    ranks = list(ranks or range(1, max(cores, 4) + 1))
    if any(p < 1 for p in ranks):
        raise ValueError(f"--ranks must be positive, got {ranks}")
    cg_size = max(n, CG_MIN_SIZE) if cg_size is None else cg_size
    runs = []
    for p in tqdm(ranks, desc="bench halo", unit="rank count", disable=not progress):
        run = run_ranks(p, n, cg_size, partition, repeat, iterations, steps)
        run["oversubscribed"] = p > cores
        add_ratios(run)
        runs.append(run)
    return {"suite": "halo", "n": n, "cg_n": cg_size, "partition": partition, "cores": cores,
            "topology": timing.topology(), "llc_bytes": timing.last_level_cache_bytes(),
            "mpi": toolchain.mpi4py_library()[1],
            "seed_openfoam_bytes": SEED_OPENFOAM_BYTES, "runs": runs,
            "warning": (f"rank counts above {cores} are oversubscribed on this machine: their "
                        f"timings are not comparable" if max(ranks) > cores else None)}


def summary_halo(results: dict) -> str:
    lines = [f"n = {results['n']} (CG: {results['cg_n']}), {results['partition']}, "
             f"{results['cores']} cores",
             f"{'P':>3} {'latency us':>10} {'GB/s':>6} {'halo us':>8} {'vs pp':>6} {'C vs pp':>7} "
             f"{'allgather':>9} {'CG ms/it':>9} {'halo %':>7} {'allred %':>8} {'of bound':>8} "
             f"{'table B':>8}"]
    for run in results["runs"]:
        model, r, cg = run["model"], run["ratios"], run["cg"]
        per = cg["seconds_per_iteration"]
        lines.append(
            f"{run['ranks']:>3} {model['latency_s'] * 1e6 if model else float('nan'):>10.1f} "
            f"{(model['bandwidth_gbs'] or 0) if model else float('nan'):>6.2f} "
            f"{run['halo']['p2p']['seconds'] * 1e6:>8.1f} "
            f"{r['halo_vs_pingpong'] or float('nan'):>6.2f} "
            f"{r['c_halo_vs_pingpong'] or float('nan'):>7.2f} {r['allgather_vs_p2p']:>8.1f}x "
            f"{per * 1e3:>9.3f} {100 * cg['halo_s'] / per:>6.1f}% "
            f"{100 * cg['allreduce_s'] / per:>7.1f}% "
            f"{timing.format_fraction(r['cg_fraction_of_bound']):>8} "
            f"{run['sizes']['table']['metadata_bytes_per_rank']:>8}"
            + ("  (oversubscribed)" if run["oversubscribed"] else ""))
    if any(timing.above_bound(run["ratios"]["cg_fraction_of_bound"]) for run in results["runs"]):
        lines.append(timing.ABOVE_BOUND_NOTE)
    # the CG's working set: one rank's traffic is the whole matrix's share of that rank; summed
    # over the ranks, the whole problem must exceed the cache that all of them share
    llc = results.get("llc_bytes")
    note = None
    if results["runs"] and llc:
        first = results["runs"][0]
        note = timing.cache_note(first["cg"]["bytes_per_iteration_max_rank"] * first["ranks"], llc)
    if note:
        lines.append(f"CG {results['cg_n']}^3 {note}")
    if results["warning"]:
        lines.append("warning: " + results["warning"])
    return "\n".join(lines)


def plot_halo(results: dict, path=None):
    """Six panels: ping-pong, halo exchange per style, the CG split, message-size metadata against
    seed 000, deep halos, Allreduce latency."""
    import matplotlib.pyplot as plt
    import numpy as np

    runs = results["runs"]
    ranks = [r["ranks"] for r in runs]
    over = [r["oversubscribed"] for r in runs]
    fig, ax = plt.subplots(2, 3, figsize=(15, 8.5))
    a = ax[0, 0]
    for r in runs:
        if r["model"]:
            b = np.array(r["pingpong"]["bytes"])
            a.loglog(b, r["pingpong"]["seconds"], "o-", label=f"P = {r['ranks']}")
            m = r["model"]
            a.loglog(b, m["latency_s"] + m["s_per_byte"] * b, "k:", lw=1)
    a.set_xlabel("message bytes"), a.set_ylabel("one-way seconds")
    a.set_title("ping-pong (dotted: alpha + beta x)")
    a.legend(fontsize=9)
    a = ax[0, 1]
    for style in ("p2p", "persistent", "neighbor", "allgather"):
        a.semilogy(ranks, [r["halo"][style]["seconds"] for r in runs], "o-", label=style)
    a.set_xlabel("ranks"), a.set_ylabel("seconds per exchange"), a.set_title("halo exchange")
    a.legend(fontsize=9)
    a = ax[0, 2]
    halo = np.array([r["cg"]["halo_s"] for r in runs]) * 1e3
    allr = np.array([r["cg"]["allreduce_s"] for r in runs]) * 1e3
    comp = np.array([max(r["cg"]["compute_s"], 0.0) for r in runs]) * 1e3
    a.bar(ranks, comp, label="local SpMV + vectors")
    a.bar(ranks, halo, bottom=comp, label="halo")
    a.bar(ranks, allr, bottom=comp + halo, label="Allreduce")
    a.plot(ranks, [r["ratios"]["cg_bandwidth_bound_s"] * 1e3 for r in runs], "k_", ms=30, mew=2,
           label="memory-bandwidth bound")
    a.set_xlabel("ranks"), a.set_ylabel("ms per CG iteration"), a.set_title("distributed PCG")
    a.legend(fontsize=9)
    a = ax[1, 0]
    p_all = np.logspace(0, 4, 50)
    a.loglog(p_all, 8 * p_all**2, "k:", label="P x P table of 8-byte sizes: 8 P^2")
    a.loglog(ranks, [max(r["sizes"]["table"]["metadata_bytes_per_rank"], 1) for r in runs],
             "o", label="table, measured here")
    seed = results["seed_openfoam_bytes"]
    a.loglog([int(p) for p in seed], list(seed.values()), "s", color="C3",
             label="OpenFOAM on K, message bytes (seed 000)")
    a.set_xlabel("ranks"), a.set_ylabel("bytes per rank")
    a.set_title("message sizes: all-to-all grows as P^2\n(neighbour lists: 0 bytes)")
    a.legend(fontsize=9)
    a = ax[1, 1]
    for r in runs:
        if r["ranks"] > 1:
            depths = [d["depth"] for d in r["deep_halo"]]
            a.plot(depths, [d["seconds"] * 1e3 for d in r["deep_halo"]], "o-",
                   label=f"P = {r['ranks']}" + (" (oversubscribed)" if r["oversubscribed"]
                                                else ""))
    a.set_xticks([1, 2, 3])
    a.set_xlabel("halo width h (exchange every h steps)"), a.set_ylabel("ms for the steps")
    a.set_title("deep halos: explicit heat steps")
    a.legend(fontsize=9)
    a = ax[1, 2]
    width = 0.25
    x = np.arange(len(ranks))
    for k, (key, label) in enumerate((("one_double_s", "1 double"),
                                      ("three_doubles_s", "3 doubles"),
                                      ("three_single_calls_s", "3 calls of 1"))):
        a.bar(x + (k - 1) * width, [r["allreduce"][key] * 1e6 for r in runs], width,
              label=label)
    a.set_xticks(x, [f"{p}{'*' if o else ''}" for p, o in zip(ranks, over)])
    a.set_xlabel("ranks (* oversubscribed)"), a.set_ylabel("microseconds"),
    a.set_title("MPI_Allreduce")
    a.legend(fontsize=9)
    fig.suptitle(f"bench halo: n = {results['n']} ({results['partition']}), "
                 f"{results['cores']} cores", fontsize=13)
    fig.tight_layout()
    if path:
        fig.savefig(path, dpi=150)
        plt.close(fig)
    return fig


# --- bench pipecg (06_pipecg) ---------------------------------------------------------------------

def bench_pipecg(sizes=(32,), ranks=None, repeat: int = 5, partition: str = "metis",
                 iterations: int = 30, progress: bool = True) -> dict:
    """For every rank count (default 1 .. max(cores, 4)): the four CG variants on the n^3 mesh,
    blocking and with MPI_Iallreduce (pipelined also with MPI_Test calls in its SpMV), seconds per
    iteration split into SpMV, halo, reductions (blocked) and the rest; Allreduce of 1 double,
    3 doubles and three calls of 1 (seed 002)."""
    (n,) = sizes if len(sizes) == 1 else (None,)
    if n is None:
        raise ValueError("bench pipecg takes one size (the n of the n^3 mesh)")
    cores = toolchain.usable_cores()
    ranks = list(ranks or range(1, max(cores, 4) + 1))
    runs = []
    for p in tqdm(ranks, desc="bench pipecg", unit="rank count", disable=not progress):
        run = run_ranks(p, n, n, partition, repeat, iterations, 0, suite="pipecg")
        run["oversubscribed"] = p > cores
        allreduce = run["allreduce"]
        run["three_single_vs_one_triple"] = (allreduce["three_single_calls_s"]
                                             / allreduce["three_doubles_s"])
        runs.append(run)
    return {"suite": "pipecg", "n": n, "partition": partition, "iterations": iterations,
            "cores": cores, "topology": timing.topology(),
            "mpi": toolchain.mpi4py_library()[1],
            "runs": runs,
            "warning": (f"rank counts above {cores} are oversubscribed on this machine: their "
                        f"timings are not comparable" if max(ranks) > cores else None)}


def mode(variant: dict) -> str:
    """blocking, iallreduce, or iallreduce with MPI_Test calls inside the SpMV (+test)."""
    if not variant["iallreduce"]:
        return "blocking"
    return "iallreduce" + ("+test" if variant.get("progress_chunks", 1) > 1 else "")


def summary_pipecg(results: dict) -> str:
    lines = [f"n = {results['n']} ({results['partition']}), {results['cores']} cores; "
             f"microseconds per iteration",
             f"{'P':>3} {'algorithm':>18} {'mode':>10} {'total':>9} {'SpMV':>8} {'halo':>8} "
             f"{'reduce':>8} {'rest':>8} {'overlap':>8} {'red/it':>6}"]
    for run in results["runs"]:
        for v in run["variants"]:
            us = {k: v[k] * 1e6 for k in ("seconds_per_iteration", "spmv_s", "halo_s",
                                           "allreduce_s", "rest_s", "overlapped_s")}
            lines.append(
                f"{run['ranks']:>3} {v['algorithm']:>18} "
                f"{mode(v):>10} "
                f"{us['seconds_per_iteration']:>9.1f} {us['spmv_s']:>8.1f} {us['halo_s']:>8.1f} "
                f"{us['allreduce_s']:>8.1f} {us['rest_s']:>8.1f} {us['overlapped_s']:>8.1f} "
                f"{v['reductions_per_iteration']:>6}"
                + ("  (oversubscribed)" if run["oversubscribed"] else ""))
        a = run["allreduce"]
        lines.append(f"{run['ranks']:>3} Allreduce: 1 double {a['one_double_s'] * 1e6:.1f} us, "
                     f"3 doubles {a['three_doubles_s'] * 1e6:.1f} us, three calls of 1 "
                     f"{a['three_single_calls_s'] * 1e6:.1f} us "
                     f"({run['three_single_vs_one_triple']:.2f}x the one call)")
    if results["warning"]:
        lines.append("warning: " + results["warning"])
    return "\n".join(lines)


def plot_pipecg(results: dict, path=None):
    """One panel per rank count: stacked seconds per iteration of every variant (-i:
    MPI_Iallreduce, +t: with MPI_Test calls in the SpMV); and the Allreduce latencies. Two panels
    to a row, so that the figure keeps readable labels at the width of a book's column."""
    import matplotlib.pyplot as plt
    import numpy as np

    runs = results["runs"]
    panels = len(runs) + 1
    cols = min(panels, 2)
    rows = -(-panels // cols)
    fig, axes = plt.subplots(rows, cols, figsize=(5.0 * cols, 4.2 * rows + 0.6), squeeze=False)
    ax = axes.ravel()
    for unused in ax[panels:]:
        unused.set_visible(False)
    parts = (("spmv_s", "local SpMV"), ("halo_s", "halo"), ("allreduce_s", "reductions"),
             ("rest_s", "vectors, M^-1, dots"))
    for a, run in zip(ax, runs):
        labels = [f"{v['algorithm'][:5]}{'-i' if v['iallreduce'] else ''}"
                  f"{'+t' if v.get('progress_chunks', 1) > 1 else ''}" for v in run["variants"]]
        bottom = np.zeros(len(labels))
        for key, label in parts:
            height = np.array([max(v[key], 0.0) * 1e6 for v in run["variants"]])
            a.bar(labels, height, bottom=bottom, label=label)
            bottom += height
        a.set_title(f"P = {run['ranks']}" + (" (oversubscribed)" if run["oversubscribed"]
                                             else ""), fontsize=12)
        a.set_ylabel("microseconds per iteration", fontsize=11)
        a.tick_params(axis="x", rotation=45, labelsize=10)
    a = ax[len(runs)]
    ranks = [r["ranks"] for r in runs]
    for key, label in (("one_double_s", "1 double"), ("three_doubles_s", "3 doubles"),
                       ("three_single_calls_s", "3 calls of 1")):
        a.plot(ranks, [r["allreduce"][key] * 1e6 for r in runs], "o-", label=label)
    a.set_xticks(ranks)
    a.set_xlabel("ranks", fontsize=11), a.set_ylabel("microseconds", fontsize=11)
    a.set_title("MPI_Allreduce", fontsize=12)
    a.legend(fontsize=10)
    handles, names = ax[0].get_legend_handles_labels()     # the parts, below the panels
    fig.legend(handles, names, loc="lower center", ncol=len(parts), fontsize=11)
    fig.suptitle(f"bench pipecg: n = {results['n']} ({results['partition']}), "
                 f"{results['cores']} cores", fontsize=13)
    fig.tight_layout(rect=(0, 0.5 / (4.2 * rows + 0.6), 1, 1))
    if path:
        fig.savefig(path, dpi=150)
        plt.close(fig)
    return fig
