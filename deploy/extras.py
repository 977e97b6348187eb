"""What each role installs, and the message when a command lacks its part.

The distribution installs the client SDK alone (`deploy.client`: numpy,
boto3); everything else is an extra of it (pyproject.toml):

    async   AsyncEndpoint (aiohttp)
    cli     the `deploy` command: validate, package, invoke, status, down, prune
    local   cli + the local endpoint: serve, up --local
    infra   cli + provisioning on AWS: up, the CDK app in deploy_infra/
    emulate local + infra + moto's server: `deploy emulate`, an AWS without an account
    dev     everything + tests and linters (`make` installs it)

A command that reaches a module of an extra that is not installed stops with
the pip command that installs it, instead of an ImportError. Standard library
only: it runs before anything optional is imported.
"""

from __future__ import annotations

DISTRIBUTION = "triton-sagemaker-deploy"

# Top-level module → (the extra that provides it, its distribution on PyPI).
PROVIDED_BY: dict[str, tuple[str, str]] = {
    "typer": ("cli", "typer"),
    "click": ("cli", "typer"),
    "rich": ("cli", "rich"),
    "pydantic": ("cli", "pydantic"),
    "pydantic_settings": ("cli", "pydantic-settings"),
    "google": ("cli", "protobuf"),
    "tritonclient": ("cli", "tritonclient"),
    "isal": ("cli", "isal"),
    "blake3": ("cli", "blake3"),
    "packaging": ("cli", "packaging"),
    "httptools": ("local", "httptools"),
    "uvloop": ("local", "uvloop"),
    "aws_cdk": ("infra", "aws-cdk-lib"),
    "constructs": ("infra", "constructs"),
    "cdk_nag": ("infra", "cdk-nag"),
    "sagemaker": ("infra", "sagemaker-core"),
    "aiohttp": ("async", "aiohttp"),
    "moto": ("emulate", "moto"),
}


def require(extra: str) -> None:
    """Raise ModuleNotFoundError (which the CLI turns into the pip command) unless
    every module `extra` provides is installed; for checks before any work starts."""
    import importlib.util

    for module, (provider, _) in PROVIDED_BY.items():
        if provider == extra and importlib.util.find_spec(module) is None:
            raise ModuleNotFoundError(f"No module named {module!r}", name=module)


def install_command(extra: str) -> str:
    return f"pip install '{DISTRIBUTION}[{extra}]'"


def missing_extra(exc: ModuleNotFoundError, command: str | None = None) -> str | None:
    """The message for a module an extra provides, or None for any other module."""
    module = (exc.name or "").split(".")[0]
    if module not in PROVIDED_BY:
        return None
    extra, distribution = PROVIDED_BY[module]
    who = f"`deploy {command}`" if command else "the deploy command"
    return (
        f"{who} needs the {extra!r} extra ({distribution} is not installed)\n"
        f"  fix: {install_command(extra)}"
    )
