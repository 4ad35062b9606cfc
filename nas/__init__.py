"""recnas: neural architecture search for recommendation ranking models."""

__version__ = "0.1.0"
