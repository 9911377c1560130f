"""One registry pattern (issue 30): the shared helper's rules, and every family held to them."""

from __future__ import annotations

import ast
import importlib
from pathlib import Path
from types import SimpleNamespace

import pytest

from textkg.data.splits import list_candidate_protocols, list_splits
from textkg.errors import ConfigError
from textkg.registry import DuplicateNameError, Registry
from textkg.training.losses import list_losses

ROOT = Path(__file__).resolve().parents[1]


# ------------------------------------------------------------------------------------------------
# The helper


def test_register_get_names_contains():
    reg: Registry[int] = Registry("widget", field="model.widget")
    assert reg.register("b", 2) == 2
    reg.register("a", 1)
    assert reg.get("a") == 1 and "a" in reg and "c" not in reg and 3 not in reg
    assert reg.names() == ["a", "b"] and list(reg) == ["a", "b"] and len(reg) == 2
    assert reg.values() == [2, 1]  # registration order: where the first match wins


def test_registration_order_when_asked():
    reg: Registry[int] = Registry("preset", sort=False)
    for name in ("z", "a", "m"):
        reg.register(name, 0)
    assert reg.names() == ["z", "a", "m"]
    with pytest.raises(ConfigError, match="choose one of: z, a, m"):
        reg.get("b")


def test_a_taken_name_raises_unless_replace_even_for_the_same_object():
    reg: Registry[object] = Registry("widget", field="model.widget")
    obj = object()
    reg.register("a", obj)
    for again in (obj, object()):
        with pytest.raises(DuplicateNameError, match="widget name 'a' is already registered") as info:
            reg.register("a", again)
        assert isinstance(info.value, ConfigError) and info.value.field == "model.widget"
    assert reg.get("a") is obj  # a refused registration changes nothing
    new = object()
    assert reg.register("a", new, replace=True) is new and reg.get("a") is new


def test_unknown_names_list_the_registry_itself():
    reg: Registry[int] = Registry("widget", field="model.widget")
    reg.register("b", 2)
    reg.register("a", 1)
    with pytest.raises(ConfigError, match=r"unknown widget 'c'; choose one of: a, b") as info:
        reg.get("c")
    assert info.value.field == "model.widget" and not isinstance(info.value, DuplicateNameError)
    with pytest.raises(ConfigError, match="unknown widget"):
        reg.get(["unhashable"])  # type: ignore[arg-type]


def test_decorator_and_bad_names():
    reg: Registry[type] = Registry("widget")

    @reg.decorator("w")
    class W:
        pass

    assert reg.get("w") is W
    with pytest.raises(DuplicateNameError):
        reg.decorator("w")(type("Other", (), {}))
    for bad in ("", None, 3):
        with pytest.raises(ConfigError, match="non-empty string"):
            reg.register(bad, W)  # type: ignore[arg-type]


def test_copy_is_independent():
    reg: Registry[int] = Registry("widget", sort=False)
    reg.register("a", 1)
    other = reg.copy()
    other.register("b", 2)
    assert reg.names() == ["a"] and other.names() == ["a", "b"]
    assert (other.family, other.field, other.sort) == (reg.family, reg.field, reg.sort)


class _Widget:
    name = "widget-a"

    def __init__(self, size: int = 1, *, colour: str = "red") -> None:
        self.size, self.colour = size, colour


class _BigWidget(_Widget):
    name = "widget-b"


def test_make_takes_a_name_a_class_or_an_instance():
    """``Registry.make``: the "name, class or instance + kwargs" rule written once (issue 40)."""
    reg: Registry[type] = Registry("widget", field="model.widget")
    reg.register("a", _Widget)
    built = reg.make("a", 3, base=_Widget, colour="blue")
    assert type(built) is _Widget and (built.size, built.colour) == (3, "blue")
    assert type(reg.make(_BigWidget, base=_Widget)) is _BigWidget  # a class needs no registration
    instance = _BigWidget()
    assert reg.make(instance, base=_Widget) is instance  # an instance is returned as is
    with pytest.raises(ConfigError, match="arguments cannot be applied to a widget instance") as info:
        reg.make(instance, base=_Widget, kwargs_field="model.widget_kwargs", colour="blue")
    assert info.value.field == "model.widget_kwargs"
    with pytest.raises(ConfigError, match=r"bad arguments for widget 'a': .*shape") as info:
        reg.make("a", base=_Widget, kwargs_field="model.widget_kwargs", shape="round")
    assert info.value.field == "model.widget_kwargs"
    with pytest.raises(ConfigError, match="unknown widget 'c'; choose one of: a"):
        reg.make("c", base=_Widget)
    for bad in (int, 3, None):
        with pytest.raises(ConfigError, match="expected a widget name, class or instance") as info:
            reg.make(bad, base=_Widget)
        assert info.value.field == "model.widget"


