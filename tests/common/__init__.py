"""Tests of the common area."""
