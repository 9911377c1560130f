"""Federated training across data holders (issue: "Federated training across data holders, on Flower").

So far: :mod:`.partition`, which statement each data holder holds. The runner
(Flower's simulation and deployment engines) sits beside the trainer and is
not built yet.
"""

from textkg.federated.partition import SCHEMES, SHARED, Partition, make_partition

__all__ = ["SCHEMES", "SHARED", "Partition", "make_partition"]
