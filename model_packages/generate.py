"""Writes the example models' weights (never committed): `python -m model_packages.generate`.

The classifier is a small CNN with a fixed seed, traced with `torch.jit.trace`,
so every run writes a model that computes the same function.
"""

from __future__ import annotations

import argparse
from pathlib import Path

EXAMPLES = Path(__file__).resolve().parent / "examples"
CLASSIFIER_SEED = 20240601


def build_classifier() -> object:
    import torch
    from torch import nn

    torch.manual_seed(CLASSIFIER_SEED)
    model = nn.Sequential(
        nn.Conv2d(3, 8, kernel_size=3, padding=1),
        nn.ReLU(),
        nn.MaxPool2d(2),
        nn.Conv2d(8, 16, kernel_size=3, padding=1),
        nn.ReLU(),
        nn.AdaptiveAvgPool2d(4),
        nn.Flatten(),
        nn.Linear(16 * 4 * 4, 10),
    )
    model.eval()
    return model


def write_classifier(repository: Path = EXAMPLES) -> Path:
    """Trace the classifier and write `classifier/1/model.pt` (atomically)."""
    import torch

    model = build_classifier()
    example = torch.zeros(1, 3, 32, 32)
    with torch.no_grad():
        traced = torch.jit.trace(model, example)
    target = repository / "classifier" / "1" / "model.pt"
    target.parent.mkdir(parents=True, exist_ok=True)
    partial = target.with_name(target.name + ".partial")
    torch.jit.save(traced, str(partial))
    partial.replace(target)
    return target


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--repository", type=Path, default=EXAMPLES)
    args = parser.parse_args(argv)
    path = write_classifier(args.repository)
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
