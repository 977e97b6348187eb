"""Reusable constructs, one per component; stacks in `deploy_infra.stacks` compose them."""
