"""Declarative search spaces built from blocks (``SearchSpace``: sample, mutate, crossover).

Empty until the search service lands; see ARCHITECTURE.md.
"""
