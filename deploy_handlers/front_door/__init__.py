"""The HTTP API front door: KServe v2 JSON in, Triton binary protocol to SageMaker, v2 JSON out."""
