"""Evaluate a checkpoint against the incumbent and decide whether to promote it."""
