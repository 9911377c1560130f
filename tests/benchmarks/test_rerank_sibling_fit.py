"""``benchmarks/investigations/rerank_sibling_fit.py``: a share outside (0, 1] is refused before any run is opened."""

from __future__ import annotations

import pytest
from bench_module import load_benchmark


@pytest.fixture(scope="module")
def bench():
    return load_benchmark("investigations/rerank_sibling_fit.py", "rerank_sibling_fit_bench")


@pytest.mark.parametrize("share", ["0", "1.5", "-0.2"])
def test_a_share_outside_zero_one_exits_2(bench, tmp_path, capsys, share):
    with pytest.raises(SystemExit) as exc:
        bench.main(["--run-dir", str(tmp_path), "--share", share, "--out", str(tmp_path / "o.json")])
    assert exc.value.code == 2
    assert "--share" in capsys.readouterr().err
    assert not (tmp_path / "o.json").exists()
