"""Lambda handlers; each sub-package is one function's code (no numpy, no deploy imports)."""
