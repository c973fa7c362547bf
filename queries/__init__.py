"""Read side: the SQL the pages and the API show, returning plain rows (never imports Flask)."""
