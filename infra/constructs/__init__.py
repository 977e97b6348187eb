"""Reusable constructs, one per component; stacks in `infra.stacks` compose them."""
