"""Files run in a separate Python process, never imported by `deploy` itself.

`autocomplete_stub.py` is the script `deploy.repository.autocomplete` starts
to call a python model's `auto_complete_config`, with
`triton_python_backend_utils.py` standing in for the python backend's module
of that name. `torchscript_stub.py` runs a TorchScript model on a sample for
`deploy.repository.init_config`. Both run in the box (`deploy.box`).
"""
