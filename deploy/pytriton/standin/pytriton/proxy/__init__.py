"""Request and response types the inference callable sees (`pytriton.proxy`)."""
