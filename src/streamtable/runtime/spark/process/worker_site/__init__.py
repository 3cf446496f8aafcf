"""A directory put on the PYTHONPATH of the Python processes Spark starts (see sitecustomize)."""
