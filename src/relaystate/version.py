"""The package's version, in one place: pyproject.toml reads it from here, and it is the
default build id (read without importlib.metadata, which costs a command ~9 ms)."""

VERSION = "0.1.0"
