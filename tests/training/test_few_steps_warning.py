"""A finished run with few optimiser steps says so (issue 37: 3 epochs of a 2,874-term ontology were 21 steps)."""

from __future__ import annotations

from textkg.pipeline.job import MIN_STEPS, few_steps_warning


def test_few_steps_are_named_with_the_epochs_that_would_be_enough():
    text = few_steps_warning(21, 3)
    assert text is not None and "only 21 training steps (3 epochs of 7)" in text
    assert f"--epochs {-(-MIN_STEPS // 7)}" in text


def test_enough_steps_an_early_stop_or_no_training_get_no_warning():
    assert few_steps_warning(MIN_STEPS, 3) is None
    assert few_steps_warning(2688, 3) is None  # the README's hpo run
    assert few_steps_warning(21, 3, stopped="max_minutes") is None  # the user chose the stop
    assert few_steps_warning(0, 0) is None
