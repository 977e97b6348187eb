"""Errors the `deploy` tool raises for anything a user can cause.

The CLI maps every `DeployError` to exit code 1 and a one-paragraph message
(where, what, what to do); any other exception is a bug and shows a traceback.
The client SDK (`deploy.client`) keeps its own tree, separate from this one.

    DeployError
    ├── ConfigError            deploy.toml, DEPLOY_* variables, flags
    ├── RepositoryError        a model repository that cannot be read at all
    ├── ValidationFailedError       `deploy validate` found errors
    ├── PackagingError         `deploy package` could not write an archive
    ├── LocalEndpointError     the local endpoint or its tritonserver
    ├── AwsError               a call to AWS (or the moto server) failed
    ├── NeuronError            Inferentia model generation and planning
    ├── RouterError            the router model of the one-archive layouts
    ├── BindError              `deploy bind`: a PyTriton script and what it binds
    ├── EnvBuildError          `deploy env build`: an execution environment
    └── BenchError             `deploy bench` cannot start or finish a load test
"""

from __future__ import annotations


class DeployError(Exception):
    """A failure the user can act on.

    `where` names the file, field, model or endpoint; `fix` says what to do.
    """

    def __init__(self, message: str, *, where: str | None = None, fix: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.where = where
        self.fix = fix

    def __str__(self) -> str:
        text = f"{self.where}: {self.message}" if self.where else self.message
        if self.fix:
            text = f"{text}\n  fix: {self.fix}"
        return text


class ConfigError(DeployError):
    """Configuration (deploy.toml, DEPLOY_* environment, flags) is invalid."""


class RepositoryError(DeployError):
    """A model repository cannot be read."""


class ValidationFailedError(DeployError):
    """Validation reported at least one error."""


class PackagingError(DeployError):
    """An archive or manifest could not be written."""


class LocalEndpointError(DeployError):
    """The local endpoint or its tritonserver failed."""


class AwsError(DeployError):
    """A call to AWS (or an emulator such as the moto server) failed."""


class NeuronError(DeployError):
    """Inferentia model generation or NeuronCore planning failed."""


class RouterError(DeployError):
    """The router model of the one-archive layouts cannot be generated or packaged."""


class BindError(DeployError):
    """A PyTriton script cannot be turned into Triton models (`deploy bind`)."""


class EnvBuildError(DeployError):
    """An execution environment for python models cannot be built."""


class BenchError(DeployError):
    """A load test cannot start (unknown model, endpoint down, inputs that do not
    match) or its reports cannot be read or compared."""
