"""The tritonserver process of the local endpoint.

install.py      where the tritonserver binary and its python backend live
wheel.py        the nvidia-pytriton wheel, fetched once into the tool's cache
supervisor.py   starts, watches, restarts and stops tritonserver
guard.py        keeps tritonserver's port to the front end (builds triton_guard.c)
listener.py     whether the server on a loopback port is the process we started
envs.py         python models with an execution environment: their stub and libpython
"""
