"""Writes the inf1 example repository: `python -m model_packages.neuron.generate`.

Two Neuron models are generated from the example classifier's TorchScript
(`python -m model_packages.generate` writes it) with `deploy neuron
generate`'s Python API, each pinned to its own NeuronCores of an
ml.inf1.6xlarge (16 cores). On inf1 the file would be the output of
`deploy neuron compile`; elsewhere the generated model.py loads it on CPU.
"""

from __future__ import annotations

import argparse
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPOSITORY = HERE / "repository"
CLASSIFIER = HERE.parent / "examples" / "classifier" / "1" / "model.pt"
INSTANCE_TYPE = "ml.inf1.6xlarge"

# name → `deploy neuron generate` options
MODELS: dict[str, dict[str, object]] = {
    # Two instances over cores 0-3 (0-1 and 2-3); queued requests run as one batch.
    "classifier_batched": {
        "cores": "0:3",
        "instances": 2,
        "max_batch_size": 8,
        "preferred_batch_sizes": [4, 8],
        "max_queue_delay_us": 20000,
    },
    # One instance on cores 4-5, one request at a time.
    "classifier_single": {"cores": "4:5", "max_batch_size": 8, "per_request": True},
}


def write_repository(repository: Path = REPOSITORY, compiled: Path = CLASSIFIER) -> list[Path]:
    from deploy.neuron.generate import generate_model
    from deploy.neuron.planning import require_core_plan
    from deploy.neuron.spec import build_spec

    specs = [
        build_spec(
            name=name,
            compiled_model=compiled,
            inputs=["INPUT__0,FP32,3x32x32"],
            outputs=["OUTPUT__0,FP32,10"],
            **options,  # type: ignore[arg-type]
        )
        for name, options in MODELS.items()
    ]
    require_core_plan({spec.name: spec.cores for spec in specs}, INSTANCE_TYPE)
    return [generate_model(spec, repository / spec.name, force=True) for spec in specs]


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--repository", type=Path, default=REPOSITORY)
    parser.add_argument("--compiled-model", type=Path, default=CLASSIFIER)
    args = parser.parse_args(argv)
    for path in write_repository(args.repository, args.compiled_model):
        print(f"wrote {path}")


if __name__ == "__main__":
    main()
