"""Tests of the ops area."""
