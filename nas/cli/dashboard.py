"""``nas dashboard``: MLflow's UI at a search's run, or several searches compared."""

from __future__ import annotations

import argparse
import sys

from nas.cli.flags import integer, open_registry, registry_flag
from nas.cli.render import console, emit_json, out
from nas.cli.signals import stop_on_sigterm
from nas.core.errors import ConfigError, NasError


def add_commands(commands) -> None:
    dashboard = commands.add_parser(
        "dashboard", help="open a search in MLflow's UI, or compare several searches' fronts"
    )
    dashboard.add_argument(
        "search_ids", nargs="*", help="one search (default: the latest), or several to compare"
    )
    dashboard.add_argument("--port", type=integer, default=5000, help="for mlflow ui (5000)")
    dashboard.add_argument("--open", action="store_true", help="open it in a browser")
    registry_flag(dashboard)
    dashboard.add_argument("--json", action="store_true", help="print {search, url} as JSON")
    dashboard.set_defaults(run=cmd_dashboard)


def cmd_dashboard(args: argparse.Namespace) -> int:
    """One search: MLflow's UI on its store (started on 127.0.0.1 for a local one) and the
    URL of its run, until Ctrl-C. Several: a page comparing their fronts."""
    import webbrowser

    from nas.core.paths import artifacts_dir, dashboards_dir
    from nas.service.config import default_tracking_uri, stored_config
    from nas.service.summary import summarize

    if not 1 <= args.port <= 65535:
        raise ConfigError("--port", f"must be a port number (1-65535), got {args.port}")
    registry = open_registry(args)
    if args.search_ids:
        searches = [registry.get_search(i) for i in args.search_ids]
    else:
        searches = registry.list_searches()[:1]
        if not searches:
            raise NasError("no searches yet: start one with nas submit SEARCH.yaml")
    if len(searches) > 1:
        from dashboards.pareto_html import page
        from dashboards.ui import comparison_figure

        summaries = {
            s.id: summarize(stored_config(s.config), registry.trials(s.id)) for s in searches
        }
        folder = dashboards_dir()
        folder.mkdir(parents=True, exist_ok=True)
        path = folder / ("compare-" + "-".join(s.id for s in searches)[:150] + ".html")
        path.write_text(page("comparison", comparison_figure(summaries)))
        if args.json:
            emit_json({"searches": [s.id for s in searches], "page": str(path)})
        else:
            # soft_wrap: a long path stays on one line, to copy or to read by a script
            out.print(
                f"comparison of {len(searches)} searches: {path}", highlight=False, soft_wrap=True
            )
        if args.open:
            webbrowser.open(path.as_uri())
        return 0
    from dashboards.ui import is_server, run_url, start_ui, stop_ui

    (search,) = searches
    if search.mlflow_run_id is None:
        raise NasError(f"search {search.id} has no MLflow run yet (it never started)")
    config = stored_config(search.config)
    uri = config.tracking_uri or default_tracking_uri()
    if is_server(uri):
        url = run_url(uri, search.mlflow_experiment_id, search.mlflow_run_id)
        _say(search.id, url, args.json)
        if args.open:
            webbrowser.open(url)
        return 0
    with console.status(f"starting mlflow ui on 127.0.0.1:{args.port} ..."):
        log = dashboards_dir() / f"mlflow-ui-{args.port}.log"
        process = start_ui(uri, artifacts_dir(), args.port, log)
    url = run_url(
        f"http://127.0.0.1:{args.port}", search.mlflow_experiment_id, search.mlflow_run_id
    )
    html = "retrain.html" if config.retrain is not None else "pareto.html"
    _say(search.id, url, args.json, f"its {html} is among the run's artifacts; Ctrl-C stops")
    if args.open:
        webbrowser.open(url)
    stop_on_sigterm()  # a supervisor's stop ends the UI too
    try:
        process.wait()
    except KeyboardInterrupt:
        stop_ui(process)
    return 0


def _say(search_id: str, url: str, as_json: bool, note: str | None = None) -> None:
    if as_json:
        emit_json({"search": search_id, "url": url})
    else:
        out.print(f"{search_id}: {url}" + (f"\n({note})" if note else ""), soft_wrap=True)
    sys.stdout.flush()  # a script reading the URL must not wait for the server to end
