"""The canary-rollback function: a model's canary alarm fired, so its canary leaves the manifest."""
