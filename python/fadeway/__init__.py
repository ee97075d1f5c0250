"""fadeway."""
