"""A model folder shipped inside a shared run must not run code when loaded (STYLE.md 13).

sentence-transformers imports every class a folder's ``modules.json`` names and calls its ``load``:
``gensim.models.KeyedVectors`` there unpickles a planted file. transformers runs a folder's own code
when ``config.json`` has ``auto_map``. Both are refused before the loader sees the folder.
"""

from __future__ import annotations

import json
import pickle
import shutil

import pytest

from textkg.encoders.bert import check_model_folder, default_minilm_path
from textkg.errors import ConfigError


class _Marker:
    def __init__(self, path):
        self.path = path

    def __reduce__(self):
        return (open, (self.path, "w"))


def test_a_modules_json_naming_a_pickle_loader_is_refused(tmp_path):
    folder = tmp_path / "model"
    shutil.copytree(default_minilm_path(), folder)
    marker = tmp_path / "ran"
    (folder / "evil").mkdir()
    (folder / "evil" / "model.kv").write_bytes(pickle.dumps(_Marker(str(marker))))
    modules = [{"idx": 0, "name": "0", "path": "evil", "type": "gensim.models.KeyedVectors"}]
    (folder / "modules.json").write_text(json.dumps(modules))
    from textkg.encoders.sbert import SentenceTransformerEncoder

    with pytest.raises(ConfigError, match="outside sentence_transformers"):
        SentenceTransformerEncoder(model_name_or_path=str(folder)).encode(["a"])
    assert not marker.exists()


def test_auto_map_is_refused_and_the_packaged_model_passes(tmp_path):
    check_model_folder(default_minilm_path())  # the default loads
    folder = tmp_path / "model"
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps({"auto_map": {"AutoModel": "evil.Model"}}))
    with pytest.raises(ConfigError, match="auto_map"):
        check_model_folder(str(folder))


@pytest.mark.parametrize(
    ("where", "document", "match"),
    [
        # a Dense module's activation is imported by name and called
        ("2_Dense/config.json", {"in_features": 384, "activation_function": "os.getpid"}, "Dense activation"),
        # a module's own subfolder may hold a config with remote code, or turn it on
        ("0_Transformer/config.json", {"auto_map": {"AutoModel": "evil.Model"}}, "auto_map"),
        ("sentence_bert_config.json", {"model_args": {"trust_remote_code": True}}, "trust_remote_code"),
    ],
)
def test_code_named_in_a_module_folder_is_refused(tmp_path, where, document, match):
    folder = tmp_path / "model"
    shutil.copytree(default_minilm_path(), folder)
    (folder / where).parent.mkdir(exist_ok=True)
    (folder / where).write_text(json.dumps(document))
    with pytest.raises(ConfigError, match=match):
        check_model_folder(str(folder))


def test_a_router_module_is_refused(tmp_path):
    """A Router loads its routes' classes from the folder itself (code a local folder is trusted to run)."""
    folder = tmp_path / "model"
    shutil.copytree(default_minilm_path(), folder)
    modules = [{"idx": 0, "name": "0", "path": "", "type": "sentence_transformers.base.modules.router.Router"}]
    (folder / "modules.json").write_text(json.dumps(modules))
    with pytest.raises(ConfigError, match="outside sentence_transformers"):
        check_model_folder(str(folder))
