"""scikit-learn's bundled handwritten digits as a non-IID federated task."""
