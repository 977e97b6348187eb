"""Checks `make lint` runs beside ruff, mypy and import-linter."""
