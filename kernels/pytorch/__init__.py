"""The PyTorch references of the ops: the training path, and what the kernels are tested against."""
