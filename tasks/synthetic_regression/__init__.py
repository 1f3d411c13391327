"""Seed 002 synthetic NIID regression and classification data."""
