"""Inferentia (ml.inf1): Neuron model generation and NeuronCore planning.

ml.inf1 runs no multi-model endpoints: its models are served behind the router
(`deploy.hosting.router_model`, `deploy.hosting.router_archive`).

spec.py        arguments of `deploy neuron generate`, parsed and checked
instances.py   NeuronCores per inf1 size
planning.py    per-instance core slices; fit and overlap on an inf1 size
generate.py    the python-backend model (config.pbtxt + templates/neuron_model.py.tmpl)
compile.py     torch-neuron tracing (Neuron package repository)
"""

from __future__ import annotations

from deploy.hosting.router_model import single_model_manifest, write_manifest, write_router
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
    "single_model_manifest",
    "split_cores",
    "write_manifest",
    "write_router",
]
