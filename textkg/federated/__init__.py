"""Federated training across data holders (issue: "Federated training across data holders, on Flower").

:mod:`.partition`: which statement each data holder holds. :mod:`.runner`:
``textkg federate`` in this process; :mod:`.simulation`: on Flower's simulation
engine (Ray); :mod:`.app`: on Flower's deployment engine.
"""

from textkg.federated.partition import SCHEMES, SHARED, Partition, make_partition

__all__ = ["SCHEMES", "SHARED", "Partition", "make_partition"]
