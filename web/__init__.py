"""Request helpers the blueprints share: htmx page-or-fragment rendering, parameter parsing, URLs, headers, text."""
