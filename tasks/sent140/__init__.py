"""Sent140 sentiment classification (seeds 001 §4.1 and 003)."""
