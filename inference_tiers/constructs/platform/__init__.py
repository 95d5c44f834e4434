"""Constructs of the ``platform`` tier."""
