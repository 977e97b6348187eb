"""Registers every command module with the application."""

from __future__ import annotations

import importlib

import typer

# Modules under deploy.cli that define `register(app)`; each owns its commands.
COMMAND_MODULES = (
    "repository",  # validate, package
    "local",  # serve
    "lifecycle",  # up, down, status, prune
    "release",  # promote, rollback (a model's canary)
    "invoke",  # invoke
    "bench",  # bench
    "neuron",  # neuron generate | plan | compile
    "bind",  # bind (PyTriton scripts)
    "init_config",  # init-config
    "env",  # env build
    "emulate",  # emulate (moto + a local data plane)
    "project",  # init
    "cdk",  # cdk (the pinned CDK CLI)
)


def register(app: typer.Typer) -> None:
    for name in COMMAND_MODULES:
        try:
            module = importlib.import_module(f"deploy.cli.{name}")
        except ModuleNotFoundError as exc:
            if exc.name != f"deploy.cli.{name}":
                raise
            continue
        module.register(app)
    from deploy.cli import help

    help.apply(app)