def test_make_loads_lazy_entries():
    """A family of ``"module:Class"`` entries (the encoders) imports the class only when it is built."""
    loaded = []

    def load(target: str) -> type:
        loaded.append(target)
        return {"tests:Widget": _Widget}[target]

    reg: Registry[str] = Registry("encoder", load=load)
    reg.register("w", "tests:Widget")
    assert loaded == []
    assert type(reg.make("w", base=_Widget)) is _Widget and loaded == ["tests:Widget"]
    assert reg.copy().load is load
    with pytest.raises(ConfigError, match="expected an encoder name"):
        reg.make(object, base=_Widget)


# ------------------------------------------------------------------------------------------------
# Every family: the shared helper, one duplicate rule, choices listed from the registry


def _interaction():
    from textkg.models.interactions import Interaction

    return type("Other", (Interaction,), {"name": "transe"})


def _fusion():
    from textkg.models.fusion import Fusion

    return type("Other", (Fusion,), {"name": "text"})


def _preset():
    from textkg.models import ModelConfig

    return ModelConfig(dim=4)


def _dataset():
    from textkg.data.registry import DatasetSpec

    return DatasetSpec(name="hpo", build=dict, sources=dict, version=str, summary="a stand-in")


def _file_format():
    from textkg.data.files import FileFormat

    return FileFormat(name="obo", suffixes=(".stand-in",), load=lambda path, options: None, options=(), summary="")


def _claim():
    from textkg.privacy.claims import Claim

    return type("Other", (Claim,), {})


def _mechanism():
    from textkg.training.mechanisms import Mechanism

    return type("Other", (Mechanism,), {})


def _loss():
    from textkg.training.losses import LossSpec

    return LossSpec(lambda scores, **kw: scores[..., 0], ("margin",))


#: family → (module, registry attribute, a taken name, a new object, register(obj, **replace) → None)
FAMILIES = {
    "encoder": (
        "textkg.encoders.registry",
        "_FROZEN",
        "bert",
        lambda: "textkg.encoders.char_ngrams:CharNgramEncoder",
        lambda m, obj, **kw: m.register_encoder("bert", obj, **kw),
    ),
    "trainable encoder": (
        "textkg.encoders.registry",
        "_TRAINABLE",
        "dkrl",
        lambda: "textkg.encoders.lstm_ae:LSTMAutoencoder",
        lambda m, obj, **kw: m.register_encoder("dkrl", obj, trainable=True, **kw),
    ),
    "interaction": (
        "textkg.models.interactions",
        "_REGISTRY",
        "transe",
        _interaction,
        lambda m, obj, **kw: m.register_interaction(obj, **kw),
    ),
    "fusion": ("textkg.models.fusion", "_REGISTRY", "text", _fusion, lambda m, obj, **kw: m.register_fusion(obj, **kw)),
    "preset": (
        "textkg.models.presets",
        "_PRESETS",
        "transe",
        _preset,
        lambda m, obj, **kw: m.register_preset("transe", obj, **kw),
    ),
    "dataset": (
        "textkg.data.registry",
        "_REGISTRY",
        "hpo",
        _dataset,
        lambda m, obj, **kw: m.register_dataset(obj, **kw),
    ),
    "file format": (
        "textkg.data.files",
        "_FORMATS",
        "obo",
        _file_format,
        lambda m, obj, **kw: m.register_file_format(obj, **kw),
    ),
    "attack": (
        "textkg.audit.attacks",
        "_ATTACKS",
        "score",
        lambda: lambda predictor, triples, **kw: None,
        lambda m, obj, **kw: m.register_attack("score", obj, **kw),
    ),
    "privacy mechanism": (
        "textkg.training.mechanisms",
        "_MECHANISMS",
        "dp-sgd",
        _mechanism,
        lambda m, obj, **kw: m.register_mechanism("dp-sgd", **kw)(obj),
    ),
    "loss": (
        "textkg.training.losses",
        "_REGISTRY",
        "margin",
        _loss,
        lambda m, obj, **kw: m.register_loss("margin", obj.fn, options=obj.options, **kw),
    ),
    "split kind": (
        "textkg.data.splits",
        "_BUILDERS",
        "inductive",
        lambda: lambda kg, **kw: None,
        lambda m, obj, **kw: m.register_split("inductive", obj, **kw),
    ),
    "candidate protocol": (
        "textkg.data.splits",
        "_CANDIDATES",
        "blp",
        lambda: lambda kg, split, which: None,
        lambda m, obj, **kw: m.register_candidate_protocol("blp", obj, **kw),
    ),
    "exchange method": (
        "textkg.federated.cross_graph.methods",
        "_METHODS",
        "ppat",
        lambda: "textkg.federated.cross_graph.runner:ProcrustesExchange",
        lambda m, obj, **kw: m.register_exchange_method("ppat", obj, **kw),
    ),
    "accountant": (
        "textkg.privacy.claims",
        "_CLAIMS",
        "rdp",
        _claim,
        lambda m, obj, **kw: m.register_claim("rdp", **kw)(obj),
    ),
}


