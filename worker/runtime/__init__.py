"""One worker process: settings, leases, locks, logs, metrics, hardening."""
