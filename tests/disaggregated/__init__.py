"""Tests of the disaggregated area."""
