"""Tests of the sagemaker area."""
