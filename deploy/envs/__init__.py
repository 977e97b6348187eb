"""Execution environments (`EXECUTION_ENV_PATH`) for python models, for the image's Python.

from deploy.envs import build_environment, image_python
python = image_python("24.09").python          # "3.10"
build_environment(Path("requirements.txt"), Path("env.tar.gz"), python=python)
"""

from __future__ import annotations

from deploy.catalogue.images import ImagePython, image_python
from deploy.envs.build import BuiltEnvironment, build_environment, read_metadata

__all__ = ["BuiltEnvironment", "ImagePython", "build_environment", "image_python", "read_metadata"]
