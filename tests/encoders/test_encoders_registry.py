import pytest
import torch

from textkg.encoders import get_encoder, get_trainable_encoder, list_encoders, list_trainable_encoders
from textkg.encoders.dkrl import DKRLEncoder
from textkg.encoders.glove import GloveBowEncoder
from textkg.errors import ConfigError


def test_lists():
    assert list_encoders() == ["bert", "char-ngrams", "concat", "flair", "glove-bow", "sentence-transformers"]
    assert list_trainable_encoders() == ["dkrl", "lstm-ae"]


def test_unknown_name_lists_registry_names():
    with pytest.raises(ConfigError) as info:
        get_encoder("word2vec")
    for name in list_encoders():
        assert name in str(info.value)
    with pytest.raises(ConfigError, match="dkrl, lstm-ae"):
        get_trainable_encoder("cnn")


def test_class_and_instance():
    enc = get_encoder(GloveBowEncoder)
    assert get_encoder(enc) is enc
    with pytest.raises(ConfigError):
        get_encoder(enc, device="cpu")
    module = get_trainable_encoder(DKRLEncoder, token_dim=4, out_dim=3)
    assert get_trainable_encoder(module) is module
    assert isinstance(get_trainable_encoder("lstm-ae", token_dim=4, code_dim=3), torch.nn.Module)


def test_glove_bow_shape():
    assert get_encoder("glove-bow").encode(["Abnormal enlargement of the kidney."]).shape == (1, 50)


def test_flair_needs_paths():
    with pytest.raises(ConfigError, match="forward_model"):
        get_encoder("flair")


def test_bad_batch_size():
    with pytest.raises(ConfigError, match="batch_size"):
        get_encoder("glove-bow").encode(["a"], batch_size=0)


def test_concat_is_normalised_parts_side_by_side():
    texts = ["Abnormal enlargement of the kidney.", "Seizures."]
    glove = get_encoder("glove-bow")
    bert = get_encoder("bert", pooling="mean")
    both = get_encoder("concat", parts=[{"name": "glove-bow"}, {"name": "bert", "pooling": "mean"}])
    assert both.dim == glove.dim + bert.dim
    x = both.encode(texts)
    g, b = glove.encode(texts), bert.encode(texts)
    torch.testing.assert_close(x[:, : glove.dim], g / g.norm(dim=1, keepdim=True))
    torch.testing.assert_close(x[:, glove.dim :], b / b.norm(dim=1, keepdim=True))
    raw = get_encoder("concat", parts=[{"name": "glove-bow"}], normalize=False)
    torch.testing.assert_close(raw.encode(texts), g)
    assert raw.identity != get_encoder("concat", parts=[{"name": "glove-bow"}]).identity


@pytest.mark.parametrize("parts", [[], "glove-bow", [{"pooling": "mean"}], [{"name": "concat"}], [{"name": "nope"}]])
def test_concat_bad_parts(parts):
    with pytest.raises(ConfigError):
        get_encoder("concat", parts=parts)
