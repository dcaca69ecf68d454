"""Lecture 07_cluster, case study: the pencil-decomposed 3-D FFT of seed 003 (a DNS of
incompressible turbulence on SX-Aurora TSUBASA), with mpi4py and NumPy's FFT.

The n x n x n complex field u is stored, on every rank and in the global array alike, with the
index order [z, y, x] (C order: x contiguous, the memory layout of Fortran's u(x, y, z)). The
P = p1 x p2 ranks form a 2-D process grid: rank = r1 + p1 r2 (so the p1 ranks of one grid row
are consecutive, as the seed's com1 was). Every rank holds one *pencil*: all n points along one
axis, a block of n/p1 along a second and n/p2 along the third.

    x-pencil  a[z, y, x]   z in block r2 (n/p2), y in block r1 (n/p1), all x   (the input)
    y-pencil  b[x, z, y]   x in block r1 (n/p1), z in block r2 (n/p2), all y
    z-pencil  c[y, x, z]   y in block r2 (n/p2), x in block r1 (n/p1), all z   (the spectrum)

Each layout is the previous one rotated, (A, B, C) -> (C, A, B): the old contiguous axis C is cut
into blocks and sent away, the axis B arrives whole and becomes contiguous. So both transposes
are the same two functions, `pack` and `unpack`, on different communicators:

    (1) FFT along x  (2) pack  (3) Alltoall on comm1 (the p1 ranks of a row: same r2)
    (4) unpack  (5) FFT along y  (6) pack  (7) Alltoall on comm2 (the p2 ranks of a column:
    same r1)  (8) unpack  (9) FFT along z.

Elements per message: m1 = n^3/(p1^2 p2) on comm1, m2 = n^3/(p1 p2^2) on comm2 (seed 003,
eqs. 6-7). The C and Fortran twins are src_c/07_cluster/pencil_fft.c and
src_fortran/07_cluster/pencil_fft.f90 (the same steps, with FFTW).
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass

import numpy as np

# --- seed 003's numbers (line numbers of the seed's text, seeds/003_3fbdf3ebc442946d.txt) ------
SEED003 = {
    "n": 18_432,                    # l.703: the largest DNS so far, 18,432^3 = (2^11 x 3^2)^3
    "arrays": 19,                   # l.708: 19 arrays of the largest size
    "bytes_per_real": 8,            # l.662: double precision
    "memory_gib_times_np": 886_464,  # l.712: (2^11 x 3^2)^3 / np x 8 x 19 = 886,464 / np "GB"
    "memory_per_core_gb": 6,        # l.719: SX-Aurora B401-8, 6 GB per core (48 GB / 8 cores)
    "np": 131_072,                  # l.723: the smallest core count the seed picks
    "p1": 512, "p2": 256,           # l.723
    "cores_per_node": 64,           # l.723-724: 2,048 nodes x 64 cores
    "nodes": 2_048,
    "tp_gbs": 0.05,                 # l.614, 727: all-to-all plateau from 16 VEs on, GB/s
    "tp_com2_gbs": 0.45,            # l.638: com2 at np = 256, "the same as np = 128-512"
    "t_per_fft_s": 7.64,            # l.734-736: t1 = t2 = 7.64 s, "the communication time of
                                    # one FFT"
    "ffts_per_step": 72,            # l.739-741: 18 FFTs per nonlinear term x 4 RK-Gill stages
    "seconds_per_step": 550,        # l.741
}
#: the seed's runs as (n, np, p1, p2, where): p1 x p2 is printed only for the split
#: communicators (np = 256, l.615) and the prediction (l.723); for the others it is None and a
#: table takes the squarest grid (process_grid), which is this course's choice, not the seed's
SEED003_CASES = [
    (512, 64, None, None, "Table 2: the baseline DNS (l.277)"),
    (2048, 256, None, None, "Fig. 2: 2048^3 on 64-256 ranks (l.301)"),
    (4096, 512, None, None, "Figs. 6-7: the libraries at 4096^3 (l.490)"),
    (18_432, 131_072, 512, 256, "the prediction for 18,432^3 (l.723)"),
]


def message_elements(n: int, p1: int, p2: int) -> tuple[float, float]:
    """(m1, m2): elements per all-to-all message on comm1 (p1 ranks) and comm2 (p2 ranks),
    n^3/(p1^2 p2) and n^3/(p1 p2^2) (seed 003, eqs. 6-7)."""
    n3 = float(n) ** 3
    return n3 / (p1 * p1 * p2), n3 / (p1 * p2 * p2)


def alltoall_seconds(n: int, p1: int, p2: int, tp_bytes_per_s: float,
                     bytes_per_element: int = 8) -> float:
    """The seed's model of one all-to-all (eqs. 10-13): p1 m1 elements leave every rank of comm1
    at the throughput tp, t1 = p1 m1 x 8 / tp = 8 n^3 / (tp p1 p2), and t2 = t1."""
    m1, _ = message_elements(n, p1, p2)
    return p1 * m1 * bytes_per_element / tp_bytes_per_s


def memory_per_core_gib(n: int, n_procs: int, arrays: int = 19, bytes_per_real: int = 8) -> float:
    """The seed's memory estimate per core (eq. 14): n^3 / np x 8 bytes x 19 arrays, in units
    of 2^30 bytes (the seed's 886,464 "GB" at np = 1 is 2^30-byte units)."""
    return float(n) ** 3 / n_procs * bytes_per_real * arrays / 2**30


def fewest_cores(n: int, gib_per_core: float, arrays: int = 19, bytes_per_real: int = 8) -> int:
    """The fewest cores whose memory holds the seed's arrays."""
    return math.ceil(memory_per_core_gib(n, 1, arrays, bytes_per_real) / gib_per_core)


def seed_prediction() -> dict:
    """The seed's prediction for 18,432^3 recomputed: memory per core at its np (the arithmetic
    slip: above the 6 GB a core has), the cores that would fit, t1 = t2 per all-to-all, and the
    time per step as the seed counts it (one t per FFT) and with both all-to-alls of an FFT."""
    s = SEED003
    t1 = alltoall_seconds(s["n"], s["p1"], s["p2"], s["tp_gbs"] * 1e9)
    need = fewest_cores(s["n"], s["memory_per_core_gb"])
    return {"memory_per_core_gib": memory_per_core_gib(s["n"], s["np"]),
            "memory_total_gib": memory_per_core_gib(s["n"], 1),
            "fits": memory_per_core_gib(s["n"], s["np"]) <= s["memory_per_core_gb"],
            "fewest_cores": need, "next_power_of_two": 1 << (need - 1).bit_length(),
            "t1_s": t1, "t2_s": alltoall_seconds(s["n"], s["p2"], s["p1"],
                                                 s["tp_gbs"] * 1e9),
            "step_s_as_seed": s["ffts_per_step"] * t1,
            "step_s_two_alltoalls": s["ffts_per_step"] * 2 * t1}


# --- the process grid --------------------------------------------------------------------------

def process_grid(size: int) -> tuple[int, int]:
    """(p1, p2) with p1 p2 = size, p1 >= p2, as square as possible (16 -> 4 x 4, 8 -> 4 x 2,
    6 -> 3 x 2, a prime P -> P x 1)."""
    if size < 1:
        raise ValueError(f"the number of ranks must be positive, got {size}")
    p2 = max(d for d in range(1, math.isqrt(size) + 1) if size % d == 0)
    return size // p2, p2


def check_sizes(n: int, p1: int, p2: int, size: int) -> None:
    """ValueError (one line, the numbers in it) unless p1 p2 = size and p1, p2 divide n."""
    if n < 1 or p1 < 1 or p2 < 1:
        raise ValueError(f"n, p1 and p2 must be positive, got n = {n}, p1 = {p1}, p2 = {p2}")
    if p1 * p2 != size:
        raise ValueError(f"p1 x p2 = {p1} x {p2} = {p1 * p2}, but there are {size} ranks")
    for name, p in (("p1", p1), ("p2", p2)):
        if n % p:
            raise ValueError(f"n = {n} is not divisible by {name} = {p} (p1 x p2 = {p1} x {p2}): "
                             f"every pencil needs n/{name} points")


@dataclass
class Pencils:
    """One rank's place in the p1 x p2 grid and its two communicators."""
    n: int
    p1: int
    p2: int
    r1: int               # position in the grid row (comm1), 0 .. p1-1
    r2: int               # position in the grid column (comm2), 0 .. p2-1
    comm1: object         # the p1 ranks with this r2: the first all-to-all (x <-> y)
    comm2: object         # the p2 ranks with this r1: the second all-to-all (y <-> z)

    @property
    def local_count(self) -> int:
        return self.n**3 // (self.p1 * self.p2)

    def free(self) -> None:
        self.comm1.Free()
        self.comm2.Free()


def make_pencils(comm, n: int, p1: int | None = None, p2: int | None = None) -> Pencils:
    """The grid of comm (p1 x p2 given, or the squarest) split into rows and columns. Every rank
    checks the same numbers, so a bad n raises the same ValueError on every rank, before any
    communication: no rank is left waiting."""
    size = comm.Get_size()
    if p1 is None and p2 is None:
        p1, p2 = process_grid(size)
    elif p1 is None or p2 is None:
        raise ValueError("give both p1 and p2, or neither")
    check_sizes(n, p1, p2, size)
    rank = comm.Get_rank()
    r1, r2 = rank % p1, rank // p1
    # color = the communicator's number, key = the rank within it: comm1 (fixed r2) holds
    # consecutive world ranks, comm2 (fixed r1) the ranks equal modulo p1 (the seed's com1/com2)
    comm1 = comm.Split(color=r2, key=r1)
    comm2 = comm.Split(color=r1, key=r2)
    return Pencils(n, p1, p2, r1, r2, comm1, comm2)


# --- which part of the global arrays a rank holds ----------------------------------------------

def x_pencil_of(u: np.ndarray, g: Pencils) -> np.ndarray:
    """This rank's x-pencil of a global u[z, y, x], contiguous: a[z, y, x]."""
    by, bz = g.n // g.p1, g.n // g.p2
    return np.ascontiguousarray(u[g.r2 * bz:(g.r2 + 1) * bz, g.r1 * by:(g.r1 + 1) * by, :])


def z_pencil_of(spectrum: np.ndarray, g: Pencils) -> np.ndarray:
    """This rank's block c[ky, kx, kz] of a global spectrum[kz, ky, kx] (what `forward`
    returns on it)."""
    bx, by = g.n // g.p1, g.n // g.p2
    block = spectrum[:, g.r2 * by:(g.r2 + 1) * by, g.r1 * bx:(g.r1 + 1) * bx]
    return np.ascontiguousarray(block.transpose(1, 2, 0))


def gather_spectrum(c: np.ndarray, g: Pencils, comm, root: int = 0) -> np.ndarray | None:
    """The whole spectrum[kz, ky, kx] on `root` (None elsewhere), from every rank's z-pencil."""
    blocks = np.empty((comm.Get_size(), *c.shape), dtype=c.dtype) if comm.Get_rank() == root \
        else None
    comm.Gather(np.ascontiguousarray(c), blocks, root=root)
    if blocks is None:
        return None
    n, bx, by = g.n, g.n // g.p1, g.n // g.p2
    out = np.empty((n, n, n), dtype=c.dtype)
    for rank, block in enumerate(blocks):
        r1, r2 = rank % g.p1, rank // g.p1
        out[:, r2 * by:(r2 + 1) * by, r1 * bx:(r1 + 1) * bx] = block.transpose(2, 0, 1)
    return out


# --- the test field: a few Fourier modes, so the exact spectrum is known -----------------------

def known_modes(n: int) -> list[tuple[int, int, int, complex]]:
    """(kx, ky, kz, c): u = sum of c exp(2 pi i (kx x + ky y + kz z) / n), the same modes as the
    C and Fortran programs; the forward FFT is n^3 c at (kx, ky, kz) mod n, zero elsewhere."""
    return [(1, 0, 0, 1.0 + 0.0j), (0, 2, 1, 0.5 - 0.25j), (3, 1, n - 2, -0.75j),
            (n - 1, n - 3, n - 1, 0.25 + 0.0j)]


def field(n: int, modes=None, z=slice(None), y=slice(None)) -> np.ndarray:
    """u[z, y, x] of the modes on the rows z, y (all of them by default). The phase is reduced
    modulo n in integers first, so every rank computes the same bits at any n."""
    modes = known_modes(n) if modes is None else modes
    iz, iy, ix = (np.arange(n)[s][:, None, None] if k == 0 else
                  np.arange(n)[s][None, :, None] if k == 1 else np.arange(n)[None, None, :]
                  for k, s in enumerate((z, y, slice(None))))
    u = np.zeros((len(iz), iy.shape[1], n), dtype=np.complex128)
    for kx, ky, kz, c in modes:
        phase = (kx * ix + ky * iy + kz * iz) % n
        u += c * np.exp(2j * np.pi * phase / n)
    return u


def exact_spectrum(n: int, modes=None) -> np.ndarray:
    """spectrum[kz, ky, kx] of the modes: n^3 c at each mode, zero elsewhere."""
    out = np.zeros((n, n, n), dtype=np.complex128)
    for kx, ky, kz, c in known_modes(n) if modes is None else modes:
        out[kz % n, ky % n, kx % n] += n**3 * c
    return out


def local_field(g: Pencils) -> np.ndarray:
    """This rank's x-pencil of `field`, computed locally (no global array)."""
    by, bz = g.n // g.p1, g.n // g.p2
    return field(g.n, z=slice(g.r2 * bz, (g.r2 + 1) * bz), y=slice(g.r1 * by, (g.r1 + 1) * by))


# --- the nine steps ----------------------------------------------------------------------------

# [pack]
def pack(a: np.ndarray, p: int) -> np.ndarray:
    """send[d, A, B, l] = a[A, B, d*blk + l]: the contiguous axis of a cut into p blocks of
    blk = n/p, block d (for rank d of the communicator) made outermost, contiguous, so that
    Alltoall sends send[d] to rank d."""
    outer, middle, n = a.shape
    return np.ascontiguousarray(a.reshape(outer, middle, p, n // p).transpose(2, 0, 1, 3))
# [pack]


# [unpack]
def unpack(recv: np.ndarray) -> np.ndarray:
    """out[l, A, s*m + i] = recv[s, A, i, l]: the blocks from the p sources s, each holding
    m = recv.shape[2] points of the axis that arrives whole, joined along it (the new contiguous
    axis); the old contiguous axis l (this rank's block of it) becomes outermost. The rotation
    (A, B, C) -> (C, A, B)."""
    p, outer, m, blk = recv.shape
    return np.ascontiguousarray(recv.transpose(3, 1, 0, 2)).reshape(blk, outer, p * m)
# [unpack]


def alltoall(comm, send: np.ndarray) -> np.ndarray:
    """MPI_Alltoall of the blocks send[d] (contiguous, equal sizes): the upper-case, buffer-based
    call, which sends the array's memory as it is."""
    from mpi4py import MPI

    recv = np.empty_like(send)
    comm.Alltoall([send, MPI.C_DOUBLE_COMPLEX], [recv, MPI.C_DOUBLE_COMPLEX])
    return recv


def fft_contiguous(a: np.ndarray) -> np.ndarray:
    """The 1-D FFT along the contiguous (last) axis."""
    return np.fft.fft(a, axis=-1)


class PhaseTimes(dict):
    """Seconds per phase, summed over calls: fft, transpose (pack + unpack), alltoall."""

    def __init__(self):
        super().__init__(fft=0.0, transpose=0.0, alltoall=0.0)

    def add(self, phase: str, start: float) -> float:
        now = time.perf_counter()
        self[phase] += now - start
        return now


# [forward]
def forward(a: np.ndarray, g: Pencils, times: PhaseTimes | None = None) -> np.ndarray:
    """The 3-D FFT of the field whose x-pencil a[z, y, x] this rank holds: returns its z-pencil
    c[ky, kx, kz] of the spectrum (block r2 of ky, block r1 of kx, all kz)."""
    t = PhaseTimes() if times is None else times
    s = time.perf_counter()
    a = fft_contiguous(a)                                 # (1) along x
    s = t.add("fft", s)
    send = pack(a, g.p1)                                  # (2) x in p1 blocks
    s = t.add("transpose", s)
    recv = alltoall(g.comm1, send)                        # (3) m1 elements per message
    s = t.add("alltoall", s)
    b = unpack(recv)                                      # (4) b[x, z, y]
    s = t.add("transpose", s)
    b = fft_contiguous(b)                                 # (5) along y
    s = t.add("fft", s)
    send = pack(b, g.p2)                                  # (6) y in p2 blocks
    s = t.add("transpose", s)
    recv = alltoall(g.comm2, send)                        # (7) m2 elements per message
    s = t.add("alltoall", s)
    c = unpack(recv)                                      # (8) c[y, x, z]
    s = t.add("transpose", s)
    c = fft_contiguous(c)                                 # (9) along z
    t.add("fft", s)
    return c
# [forward]


def run_check(comm, n: int, p1: int | None = None, p2: int | None = None) -> dict:
    """The pencil FFT of `field` on comm against numpy.fft.fftn of the whole field (gathered on
    rank 0) and against the exact spectrum of the modes: the two largest differences, relative
    to the largest coefficient (on rank 0; the other ranks get None in them)."""
    g = make_pencils(comm, n, p1, p2)
    c = forward(local_field(g), g)
    spectrum = gather_spectrum(c, g, comm)
    result = {"n": n, "p1": g.p1, "p2": g.p2, "ranks": comm.Get_size(),
              "m1": message_elements(n, g.p1, g.p2)[0], "m2": message_elements(n, g.p1, g.p2)[1],
              "error_vs_fftn": None, "error_vs_modes": None}
    if spectrum is not None:
        scale = float(n) ** 3
        result["error_vs_fftn"] = float(np.abs(spectrum - np.fft.fftn(field(n))).max() / scale)
        result["error_vs_modes"] = float(np.abs(spectrum - exact_spectrum(n)).max() / scale)
    g.free()
    return result


def time_forward(comm, n: int, repeat: int, p1: int | None = None,
                 p2: int | None = None) -> dict:
    """Seconds of the forward FFT, best of `repeat` (after one untimed call), split into the
    phases; each phase's time is the slowest rank's."""
    from mpi4py import MPI

    g = make_pencils(comm, n, p1, p2)
    a = local_field(g)
    forward(a, g)
    best = None
    for _ in range(repeat):
        times = PhaseTimes()
        comm.Barrier()
        start = time.perf_counter()
        forward(a, g, times)
        phases = np.array([time.perf_counter() - start, times["fft"], times["transpose"],
                           times["alltoall"]])
        comm.Allreduce(MPI.IN_PLACE, [phases, MPI.DOUBLE], op=MPI.MAX)
        if best is None or phases[0] < best[0]:
            best = phases
    g.free()
    return {"n": n, "p1": g.p1, "p2": g.p2, "total_s": float(best[0]), "fft_s": float(best[1]),
            "transpose_s": float(best[2]), "alltoall_s": float(best[3])}
