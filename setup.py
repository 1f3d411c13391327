"""Installs tff_mixed; the metadata lives in setup.cfg.

One C file is built: `tff_mixed/_loopback_bind.c`, preloaded into TFF's
worker binary so a local worker listens on loopback only
(`tff_mixed.execution.LocalWorker`). It is a plain shared object, never
imported; without a C compiler the install goes on and local TFF workers
refuse to start, saying why (the default in-process runtime needs none).
"""

import setuptools

setuptools.setup(
    ext_modules=[
        setuptools.Extension(
            'tff_mixed._loopback_bind',
            sources=['tff_mixed/_loopback_bind.c'],
            libraries=['dl'],
            optional=True,
        )
    ],
)
