"""The JSON call of AWS's "XGBoost with the FIL backend on a multi-model endpoint" notebook,
aimed at the FIL model itself.

Source: github.com/aws/amazon-sagemaker-examples,
archived/xgboost_ensemble_python-fil-backend/mme_triton_xgb_fil_ensemble.ipynb @ 2d519b52c3a2
(Apache-2.0; Copyright Amazon.com, Inc. or its affiliates), cells [67] and [68]. Changes: the
notebook sends one column per input to its preprocessing ensemble; here the same v2 JSON body
form carries the 15 features the FIL model takes (`input__0`), seeded; the endpoint name and
TargetModel are parameters.
"""

import json

import numpy as np


def run(client, endpoint_name, target_models):
    data_infer = np.random.default_rng(67).random((3, 15), dtype=np.float32)
    batch_size = len(data_infer)
    payload = {}
    payload["inputs"] = [
        {
            "name": "input__0",
            "data": data_infer.astype("float32").tolist(),
            "datatype": "FP32",
            "shape": [batch_size, 15],
        }
    ]
    response = client.invoke_endpoint(
        EndpointName=endpoint_name,
        ContentType="application/octet-stream",
        Body=json.dumps(payload),
        TargetModel=target_models["fil"],
    )
    response_body = json.loads(response["Body"].read().decode("utf8"))
    predictions = response_body["outputs"][0]["data"]
    return [
        {
            "model": "fil",
            "inputs": {"input__0": data_infer},
            "outputs": {"output__0": np.array(predictions, np.float32).reshape(batch_size, 1)},
        }
    ]
