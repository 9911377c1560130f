"""``--upload-top-k K``: the K rows that moved most, averaged over their uploaders; the choice is post-processing."""

from __future__ import annotations

import inspect
import json

import pytest
import torch

from textkg.cli.main import main
from textkg.errors import ConfigError
from textkg.federated.topk import STRUCTURAL_TABLE, dense_upload, rows_key, select_rows, sparse_upload

pytest.importorskip("flwr")

K = 100


def test_the_rows_that_moved_most_ascending_ties_to_the_lower_row():
    sent = torch.zeros(6, 2)
    trained = torch.tensor([[0.0, 0.0], [3.0, 4.0], [1.0, 0.0], [0.0, 5.0], [0.0, 1.0], [0.0, 2.0]])
    # changes 0, 5, 1, 5, 1, 2: the two largest are rows 1 and 3; of the tied 1s, row 2 comes before row 4
    assert select_rows(sent, trained, 2).tolist() == [1, 3]
    assert select_rows(sent, trained, 4).tolist() == [1, 2, 3, 5]
    assert select_rows(sent, trained, 5).tolist() == [1, 2, 3, 4, 5]
    with pytest.raises(ConfigError, match="upload-top-k"):
        select_rows(sent, trained, 7)


def test_the_selection_reads_only_what_was_sent_and_what_was_trained():
    """The choice of rows has no argument through which a holder's statements, gradients or counts could enter."""
    assert list(inspect.signature(select_rows).parameters) == ["sent", "trained", "k"]


def test_a_sparse_upload_densifies_to_the_sent_rows_elsewhere():
    sent = {STRUCTURAL_TABLE: torch.zeros(5, 2), "relation_embeddings": torch.zeros(2, 2)}
    trained = {STRUCTURAL_TABLE: torch.arange(10.0).reshape(5, 2), "relation_embeddings": torch.ones(2, 2)}
    up = sparse_upload(sent, trained, 2)
    assert up[rows_key()].tolist() == [3, 4] and up[STRUCTURAL_TABLE].shape == (2, 2)
    assert torch.equal(up["relation_embeddings"], trained["relation_embeddings"])  # small tensors go whole
    full = dense_upload(sent, up)
    assert rows_key() not in full and torch.equal(full[STRUCTURAL_TABLE][3:], trained[STRUCTURAL_TABLE][3:])
    assert not full[STRUCTURAL_TABLE][:3].any()


def test_each_row_is_averaged_over_the_holders_that_uploaded_it(federate_base, tmp_path, uploads):
    """Oracle, one round of three holders: row r = Σ_k n_k 1[k uploaded r] θ_k[r] / Σ_k n_k 1[…];
    a row no one uploaded keeps its value; every other tensor is plain FedAvg. The upload's shape
    depends on K only (public), the same for every holder."""
    out = tmp_path / "fed"
    args = [*federate_base, "--partition", "source", "--rounds", "1", "--upload-top-k", str(K), "--out", str(out)]
    assert main(args) == 0
    sent = uploads.sent[0]
    glob = torch.load(out / "best_model.pt", weights_only=True)
    returned = [(params, metrics["num-examples"]) for params, metrics in uploads.returned]
    assert all(set(p) == set(returned[0][0]) for p, _ in returned)
    d = sent[STRUCTURAL_TABLE].shape[1]
    assert all(p[STRUCTURAL_TABLE].shape == (K, d) and p[rows_key()].shape == (K,) for p, _ in returned)
    num = torch.zeros_like(sent[STRUCTURAL_TABLE], dtype=torch.float64)
    den = torch.zeros(len(num), 1, dtype=torch.float64)
    for params, n in returned:
        num[params[rows_key()]] += n * params[STRUCTURAL_TABLE].double()
        den[params[rows_key()]] += n
    expected = torch.where(den > 0, num / den.clamp_min(1e-300), sent[STRUCTURAL_TABLE].double())
    torch.testing.assert_close(glob[STRUCTURAL_TABLE].double(), expected, rtol=1e-5, atol=1e-6)
    assert int((den > 0).sum()) < len(den)  # some rows were uploaded by nobody, and kept
    total = sum(n for _, n in returned)
    rel = sum(p["relation_embeddings"].double() * n for p, n in returned) / total
    torch.testing.assert_close(glob["relation_embeddings"].double(), rel, rtol=1e-5, atol=1e-6)
    upload = json.loads((out / "metrics.json").read_text())["federated"]["upload"]
    assert upload["rows"] == K and upload["privacy"].startswith("none claimed")


def _holder(fedn, own, out_dir):
    from textkg.federated.runner import DataHolder

    return DataHolder("h", fedn.prep, fedn.cfg, own, fedn.shared, out_dir, upload_top_k=K)


def test_neighbouring_holders_with_the_same_dp_output_upload_the_same_rows(tmp_path, monkeypatch):
    """Post-processing, played as the adversary: holder B has one statement fewer than holder A (neighbours),
    holder C holds another hospital's statements. Under DP the upload may depend on the data only through
    the trained parameters, so when B's and C's DP outputs equal A's, their uploads must equal A's, whatever
    their statements, ledgers or gradients. A selection that read the holder's statements (say, preferring
    its own entities' rows) fails here."""
    from textkg.cli.config_loading import build_run_config
    from textkg.cli.main import build_parser
    from textkg.federated.runner import FederatedConfig, prepare_federation, trained_state

    argv = ["train", "--dataset", "hpo-small", "--split", "inductive", "--model", "transe", "--dim", "16"]
    argv += ["--batch-size", "1024", "--privacy", "full", "--target-epsilon", "4", "--reproducible-noise", "3"]
    cfg = build_run_config(build_parser().parse_args(argv))
    fedn = prepare_federation(cfg, FederatedConfig(partition="source", rounds=1, upload_top_k=K))
    own = fedn.part.client_triples(fedn.prep.split.train, 1, include_shared=False)  # ORPHA
    other = fedn.part.client_triples(fedn.prep.split.train, 0, include_shared=False)  # OMIM
    a = _holder(fedn, own, tmp_path)
    sent = trained_state(fedn.prep.model)
    up_a, _ = a.fit(sent, 1)
    dp_output = trained_state(a.model)
    for data in (own[1:], other):
        b = _holder(fedn, data, tmp_path)

        def same_output(epochs, b=b):  # B's DP-SGD happens to return A's parameters
            b.model.load_state_dict(dp_output, strict=False)
            return []

        monkeypatch.setattr(b.trainer, "train_epochs", same_output)
        up_b, _ = b.fit(sent, 1)
        assert set(up_a) == set(up_b) and all(torch.equal(up_a[k], up_b[k]) for k in up_a)
    # the rows chosen are not simply the rows of A's own entities (the test would then prove nothing)
    mine = torch.unique(own[:, [0, 2]])
    rows = fedn.prep.model.structural.struct_index[mine]
    assert not torch.isin(up_a[rows_key()], rows).all()


@pytest.mark.parametrize(
    "extra, field",
    [
        (["--upload-top-k", "0"], "upload-top-k"),
        (["--upload-top-k", "100000"], "upload-top-k"),
        (["--upload-top-k", "5", "--client-noise-multiplier", "1"], "upload-top-k"),
    ],
)
def test_bad_top_k_exits_2_and_writes_nothing(federate_base, tmp_path, capsys, extra, field):
    out = tmp_path / "fed"
    assert main([*federate_base, "--partition", "random", "--rounds", "1", *extra, "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert (f"field '{field}'" in err or f"argument --{field}:" in err) and "Traceback" not in err
    assert not out.exists()
