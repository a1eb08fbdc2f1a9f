"""Carton Registry benchmarks: ``harness`` runs things, ``figures`` measure, ``report`` writes.

Run through ``bench/run`` (``python -m bench``); see bench/README.md for the layout
and for how to add a figure. Nothing in ``registry/`` imports this package.
"""
