"""The `fadeway` command line (`main`), its batch replay over worker processes (`batch`) and the
inspection of one memory (`inspection`). Above the engine: the one place besides the facade that
opens engines."""
