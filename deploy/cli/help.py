"""`--help` that reads like a command line: flags as flags, arguments as `REPO`.

Typer labels every option with its Python type (`--json <bool>`) and wraps
required arguments in braces in the usage line (`{repo}`). These classes show
a flag bare, an option's value and an argument in capitals (`--out PATH`,
`REPO`; an explicit metavar wins) and a required argument without brackets,
as POSIX usage lines do. `apply(app)`
gives every command and group of an application these classes, so a command
added later gets them without remembering to.
"""

from __future__ import annotations

from typing import Any

import typer
from typer.core import TyperArgument, TyperCommand, TyperGroup, TyperOption
from typer.models import DefaultPlaceholder

# Typer carries its own copy of click: its classes, not click's, are the ones to test.


_TYPE_NAMES = {"str": "TEXT", "int": "INTEGER", "int range": "INTEGER", "float": "FLOAT"}


def _readable(params: list[Any], ctx: typer.Context) -> list[Any]:
    for param in params:
        if isinstance(param, TyperOption) and (param.is_flag or param.count):
            if param.metavar is None:
                param.metavar = ""  # a flag takes no value: show none
        elif isinstance(param, TyperOption) and param.metavar is None:
            # `--out PATH`, not `--out <path>`; a repeatable option still takes one
            # value each time (typer says `<list[str]>`).
            label = param.display_type(ctx).strip("<>")
            if label.startswith("list[") and label.endswith("]"):
                label = label[len("list[") : -1]
            param.metavar = label if "|" in label else _TYPE_NAMES.get(label, label.upper())
        elif isinstance(param, TyperArgument) and param.metavar is None and param.name:
            param.metavar = param.name.upper()
    return params


def _usage(command: Any, ctx: typer.Context) -> list[str]:
    pieces = [command.options_metavar] if command.options_metavar else []
    for param in command.get_params(ctx):
        if isinstance(param, TyperArgument):
            name = param.metavar or (param.name or "").upper()
            name = name if param.required else f"[{name}]"
            pieces.append(name + ("..." if param.nargs != 1 else ""))
        else:
            pieces.extend(param.get_usage_pieces(ctx))
    return pieces


class ReadableCommand(TyperCommand):
    def get_params(self, ctx: Any) -> list[Any]:
        return _readable(super().get_params(ctx), ctx)

    def collect_usage_pieces(self, ctx: Any) -> list[str]:
        return _usage(self, ctx)


class ReadableGroup(TyperGroup):
    def get_params(self, ctx: Any) -> list[Any]:
        return _readable(super().get_params(ctx), ctx)

    def collect_usage_pieces(self, ctx: Any) -> list[str]:
        return [*_usage(self, ctx), self.subcommand_metavar]


def apply(app: typer.Typer) -> None:
    """Give every command (and nested group) of `app` the readable classes."""
    for command in app.registered_commands:
        if command.cls in (None, TyperCommand):
            command.cls = ReadableCommand
    for group in app.registered_groups:
        sub: Any = group.typer_instance
        if sub is None:
            continue
        unset = (DefaultPlaceholder, type(None))
        if isinstance(group.cls, unset) and isinstance(sub.info.cls, unset):
            group.cls = ReadableGroup
        apply(sub)
