"""One configuration model for the CLI, the CDK app and the SDK defaults.

Precedence, highest first:

1. explicit values (CLI flags, CDK `-c` context) passed to `load_settings`;
2. environment variables `DEPLOY_<FIELD>` (nested fields: `DEPLOY_<GROUP>__<FIELD>`);
3. `deploy.toml`: the `[stages.<stage>]` section, over the `[default]` section;
4. the defaults below.

`deploy.toml` is looked up in the current directory unless `DEPLOY_CONFIG` or
the `config_file` argument names another file. Later features add fields here.
"""

from __future__ import annotations

import difflib
import os
import re
import tomllib
from pathlib import Path
from typing import Any

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    field_validator,
    model_validator,
)
from pydantic_settings import (
    BaseSettings,
    InitSettingsSource,
    PydanticBaseSettingsSource,
    SettingsConfigDict,
)

from deploy.catalogue.images import DEFAULT_TRITON_VERSION
from deploy.component_settings import ComponentSettings
from deploy.errors import ConfigError
from deploy.guardrails import RolloutSettings

ENV_PREFIX = "DEPLOY_"
CONFIG_FILE_ENV = "DEPLOY_CONFIG"
STAGE_ENV = "DEPLOY_STAGE"
DEFAULT_CONFIG_FILE = "deploy.toml"
DEFAULT_STAGE = "dev"
# ServerlessConfig.MemorySizeInMB: 1 GB steps from 1 to 6 GB (SageMaker API reference).
SERVERLESS_MEMORY_MB = (1024, 2048, 3072, 4096, 5120, 6144)
# Neuron families: no multi-model endpoints, no SageMaker Triton image for an async lane
# (deploy.hosting.rules.NO_MME_FAMILIES says the same; a test keeps the two equal).
ASYNC_INCAPABLE_FAMILIES = ("inf1", "inf2", "trn1", "trn2")


