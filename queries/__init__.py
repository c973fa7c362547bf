"""Read side: the SQL the pages, the API, login and the worker read, returning plain rows (never imports Flask)."""
