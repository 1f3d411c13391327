"""CIFAR-100 image classification (seeds 001 and 003)."""
