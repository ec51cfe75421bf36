"""Helpers the tests share (not tests themselves): configs, producing and checking archives, fault hooks, the S3
fault proxy, the store contract. Imported as ``support.<module>``: ``pythonpath = ["tests"]`` in pyproject.toml
puts ``tests/`` on ``sys.path`` for pytest, and the tests that start a job script put it on ``PYTHONPATH``."""
