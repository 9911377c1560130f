import json

import pytest

from textkg.encoders import get_encoder
from textkg.encoders.charlm import read_char_lm_metrics, train_char_lm
from textkg.errors import ConfigError, DataError


def test_char_lm_metrics(char_lms):
    for path, direction in zip(char_lms, ("forward", "backward"), strict=True):
        metrics = read_char_lm_metrics(path)
        assert metrics["direction"] == direction
        assert metrics["valid_perplexity"] > 1 and metrics["test_perplexity"] > 1
        assert (path.parent / "corpus" / "valid.txt").exists()
        assert json.loads((path.parent / "metrics.json").read_text())["model"] == str(path)


def test_stack_dimension(char_lms):
    enc = get_encoder("flair", forward_model=char_lms[0], backward_model=char_lms[1])
    assert enc.dim == 50 + 16 + 16 == enc.token_dim
    assert enc.encode(["Abnormal enlargement of the kidney."]).shape == (1, 82)
    no_words = get_encoder("flair", forward_model=char_lms[0], backward_model=char_lms[1], word_embeddings=None)
    assert no_words.dim == 32


def test_swapped_directions_rejected(char_lms):
    with pytest.raises(ConfigError, match="forward LM"):
        get_encoder("flair", forward_model=char_lms[1], backward_model=char_lms[0])


def test_named_models_and_pickles_are_config_errors(char_lms):
    with pytest.raises(ConfigError, match="named model 'pubmed-forward' is a pickle"):
        get_encoder("flair", forward_model="pubmed-forward", backward_model=char_lms[1])
    with pytest.raises(ConfigError, match="a pickle"):
        get_encoder("flair", forward_model="no/such/file.pt", backward_model=char_lms[1])
    with pytest.raises(ConfigError, match="does not exist"):
        get_encoder("flair", forward_model="no/such/file.safetensors", backward_model=char_lms[1])
    with pytest.raises(ConfigError, match="word embeddings"):
        get_encoder("flair", forward_model=char_lms[0], backward_model=char_lms[1], word_embeddings="glove")


def test_train_char_lm_validates_first(tmp_path):
    with pytest.raises(ConfigError, match="direction"):
        train_char_lm(["abc"], direction="sideways", out_dir=tmp_path)
    with pytest.raises(DataError, match="description 1"):
        train_char_lm(["abc", ""], direction="forward", out_dir=tmp_path)
    assert not any(tmp_path.iterdir())


def test_max_seconds_stops_cleanly(tmp_path):
    texts = [f"Description {i} of some phenotype with several words." for i in range(300)]
    path = train_char_lm(texts, direction="forward", out_dir=tmp_path, hidden_size=16, epochs=50, max_seconds=2, seed=0)
    metrics = read_char_lm_metrics(path)
    assert path.exists() and metrics["seconds"] < 30 and metrics["valid_perplexity"] > 1
