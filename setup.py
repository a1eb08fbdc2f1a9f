"""Package discovery; everything else is in pyproject.toml.

Every folder under ``registry/`` is a package of the wheel, found rather than listed (a
list once left ``registry.services.ingest`` out of every plain install), and
``migrations/`` (at the top of the repository, DESIGN.md's layout) ships as
``registry.migrations``: pyproject.toml's ``packages.find`` cannot install a folder under
another name. ``tests/integration/packaging`` compares a built wheel with the source tree.
"""

from setuptools import find_namespace_packages, setup

PYCACHE = ["*.__pycache__", "*.__pycache__.*"]

setup(
    packages=[
        *find_namespace_packages(include=["registry", "registry.*"], exclude=PYCACHE),
        *(
            f"registry.{name}"
            for name in find_namespace_packages(
                include=["migrations", "migrations.*"], exclude=PYCACHE
            )
        ),
    ]
)
