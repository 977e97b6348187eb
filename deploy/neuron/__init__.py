"""Inferentia (ml.inf1): Neuron model generation, NeuronCore planning, the router.

spec.py        arguments of `deploy neuron generate`, parsed and checked
instances.py   NeuronCores per inf1 size
planning.py    per-instance core slices; fit and overlap on an inf1 size
generate.py    the python-backend model (config.pbtxt + templates/neuron_model.py.tmpl)
router.py      the BLS router (templates/router_model.py.tmpl) and the single-model manifest
package.py     the inf1 layout as one single-model archive
compile.py     torch-neuron tracing (Neuron package repository)
"""

from __future__ import annotations

from deploy.neuron.generate import generate_model, model_config_text
from deploy.neuron.instances import NEURON_CORES, is_inferentia, neuron_cores
from deploy.neuron.planning import check_core_plan, repository_core_ranges, split_cores
from deploy.neuron.router import single_model_manifest, write_manifest, write_router
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
