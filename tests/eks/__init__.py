"""Tests of the eks area."""
