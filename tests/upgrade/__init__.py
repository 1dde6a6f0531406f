"""Rolling upgrade under load (issue 12): builds v1 and v2 of a small app, nginx in front
of their API processes, workers of both builds, real processes on PostgreSQL."""
