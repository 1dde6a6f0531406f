"""The action protocol: record, claim, execute, reconcile, compensate."""
