"""notes."""
