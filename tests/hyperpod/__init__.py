"""Tests of the hyperpod area."""
