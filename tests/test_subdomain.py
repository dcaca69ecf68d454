"""Each rank builds its own part (course.parallel.subdomain): from the partition rule alone it
finds the same local data as course.parallel.local.local_data finds from the whole node -> rank
map, for blocks, METIS on the node graph and METIS on a coarse lattice; the coarse lattice stays
bounded however large the mesh; the 32-bit limit applies to a rank's part, checked before any
array is built."""

from __future__ import annotations

import numpy as np
import pytest

from course.fem.mesh import box_mesh
from course.parallel import subdomain
from course.parallel.local import local_data
from course.parallel.partition import make_partition


class OneProcess:
    """The communicator calls partition_rule makes, for `size` ranks seen from rank 0."""

    def __init__(self, size):
        self.size = size

    def Get_size(self):
        return self.size

    def Get_rank(self):
        return 0

    def bcast(self, value, root=0):
        return value


def assert_same_parts(box, rule, owner, ranks):
    assert np.array_equal(rule.owner_of(np.arange(box.n_node)), owner)
    for rank in range(ranks):
        assert np.array_equal(rule.owned(rank), np.flatnonzero(owner == rank))
        assert rule.count(rank) == np.count_nonzero(owner == rank)
        assert subdomain.fem_local_data(box, rule, rank, ranks) == local_data(box, owner, rank)


@pytest.mark.parametrize("method", ["blocks", "metis"])
@pytest.mark.parametrize("ranks", [1, 3, 4])
def test_a_rank_finds_the_local_data_of_the_whole_map(method, ranks):
    box = box_mesh(7, 5, 4)
    rule = subdomain.partition_rule(OneProcess(ranks), box, method)
    assert_same_parts(box, rule, make_partition(box, method, ranks), ranks)


def test_metis_on_a_coarse_lattice():
    """Above COARSE_POINTS nodes METIS cuts the lattice of c x c x c groups (here forced with a
    small bound): every node of a group on one rank, the parts balanced by node weights."""
    box = box_mesh(23, 17, 12)
    rule = subdomain.metis_rule(box, 4, points=600)
    assert rule.factors == (3, 3, 3) and np.prod(rule.points) <= 600
    owner = rule.owner_of(np.arange(box.n_node))
    counts = np.bincount(owner)
    assert counts.size == 4 and counts.max() / counts.mean() < 1.1, counts
    assert_same_parts(box, rule, owner, 4)


def test_the_coarse_lattice_stays_bounded():
    box = box_mesh(1000, 1000, 500, distributed=True)
    factors = subdomain.coarse_factors(box)
    points = np.prod([np.ceil((n + 1) / f) for n, f in zip((1000, 1000, 500), factors)])
    assert points <= subdomain.COARSE_POINTS and max(factors) <= 20
    # a thin column: x and y keep 2 coarse points each, z takes the rest, 2 * 2 * 12 <= 50
    assert subdomain.coarse_factors(box_mesh(3, 3, 400), points=50) == (2, 2, 34)


def test_the_index_limit_is_a_ranks():
    """A mesh too large for 32-bit indices as a whole is refused only where a rank's part is."""
    with pytest.raises(ValueError, match="more than the 32-bit"):
        box_mesh(600, 600, 600)
    box = box_mesh(600, 600, 600, distributed=True)
    one = subdomain.partition_rule(OneProcess(1), box, "blocks")
    with pytest.raises(ValueError, match="rank 0's part has 217081801 nodes"):
        subdomain.check_part(one, 0, 27)
    eight = subdomain.partition_rule(OneProcess(8), box, "blocks")      # 2 x 2 x 2 blocks
    assert subdomain.check_part(eight, 5, 27) == 301 * 300 * 301         # block (1, 0, 1)
