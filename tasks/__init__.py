"""Task modules and their absl training binaries."""
