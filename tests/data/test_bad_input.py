"""Every malformed input raises DataError naming the file, line and field."""

import pytest

from textkg.data import list_datasets, load_dataset
from textkg.errors import ConfigError, DataError


def _lines(path):
    return path.read_text(encoding="utf-8").splitlines(keepends=True)


def _set_line(path, number, text):
    lines = _lines(path)
    lines[number - 1] = text
    path.write_text("".join(lines), encoding="utf-8")


def _append(path, text):
    with open(path, "a", encoding="utf-8") as fh:
        fh.write(text)


def _raises(directory, file, line, field, match=None, **kwargs) -> DataError:
    with pytest.raises(DataError) as info:
        load_dataset(directory, **kwargs)
    err = info.value
    assert err.file is not None and err.file.endswith(file), str(err)
    assert err.line == line, str(err)
    assert err.field == field, str(err)
    message = str(err)
    assert f"{file}:{line}" in message if line else file in message
    if field:
        assert f"field '{field}'" in message
    if match:
        assert match in message, message
    return err


def test_wrong_column_count(tiny_copy):
    _append(tiny_copy / "train.tsv", "/e/00\t/r/likes\n")
    _raises(tiny_copy, "train.tsv", 201, "tail", match="expected 3 tab-separated columns")


def test_too_many_columns(tiny_copy):
    _set_line(tiny_copy / "dev.tsv", 4, "/e/00\t/r/likes\t/e/01\textra\n")
    _raises(tiny_copy, "dev.tsv", 4, "column 4", match="got 4")


def test_unknown_entity_in_evaluation_file(tiny_copy):
    h, r, t = _lines(tiny_copy / "test.tsv")[6].rstrip("\n").split("\t")
    _set_line(tiny_copy / "test.tsv", 7, f"{h}\t{r}\t/e/nowhere\n")
    _raises(tiny_copy, "test.tsv", 7, "tail", match="unknown entity '/e/nowhere'")


def test_entity_without_description_names_the_triples_file(tiny_copy):
    lines = _lines(tiny_copy / "entity2text.txt")
    missing = lines[5].split("\t")[0]
    (tiny_copy / "entity2text.txt").write_text("".join(lines[:5] + lines[6:]), encoding="utf-8")
    first = next(
        i for i, line in enumerate(_lines(tiny_copy / "train.tsv"), start=1) if missing in line.rstrip("\n").split("\t")
    )
    field = "head" if _lines(tiny_copy / "train.tsv")[first - 1].startswith(missing + "\t") else "tail"
    _raises(tiny_copy, "train.tsv", first, field, match="entity2text.txt")


def test_missing_long_description_row(tiny_copy):
    lines = _lines(tiny_copy / "entity2textlong.txt")
    (tiny_copy / "entity2textlong.txt").write_text(
        "".join(line for line in lines if not line.startswith("/e/03\t")), encoding="utf-8"
    )
    with pytest.raises(DataError) as info:
        load_dataset(tiny_copy, description="long")
    err = info.value
    assert err.field in ("head", "tail") and err.line is not None and "entity2textlong.txt" in str(err)


def test_long_requested_but_file_missing(tiny_copy):
    (tiny_copy / "entity2textlong.txt").unlink()
    with pytest.raises(DataError) as info:
        load_dataset(tiny_copy, description="long")
    assert info.value.field == "description" and "entity2textlong.txt" in str(info.value)


def test_empty_description(tiny_copy):
    _set_line(tiny_copy / "entity2text.txt", 9, "/e/08\t   \n")
    _raises(tiny_copy, "entity2text.txt", 9, "text", match="empty")


def test_missing_description_column(tiny_copy):
    _set_line(tiny_copy / "entity2text.txt", 3, "/e/02\n")
    _raises(tiny_copy, "entity2text.txt", 3, "text", match="missing text")


def test_duplicate_entity_row(tiny_copy):
    _append(tiny_copy / "entity2text.txt", "/e/04\tAgain\n")
    _raises(tiny_copy, "entity2text.txt", 42, "id", match="listed twice")


def test_non_utf8_bytes(tiny_copy):
    path = tiny_copy / "train.tsv"
    raw = path.read_bytes().split(b"\n")
    h, r, _ = raw[4].split(b"\t")
    raw[4] = b"\t".join([h, r, b"/e/\xff9"])
    path.write_bytes(b"\n".join(raw))
    _raises(tiny_copy, "train.tsv", 5, "tail", match="UTF-8")


