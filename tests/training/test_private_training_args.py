"""PrivateTraining needs a noise multiplier or a target ε; without either it says so."""

import pytest
import torch

from textkg.errors import PrivacyError
from textkg.training.config import PrivacyConfig
from textkg.training.private_training import PrivateTraining


def _build(cfg: PrivacyConfig) -> PrivateTraining:
    triples = torch.tensor([[0, 0, 1], [1, 0, 2], [2, 0, 3], [3, 0, 0]])
    return PrivateTraining(
        cfg,
        private_triples=triples,
        batch_size=2,
        planned_epochs=1,
        entity_pool=torch.arange(4),
        loss_fn=None,
        num_negatives=1,
        trained_parameters=[],
    )


def test_neither_sigma_nor_target_is_a_privacy_error():
    # PrivacyConfig checks this itself except in mode "none", which a PrivateTraining should never get
    with pytest.raises(PrivacyError, match="--noise-multiplier or --target-epsilon") as err:
        _build(PrivacyConfig(mode="none"))
    assert err.value.field == "privacy.noise_multiplier"


def test_sigma_given_is_used_as_is():
    p = _build(PrivacyConfig(mode="full", noise_multiplier=1.5))
    assert p.noise_multiplier == 1.5 and not p.calibrated
    p.close()


@pytest.mark.parametrize("accountant", ["rdp", "pld"])
def test_target_is_calibrated_and_the_planned_steps_fit_it(accountant):
    p = _build(PrivacyConfig(mode="full", target_epsilon=4.0, accountant=accountant))
    assert p.calibrated and p.noise_multiplier > 0
    for _ in range(p.planned_steps):
        assert not p.budget_exhausted()
        p.accountant.step(p.next_event())
    if accountant == "rdp":
        assert 0 < p.epsilon() <= 4.0
    p.close()
