"""FEMNIST character recognition (seeds 000, 001 and 003)."""
