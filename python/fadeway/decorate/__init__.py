"""decorate."""