def test_non_utf8_in_description(tiny_copy):
    path = tiny_copy / "entity2text.txt"
    path.write_bytes(path.read_bytes().replace("München".encode(), "M\xfcnchen".encode("latin-1")))
    _raises(tiny_copy, "entity2text.txt", 3, "text", match="UTF-8")


def test_duplicate_triple_within_file(tiny_copy):
    _append(tiny_copy / "train.tsv", _lines(tiny_copy / "train.tsv")[10])
    _raises(tiny_copy, "train.tsv", 201, None, match="duplicate triple (first on line 11)")


def test_test_triple_leaking_from_training(tiny_copy):
    _append(tiny_copy / "test.tsv", _lines(tiny_copy / "train.tsv")[2])
    _raises(tiny_copy, "test.tsv", 21, None, match="leaks from training")


def test_unknown_relation_without_text(tiny_copy):
    h, _, t = _lines(tiny_copy / "dev.tsv")[1].rstrip("\n").split("\t")
    _set_line(tiny_copy / "dev.tsv", 2, f"{h}\t/r/hates\t{t}\n")
    _raises(tiny_copy, "dev.tsv", 2, "relation", match="relation2text.txt")


def test_validation_entity_in_inductive_training(tiny_copy):
    ind = tiny_copy / "ind_split"
    valid_entity = _lines(ind / "dev-ents.txt")[0].strip()
    train_entity = _lines(ind / "train-ents.txt")[0].strip()
    _append(ind / "ind-train.tsv", f"{train_entity}\t/r/likes\t{valid_entity}\n")
    n = len(_lines(ind / "ind-train.tsv"))
    _raises(tiny_copy, "ind-train.tsv", n, "tail", match="ind-valid entity", inductive_dir="ind_split")


def test_test_entity_in_inductive_validation(tiny_copy):
    ind = tiny_copy / "ind_split"
    test_entity = _lines(ind / "test-ents.txt")[0].strip()
    _set_line(ind / "ind-dev.tsv", 3, f"{test_entity}\t/r/likes\t/e/00\n")
    _raises(tiny_copy, "ind-dev.tsv", 3, "head", match="ind-test entity", inductive_dir="ind_split")


def test_overlapping_entity_lists(tiny_copy):
    ind = tiny_copy / "ind_split"
    _append(ind / "test-ents.txt", _lines(ind / "train-ents.txt")[0])
    _raises(tiny_copy, "test-ents.txt", 7, "id", match="disjoint", inductive_dir="ind_split")


def test_inductive_validation_triple_without_unseen_entity(tiny_ind_copy):
    train = _lines(tiny_ind_copy / "ind-train.tsv")
    h = train[0].split("\t")[0]
    t = train[1].rstrip("\n").split("\t")[2]
    _append(tiny_ind_copy / "ind-dev.tsv", f"{h}\t/r/knows\t{t}\n")
    n = len(_lines(tiny_ind_copy / "ind-dev.tsv"))
    _raises(tiny_ind_copy, "ind-dev.tsv", n, "head/tail", match="unseen in training")


def test_incomplete_inductive_split(tiny_ind_copy):
    (tiny_ind_copy / "ind-test.tsv").unlink()
    with pytest.raises(DataError, match="missing ind-test.tsv"):
        load_dataset(tiny_ind_copy)


def test_missing_triple_file(tiny_copy):
    (tiny_copy / "dev.tsv").unlink()
    with pytest.raises(DataError, match="file not found") as info:
        load_dataset(tiny_copy)
    assert info.value.file.endswith("dev.tsv")


def test_unknown_dataset_lists_registered_names(tmp_path):
    with pytest.raises(ConfigError) as info:
        load_dataset(str(tmp_path / "no-such-thing"))
    assert info.value.field == "dataset"
    for name in list_datasets():
        assert name in str(info.value)


def test_inductive_test_triple_between_validation_and_training(tiny_ind_copy):
    kg = load_dataset(tiny_ind_copy)
    valid_entity = kg.entities[kg.entity_splits["ind-valid"][0]]
    train_entity = kg.entities[kg.entity_splits["ind-train"][0]]
    _append(tiny_ind_copy / "ind-test.tsv", f"{valid_entity}\t/r/knows\t{train_entity}\n")
    n = len(_lines(tiny_ind_copy / "ind-test.tsv"))
    _raises(tiny_ind_copy, "ind-test.tsv", n, "head/tail", match="ind-dev.tsv")
