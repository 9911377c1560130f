"""RowAwareFedAvg's per-reply weight: a number from the reply's metric record, or a clear error."""

import pytest

pytest.importorskip("flwr")

from flwr.app import MetricRecord, RecordDict

from textkg.federated.strategy import _weight


def test_weight_reads_the_number():
    assert _weight(RecordDict({"metrics": MetricRecord({"num-examples": 13})}), "num-examples") == 13.0


def test_weight_that_is_a_list_is_refused():
    with pytest.raises(ValueError, match="'num-examples' must be a number"):
        _weight(RecordDict({"metrics": MetricRecord({"num-examples": [1, 2]})}), "num-examples")
