"""A party named ``../x`` would write its checkpoint (noise key included) outside --out: exit 2 first."""

from __future__ import annotations

import pytest
import yaml

from textkg.cli.main import main
from textkg.errors import ConfigError
from textkg.federated.cross_graph.config import CrossGraphConfig


def test_a_holders_file_naming_a_party_dotdot_exits_2_and_writes_nothing_outside_out(
    tmp_path, two_graphs, holders, capsys
):
    raw = holders(*two_graphs, target_epsilon=4.0)
    raw["holders"][1]["name"] = "../x"
    path = tmp_path / "holders.yaml"
    path.write_text(yaml.safe_dump(raw))
    out = tmp_path / "out"
    code = main(["federate", "--mode", "cross-graph", "--holders", str(path), "--out", str(out), "--no-progress"])
    err = capsys.readouterr().err
    assert code == 2 and "holders[1].name" in err and str(path) in err and "Traceback" not in err
    assert not (tmp_path / "x").exists() and not out.exists()  # validated before any folder is made
    with pytest.raises(ConfigError, match="not allowed"):
        CrossGraphConfig.from_dict(raw)


def test_the_python_api_refuses_the_name_too():
    from textkg.federated.cross_graph.config import HolderSpec

    with pytest.raises(ConfigError, match="not allowed"):
        HolderSpec(name="../x", dataset="d")
