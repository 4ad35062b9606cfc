"""Read-only views of stored results: pure functions of a search's summary.

``pareto_plot.pareto_figure`` draws the front; the controller logs it to MLflow.
"""
