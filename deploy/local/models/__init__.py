"""Models on the local endpoint: the store they come from and the platform that loads them.

store.py        reading archives from a directory or s3://, and the manifest
archive.py      safe extraction of model archives
platform.py     the MME platform: lazy load, load-once, LRU eviction
bundled.py      which BLS-bundled model tritonserver holds under each plain name
adapters.py     python-backend adapters for TorchScript and ONNX models
adapter_model.py.tmpl  the adapter's model.py (copied into adapted models)
"""
