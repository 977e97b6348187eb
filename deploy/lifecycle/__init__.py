"""`deploy up` as a chain of stages, each a function you can test alone.

    validate -> package -> plan -> upload -> provision -> wait -> smoke -> report

    plan.py        plain-data plan objects (models new/changed/unchanged, infra changes, cost)
    actions.py     the plan's changes as typed actions: what is printed and what is applied
    apply.py       apply(plan): each action through its one executor, nothing else
    prices.py      the dated price table shipped in deploy/catalogue/prices.json
    provider.py    the Provider protocol: what a target (AWS, local) must offer the stages
    stages.py      the stages themselves; no AWS calls except through a Provider
    smoke.py       smoke-testing changed models through the SDK with generated inputs
    up.py          chains the stages for `deploy up` (and `--dry-run`)
    cdk_cli.py     the pinned CDK CLI (and the Docker check) for stacks with container images
    aws_provider.py  the AWS provider: S3 model store, CloudFormation stacks, SageMaker
    aws_clients.py   the AWS service clients, built by one factory and passed in
    aws_stage.py     a stage's resources on AWS (stacks, model store, endpoint), by name
    rollout.py     CloudFormation rollouts and waiting for the endpoint
    operations.py  `deploy status/down/prune` on AWS
    local_provider.py  the local provider: `deploy serve` in the background
    progress.py    live views (upload bytes, rollout status) on a TTY, silent otherwise

What differs between hosting modes (multi-model, single-model, async,
serverless) comes from the `deploy.hosting.HostingMode` the stages are given.
Planning makes describe/list calls only; the plan's actions (upload,
provision, publish) are the only changes, and `apply` makes no other. The
manifest is published last, after the smoke test of every changed model
passed, so clients never resolve a TargetModel whose archive is missing or
broken.
"""
