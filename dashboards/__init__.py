"""Read-only views over stored search results (Pareto plots, reports, MLflow UI).

Empty until the search service lands; see ARCHITECTURE.md.
"""
