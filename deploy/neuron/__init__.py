"""Inferentia (ml.inf1): Neuron model generation, NeuronCore planning, the router."""

from __future__ import annotations

from deploy.neuron.generate import generate_model, model_config_text
from deploy.neuron.instances import NEURON_CORES, is_inferentia, neuron_cores
from deploy.neuron.planning import check_core_plan, repository_core_ranges, split_cores
from deploy.neuron.spec import CoreRange, NeuronModelSpec, TensorSpec, build_spec

__all__ = [
    "NEURON_CORES",
    "CoreRange",
    "NeuronModelSpec",
    "TensorSpec",
    "build_spec",
    "check_core_plan",
    "generate_model",
    "is_inferentia",
    "model_config_text",
    "neuron_cores",
    "repository_core_ranges",
    "split_cores",
]
