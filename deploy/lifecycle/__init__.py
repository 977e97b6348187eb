"""`deploy up` as a chain of stages, each a function you can test alone.

    validate -> package -> plan -> upload -> provision -> wait -> smoke -> report

    plan.py        plain-data plan objects (models new/changed/unchanged, infra changes, cost)
    prices.py      the dated price table shipped in deploy/data/prices.json
    provider.py    the Provider protocol: what a target (AWS, local) must offer the stages
    stages.py      the stages themselves; no AWS calls except through a Provider
    smoke.py       smoke-testing changed models through the SDK with generated inputs
    up.py          chains the stages for `deploy up` (and `--dry-run`)
    single_model.py  the ml.inf1 stages: one archive (every model + router), single-model endpoint
    cdk_cli.py     the pinned CDK CLI (and the Docker check) for stacks with container images
    aws_provider.py  the AWS provider: S3 model store, CloudFormation stacks, SageMaker
    progress.py    live views (upload bytes, rollout status) on a TTY, silent otherwise

Planning makes describe/list calls only; upload, provision and publish are
the only mutating stages. The manifest is published last, after the smoke
test of every changed model passed, so clients never resolve a TargetModel
whose archive is missing or broken.
"""