class InfraSettings(BaseModel):
    """Infrastructure settings read by the CDK app (`deploy_infra/`); instance type is top-level."""

    model_config = ConfigDict(extra="forbid")

    account: str | None = Field(
        None, pattern=r"^\d{12}$", description="AWS account id (None: the CLI's credentials)."
    )
    initial_instance_count: int = Field(1, ge=1, description="Instances the variant starts with.")
    min_instance_count: int = Field(
        1, ge=0, description="Autoscaling minimum (0: hosting async scales to zero when idle)."
    )
    max_instance_count: int = Field(2, ge=1, description="Autoscaling maximum.")
    target_invocations_per_instance: float = Field(
        100.0, gt=0, description="Target tracking on SageMakerVariantInvocationsPerInstance."
    )
    gpu_utilization_target: float | None = Field(
        None, gt=0, le=100, description="Optional target tracking on GPUUtilization (percent)."
    )
    scale_in_cooldown_s: int = Field(300, ge=0, description="Scale-in cooldown (seconds).")
    scale_out_cooldown_s: int = Field(60, ge=0, description="Scale-out cooldown (seconds).")
    vpc_id: str | None = Field(None, description="Existing VPC id (None: create one).")
    kms_key_arn: str | None = Field(None, description="Existing KMS key ARN (None: create one).")
    triton_version: str = Field(
        DEFAULT_TRITON_VERSION, description="SageMaker Triton image version."
    )
    model_bucket_name: str | None = Field(None, description="Model-store bucket (None: generated).")
    model_prefix: str = Field(
        "models/", pattern=r"^([A-Za-z0-9!_.*'()-]+/)+$", description="Model-store key prefix."
    )
    model_archive: str | None = Field(
        None,
        pattern=r"^([A-Za-z0-9!_.*'()-]+/)*[A-Za-z0-9!_.*'()-]+\.tar\.gz$",
        description="Router layouts (single-model, async, serverless): the archive's key "
        "under model_prefix (None: `<the mode's folder>model.tar.gz`, e.g. inf1/model.tar.gz; "
        "`deploy up` sets a content-derived one, so new bytes give a new SageMaker Model).",
    )
    alarm_5xx_errors: int = Field(1, ge=1, description="Invocation5XXErrors per minute.")
    alarm_model_latency_p99_ms: float = Field(1000.0, gt=0, description="ModelLatency p99 (ms).")
    alarm_model_loading_wait_ms: float = Field(
        5000.0, gt=0, description="ModelLoadingWaitTime average (ms)."
    )
    alarm_memory_percent: float = Field(90.0, gt=0, le=100, description="Memory utilisation.")
    alarm_gpu_memory_percent: float = Field(
        90.0, gt=0, le=100, description="GPU memory utilisation."
    )
    alarm_disk_percent: float = Field(85.0, gt=0, le=100, description="Disk utilisation.")
    notification_email: str | None = Field(None, description="E-mail subscribed to alarms.")
    notification_topic_arn: str | None = Field(None, description="Existing SNS topic for alarms.")
    data_capture: bool = Field(False, description="Capture requests/responses to the model store.")
    data_capture_percent: int = Field(100, ge=1, le=100, description="Sampling percentage.")
    detailed_observability: bool = Field(
        True,
        description="EndpointConfig MetricsConfig.EnableDetailedObservability: container, "
        "per-GPU and per-instance metrics.",
    )
    api: bool = Field(True, description="Deploy the HTTP API front door (API Gateway + Lambda).")
    # Serverless hosting (ProductionVariant.ServerlessConfig): SageMaker's own bounds.
    serverless_memory_mb: int = Field(
        2048,
        ge=SERVERLESS_MEMORY_MB[0],
        le=SERVERLESS_MEMORY_MB[-1],
        description="Serverless stages: memory per concurrent copy, 1024-6144 MB in 1024 MB "
        "steps (it also sets the CPU share).",
    )
    serverless_max_concurrency: int = Field(
        5, ge=1, le=200, description="Serverless stages: most concurrent invocations (1-200)."
    )
    serverless_provisioned_concurrency: int | None = Field(
        None,
        ge=1,
        le=200,
        description="Serverless stages: copies kept warm (billed while provisioned); at most "
        "serverless_max_concurrency. None: on demand only.",
    )

    @field_validator("serverless_memory_mb")
    @classmethod
    def _memory_in_steps(cls, value: int) -> int:
        if value not in SERVERLESS_MEMORY_MB:
            raise ValueError(
                f"{value} MB is not a serverless memory size; SageMaker takes "
                + ", ".join(str(size) for size in SERVERLESS_MEMORY_MB)
            )
        return value

    async_max_concurrent_invocations: int = Field(
        4, ge=1, le=1000, description="hosting async: MaxConcurrentInvocationsPerInstance."
    )
    async_backlog_per_instance: float = Field(
        5.0,
        gt=0,
        description="hosting async: target tracking on ApproximateBacklogSizePerInstance.",
    )

    @model_validator(mode="after")
    def _counts_are_ordered(self) -> InfraSettings:
        if not (self.min_instance_count <= self.initial_instance_count <= self.max_instance_count):
            raise ValueError(
                "need min_instance_count <= initial_instance_count <= max_instance_count"
            )
        provisioned = self.serverless_provisioned_concurrency
        if provisioned is not None and provisioned > self.serverless_max_concurrency:
            raise ValueError(
                f"serverless_provisioned_concurrency ({provisioned}) is above "
                f"serverless_max_concurrency ({self.serverless_max_concurrency}); SageMaker "
                "keeps at most max concurrency warm"
            )
        return self


