"""What running cove needs beyond conversations: health checks (``cove doctor``) and, for a
service, readiness and backups."""
