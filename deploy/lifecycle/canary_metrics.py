"""The per-model metrics a canary's alarms watch: the names the front door and the
SDK emit as CloudWatch embedded metric format (issue 22, item 4).

Namespace `Deploy/Models`, dimensions [Endpoint, Model] and [Endpoint, Model,
TargetModel]; `Latency` is in milliseconds.
"""

from __future__ import annotations

NAMESPACE = "Deploy/Models"
ENDPOINT = "Endpoint"
MODEL = "Model"
TARGET_MODEL = "TargetModel"
REQUESTS = "Requests"
LATENCY = "Latency"  # milliseconds
CLIENT_ERRORS = "ClientErrors"
MODEL_ERRORS = "ModelErrors"
THROTTLES = "Throttles"
REQUEST_BYTES = "RequestBytes"
RESPONSE_BYTES = "ResponseBytes"