class DeploySettings(BaseSettings):
    """Settings shared by every `deploy` command and the CDK app."""

    model_config = SettingsConfigDict(
        env_prefix=ENV_PREFIX,
        env_nested_delimiter="__",
        extra="forbid",
        validate_default=True,
    )

    stage: str = Field(DEFAULT_STAGE, description="Stage name (a [stages.<name>] section).")
    repository: Path = Field(
        default_factory=lambda: default_repository(),
        description="Triton model repository (unset: models/ or model_repository/, the "
        "first found here).",
    )
    package_dir: Path = Field(Path("build/models"), description="Where `deploy package` writes.")
    region: str = Field("us-east-1", description="AWS region.")
    endpoint_name: str = Field(
        default_factory=lambda: default_endpoint_name(),
        description="SageMaker endpoint name (unset: the project folder's name, the folder "
        "of deploy.toml).",
    )
    instance_type: str = Field("ml.g5.xlarge", description="SageMaker instance type.")
    hosting: str | None = Field(
        None,
        description="How the endpoint hosts the models: multi-model, single-model, async, "
        "serverless or components (deploy.hosting); unset: single-model on ml.inf1.*, else "
        "multi-model.",
    )
    async_lane: bool = Field(
        False,
        description="hosting multi-model: pair the real-time endpoint with an asynchronous "
        "one (`<endpoint_name>-async`, the router layout) that the SDK sends requests over "
        "6 MB to; needs a GPU or CPU instance type.",
    )
    local_port: int = Field(
        8080,
        ge=0,
        le=65535,
        description="Port of the local endpoint (`deploy serve`, `deploy up --local`); 0: any.",
    )
    pip_index_url: str | None = Field(
        None,
        description="Package index (simple API URL) for requirements.txt environments, e.g. "
        "a company mirror; unset: PyPI. A requirements file never chooses the index.",
    )
    repository_code: bool = Field(
        True,
        description="Run code from repositories and scripts (auto_complete_config, bind "
        "scripts, TorchScript sample runs, python models), announced and boxed; false: "
        "as --no-repo-code, a model that needs its code is an error.",
    )
    infra: InfraSettings = Field(default_factory=InfraSettings)
    rollout: RolloutSettings = Field(
        default_factory=RolloutSettings,
        description="[stages.X.rollout]: how endpoint updates shift traffic (deploy.guardrails).",
    )
    models: dict[str, ComponentSettings] = Field(
        default_factory=dict,
        description='[stages.X.models.NAME]: hosting "components": a model\'s accelerators, '
        "memory_mb, cpus, min_copies and max_copies (deploy.component_settings).",
    )

    def stack_name(self, component: str) -> str:
        """The CloudFormation stack of a component: `<endpoint_name>-<stage>-<component>`.

        The one place stack names are made (the CDK app and `deploy up` both ask
        here). An endpoint name that already names the stage as one of its
        dash-separated parts (`deploy-triton-staging` for stage `staging`) does
        not get it twice: `deploy-triton-staging-endpoint`.
        """
        if f"-{self.stage}-" in f"-{self.endpoint_name}-":
            return f"{self.endpoint_name}-{component}"
        return f"{self.endpoint_name}-{self.stage}-{component}"

    @model_validator(mode="after")
    def _lane_needs_multi_model(self) -> DeploySettings:
        if not self.async_lane:
            return self
        from deploy.hosting import MODES

        if self.hosting is not None and not MODES[self.hosting].async_lane:
            raise ValueError(
                f"async_lane pairs a multi-model endpoint with an asynchronous one; hosting "
                f"{self.hosting!r} has no lane: remove async_lane or use hosting multi-model"
            )
        family = self.instance_type.split(".")[1] if self.instance_type.count(".") >= 2 else ""
        if family in ASYNC_INCAPABLE_FAMILIES:
            raise ValueError(
                f"async_lane needs an instance type that runs the SageMaker Triton image "
                f"(GPU or CPU, e.g. ml.g5.xlarge or ml.m5.xlarge); {self.instance_type} does "
                "not: remove async_lane or change instance_type"
            )
        return self

    @field_validator("pip_index_url")
    @classmethod
    def _index_is_a_url(cls, value: str | None) -> str | None:
        from deploy.envs.installer import index_url_problem

        problem = index_url_problem(value) if value is not None else None
        if problem:
            raise ValueError(problem)
        return value

    @field_validator("hosting")
    @classmethod
    def _known_hosting(cls, value: str | None) -> str | None:
        # The names are the manifest contract's (deploy.client.manifest imports nothing).
        from deploy.client.manifest import HOSTINGS

        if value is not None and value not in HOSTINGS:
            close = difflib.get_close_matches(value, HOSTINGS, n=1)
            hint = f" (did you mean {close[0]}?)" if close else ""
            raise ValueError(f"unknown hosting {value!r}{hint}; use one of {', '.join(HOSTINGS)}")
        return value


# A project's model repository, by the names projects use (`deploy init` makes the first).
REPOSITORY_NAMES = ("models", "model_repository")
# SageMaker endpoint names: ^[a-zA-Z0-9](-*[a-zA-Z0-9]){0,62}; room is left for a
# `-staging` suffix and the stack names made from it.
_ENDPOINT_NAME_ROOM = 50


def default_repository(project: Path | None = None) -> Path:
    """The project's model repository: the first of REPOSITORY_NAMES found (relative
    paths stay relative to cwd, as every path setting does)."""
    for name in REPOSITORY_NAMES:
        if ((project or Path()) / name).is_dir():
            return Path(name) if project is None else project / name
    return Path(REPOSITORY_NAMES[0]) if project is None else project / REPOSITORY_NAMES[0]


def endpoint_name_for(folder: Path) -> str:
    """A SageMaker endpoint name made from a folder's name (`My_Project` → `my-project`)."""
    words = re.findall(r"[a-z0-9]+", folder.resolve().name.lower())
    name = "-".join(words)[:_ENDPOINT_NAME_ROOM].strip("-")
    return name or "triton"


def default_endpoint_name() -> str:
    """The project folder's name: the folder of the settings file (deploy.toml here, or
    DEPLOY_CONFIG's), whether the file exists or not."""
    return endpoint_name_for(settings_file().absolute().parent)


