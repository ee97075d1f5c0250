"""episodes."""
