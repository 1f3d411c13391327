"""Stack Overflow tag prediction (seed 000 §4, App. B)."""
