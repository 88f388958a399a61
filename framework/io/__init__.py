"""Reading sources and writing Delta tables."""
