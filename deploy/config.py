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

import os
import tomllib
from pathlib import Path
from typing import Any

from pydantic import Field, ValidationError
from pydantic_settings import (
    BaseSettings,
    InitSettingsSource,
    PydanticBaseSettingsSource,
    SettingsConfigDict,
)

from deploy.errors import ConfigError

ENV_PREFIX = "DEPLOY_"
CONFIG_FILE_ENV = "DEPLOY_CONFIG"
STAGE_ENV = "DEPLOY_STAGE"
DEFAULT_CONFIG_FILE = "deploy.toml"
DEFAULT_STAGE = "dev"


class DeploySettings(BaseSettings):
    """Settings shared by every `deploy` command and the CDK app."""

    model_config = SettingsConfigDict(
        env_prefix=ENV_PREFIX,
        env_nested_delimiter="__",
        extra="forbid",
        validate_default=True,
    )

    stage: str = Field(DEFAULT_STAGE, description="Stage name (a [stages.<name>] section).")
    repository: Path = Field(Path("model_packages"), description="Triton model repository.")
    package_dir: Path = Field(Path("build/models"), description="Where `deploy package` writes.")
    region: str = Field("us-east-1", description="AWS region.")
    endpoint_name: str = Field("deploy-triton", description="SageMaker endpoint name.")
    instance_type: str = Field("ml.g5.xlarge", description="SageMaker instance type.")


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


def _describe(exc: ValidationError) -> str:
    parts = []
    for error in exc.errors():
        location = ".".join(str(item) for item in error["loc"]) or "settings"
        parts.append(f"{location}: {error['msg']}")
    return "invalid configuration: " + "; ".join(parts)
