"""What SageMaker hosts on: the instance catalogue (and its prices), one table each."""
