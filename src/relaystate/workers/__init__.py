"""Processes that serve a Runtime: the worker loop and its presence."""
