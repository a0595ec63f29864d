"""Low-level utilities that import nothing else of bertlayers' (the bottom tier)."""
