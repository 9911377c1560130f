"""Federation across different graphs (FKGE, Peng et al. 2021, arXiv:2105.07615): each holder keeps
its own graph, model and embedding space, finds the entities it shares with each other holder by
private set intersection, and improves through a DP exchange of their embeddings (docs/cross_graph.md).
"""

from textkg.federated.cross_graph.config import CrossGraphConfig, ExchangeConfig, HolderSpec, load_holders

__all__ = ["CrossGraphConfig", "ExchangeConfig", "HolderSpec", "load_holders"]