@pytest.mark.parametrize("family", sorted(FAMILIES))
def test_every_family_has_one_duplicate_rule(family, monkeypatch):
    """Registering a taken name raises the same error in every family; ``replace=True`` replaces."""
    module_name, attribute, taken, make, register = FAMILIES[family]
    module = importlib.import_module(module_name)
    registry = getattr(module, attribute)
    assert isinstance(registry, Registry), f"{module_name}.{attribute} is not a textkg.registry.Registry"
    monkeypatch.setattr(module, attribute, registry.copy())  # what this test registers stays here
    before = getattr(module, attribute).get(taken)
    obj = make()
    with pytest.raises(DuplicateNameError, match="already registered"):
        register(module, obj)
    assert getattr(module, attribute).get(taken) is before
    register(module, obj, replace=True)
    assert getattr(module, attribute).get(taken) == obj
    with pytest.raises(ConfigError, match="; choose one of: " + ", ".join(registry.names())):
        registry.get("no-such-name")


def test_every_module_with_a_register_function_is_in_the_meta_test():
    """A new family (a module-level ``register_*`` function) uses the shared helper and is tested above."""
    covered = {module for module, *_ in FAMILIES.values()}
    found = {}
    for path in (ROOT / "textkg").rglob("*.py"):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        names = [n.name for n in tree.body if isinstance(n, ast.FunctionDef) and n.name.startswith("register_")]
        if names:
            module = ".".join(path.relative_to(ROOT).with_suffix("").parts)
            found[module] = names
            assert "Registry(" in path.read_text(encoding="utf-8"), f"{module} registers without textkg.registry"
    assert set(found) <= covered, {m: n for m, n in found.items() if m not in covered}


def test_public_wrappers_keep_their_answers():
    """The thin wrappers list what they listed before the move onto the helper."""
    from textkg.audit.attacks import list_attacks
    from textkg.data import list_datasets
    from textkg.data.files import list_file_formats
    from textkg.encoders import list_encoders, list_trainable_encoders
    from textkg.models import list_fusions, list_interactions, list_presets
    from textkg.privacy.claims import registered_claims
    from textkg.training.mechanisms import registered_mechanisms

    assert list_attacks() == ("loss", "rank", "score")
    assert {"hpo", "hpo-small"} <= set(list_datasets()) and isinstance(list_datasets(), tuple)
    assert {"obo", "owl", "rdf"} <= set(list_file_formats())
    assert {"bert", "char-ngrams", "concat"} <= set(list_encoders()) and list_trainable_encoders() == [
        "dkrl",
        "lstm-ae",
    ]
    assert list_fusions() == ["gate", "structural", "text", "weighted"]
    assert list_interactions() == ["complex", "distmult", "rotate", "transe", "transe-typed"]
    assert list_presets()[:2] == ["transe", "transe-l2"]  # the order of docs/models.md, not sorted
    assert registered_claims() == ["pld", "rdp"] and registered_mechanisms() == ["dp-sgd", "simulation"]


def test_cli_choices_are_the_registries_names():
    """Where the CLI lists a family's names by hand (to keep `textkg --help` free of torch), the list is
    the registry's."""
    from textkg.audit.attacks import list_attacks
    from textkg.cli.main import build_parser
    from textkg.privacy.claims import registered_claims
    from textkg.training.mechanisms import registered_mechanisms

    choices: dict[str, set] = {}
    parsers = [build_parser()]
    while parsers:
        parser = parsers.pop()
        for action in parser._actions:
            if action.choices is not None and isinstance(action.choices, dict):
                parsers.extend(action.choices.values())  # sub-commands
            elif action.choices is not None:
                for flag in action.option_strings:
                    choices.setdefault(flag, set()).update(action.choices)
    assert choices["--accountant"] == set(registered_claims())
    assert choices["--mechanism"] == set(registered_mechanisms())
    assert choices["--attack"] == set(list_attacks())
    assert choices["--loss"] == set(list_losses())
    assert choices["--split"] == set(list_splits())
    assert choices["--candidates"] == set(list_candidate_protocols())


