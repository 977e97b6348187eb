"""`[stages.X.models.NAME]`: one model's inference component (`hosting = "components"`).

Each field overrides what `deploy.hosting.components` derives from the model's
`instance_group`, its files and the instance catalogue; copies bound the
component's own autoscaling (`sagemaker:inference-component:DesiredCopyCount`).
A minimum of 0 copies lets the model, and the instances with it, scale to zero.
`canary` applies to `hosting = "multi-model"` (deploy.lifecycle.canary).
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field, model_validator


class ComponentSettings(BaseModel):
    model_config = ConfigDict(extra="forbid")

    accelerators: int | None = Field(
        None, ge=0, description="GPUs per copy (unset: from the model's KIND_GPU instance groups)."
    )
    memory_mb: int | None = Field(
        None, ge=128, description="Host memory per copy in MB, at least 128 (unset: from files)."
    )
    cpus: float | None = Field(
        None, ge=0.25, description="vCPUs per copy, at least 0.25 (unset: from instance groups)."
    )
    min_copies: int = Field(1, ge=0, description="Fewest copies; 0 scales the model to zero.")
    max_copies: int = Field(4, ge=1, description="Most copies autoscaling may run.")
    canary: float | None = Field(
        None,
        gt=0,
        le=50,
        description='hosting "multi-model": the percent of calls (above 0, at most 50) a new '
        "version of this model takes as a canary while the live version keeps the rest.",
    )

    @model_validator(mode="after")
    def _bounds(self) -> ComponentSettings:
        if self.max_copies < self.min_copies:
            raise ValueError(
                f"max_copies ({self.max_copies}) is below min_copies ({self.min_copies}): "
                "raise max_copies or lower min_copies"
            )
        return self
