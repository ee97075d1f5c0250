"""forgetting."""