class _TomlStageSource(PydanticBaseSettingsSource):
    """Reads `[default]` then `[stages.<stage>]` from deploy.toml."""

    def __init__(self, settings_cls: type[BaseSettings], path: Path | None, stage: str) -> None:
        super().__init__(settings_cls)
        self._values = _read_stage_section(path, stage)

    def get_field_value(self, field: Any, field_name: str) -> tuple[Any, str, bool]:
        return self._values.get(field_name), field_name, False

    def __call__(self) -> dict[str, Any]:
        return dict(self._values)


def _read_stage_section(path: Path | None, stage: str) -> dict[str, Any]:
    if path is None or not path.is_file():
        return {}
    try:
        document = tomllib.loads(path.read_text(encoding="utf-8"))
    except (OSError, tomllib.TOMLDecodeError) as exc:
        raise ConfigError(f"cannot read TOML: {exc}", where=str(path)) from exc
    stages = document.get("stages", {})
    if not isinstance(stages, dict):
        raise ConfigError("[stages] must be a table of stage sections", where=str(path))
    if stage not in stages and stages and stage != DEFAULT_STAGE:
        known = ", ".join(sorted(stages)) or "none"
        raise ConfigError(
            f"stage {stage!r} has no [stages.{stage}] section (known stages: {known})",
            where=str(path),
            fix=f"add a [stages.{stage}] section or pick one of the known stages",
        )
    values: dict[str, Any] = {}
    for section in (document.get("default", {}), stages.get(stage, {})):
        if not isinstance(section, dict):
            raise ConfigError("stage sections must be TOML tables", where=str(path))
        _merge(values, section)
    return values


def _merge(into: dict[str, Any], update: dict[str, Any]) -> None:
    for key, value in update.items():
        if isinstance(value, dict) and isinstance(into.get(key), dict):
            _merge(into[key], value)
        else:
            into[key] = value


def load_settings(
    *,
    stage: str | None = None,
    config_file: Path | None = None,
    settings_cls: type[DeploySettings] = DeploySettings,
    **overrides: Any,
) -> DeploySettings:
    """Build settings with the documented precedence.

    `overrides` are explicit values (flags); `None` means "not given".
    """
    chosen_stage = stage or os.environ.get(STAGE_ENV) or DEFAULT_STAGE
    path = config_file or Path(os.environ.get(CONFIG_FILE_ENV, DEFAULT_CONFIG_FILE))
    if config_file is not None and not config_file.is_file():
        raise ConfigError("configuration file not found", where=str(config_file))
    explicit = {key: value for key, value in overrides.items() if value is not None}
    explicit["stage"] = chosen_stage

    class _Sourced(settings_cls):  # type: ignore[valid-type,misc]
        @classmethod
        def settings_customise_sources(
            cls,
            settings_cls: type[BaseSettings],
            init_settings: PydanticBaseSettingsSource,
            env_settings: PydanticBaseSettingsSource,
            dotenv_settings: PydanticBaseSettingsSource,
            file_secret_settings: PydanticBaseSettingsSource,
        ) -> tuple[PydanticBaseSettingsSource, ...]:
            return (
                InitSettingsSource(settings_cls, init_kwargs=explicit),
                env_settings,
                _TomlStageSource(settings_cls, path, chosen_stage),
            )

    try:
        return _Sourced()
    except ValidationError as exc:
        raise ConfigError(_describe(exc), where=str(path), fix="correct the named setting") from exc


def settings_file(config_file: Path | None = None) -> Path:
    """The file settings are read from (`DEPLOY_CONFIG`, else deploy.toml here)."""
    return config_file or Path(os.environ.get(CONFIG_FILE_ENV, DEFAULT_CONFIG_FILE))


def configured_value(
    field: str, *, stage: str | None = None, config_file: Path | None = None
) -> tuple[Any, str] | None:
    """A top-level field as deploy.toml sets it for the stage, and where (None: unset).

    For callers that rank deploy.toml among other sources of their own (the
    AWS region comes after the AWS environment and profile, as boto3 users
    expect).
    """
    chosen_stage = stage or os.environ.get(STAGE_ENV) or DEFAULT_STAGE
    path = config_file or Path(os.environ.get(CONFIG_FILE_ENV, DEFAULT_CONFIG_FILE))
    values = _read_stage_section(path, chosen_stage)
    if field not in values:
        return None
    return values[field], str(path)


def _describe(exc: ValidationError) -> str:
    parts = []
    for error in exc.errors():
        location = ".".join(str(item) for item in error["loc"]) or "settings"
        parts.append(f"{location}: {error['msg']}")
    return "invalid configuration: " + "; ".join(parts)
