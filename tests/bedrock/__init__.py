"""Tests of the bedrock area."""
