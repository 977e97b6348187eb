"""The DALI + TensorFlow ensemble call of AWS's "Triton MME GPU ensembles" notebook: an encoded
image as a UINT8 tensor in a v2 JSON body sent as application/octet-stream.

Source: github.com/aws/amazon-sagemaker-examples,
deploy_and_monitor/sm-triton_mme_gpu_ensemble_dali/sm-triton_mme_gpu_ensemble_dali.ipynb
@ 2d519b52c3a2 (Apache-2.0; Copyright Amazon.com, Inc. or its affiliates), cells [50] and [51].
Changes: the endpoint name and TargetModel are parameters; the JPEG's bytes are replaced by
seeded random bytes (the model is refused before it would decode them).
"""

import json

import numpy as np


def load_image():
    """Loads image as an encoded array of bytes."""
    img = np.random.default_rng(50).integers(0, 256, size=2048).astype(np.uint8).tobytes()
    return np.array(list(img)).astype(np.uint8)


def run(runtime_sm_client, endpoint_name, target_models):
    rv = load_image()
    rv2 = np.expand_dims(rv, 0)
    payload = {
        "inputs": [
            {
                "name": "INPUT",
                "shape": rv2.shape,
                "datatype": "UINT8",
                "data": rv2.tolist(),
            }
        ]
    }
    response = runtime_sm_client.invoke_endpoint(
        EndpointName=endpoint_name,
        ContentType="application/octet-stream",
        Body=json.dumps(payload),
        TargetModel=target_models["ensemble_dali_inception"],
    )
    output = json.loads(response["Body"].read().decode("utf8"))["outputs"][0]
    return [
        {
            "model": "ensemble_dali_inception",
            "inputs": {"INPUT": rv2},
            "outputs": {"OUTPUT": np.array(output["data"], np.float32).reshape(output["shape"])},
        }
    ]
