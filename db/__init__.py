"""The database: where it is (urls), the embedded cluster (cluster), engines and org-scoped sessions (session), the
schema's migrations (migrate). Import the module you need; this package re-exports nothing."""
