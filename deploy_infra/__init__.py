"""The CDK app that provisions a SageMaker Triton multi-model endpoint.

`python -m deploy_infra.app` is the app `cdk.json` names; `deploy_infra.synth.synthesize`
writes the templates for one stage without the CDK CLI.
"""

import os

# Node 20 still synthesizes correctly; the runtime's end-of-life banner would
# otherwise print on every synth and every test session.
os.environ.setdefault("JSII_SILENCE_WARNING_DEPRECATED_NODE_VERSION", "1")
os.environ.setdefault("JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION", "20")
