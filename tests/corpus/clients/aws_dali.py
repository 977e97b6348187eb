"""The DALI step of AWS's "Triton MME GPU ensembles" notebook, called on its own.

Source: github.com/aws/amazon-sagemaker-examples,
deploy_and_monitor/sm-triton_mme_gpu_ensemble_dali/sm-triton_mme_gpu_ensemble_dali.ipynb
@ 2d519b52c3a2 (Apache-2.0; Copyright Amazon.com, Inc. or its affiliates), cells [50] and [51].
Changes: `deploy package` gives the ensemble's `dali` step its own TargetModel; the notebook's
payload goes to it, with the input named as the DALI model names it (`DALI_INPUT_0`).
"""

import json

import numpy as np

from tests.corpus.clients.aws_dali_tf_ensemble import load_image


def run(runtime_sm_client, endpoint_name, target_models):
    rv2 = np.expand_dims(load_image(), 0)
    payload = {
        "inputs": [
            {"name": "DALI_INPUT_0", "shape": rv2.shape, "datatype": "UINT8", "data": rv2.tolist()}
        ]
    }
    response = runtime_sm_client.invoke_endpoint(
        EndpointName=endpoint_name,
        ContentType="application/octet-stream",
        Body=json.dumps(payload),
        TargetModel=target_models["dali"],
    )
    output = json.loads(response["Body"].read().decode("utf8"))["outputs"][0]
    return [
        {
            "model": "dali",
            "inputs": {"DALI_INPUT_0": rv2},
            "outputs": {"DALI_OUTPUT_0": np.array(output["data"], np.float32)},
        }
    ]
