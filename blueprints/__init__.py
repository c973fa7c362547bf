"""One blueprint per area of the dashboard; `register_blueprints` wires them into the app."""

from flask import Flask


def register_blueprints(app: Flask) -> None:
    """Register every area's blueprint (auth first: its login guard runs before CSRF checks)."""
    from blueprints import (
        api,
        auth,
        catalog,
        compare,
        dataset_runs,
        datasets,
        environments,
        health,
        insights,
        invitations,
        leaderboard,
        review_queue,
        runs,
        settings,
        triage,
        trials,
    )

    app.register_blueprint(auth.bp)
    auth.login_manager.init_app(app)
    app.register_blueprint(health.bp)
    app.register_blueprint(environments.bp)
    app.register_blueprint(catalog.bp)
    app.register_blueprint(runs.bp)
    app.register_blueprint(trials.bp)
    app.register_blueprint(insights.bp)
    app.register_blueprint(compare.bp)
    app.register_blueprint(datasets.bp)
    app.register_blueprint(dataset_runs.bp)
    app.register_blueprint(leaderboard.bp)
    app.register_blueprint(settings.bp)
    app.register_blueprint(triage.bp)
    app.register_blueprint(review_queue.bp)
    app.register_blueprint(invitations.bp)
    app.register_blueprint(api.bp)
