"""KG embedding models: representations + fusion + interaction (see docs/models.md).

Public API::

    from textkg.models import build_model, get_preset
    model = build_model(get_preset("fused-transe"), num_entities=n, num_relations=r,
                        seen_entities=split.train_entities, text_features=x)
    scores = model(triples)                       # (..., 3) → (...)
    plan = model.lookup_plan(triples, generator)  # rows each triple reads
    scores = model.score_rows(triples, model.gather(plan))
"""

from textkg.models.build import build_model
from textkg.models.config import ModelConfig
from textkg.models.fusion import Fusion, get_fusion, list_fusions, register_fusion
from textkg.models.interactions import Interaction, get_interaction, list_interactions, register_interaction
from textkg.models.kge import KGEModel
from textkg.models.presets import get_preset, list_presets, register_preset
from textkg.models.representations import PooledTransformer, StructuralRepresentation, TextRepresentation
from textkg.models.top_layers import TopLayers, text_focus

__all__ = [
    "Fusion",
    "Interaction",
    "KGEModel",
    "ModelConfig",
    "PooledTransformer",
    "StructuralRepresentation",
    "TextRepresentation",
    "TopLayers",
    "build_model",
    "get_fusion",
    "get_interaction",
    "get_preset",
    "list_fusions",
    "list_interactions",
    "list_presets",
    "register_fusion",
    "register_interaction",
    "register_preset",
    "text_focus",
]
