"""Carton Registry: a content-addressed registry and dedup store for .carton model packages."""

__version__ = "0.1.0"
