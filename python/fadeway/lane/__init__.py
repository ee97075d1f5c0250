"""lane."""
