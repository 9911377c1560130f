"""Issue 36, item 9: ``textkg release`` copies only the run's own regular files that its config needs.

On 7add106 a run folder whose ``graph.json`` was a symlink to another file had that file copied
into the bundle (exit 0), and a TransE run's stray ``lstm_ae.pt`` was copied too.
"""

from __future__ import annotations

from security_helpers import copy_run

from textkg.cli.main import main


def test_a_symlinked_graph_json_is_refused_and_nothing_is_written(tiny_run, tmp_path, capsys):
    secret = tmp_path / "secret.json"
    secret.write_text('{"private": "TOP-SECRET"}')
    run = copy_run(tiny_run, tmp_path / "run")
    (run / "graph.json").unlink()
    (run / "graph.json").symlink_to(secret)
    out = tmp_path / "bundle"
    code = main(["release", str(run), "--out", str(out), "--allow-simulation"])
    err = capsys.readouterr().err
    assert code == 2 and "symlink" in err and "graph.json" in err and "Traceback" not in err
    assert not out.exists() or not any(out.rglob("*"))


def test_a_file_the_config_does_not_need_is_not_copied(tiny_run, tmp_path, capsys):
    run = copy_run(tiny_run, tmp_path / "run")
    (run / "lstm_ae.pt").write_bytes(b"planted by someone else")  # a TransE run needs no autoencoder
    out = tmp_path / "bundle"
    assert main(["release", str(run), "--out", str(out), "--allow-simulation"]) == 0, capsys.readouterr().err
    assert not (out / "lstm_ae.pt").exists()
    assert (out / "graph.json").is_file() and not (out / "graph.json").is_symlink()
