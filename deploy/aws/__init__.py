"""The boundary to AWS: one typed module per service family.

Every boto3 call in `deploy` goes through these modules. Each maps botocore
errors to `deploy.errors.AwsError` naming where (bucket/key, stack, endpoint),
what failed and what to do. Endpoints come from boto3's own configuration:
`AWS_ENDPOINT_URL` and the per-service `AWS_ENDPOINT_URL_<SERVICE>` variables
(boto3 >= 1.28) point every client at an emulator such as the moto server.

    session.py         AwsSession: region + credentials -> clients; error mapping
    region.py          which profile and region a command uses (one order for all)
    ssm.py             SSM parameters: the CDK bootstrap version
    s3.py              the model store: head/list/put, checksummed resumable multipart
    sagemaker.py       endpoints and endpoint configs (read, delete)
    cloudformation.py  stacks: create/update/delete, events, outputs
    autoscaling.py     Application Auto Scaling bounds of an endpoint variant
    cloudwatch.py      recent 5XX and latency statistics of an endpoint variant
"""
