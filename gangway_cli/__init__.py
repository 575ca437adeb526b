"""`gangway`: submit training jobs to a Gangway portal from CI and wait for them (standard library only)."""
