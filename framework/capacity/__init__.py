"""Capacity: how much cluster an operator needs (predicted) next to what a run used (observed)."""
