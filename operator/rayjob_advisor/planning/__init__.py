"""Profiling plans: which runs to measure so that a profile predicts jobs at a target scale, for the least cost."""
