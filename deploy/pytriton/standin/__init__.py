"""The PyTriton stand-in's parent folder: put on sys.path, it makes `pytriton` the stand-in."""