def _flag_choices(flag: str) -> list:
    from textkg.cli.main import build_parser

    parsers = [build_parser()]
    while parsers:
        parser = parsers.pop()
        for action in parser._actions:
            if action.choices is not None and isinstance(action.choices, dict):
                parsers.extend(action.choices.values())
            elif flag in action.option_strings:
                return list(action.choices)
    raise AssertionError(f"no {flag} with choices")


# ------------------------------------------------------------------------------------------------
# Losses, split builders and candidate protocols: registries with the names, order and errors of the
# hand-kept tuples they replace


def test_losses_splits_and_candidates_keep_their_names_order_and_errors():
    from textkg.data.splits import make_split
    from textkg.training.config import DataConfig, TrainConfig
    from textkg.training.losses import get_loss

    assert list_losses() == ("margin", "softplus", "softmax") and _flag_choices("--loss") == list(list_losses())
    assert list_splits() == ("transductive", "inductive") and _flag_choices("--split") == list(list_splits())
    assert list_candidate_protocols() == ("blp", "all", "split")
    assert _flag_choices("--candidates") == list(list_candidate_protocols())
    with pytest.raises(ConfigError, match="'hinge' is not one of margin, softplus, softmax") as info:
        TrainConfig(loss="hinge")
    assert info.value.field == "train.loss"
    with pytest.raises(ConfigError, match="'semi' is not one of transductive, inductive") as info:
        DataConfig(split="semi")
    assert info.value.field == "data.split"
    with pytest.raises(ConfigError, match="'every' is not one of blp, all, split"):
        TrainConfig(candidates="every")
    with pytest.raises(ConfigError, match="unknown loss 'hinge'; choose from margin, softmax, softplus"):
        get_loss("hinge")
    with pytest.raises(ConfigError, match=r"unknown split kind 'semi'; choose one of \['inductive', 'transductive'\]"):
        make_split(None, "semi")  # type: ignore[arg-type]


def test_make_loss_passes_each_loss_its_own_options():
    import functools

    from textkg.training.config import TrainConfig
    from textkg.training.losses import make_loss, margin_ranking, softmax_cross_entropy, softplus_loss

    margin = make_loss(TrainConfig(loss="margin", margin=2.5))
    assert isinstance(margin, functools.partial) and margin.func is margin_ranking
    assert margin.keywords == {"margin": 2.5}
    softmax = make_loss(TrainConfig(loss="softmax", temperature=0.05))
    assert softmax.func is softmax_cross_entropy and softmax.keywords == {"temperature": 0.05}
    assert make_loss(TrainConfig(loss="softplus")) is softplus_loss


def test_a_registered_loss_is_a_config_choice(monkeypatch):
    """The config checks the registry itself, not a hand-kept tuple: a new loss needs no other edit."""
    import torch

    from textkg.training import losses
    from textkg.training.config import TrainConfig

    monkeypatch.setattr(losses, "_REGISTRY", losses._REGISTRY.copy())

    def squared(scores, *, margin):
        return (margin - scores[..., 0]).pow(2)

    losses.register_loss("squared", squared, options=("margin",))
    cfg = TrainConfig(loss="squared", margin=3.0)
    assert losses.list_losses()[-1] == "squared"
    assert losses.make_loss(cfg)(torch.tensor([[1.0, 0.0]])).item() == 4.0


def test_a_registered_split_builder_is_a_config_choice(monkeypatch):
    from textkg.data import splits
    from textkg.training.config import DataConfig

    monkeypatch.setattr(splits, "_BUILDERS", splits._BUILDERS.copy())
    seen = {}

    def everything_trains(kg, **kwargs):
        seen.update(kwargs)
        return "a split"

    splits.register_split("all-train", everything_trains)
    assert DataConfig(split="all-train").split == "all-train"
    kg = SimpleNamespace(info={})  # a builder that needs nothing of the graph but its info
    assert splits.make_split(kg, "all-train", seed=3) == "a split"  # type: ignore[arg-type]
    assert seen["seed"] == 3 and seen["valid_fraction"] == 0.1
