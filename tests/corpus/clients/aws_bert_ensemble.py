"""The sentence-embedding call of AWS's "Triton MME GPU ensembles (DALI, python + TensorRT)"
notebook: two sentences as a BYTES tensor in a binary body built by tritonclient.

Source: github.com/aws/amazon-sagemaker-examples,
deploy_and_monitor/sm-triton_mme_gpu_ensemble_dali/sm-triton_mme_gpu_ensemble_dali.ipynb
@ 2d519b52c3a2 (Apache-2.0; Copyright Amazon.com, Inc. or its affiliates), cells [55] and [56].
Changes: the endpoint name and TargetModel are parameters.
"""

import numpy as np
import tritonclient.http as http_client


def run(runtime_sm_client, endpoint_name, target_models):
    text_inputs = ["Sentence 1", "Sentence 2"]

    inputs = []
    inputs.append(http_client.InferInput("INPUT0", [len(text_inputs), 1], "BYTES"))

    batch_request = [[text_inputs[i]] for i in range(len(text_inputs))]

    input0_real = np.array(batch_request, dtype=np.object_)

    inputs[0].set_data_from_numpy(input0_real, binary_data=True)

    outputs = []
    outputs.append(http_client.InferRequestedOutput("finaloutput"))

    request_body, header_length = http_client.InferenceServerClient.generate_request_body(
        inputs, outputs=outputs
    )
    response = runtime_sm_client.invoke_endpoint(
        EndpointName=endpoint_name,
        ContentType="application/vnd.sagemaker-triton.binary+json;json-header-size={}".format(
            header_length
        ),
        Body=request_body,
        TargetModel=target_models["ensemble"],
    )
    header_length_prefix = "application/vnd.sagemaker-triton.binary+json;json-header-size="
    header_length_str = response["ContentType"][len(header_length_prefix) :]

    # Read response body
    result = http_client.InferenceServerClient.parse_response_body(
        response["Body"].read(), header_length=int(header_length_str)
    )
    outputs_data = result.as_numpy("finaloutput")
    return [
        {
            "model": "ensemble",
            "inputs": {"INPUT0": input0_real},
            "outputs": {"finaloutput": outputs_data},
        }
    ]
