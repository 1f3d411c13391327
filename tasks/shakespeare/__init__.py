"""Shakespeare next-character prediction (seeds 000, 001 and 003)."""
