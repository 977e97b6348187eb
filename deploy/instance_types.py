"""The instance types SageMaker hosts endpoints on, and the check against them.

The list is SageMaker's own: the `ProductionVariantInstanceType` enum of the
sagemaker service model that botocore ships (read from its data files, no AWS
call), so it follows botocore upgrades instead of a copy kept here. The enum is
the API's, not a region's: a type may still be unavailable in a region, which
SageMaker reports when the endpoint config is created.
"""

from __future__ import annotations

import difflib
from functools import cache
from typing import Any

from deploy.errors import ConfigError

SERVICE = "sagemaker"
SHAPE = "ProductionVariantInstanceType"


@cache
def hosting_instance_types() -> frozenset[str]:
    """Every instance type a SageMaker endpoint variant accepts."""
    from botocore.session import get_session

    model = get_session().get_service_model(SERVICE)
    shape: Any = model.shape_for(SHAPE)  # a StringShape: its `enum` lists the values
    return frozenset(shape.enum)


def suggestions(instance_type: str, *, count: int = 1) -> list[str]:
    """The known types closest to a misspelt one (best first)."""
    known = sorted(hosting_instance_types())
    guess = instance_type.strip().lower()
    if guess and not guess.startswith("ml."):
        guess = "ml." + guess  # `g5.xlarge`: the EC2 name of a SageMaker type
    return difflib.get_close_matches(guess, known, n=count, cutoff=0.75)


def require_instance_type(instance_type: str, *, where: str) -> None:
    """Raise `ConfigError` for a type SageMaker does not host endpoints on."""
    if instance_type in hosting_instance_types():
        return
    close = suggestions(instance_type)
    hint = f" (did you mean {close[0]}?)" if close else ""
    raise ConfigError(
        f"{instance_type!r} is not a SageMaker hosting instance type{hint}",
        where=where,
        fix=f"use {close[0]}"
        if close
        else "use a type such as ml.g5.xlarge (GPU) or "
        "ml.m5.xlarge (CPU); the list is the ProductionVariantInstanceType enum of "
        "SageMaker's API",
    )
