"""The ``files`` partition on Flower's deployment apps, in one process: a holder's statements reach no one.

Each holder's statements are in its own file, named only in its own node's ``node_config``
(``data-file``). The deployment ServerApp (:func:`textkg.federated.app.serve`) and ClientApp run over
:class:`~textkg.federated.grid.InProcessGrid`, every ClientApp call as in a fresh process. Checked as the
adversary (a curious server, or another holder):

- no file of a holder is opened outside that holder's own ClientApp calls (a Python audit hook sees
  every ``open``): not by the server, not by the other node;
- no message either way carries a holder's path or statements: the server sends the global parameters
  and the round number, a holder returns the trained parameters with the server's shapes, its metrics
  and its report (under DP with a declared size: the declared size, never the count);
- neighbouring holder files (one private statement apart) give the same messages, the same
  ``federated.json`` and the same shapes and keys in ``metrics.json``.

The same with real processes (a SuperLink and two SuperNodes): test_flower_deployment_files.py.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

pytest.importorskip("flwr")

from flower_nodes import node_configs
from holder_files import FLAGS, PRIVATE, make_holder_files, marker_statement
from neighbours import message_view, shape_tree

from textkg.errors import ConfigError
from textkg.federated import app
from textkg.federated.grid import DATA_FILE, InProcessGrid

#: opened paths, with the node whose ClientApp call was running (None: the server's side)
_OPENED: list[tuple[str, int | None]] = []
_STATE: dict = {"on": False, "node": None}


def _audit(event: str, args) -> None:
    if _STATE["on"] and event == "open" and isinstance(args[0], (str, Path)):
        _OPENED.append((str(Path(args[0]).resolve()) if args[0] else "", _STATE["node"]))


sys.addaudithook(_audit)  # stays for the process; records only while a test here turns it on


class SpyGrid(InProcessGrid):
    """Records every message sent and received, and which node's ClientApp is running."""

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.sent: list = []
        self.received: list = []

    def push_messages(self, messages):
        ids = []
        for message in messages:
            self.sent.append(message_view(message.content))
            _STATE["node"] = message.metadata.dst_node_id - 1
            try:
                ids.extend(super().push_messages([message]))
            finally:
                _STATE["node"] = None
        return ids

    def pull_messages(self, message_ids):
        replies = list(super().pull_messages(message_ids))
        self.received.extend(message_view(r.content) for r in replies)
        return replies


def fresh(message, context):
    app._HOLDERS.clear()  # Flower 1.42 runs every message in a new process
    return app.clientapp(message, context)


def _settings(dataset: Path, *extra: str):
    from textkg.cli.config_loading import build_run_config
    from textkg.cli.federation import _federated_config
    from textkg.cli.main import build_parser

    args = build_parser().parse_args(["federate", "--dataset", str(dataset), *FLAGS, *extra])
    return build_run_config(args), _federated_config(args)


def _serve(root: Path, *extra: str, neighbour: str | None = None):
    public, holders = make_holder_files(root, extra=neighbour)
    cfg, fed = _settings(public, *extra)
    own = node_configs(root / "nodes", cfg, fed, 2, extra=[{DATA_FILE: str(p)} for p in holders])
    grid = SpyGrid(fresh, 2, node_configs=own)
    _OPENED.clear()
    _STATE["on"] = True
    try:
        metrics = app.serve(grid, cfg, fed, root / "out")
    finally:
        _STATE["on"] = False
    return metrics, grid, holders, list(_OPENED)


