"""Installs tff_mixed; the metadata lives in setup.cfg."""

import setuptools

setuptools.setup()
