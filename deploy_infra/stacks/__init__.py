"""Stacks, one per deployable component: network, model store, endpoint, API."""
