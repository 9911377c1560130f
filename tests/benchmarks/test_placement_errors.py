"""``benchmarks/investigations/placement_errors.py``: each first suggestion sorted into one kind, on a hierarchy
whose answer is known for every term."""

from __future__ import annotations

import pytest
from bench_module import load_benchmark

#           r
#         /   \
#        a     x
#       / \     \
#      p   s     y
#     / \
#    c   d
EDGES = [("a", "r"), ("x", "r"), ("p", "a"), ("s", "a"), ("y", "x"), ("c", "p"), ("d", "p")]


@pytest.fixture(scope="module")
def bench():
    return load_benchmark("investigations/placement_errors.py", "placement_errors_bench")


@pytest.mark.parametrize(
    "first, expected",
    [
        ("p", 0),  # a true parent
        ("a", 1),  # its parent: too general
        ("r", 1),  # the root: too general
        ("c", 2),  # its child: too specific
        ("s", 3),  # its sibling
        ("y", 5),  # shares only the root
        ("x", 5),
    ],
)
def test_each_first_suggestion_has_one_kind(bench, first, expected):
    up, down = {}, {}
    for child, parent in EDGES:
        up.setdefault(child, set()).add(parent)
        down.setdefault(parent, set()).add(child)
    assert bench.kind(first, {"p"}, up, down) == bench.KINDS[expected]


def test_a_common_non_root_ancestor_is_its_own_kind(bench):
    edges = [*EDGES, ("q", "s"), ("t", "q")]  # t sits under a, below the true parent's sibling s
    up, down = {}, {}
    for child, parent in edges:
        up.setdefault(child, set()).add(parent)
        down.setdefault(parent, set()).add(child)
    assert bench.kind("t", {"p"}, up, down) == bench.KINDS[4]
    assert bench.kind("q", {"p"}, up, down) == bench.KINDS[4]  # a child of p's sibling: not p's sibling