@pytest.mark.parametrize("privacy", [(), PRIVATE], ids=["public", "record-level-dp"])
def test_a_holders_file_is_opened_by_its_own_node_only_and_no_message_carries_it(tmp_path, privacy):
    metrics, grid, holders, opened = _serve(tmp_path, *privacy)
    paths = [str(p.resolve()) for p in holders]
    for k, path in enumerate(paths):
        readers = {node for p, node in opened if p == path}
        assert readers == {k}, f"holder {k}'s file was opened by {readers} (None: the server)"
    texts = [json.dumps(m, default=str) for m in grid.sent + grid.received]
    for k, path in enumerate(paths):
        assert not any(path in t or "holder-" in t or marker_statement(k) in t for t in texts)
    sent_shapes = grid.sent[0]["arrays"]["arrays"]
    for reply in grid.received:  # the server's shapes back, and nothing but the model's parameters
        assert reply["arrays"]["arrays"] == sent_shapes
    for name in ("config.json", "federated.json", "graph.json", "metrics.json"):
        text = (tmp_path / "out" / name).read_text()
        assert not any(p in text for p in paths) and "holder-" not in text, name
    federated = json.loads((tmp_path / "out" / "federated.json").read_text())
    assert federated["sizes"] is None and federated["partition"] == "files"
    import textkg

    # the run reloads from the public side alone: its vocabulary (every entity with a text) is the model's
    assert textkg.load(tmp_path / "out") is not None
    if privacy:
        assert all(r["metrics"]["metrics"]["num-examples"] == 64 for r in grid.received)
        assert metrics["privacy"]["guarantee"] == "dp"
        assert all(c["num_statements"] is None for c in metrics["clients"])


def test_neighbouring_holder_files_send_the_server_the_same_messages(tmp_path):
    runs = []
    for name, extra in (("d", None), ("d_plus", "/e/unused\t/r/likes\t/e/00")):
        runs.append(_serve(tmp_path / name, *PRIVATE, neighbour=extra))
    (ma, ga, _, _), (mb, gb, _, _) = runs

    def public(messages, name):
        text = json.dumps(messages, default=str).replace(str(tmp_path / name), "ROOT")  # the folders' names
        out = json.loads(text)
        for m in out:
            for record in m["metrics"].values():
                record.pop("public-loss", None)  # moves with the noised model
            for record in m.get("configs", {}).values():  # the digest of the node's settings, which name the folder
                if "json" in record:
                    report = json.loads(record["json"])
                    report.pop(app.DIGEST_KEY, None)
                    record["json"] = json.dumps(report)
        return out

    assert public(ga.received, "d") == public(gb.received, "d_plus")
    assert public(ga.sent, "d")[0] == public(gb.sent, "d_plus")[0]  # the first round's message: the same parameters
    fa, fb = (json.loads((tmp_path / n / "out" / "federated.json").read_text()) for n in ("d", "d_plus"))
    assert fa == fb
    assert shape_tree(ma) == shape_tree(mb) and ma["clients"][0]["privacy"] == mb["clients"][0]["privacy"]
    assert ma["federated"] == mb["federated"]


def test_a_holder_file_is_checked_and_the_in_process_engine_refuses_the_scheme(tmp_path):
    from textkg.federated.engines import federate

    public, holders = make_holder_files(tmp_path)
    holders[1].write_text(holders[1].read_text() + "/e/nope\t/r/likes\t/e/00\n")
    cfg, fed = _settings(public)
    own = node_configs(tmp_path / "nodes", cfg, fed, 2, extra=[{DATA_FILE: str(p)} for p in holders])
    grid = InProcessGrid(fresh, 2, node_configs=own)
    with pytest.raises(ConfigError.__mro__[1], match=r"statements.tsv:72, field 'head'.*not in the public vocabulary"):
        app.serve(grid, cfg, fed, tmp_path / "out")
    with pytest.raises(ConfigError, match="deployment engine"):
        federate(cfg, fed, tmp_path / "inprocess", progress=False)
    grid = InProcessGrid(fresh, 2, node_configs=node_configs(tmp_path / "nodes2", cfg, fed, 2))  # no data-file
    with pytest.raises(ConfigError, match="data-file"):
        app.serve(grid, cfg, fed, tmp_path / "out2")
